"""One migration history for both databases: the same revisions build, check, move and lock a PostgreSQL database,
and its views answer as SQLite's do for the same data."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from uuid import uuid4

import asyncpg  # type: ignore[import-untyped]
import pytest
from alembic.script import ScriptDirectory
from pg_server import PostgresServer
from sessionstore.migrations.sqlobjects import SQLObject, find
from sqlalchemy.ext.asyncio import create_async_engine as create_engine

from sessionstore import (
    EventContext,
    MigrationError,
    ModelMessage,
    SessionRecord,
    SQLiteStorage,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
    migrate,
    records,
)
from sessionstore.postgres import PostgresStorage
from sessionstore.postgres import migrate as pgmigrate
from sessionstore.schema import revisions as schema_revisions
from sessionstore.schema.models import Base

REPO = Path(__file__).resolve().parents[2]
HEAD, PREVIOUS = [revision for revision, _, _ in migrate.history()][:2]
ALEMBIC = [sys.executable, "-m", "alembic"]


def alembic(*args: str, env: dict[str, str] | None = None, ok: bool = True) -> str:
    done = subprocess.run([*ALEMBIC, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode == 0) == ok, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def test_a_downgrade_to_base_of_a_database_holding_sessions_is_refused_unless_forced(pg_empty_url: str) -> None:
    """``downgrade base`` drops every session: a file is copied aside first, a PostgreSQL database cannot be from
    here, so both ``alembic`` and ``sessionstore db downgrade`` refuse it in one line, changing nothing, until the
    user (after a pg_dump) forces it."""
    url = pg_empty_url.replace("+asyncpg", "")
    stream_id = uuid4()

    async def write() -> None:
        async with PostgresStorage(pg_empty_url) as storage:
            await storage.save_event(UserMessage("keep me"), EventContext.for_stream(stream_id))

    asyncio.run(write())
    refused = alembic("-x", f"db={url}", "downgrade", "base", ok=False)
    assert "DowngradeRefusedError" in refused and "pg_dump it first, then run again with -x force=1" in refused
    cli = subprocess.run(
        [str(Path(sys.executable).parent / "sessionstore"), "db", "downgrade", "base", "--db", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 1 and cli.stderr.count("\n") == 1, cli.stderr
    assert "drops every session" in cli.stderr and "run again with --force" in cli.stderr
    assert f"{HEAD} (head)" in alembic("-x", f"db={url}", "current")
    assert asyncio.run(fetch(url, "SELECT count(*) FROM events")) == [(1,)]
    # A downgrade that keeps the sessions is not refused, and forcing goes to base.
    assert f"{HEAD} -> {PREVIOUS}" in alembic("-x", f"db={url}", "downgrade", "-1")
    assert f"-> {HEAD}" in alembic("-x", f"db={url}", "upgrade", "head")
    assert "0001 -> , baseline" in alembic("-x", f"db={url}", "-x", "force=1", "downgrade", "base")
    assert asyncio.run(fetch(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")) == [
        ("alembic_version",)
    ]


async def fetch(url: str, sql: str) -> list[tuple[object, ...]]:
    """The rows of one statement; statements separated by ``;`` are run, and give none."""
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        if ";" in sql:
            await conn.execute(sql)
            return []
        return [tuple(r) for r in await conn.fetch(sql)]
    finally:
        await conn.close()


def test_alembic_command_line_on_postgresql(pg_empty_url: str) -> None:
    password = pg_empty_url.split(":")[2].split("@")[0]
    url = pg_empty_url.replace("+asyncpg", "")  # postgresql:// works as well as postgresql+asyncpg://
    assert f"-> {HEAD}" in alembic("-x", f"db={url}", "upgrade", "head")
    assert "No new upgrade operations detected" in alembic("-x", f"db={pg_empty_url}", "check")
    assert f"{HEAD} (head)" in alembic("-x", f"db={url}", "current")
    env = {**os.environ, "SESSIONSTORE_DB": url}
    assert f"{HEAD} -> {PREVIOUS}" in alembic("downgrade", "-1", env=env)
    assert "0001 -> , baseline" in alembic("downgrade", "base", env=env)
    assert asyncio.run(fetch(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")) == [
        ("alembic_version",)
    ]
    assert asyncio.run(fetch(url, "SELECT proname FROM pg_proc WHERE proname LIKE '%sessionstore%'")) == []
    output = alembic("-x", f"db={url}", "upgrade", "head")
    assert password not in output


def columns_in_any_order(dump: str) -> str:
    """``dump`` with each table's column lines sorted: a column added by a later revision (0012's forks) lands
    after one only PostgreSQL has, which the reference adds last (0011's ``owner``: not in the models), and
    PostgreSQL cannot move a column."""
    out, table = [], None
    for line in dump.splitlines():
        if line.startswith("CREATE TABLE ") and line.endswith("("):
            out.append(line)
            table = []
        elif table is not None and line == ");":
            out.extend(sorted(column.rstrip(",") for column in table))
            out.append(line)
            table = None
        elif table is not None:
            table.append(line)
        else:
            out.append(line)
    return "\n".join(out)


def test_a_new_database_is_the_models_and_the_objects_at_head(pg_server: PostgresServer, pg_url: str) -> None:
    # compare_metadata ignores CHECK constraints, triggers, functions and views: the migrated database must be
    # what create_all writes plus the objects at head as their revisions define them, statement for statement.
    reference = pg_server.create_database()
    try:
        engine = create_engine(pg_server.url(reference, driver="postgresql+asyncpg"))

        async def build() -> None:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
                scripts = ScriptDirectory(str(schema_revisions.script_location()))
                for name in schema_revisions.OBJECTS_AT_HEAD_POSTGRESQL:
                    for ddl in find(scripts, name, SQLObject).create(scripts):
                        await conn.exec_driver_sql(ddl)
            await engine.dispose()

        asyncio.run(build())
        asyncio.run(fetch(pg_url, "DROP TABLE alembic_version"))
        migrated, built = (
            columns_in_any_order(pg_server.schema(name)) for name in (pg_url.rsplit("/", 1)[1], reference)
        )
        assert "CREATE TRIGGER events_revision_update" in migrated and "events_fts" in migrated
        assert migrated == built
    finally:
        pg_server.drop_database(reference)


def test_drift_is_detected_on_postgresql(pg_url: str) -> None:
    # The check could pass by comparing nothing: a column the models lack must fail it.
    asyncio.run(fetch(pg_url, "ALTER TABLE events ADD COLUMN stray TEXT"))
    assert "stray" in alembic("-x", f"db={pg_url}", "check", ok=False)
    asyncio.run(fetch(pg_url, "ALTER TABLE events DROP COLUMN stray"))
    alembic("-x", f"db={pg_url}", "check")


def test_a_populated_database_goes_down_to_base_and_back_up(pg_empty_url: str) -> None:
    pgmigrate.migrate(pg_empty_url, "0001")
    asyncio.run(
        fetch(
            pg_empty_url,
            "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, created_at, updated_at,"
            f" released, revision) VALUES ('{'a' * 32}', '/w', '[]', '[]', '{{}}', now(), now(), false, 0);"
            "INSERT INTO events (session, position, type, payload, created_at) SELECT id, 0, 'user_message',"
            ' \'{"content":"from 0001"}\', now() FROM sessions;'
            "INSERT INTO events (session, position, type, payload, created_at) SELECT id, 1, 'tool_call',"
            ' \'{"call_id":"c","name":"ls","arguments":{"path":"/","all":true}}\', now() FROM sessions',
        )
    )
    assert pgmigrate.migrate(pg_empty_url) == "0001"  # the revision it was at
    # 0003 filled the new columns as the codec describes those events, without counting a change
    assert asyncio.run(fetch(pg_empty_url, "SELECT role, text, text_path FROM events ORDER BY position")) == [
        ("user", None, "$.content"),
        ("tool_call", 'ls(path="/", all=true)', None),
    ]
    assert asyncio.run(fetch(pg_empty_url, "SELECT revision FROM sessions")) == [(2,)]
    assert asyncio.run(fetch(pg_empty_url, "SELECT role, text FROM transcript ORDER BY position")) == [
        ("user", "from 0001"),
        ("tool_call", 'ls(path="/", all=true)'),
    ]
    pgmigrate.migrate(pg_empty_url, "base", "downgrade", force=True)  # its sessions go: forced, as after a pg_dump
    pgmigrate.migrate(pg_empty_url)
    alembic("-x", f"db={pg_empty_url}", "check")


def test_two_processes_opening_an_old_database_at_once_migrate_it_once(pg_empty_url: str) -> None:
    pgmigrate.migrate(pg_empty_url, "0001")
    opener = (
        "import asyncio, sys\nfrom sessionstore.postgres import PostgresStorage\n"
        "async def main():\n    async with PostgresStorage(sys.argv[1]) as s:\n"
        "        print(len((await s.list_sessions()).sessions))\nasyncio.run(main())\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", opener, pg_empty_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    outcomes = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 4, outcomes
    assert asyncio.run(fetch(pg_empty_url, "SELECT version_num FROM alembic_version")) == [(HEAD,)]


CONVERSATIONS = [
    [
        SystemMessage("be brief"),
        UserMessage("  Why is the build red?\nIt was green\tyesterday " + "x" * 90),
        ToolCall(call_id="c1", name="run", arguments={"cmd": "pytest -x", "n": 3, "deep": {"a": [1, None]}}),
        ToolResult(call_id="c1", content="1 failed: test_parse_dates"),
        ToolResult(call_id="c2", content={"files": ["a.py"], "ok": False}),
        ModelMessage("test_parse_dates fails: the fixture expects UTC."),
    ],
    [ModelMessage("no user here"), UserMessage("Straße naïve émigré fixture")],
    [],
]


async def test_views_answer_as_on_sqlite(pg_url: str, tmp_path: Path) -> None:
    ids = [uuid4() for _ in CONVERSATIONS]
    sqlite = SQLiteStorage(tmp_path / "same.db")
    async with sqlite, PostgresStorage(pg_url) as postgres:
        for storage in (sqlite, postgres):
            for n, (sid, events) in enumerate(zip(ids, CONVERSATIONS, strict=True)):
                await storage.save_session(
                    SessionRecord(session_id=sid.hex, cwd=f"/w{n}", title="set" if n == 2 else None)
                )
                await storage.set_history(sid, events)
            await storage.save_event(UserMessage("one more"), EventContext.for_stream(ids[1]))
    with sqlite3.connect(tmp_path / "same.db") as conn:
        lite_transcript = conn.execute(
            "SELECT session_id, position, type, role, text FROM transcript ORDER BY session_id, position"
        ).fetchall()
        lite_overview = conn.execute(
            "SELECT session_id, title, title_set, cwd, released, events FROM session_overview ORDER BY session_id"
        ).fetchall()
    pg_transcript = await fetch(
        pg_url, "SELECT session_id, position, type, role, text FROM transcript ORDER BY session_id, position"
    )
    pg_overview = await fetch(
        pg_url,
        "SELECT session_id, title, title_set::int, cwd, released::int, events"
        " FROM session_overview ORDER BY session_id",
    )
    assert pg_transcript == lite_transcript
    assert pg_overview == lite_overview
    assert len(lite_transcript) == 9 and lite_overview[0][1] is not None


def test_0009_indexes_the_words_inside_tokens_and_goes_back(pg_server: PostgresServer, pg_empty_url: str) -> None:
    """An 0008 database's events are found by the words inside their tokens once 0009 has rebuilt the index; a
    downgrade puts 0003's index back (the old answer: nothing), and the upgrade again finds them."""
    pgmigrate.migrate(pg_empty_url, "0008")
    asyncio.run(
        fetch(
            pg_empty_url,
            "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, created_at, updated_at,"
            f" released, revision) VALUES ('{'b' * 32}', '/w', '[]', '[]', '{{}}', now(), now(), false, 0);"
            "INSERT INTO events (session, position, type, payload, created_at, role, text_path) SELECT id, 0,"
            " 'user_message', '{\"content\":\"edit /home/me/src/app.py for bob@example.org\"}', now(), 'user',"
            " '$.content' FROM sessions",
        )
    )
    indexes = "SELECT indexdef FROM pg_indexes WHERE indexname = 'events_fts'"
    assert "to_tsvector" in str(asyncio.run(fetch(pg_empty_url, indexes)))
    assert pgmigrate.migrate(pg_empty_url, "0009") == "0008"
    assert "sessionstore_search_words" in str(asyncio.run(fetch(pg_empty_url, indexes)))
    pgmigrate.migrate(pg_empty_url)  # search runs at head (0015 keeps the words in a table of their own)
    for word in ("home", "src", "app", "example"):
        assert [h.position for h in records.search(pg_empty_url, word)] == [0], word
    pgmigrate.migrate(pg_empty_url, "0008", "downgrade")
    assert "to_tsvector" in str(asyncio.run(fetch(pg_empty_url, indexes)))
    functions = "SELECT count(*) FROM pg_proc WHERE proname = 'sessionstore_search_words'"
    assert asyncio.run(fetch(pg_empty_url, functions)) == [(0,)]
    pgmigrate.migrate(pg_empty_url)
    assert [h.position for h in records.search(pg_empty_url, "example")] == [0]
    alembic("-x", f"db={pg_empty_url}", "check")


def test_0009_refuses_a_database_that_is_not_utf8(pg_server: PostgresServer) -> None:
    name = f"ascii{uuid4().hex[:8]}"
    pg_server.psql(f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    url = pg_server.url(name)
    try:
        pgmigrate.migrate(url, "0008")
        with pytest.raises(MigrationError, match=r"revision 0009 .* is not UTF8"):
            pgmigrate.migrate(url)
        assert asyncio.run(fetch(url, "SELECT version_num FROM alembic_version")) == [("0008",)]  # nothing changed
    finally:
        pg_server.drop_database(name)


def test_0013_checks_a_forks_key_at_commit_and_goes_back(pg_empty_url: str) -> None:
    """A 0012 database's fork (with its key's SET NULL) upgrades in place to a key checked at commit with no
    ``ON DELETE`` action, which refuses a delete of its parent made behind the storage's back (raw SQL), whole; the
    downgrade puts SET NULL back; ``alembic check`` finds no drift at head."""
    pgmigrate.migrate(pg_empty_url, "0012")
    asyncio.run(
        fetch(
            pg_empty_url,
            "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, created_at, updated_at,"
            f" released, revision) VALUES ('{'c' * 32}', '/w', '[]', '[]', '{{}}', now(), now(), false, 0);"
            "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, created_at, updated_at,"
            f" released, revision, forked_from, forked_at) SELECT '{'d' * 32}', '/w', '[]', '[]', '{{}}', now(), now(),"
            " false, 0, id, 0 FROM sessions",
        )
    )
    key = "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'fk_sessions_forked_from_sessions'"
    assert asyncio.run(fetch(pg_empty_url, key)) == [
        ("FOREIGN KEY (forked_from) REFERENCES sessions(id) ON DELETE SET NULL",)
    ]
    assert pgmigrate.migrate(pg_empty_url) == "0012"
    assert asyncio.run(fetch(pg_empty_url, key)) == [
        ("FOREIGN KEY (forked_from) REFERENCES sessions(id) DEFERRABLE INITIALLY DEFERRED",)
    ]
    with pytest.raises(asyncpg.ForeignKeyViolationError, match="fk_sessions_forked_from_sessions"):
        asyncio.run(fetch(pg_empty_url, f"DELETE FROM sessions WHERE session_id = '{'c' * 32}'; SELECT 1"))
    forks = f"SELECT count(*) FROM sessions WHERE forked_from IS NOT NULL AND session_id = '{'d' * 32}'"
    assert asyncio.run(fetch(pg_empty_url, forks)) == [(1,)]  # the delete was rolled back whole
    alembic("-x", f"db={pg_empty_url}", "check")
    pgmigrate.migrate(pg_empty_url, "0012", "downgrade")
    assert asyncio.run(fetch(pg_empty_url, key)) == [
        ("FOREIGN KEY (forked_from) REFERENCES sessions(id) ON DELETE SET NULL",)
    ]
