"""The views, JSON payloads and full-text index as a person reaches them: the real ``sqlite3`` shell, and ``search``.

The shell commands here are the README's one-liners, word for word (with the file name).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from uuid import UUID

from _clitools import TIMEOUT, Call, Run, Spec, conversation, sqlite3_shell, write_db

from sessionstore import ModelMessage, SQLiteStorage, UserMessage

# The README's one-liners, word for word: run by a shell in the folder holding demo.db.
OVERVIEW = (
    'sqlite3 demo.db "SELECT session_id, title, cwd, updated_at, events FROM session_overview'
    ' ORDER BY updated_at DESC LIMIT 20"'
)
TRANSCRIPT = (
    "sqlite3 demo.db \"SELECT position, role, text FROM transcript WHERE session_id LIKE '3f2a%' ORDER BY position\""
)
TOOL_CALLS = (
    "sqlite3 demo.db \"SELECT json_extract(payload, '$.name'), json_extract(payload, '$.arguments.cmd')"
    " FROM events WHERE type = 'tool_call'\""
)
SEARCH = (
    "sqlite3 demo.db \"SELECT s.session_id, snippet(events_fts, -1, '[', ']', '…', 8) FROM events_fts"
    " JOIN events e ON e.id = events_fts.rowid JOIN sessions s ON s.id = e.session"
    " WHERE events_fts MATCH 'fixture'\""
)


FTS = (
    "SELECT s.session_id, snippet(events_fts, -1, '[', ']', '…', 8) FROM events_fts"
    " JOIN events e ON e.id = events_fts.rowid JOIN sessions s ON s.id = e.session"
    " WHERE events_fts MATCH '{query}';"
)


def shell(folder: Path, line: str) -> str:
    done = subprocess.run(["sh", "-c", line], cwd=folder, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.strip()


def test_views_and_json_in_the_sqlite3_shell(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    red, other = write_db(db, [Spec(conversation(), cwd="/home/me/project"), Spec([UserMessage("x" * 100)])])

    rows = [line.split("|") for line in shell(tmp_path, OVERVIEW).splitlines()]
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [
        (other, "x" * 79 + "…", "/work", "1"),  # a long first message, shortened
        (red, "Why is the build red? It was green yesterday.", "/home/me/project", "6"),
    ]

    transcript = shell(tmp_path, TRANSCRIPT.replace("3f2a", red[:8])).splitlines()
    assert transcript[0] == "0|system|You are careful."
    assert transcript[1:3] == ["1|user|Why is the build red?", "It was green yesterday."]  # a two-line message
    # A type this version does not know (position 5) is kept in events, and is not part of the transcript.
    assert transcript[3:] == [
        '2|tool_call|run(cmd="pytest -x")',
        "3|tool|1 failed: test_parse_dates",
        "4|assistant|test_parse_dates fails: the fixture expects UTC.",
    ]
    assert shell(tmp_path, TOOL_CALLS) == "run|pytest -x"
    assert shell(tmp_path, SEARCH) == f"{red}|test_parse_dates fails: the [fixture] expects UTC."


def test_full_text_index_follows_every_write(call: Call, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    red, _ = write_db(db, [Spec(conversation()), Spec([UserMessage("unrelated")])])
    assert sqlite3_shell(db, FTS.format(query="test_parse_dates")).splitlines() == [
        f"{red}|1 failed: [test_parse_dates]",
        f"{red}|[test_parse_dates] fails: the fixture expects UTC.",
    ]

    async def rewrite(keep_past: bool) -> None:  # a history rewritten through the library
        async with SQLiteStorage(db, keep_past=keep_past) as storage:
            await storage.set_history(UUID(hex=red), [UserMessage("Why is the build red?"), ModelMessage("flaky")])

    asyncio.run(rewrite(True))  # by default what it replaced is kept, as the session's earlier branch: still found
    branch = sqlite3_shell(db, "SELECT session_id FROM sessions WHERE branch_of IS NOT NULL;").strip()
    assert sqlite3_shell(db, FTS.format(query="test_parse_dates")).splitlines() == [
        f"{branch}|1 failed: [test_parse_dates]",
        f"{branch}|[test_parse_dates] fails: the fixture expects UTC.",
    ]
    assert call("--db", db, "delete", red[:8]).code == 0  # and deleted with it
    (red,) = write_db(db, [Spec(conversation())])
    asyncio.run(rewrite(False))  # a store that opts out: the old text leaves the index
    assert sqlite3_shell(db, FTS.format(query="test_parse_dates")) == ""
    assert sqlite3_shell(db, FTS.format(query="flaky")) == f"{red}|[flaky]"

    assert call("--db", db, "delete", red[:8]).code == 0
    assert sqlite3_shell(db, FTS.format(query="flaky")) == ""
    assert sqlite3_shell(db, "INSERT INTO events_fts (events_fts) VALUES ('integrity-check');") == ""


def test_search_command_prints_id_title_and_snippet(sessionstore: Run, call: Call, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    red, _ = write_db(db, [Spec(conversation(), title="Red build"), Spec([UserMessage("the build is green")])])
    found = sessionstore("--db", db, "search", "fixture", "UTC")
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines() == [
        f"{red[:12]}  Red build",
        "    #4 assistant: test_parse_dates fails: the [fixture] expects [UTC].",
    ]
    hits = json.loads(call("--db", db, "search", "pytest", "--json").out)
    assert [(h["session_id"], h["position"], h["type"]) for h in hits] == [(red, 2, "tool_call")]

    nothing = sessionstore("--db", db, "search", "kubernetes")
    assert (nothing.returncode, nothing.stdout) == (1, "")
    assert nothing.stderr == "sessionstore: nothing matches 'kubernetes'\n"
    # Punctuation in plain words is never query syntax; --fts takes FTS5 syntax as written.
    assert call("--db", db, "search", "build-red?").code == 0
    prefixed = call("--db", db, "search", "--fts", "gree* NOT yesterday", "--json")
    assert [h["snippet"] for h in json.loads(prefixed.out)] == ["the build is [green]"]
    bad = call("--db", db, "search", "--fts", "AND AND")
    assert bad.code == 1 and bad.err.startswith("sessionstore: error: not a valid full-text query")


def test_the_guide_names_every_column_of_each_view_and_no_other(tmp_path: Path) -> None:
    """Was: the guide listed 8 of ``session_overview``'s 12 columns. Its tables are read here, so a column added
    to a view in a migration fails this test until the guide names it."""
    db = tmp_path / "demo.db"
    write_db(db, [Spec(conversation())])
    guide = (Path(__file__).parents[2] / "docs" / "inspecting.md").read_text()
    for view in ("session_overview", "transcript"):
        table = guide.split(f"`{view}`, one row per", 1)[1].split("\n\n", 2)[1]
        named = [
            name.strip(" `")
            for row in table.splitlines()[2:]
            for name in row.split("|")[1].split(",")
            if name.strip(" `")
        ]
        columns = sqlite3_shell(db, f"SELECT name FROM pragma_table_info('{view}');").splitlines()
        assert sorted(named) == sorted(columns), view
