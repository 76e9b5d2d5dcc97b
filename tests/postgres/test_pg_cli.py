"""The ``sessionstore`` command on a PostgreSQL URL: the installed script, a real server, the same answers as on
a SQLite file holding the same sessions; what cannot apply says so in one line; the password is never shown."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest
from _pgcli import Spec, child_env, conversation, now, run, same_search, write_db
from pg_server import PostgresServer

from sessionstore import ModelMessage, UserMessage, records
from sessionstore.cli import main
from sessionstore.postgres import connect as pgdatabase
from sessionstore.postgres.connect import STREAM_BUFFER
from sessionstore.schema.revisions import HEAD


def twins(tmp_path: Path, url: str, specs: list[Spec]) -> tuple[Path, list[str]]:
    """``specs`` written into a SQLite file by the storage, and moved into the PostgreSQL database by the CLI."""
    db = tmp_path / "agent.db"
    ids = write_db(db, specs)
    exported = run("export", "--all", "--db", db)
    assert exported.returncode == 0, exported.stderr
    moved = run("import", "-", "--db", url, input=exported.stdout)
    assert moved.returncode == 0, moved.stderr
    return db, ids


def same_on_both(db: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    lite, pg = run(*args, "--db", db), run(*args, "--db", url)
    assert (pg.returncode, pg.stdout, pg.stderr) == (lite.returncode, lite.stdout, lite.stderr), args
    return pg


def test_reading_commands_answer_as_on_sqlite(pg_url: str, tmp_path: Path) -> None:
    old = now() - timedelta(days=40)
    db, (a, b, c) = twins(
        tmp_path,
        pg_url,
        [
            Spec(conversation(), cwd="/home/me/project"),
            Spec([UserMessage("Straße naïve émigré: the fixture\nsecond line"), ModelMessage("ok")], title="Named"),
            Spec([UserMessage("an old one")], cwd="/elsewhere", updated_at=old),
        ],
    )
    listed = same_on_both(db, pg_url, "list")
    assert a[:12] in listed.stdout and "Named" in listed.stdout
    assert [s["session_id"] for s in json.loads(same_on_both(db, pg_url, "list", "--json").stdout)] == [b, a, c]
    same_on_both(db, pg_url, "list", "--cwd", "/elsewhere", "--json")
    same_on_both(db, pg_url, "list", "-n", "1")
    shown = same_on_both(db, pg_url, "show", a[:6])
    assert 'tool call    run(cmd="pytest -x")' in shown.stdout
    same_on_both(db, pg_url, "show", a[:6], "--all")
    same_on_both(db, pg_url, "show", b, "--json")
    same_search(db, pg_url, "fixture", "--json")  # snippets included
    same_search(db, pg_url, "build", "red")
    missing = same_search(db, pg_url, "nowhere")
    assert missing.returncode == 1
    unknown = same_on_both(db, pg_url, "show", "0" * 12)
    assert unknown.returncode == 1 and unknown.stderr.count("\n") == 1


def test_writing_commands_change_both_alike(pg_url: str, tmp_path: Path) -> None:
    old = now() - timedelta(days=40)
    db, (a, b, c, d) = twins(
        tmp_path,
        pg_url,
        [
            Spec([UserMessage("first")]),
            Spec([UserMessage("second")]),
            Spec([UserMessage("old and released")], updated_at=old),
            Spec([UserMessage("old, never released")], updated_at=old, released=False),
        ],
    )
    assert same_on_both(db, pg_url, "title", a[:8], "A   title").stdout == f"{a}: title set to 'A title'\n"
    same_on_both(db, pg_url, "title", a[:8], "--clear")
    same_on_both(db, pg_url, "title", b[:8], "Kept")
    # One unknown id deletes nothing, on either database.
    failed = same_on_both(db, pg_url, "delete", a, "f" * 32)
    assert failed.returncode == 1 and failed.stderr == f"sessionstore: error: no session matches {'f' * 32!r}\n"
    assert same_on_both(db, pg_url, "delete", a).stdout == f"deleted {a}\n"
    # No live process holds either old session (released, or written without a registry): both go.
    dry = same_on_both(db, pg_url, "prune", "--older-than", "30d")
    assert c[:12] in dry.stdout and d[:12] in dry.stdout and "--yes" in dry.stdout
    same_on_both(db, pg_url, "prune", "--older-than", "30d", "--yes")
    after = same_on_both(db, pg_url, "list", "--json")
    assert [(s["session_id"], s["stored_title"]) for s in json.loads(after.stdout)] == [(b, "Kept")]
    same_on_both(db, pg_url, "export", "--all")


def test_stats_and_check_show_what_a_server_has(pg_server: PostgresServer, pg_url: str, tmp_path: Path) -> None:
    db, _ = twins(tmp_path, pg_url, [Spec(conversation()), Spec([UserMessage("x")], released=False)])
    lite, pg = (
        json.loads(run("stats", "--json", "--db", db).stdout),
        json.loads(run("stats", "--json", "--db", pg_url).stdout),
    )
    for key in ("sessions", "released", "events", "event_types", "revision", "head"):
        assert pg[key] == lite[key], key
    assert pg["database"] == "postgresql" and pg["file_size"] > pg["tables_size"] > 0
    text = run("stats", "--db", pg_url)
    assert text.returncode == 0 and "database  postgresql+asyncpg://postgres:***@" in text.stdout
    assert "size      " in text.stdout and "sessions  2 (1 released)" in text.stdout

    checked = run("check", "--db", pg_url)
    assert checked.returncode == 0 and checked.stdout.endswith("ok\n"), checked.stdout
    assert "integrity     not a file's check" in checked.stdout
    assert json.loads(run("check", "--json", "--db", pg_url).stdout)["ok"] is True
    repair = run("check", "--repair", "--db", pg_url)
    assert repair.returncode == 1 and repair.stderr.count("\n") == 1 and "SQLite file's" in repair.stderr
    assert pg_server.password not in repair.stderr

    name = pg_url.rsplit("/", 1)[1]
    pg_server.psql("DROP VIEW session_overview; DROP TRIGGER events_revision_delete ON events", database=name)
    broken = run("check", "--json", "--db", pg_url)
    report = json.loads(broken.stdout)
    assert broken.returncode == 1 and report["ok"] is False
    assert sorted(report["schema_objects"]) == ["events_revision_delete is missing", "session_overview is missing"]

    # Events whose session row went while the foreign key's triggers were off are named.
    pg_server.psql(
        "ALTER TABLE sessions DISABLE TRIGGER ALL; DELETE FROM sessions WHERE released = FALSE;"
        " ALTER TABLE sessions ENABLE TRIGGER ALL",
        database=name,
    )
    orphans = json.loads(run("check", "--json", "--db", pg_url).stdout)["foreign_keys"]
    assert len(orphans) == 1 and orphans[0].startswith("events row ") and "missing sessions row" in orphans[0]


def test_db_commands_move_a_server_database(pg_empty_url: str) -> None:
    url = pg_empty_url
    assert run("db", "current", "--db", url).stdout.startswith(f"base (head is {HEAD}")
    refused = run("list", "--db", url)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    # An empty database names the command that gives it the schema (run below).
    assert "has no sessionstore schema yet; give it one with `sessionstore db upgrade --db" in refused.stderr
    up = run("db", "upgrade", "0003", "--db", url)
    assert up.returncode == 0 and up.stdout == f"upgraded {pgdatabase.redacted(url)} from base to 0003\n"
    behind = run("list", "--db", url)
    assert behind.returncode == 1 and "run `sessionstore db upgrade --db" in behind.stderr
    assert run("db", "current", "--db", url).stdout.startswith(f"0003 (head is {HEAD}")
    assert run("db", "upgrade", "--db", url).stdout.endswith(f"from 0003 to {HEAD}\n")
    assert run("db", "upgrade", "--db", url).stdout.endswith(f"is already at {HEAD}\n")
    assert run("db", "current", "--db", url).stdout == f"{HEAD} (head)\n"
    assert run("list", "--db", url).stderr == "no sessions\n"
    assert run("db", "downgrade", "0002", "--db", url).stdout.endswith(f"from {HEAD} to 0002\n")
    wrong_way = run("db", "upgrade", "0001", "--db", url)
    assert wrong_way.returncode == 1 and "downgrade it" in wrong_way.stderr
    assert run("db", "downgrade", "base", "--db", url).returncode == 0
    assert run("db", "current", "--db", url).stdout.startswith("base")


def test_the_url_may_come_from_the_environment(pg_url: str, tmp_path: Path) -> None:
    twins(tmp_path, pg_url, [Spec([UserMessage("from the environment")])])
    listed = run("list", env=child_env(SESSIONSTORE_DB=pg_url))
    assert listed.returncode == 0 and "from the environment" in listed.stdout


ALL_COMMANDS = [
    ["list"],
    ["show", "ab"],
    ["search", "word"],
    ["export", "--all"],
    ["import", "-"],
    ["delete", "ab"],
    ["prune", "--older-than", "1d"],
    ["title", "ab", "x"],
    ["stats"],
    ["check"],
    ["db", "current"],
    ["db", "upgrade"],
]


def test_errors_are_one_line_and_never_show_the_password(pg_server: PostgresServer, pg_url: str) -> None:
    password = pg_server.password
    bad = [
        pg_url.replace(password, "not-" + password),  # refused login
        pg_url.rsplit("/", 1)[0] + "/no_such_database",
        pg_url.replace(f":{pg_server.port}/", ":1/"),  # nothing listens
        pg_url.replace(f":{pg_server.port}/", ":port/"),  # not a URL one can connect with
    ]
    for url in bad:
        for command in ALL_COMMANDS:
            done = run(*command, "--db", url, input='{"format":"sessionstore-export","version":2}\n')
            shown = done.stdout + done.stderr
            assert done.returncode == 1, (command, shown)
            assert done.stderr.startswith("sessionstore: error: ") and done.stderr.count("\n") == 1, (command, shown)
            assert password not in shown and "Traceback" not in shown, (command, shown)
            secret = url.split(":", 2)[2].split("@")[0]
            assert secret not in shown, (command, shown)


def test_logs_and_reprs_never_hold_the_password(
    pg_server: PostgresServer,
    pg_url: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db, (sid,) = twins(tmp_path, pg_url, [Spec(conversation())])
    export = tmp_path / "moved.jsonl"
    assert run("export", "--all", "-o", export, "--db", db).returncode == 0
    for name in ("sqlalchemy", "asyncpg", "sessionstore", "alembic"):
        caplog.set_level(logging.DEBUG, logger=name)
    wrong = pg_url.replace(pg_server.password, "wrong")
    for args in (
        ["list"],
        ["show", sid[:8]],
        ["search", "fixture"],
        ["import", export, "--replace"],
        ["stats"],
        ["check"],
        ["db", "current"],
    ):
        for url in (pg_url, wrong):
            try:
                main([*map(str, args), "--db", url])
            except SystemExit:
                pass
    out = capsys.readouterr()
    logged = "\n".join(f"{r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records)
    assert "***" in out.err  # the refused logins were reported, the URL redacted
    for text in (logged, out.out, out.err):
        assert pg_server.password not in text and "wrong@" not in text
    connection_repr = repr(pgdatabase.PgConnection(None, pg_url))
    assert pg_server.password not in connection_repr and "***" in connection_repr


async def test_the_functions_work_from_async_code_too(pg_url: str, tmp_path: Path) -> None:
    """The same synchronous functions, called where an event loop runs (directly, or in a worker thread)."""
    import asyncio

    from sessionstore import records

    _, (sid,) = await asyncio.to_thread(twins, tmp_path, pg_url, [Spec(conversation())])
    assert [r.session_id for r in records.list_sessions(pg_url)] == [sid]
    stored = await asyncio.to_thread(records.read_session, pg_url, sid[:6])
    assert stored.record.session_id == sid and len(stored.events) == len(conversation())
    assert [h.position for h in records.search(pg_url, "fixture")] == [4]


def sql(url: str, statement: str, *args: object) -> object:
    """One statement on its own connection (asyncpg, as a person's psql would be): its first value."""

    async def run() -> object:
        conn = await asyncpg.connect(url.replace("+asyncpg", ""))
        try:
            return await conn.fetchval(statement, *args)
        finally:
            await conn.close()

    return asyncio.run(run())


def test_a_listing_is_handed_over_as_it_is_read_and_its_connection_closes_when_done(pg_url: str) -> None:
    """Was: on PostgreSQL the listing gathered every row before the first was printed. Now rows come from a
    server-side cursor through a bounded queue: while the first is in hand the listing's transaction is still open
    on the server, and it closes once the last is taken, or at once when the reader stops early."""
    count = 3 * STREAM_BUFFER
    sql(
        pg_url,
        "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, created_at, updated_at,"
        " released, revision) SELECT md5(n::text), '/w', '[]', '[]', '{}', now(), now() - n * interval '1 s', false, 0"
        " FROM generate_series(1, $1::int) AS n",
        count,
    )
    open_listings = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND state = 'idle in transaction'"
    )

    listing = records.list_sessions(pg_url)
    first = next(listing)
    assert first.session_id == hashlib.md5(b"1").hexdigest()  # the most recently updated
    # The rest is still on the server, not gathered here: once the reader has filled its bounded queue (each row's
    # usage read meanwhile), the listing's transaction waits, open.
    deadline = time.monotonic() + 30
    while sql(pg_url, open_listings) != 1:
        assert time.monotonic() < deadline, "the listing's transaction never waited open with rows left to read"
        time.sleep(0.05)
    assert sum(1 for _ in listing) == count - 1
    assert sql(pg_url, open_listings) == 0

    stopped = records.list_sessions(pg_url)
    next(stopped)
    stopped.close()  # a reader that leaves early (`sessionstore list | head`)
    assert sql(pg_url, open_listings) == 0
