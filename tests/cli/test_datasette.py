"""``datasette agent.db``, no options: a real Datasette process over HTTP, and a real headless Chromium.

Whichever Datasette is installed is the one run (the test extra installs 0.65; 1.0a serves the same pages): its
search box on the transcript's and the events' pages, FTS5's syntax, phrases, a column's search, each hit's
session, and facets, all from what Datasette detects in the file (revision 0008), with no metadata.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _clitools import TIMEOUT, Spec, conversation, write_db
from datasette.version import __version__ as DATASETTE

from sessionstore import ModelMessage, ToolCall, ToolResult, UserMessage, migrate

RED = "Why is the build red?\nIt was green yesterday."  # conversation()'s user message: a phrase "build red"
APART = "The red light on the build server is unrelated."  # both words, not side by side


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("datasette")
    db = folder / "agent.db"
    red, other = write_db(
        db,
        [
            Spec(conversation(), cwd="/home/me/project", title="The red build"),
            Spec(
                [
                    UserMessage(APART),
                    ToolCall(call_id="c9", name="grep", arguments={"pattern": "zeppelin_manifest"}),
                    ToolResult(call_id="c9", content="src/zeppelin_manifest.py:3"),
                    ModelMessage("The zeppelin_manifest is parsed in src."),
                ],
                cwd="/home/me/other",
            ),
        ],
    )
    with serve(db) as url:
        yield Site(url, red, other)


class Site:
    def __init__(self, url: str, red: str = "", other: str = "") -> None:
        self.url, self.red, self.other = url, red, other

    def get(self, path: str, **params: str | list[str]) -> str:
        query = urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(f"{self.url}{path}{'?' + query if query else ''}", timeout=TIMEOUT) as reply:
            return str(reply.read().decode())

    def rows(self, table: str, **params: str | list[str]) -> list[dict[str, Any]]:
        """Every row of a table's page as objects (the same request on 0.65 and 1.0)."""
        data = json.loads(self.get(f"/agent/{table}.json", _shape="objects", _size="max", **params))
        assert "error" not in data or not data["error"], data
        return list(data["rows"])

    def texts(self, **params: str | list[str]) -> set[str]:
        return {row["text"] for row in self.rows("transcript", **params)}


DATASETTE_SERVE = [sys.executable, "-m", "datasette", "serve", "agent.db"]


@contextlib.contextmanager
def serve(db: Path, command: list[str] = DATASETTE_SERVE) -> Iterator[str]:
    """``datasette serve agent.db`` (or ``command``), told only where to listen, until it answers; stopped after."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = db.parent / "datasette.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(port)],
            cwd=db.parent,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                urllib.request.urlopen(f"{url}/-/versions.json", timeout=5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"datasette did not start:\n{log.read_text()}") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_transcript_page_has_a_search_box_and_finds_only_the_hits(site: Site) -> None:
    page = site.get("/agent/transcript", _search="zeppelin_manifest")
    assert '<input id="_search" type="search" name="_search"' in page  # Datasette found the index on its own
    # The user's report: ?_search= returned every row. Now only the three events holding the word.
    assert site.texts(_search="zeppelin_manifest") == {
        'grep(pattern="zeppelin_manifest")',
        "src/zeppelin_manifest.py:3",
        "The zeppelin_manifest is parsed in src.",
    }
    assert len(site.rows("transcript")) == 9
    hit = site.rows("transcript", _search="parsed")[0]
    assert (hit["session_id"], hit["cwd"], hit["role"], hit["type"]) == (
        site.other,
        "/home/me/other",
        "assistant",
        "model_message",
    )  # each hit shows its session


def test_phrases_fts5_syntax_and_a_columns_search(site: Site) -> None:
    # Datasette's default (escaped) search keeps a quoted phrase: side by side only.
    assert site.texts(_search='"build red"') == {RED}
    assert site.texts(_search="build red") == {RED, APART}  # words, anywhere
    # FTS5's syntax as it is, with ?_searchmode=raw (the page's own search box keeps it: a hidden field).
    raw = {"_searchmode": "raw"}
    assert site.texts(_search="zeppelin* NOT grep", **raw) == {
        "src/zeppelin_manifest.py:3",
        "The zeppelin_manifest is parsed in src.",
    }
    assert site.texts(_search="NEAR(red build, 2) OR fixture", **raw) == {
        RED,
        "test_parse_dates fails: the fixture expects UTC.",
    }
    assert '<input type="hidden" name="_searchmode" value="raw">' in site.get(
        "/agent/transcript", _search="fixture", **raw
    )
    # A column's own search (detail=full keeps columns and positions: detail=none refused both).
    assert site.texts(_search_text='"fixture expects"') == {"test_parse_dates fails: the fixture expects UTC."}


def test_every_hit_on_the_events_page_links_to_its_session(site: Site) -> None:
    page = site.get("/agent/events", _search='"zeppelin_manifest"')
    assert '<input id="_search" type="search" name="_search"' in page
    hits = site.rows("events", _search="zeppelin_manifest", _labels="on")
    assert {hit["type"] for hit in hits} == {"tool_call", "tool_result", "model_message"}
    session = {hit["session"]["value"] if isinstance(hit["session"], dict) else hit["session"] for hit in hits}
    assert len(session) == 1
    (number,) = session
    assert page.count(f'href="/agent/sessions/{number}"') == 3  # the session's cell, on every hit
    assert site.other in site.get(f"/agent/sessions/{number}")  # the page it links to is that session's
    # The link's label: 1.0 takes the one unique text column (the session id); 0.65 a column named title.
    label = "The red build" if DATASETTE.startswith("0.") else site.red
    assert f'<a href="/agent/sessions/1">{label}</a>' in site.get("/agent/events", _search='"build red"')


def test_facets_by_cwd_role_and_type(site: Site) -> None:
    data = json.loads(
        site.get(
            "/agent/transcript.json",
            _facet=["cwd", "role", "type"],
            _extra=["facet_results", "suggested_facets"],
        )
    )
    results = data["facet_results"]
    results = results.get("results", results)  # 1.0 nests them
    counts = {name: {v["value"]: v["count"] for v in facet["results"]} for name, facet in results.items()}
    assert counts["cwd"] == {"/home/me/project": 5, "/home/me/other": 4}
    assert counts["role"] == {"system": 1, "user": 2, "tool_call": 2, "tool": 2, "assistant": 2}
    assert counts["type"]["tool_result"] == 2
    # A facet's link narrows the page: the search's hits in one folder.
    toggle = next(v["toggle_url"] for v in results["cwd"]["results"] if v["value"] == "/home/me/other")
    narrowed = urllib.parse.parse_qs(urllib.parse.urlparse(toggle).query)
    assert narrowed["cwd"] == ["/home/me/other"]
    assert site.texts(_search="build", cwd="/home/me/other") == {APART}
    # Datasette suggests them itself on the bare page.
    suggested = json.loads(site.get("/agent/transcript.json", _extra="suggested_facets"))["suggested_facets"]
    assert {"cwd", "role", "type"} <= {facet["name"] for facet in suggested}


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "headless Chromium is needed: apt-get install chromium (.ci/run installs it)"
    return found


def test_chromium_renders_the_search_results(site: Site, tmp_path: Path) -> None:
    url = f"{site.url}/agent/transcript?" + urllib.parse.urlencode({"_search": '"build red"'})
    done = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",  # tests run as root in CI
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    dom = done.stdout
    assert "1 row where search matches" in dom
    assert f'<td class="col-text type-str">{RED}</td>' in dom
    assert f'<td class="col-session_id type-str">{site.red}</td>' in dom
    assert APART not in dom


def test_sessionstore_datasette_passes_the_two_settings_the_file_cannot_hold(tmp_path: Path) -> None:
    # One documented command: the search box takes FTS5's syntax as it is, and each hit's session reads its id
    # (Datasette 0.65 would label it by its title column). Nothing is written beside the file.
    db = tmp_path / "agent.db"
    write_db(db, [Spec(conversation(), title="The red build")])
    before = [path.name for path in tmp_path.iterdir()]
    with serve(db, ["sessionstore", "datasette", "--db", "agent.db", "--"]) as url:
        configured = Site(url)
        assert configured.texts(_search="test_parse* NOT fixture") == {"1 failed: test_parse_dates"}
        page = configured.get("/agent/events", _search='"build red"')
        (sid,) = {row["session_id"] for row in configured.rows("transcript", _search='"build red"')}
        assert f'<a href="/agent/sessions/1">{sid}</a>' in page
    sqlite_and_log = {"agent.db-wal", "agent.db-shm", "datasette.log"}
    assert {path.name for path in tmp_path.iterdir()} - sqlite_and_log == set(before)


@pytest.mark.parametrize("where", ["old", "postgresql://me@localhost/agents"])
def test_sessionstore_datasette_refuses_what_datasette_cannot_serve(built_old: Path, where: str) -> None:
    db = str(built_old) if where == "old" else where
    done = subprocess.run(["sessionstore", "datasette", "--db", db], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 1 and done.stdout == ""
    if where == "old":
        assert f"run `sessionstore db upgrade --db {db}` first" in done.stderr
    else:
        assert "Datasette serves a SQLite file; postgresql://me@localhost/agents is a server's database" in done.stderr


@pytest.fixture
def built_old(tmp_path: Path) -> Path:
    """A file at revision 0007, before Datasette could find its index."""
    path = tmp_path / "old.db"
    migrate.upgrade(path, "0007")
    return path
