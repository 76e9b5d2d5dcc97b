"""The statements on the tables come from the models (``schema/statements.py`` writes ``schema/queries.py``), run
on both databases as written, and bind what the models' types would: a real SQLite file, a real PostgreSQL
server, the generator run as a command."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from uuid import uuid4

import asyncpg  # type: ignore[import-untyped]
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import MetaData, create_engine, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import create_async_engine

from sessionstore import SessionRecord, SQLiteStorage
from sessionstore.errors import EventEncodeError
from sessionstore.postgres import PostgresStorage
from sessionstore.postgres.connect import bind
from sessionstore.schema import queries, statements
from sessionstore.schema.models import Base, Session
from sessionstore.storage import UPDATED_AT_SLACK, now_texts, record_row, stamp, utc_text

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "sessionstore"


def renamed(table: str, name: str, to: str) -> MetaData:
    """A copy of the models' metadata with one column renamed in the database (its key, the attribute, kept)."""
    copy = MetaData()
    for t in Base.metadata.sorted_tables:
        t.to_metadata(copy)
    copy.tables[table].c[name].name = to
    return copy


def naming(column: str, texts: dict[str, str]) -> set[str]:
    """The statements that name ``column`` (a parameter of the same name, ``:column``, is not the column)."""
    return {name for name, sql in texts.items() if re.search(rf"(?<!:)\b{column}\b", sql)}


@pytest.fixture
def head_file(tmp_path: Path) -> Iterator[Path]:
    """A SQLite file at the head revision, made by a storage."""
    path = tmp_path / "head.db"

    async def make() -> None:
        async with SQLiteStorage(path):
            pass

    asyncio.run(make())
    yield path


# -- the generated file ---------------------------------------------------------------------------------------------


def test_queries_py_is_what_the_generator_writes() -> None:
    assert statements.render() == statements.QUERIES.read_text()
    check = subprocess.run(
        [sys.executable, "-m", "sessionstore.schema.statements", "--check"], capture_output=True, text=True, cwd=ROOT
    )
    assert (check.returncode, check.stderr) == (0, "")
    # Every name of the generated part is a constant of the module, with the text the generator compiled.
    for name, text in statements.texts().items():
        assert getattr(queries, name) == text, name
    assert set(statements.texts()) | {"list_sessions", "search_in"} == set(queries.__all__)


@pytest.mark.parametrize(("table", "column", "to"), [("sessions", "held_by", "holder"), ("events", "payload", "body")])
def test_a_column_renamed_in_the_models_renames_it_in_every_statement(table: str, column: str, to: str) -> None:
    before = statements.texts()
    after = statements.texts(renamed(table, column, to))
    named = naming(column, before)
    assert len(named) >= 6  # the test looks at statements that use the column
    assert {name for name in before if before[name] != after[name]} == named
    assert naming(column, after) == set()
    assert naming(to, after) == named
    # The check fails: the file checked in is not what the renamed models would write.
    assert statements.render(renamed(table, column, to)) != statements.QUERIES.read_text()


def test_a_stale_file_fails_the_check_and_write_brings_it_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "queries.py"
    current = statements.QUERIES.read_text()
    copy.write_text(current.replace("sessions.session_id = :sid", "sessions.session_id = :other", 1))
    monkeypatch.setattr(statements, "QUERIES", copy)
    assert statements.main(["--check"]) == 1
    assert statements.main(["--write"]) == 0
    assert copy.read_text() == current
    assert statements.main(["--check"]) == 0
    copy.write_text(current.replace(statements.HAND_WRITTEN, "# the marker line, lost"))
    with pytest.raises(SystemExit, match="lost its line"):
        statements.main(["--check"])


def test_a_statement_only_postgresql_runs_is_named_for_it_and_run_by_its_package_alone() -> None:
    sources = {path: path.read_text() for path in PACKAGE.rglob("*.py") if "schema" not in path.parts}

    def users(name: str) -> set[str]:
        return {str(p.relative_to(PACKAGE)) for p, text in sources.items() if re.search(rf"queries\.{name}\b", text)}

    variants = [name for name in queries.__all__ if name.endswith("_POSTGRESQL")]
    assert "NEW_SESSION_POSTGRESQL" in variants and "SEARCH_POSTGRESQL" in variants
    for name in variants:
        assert users(name) and all(u.startswith("postgres/") for u in users(name)), (name, users(name))
        # SQLite's text of the same statement is SQLite's code's alone: no shared module runs it on PostgreSQL.
        base = name.removesuffix("_POSTGRESQL")
        assert all(u.startswith("sqlite/") for u in users(base)), (base, users(base))


def test_importing_the_package_or_running_a_command_loads_neither_sqlalchemy_nor_the_generator(
    head_file: Path,
) -> None:
    code = "import sys, sessionstore; print(' '.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "sessionstore.schema.queries" in loaded  # the test sees what was loaded
    assert [m for m in loaded if m.startswith(("sqlalchemy", "sessionstore.schema.statements"))] == []
    listed = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "sessionstore.cli", "list", "--db", str(head_file)],
        capture_output=True,
        text=True,
    )
    assert listed.returncode == 0, listed.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in listed.stderr.splitlines() if "|" in line]
    assert "sessionstore.records" in imported and "sessionstore.schema.queries" in imported  # it sees the list's
    assert [m for m in imported if m.startswith(("sqlalchemy", "sessionstore.schema.statements"))] == []


# -- the views as declared ----------------------------------------------------------------------------------------


def test_the_views_and_the_index_are_declared_as_a_file_at_head_has_them(head_file: Path) -> None:
    conn = sqlite3.connect(head_file)
    for declared in (statements.OVERVIEW_VIEW, statements.TRANSCRIPT, statements.PROGRESS, statements.FTS):
        columns = [str(row[1]) for row in conn.execute(f"PRAGMA table_info({declared.name})")]
        hidden = {"rowid", "rank"} if declared is statements.FTS else set()  # FTS5's own, never listed
        assert sorted(c.name for c in declared.c if c.name not in hidden) == sorted(columns), declared.name


async def test_the_views_are_declared_as_a_postgresql_database_at_head_has_them(pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url.replace("+asyncpg", ""))
    try:
        for declared in (statements.OVERVIEW_VIEW, statements.TRANSCRIPT):
            rows = await conn.fetch(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
                " AND table_name = $1",
                declared.name,
            )
            assert sorted(c.name for c in declared.c) == sorted(r[0] for r in rows), declared.name
    finally:
        await conn.close()


# -- every statement, on the databases that run it ----------------------------------------------------------------


def _runs_on(database: str) -> dict[str, str]:
    """Each statement ``database`` runs, by its name, as a statement (the TOP_LEVEL conditions in one)."""
    out = {}
    for entry in statements.STATEMENTS:
        if isinstance(entry, statements.Statement) and database in entry.databases:
            sql = statements.compiled(entry, Base.metadata, database)
            condition = entry.name.startswith("TOP_LEVEL")  # TOP_LEVEL, TOP_LEVEL_POSTGRESQL: in a statement
            out[entry.name] = f"SELECT 1 FROM session_overview WHERE {sql}" if condition else sql
    return out


def _numbered(sql: str) -> str:
    """``sql`` with asyncpg's ``$n`` for its ``:named`` parameters (a name used twice is one number)."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    return re.sub(r"(?<!:):(\w+)", number, sql)


def test_every_statement_sqlite_runs_is_valid_on_a_file_at_head(head_file: Path) -> None:
    conn = sqlite3.connect(head_file)
    runs = _runs_on("sqlite")
    assert "APPEND_EVENT" in runs and "SEARCH" in runs
    for sql in runs.values():
        params = dict.fromkeys(re.findall(r"(?<!:):(\w+)", sql))
        conn.execute(f"EXPLAIN {sql}", params).fetchall()  # prepared against the schema: every name resolves


async def test_every_statement_postgresql_runs_is_valid_on_a_database_at_head(pg_url: str) -> None:
    conn = await asyncpg.connect(pg_url.replace("+asyncpg", ""))
    runs = _runs_on("postgresql")
    assert "NEW_SESSION_POSTGRESQL" in runs and "UPSERT_SESSION" in runs and "NEW_SESSION" not in runs
    try:
        for sql in runs.values():
            await conn.prepare(_numbered(sql))  # parsed and planned against the schema, not run
    finally:
        await conn.close()


# -- what the models' types bind is what the storages write -------------------------------------------------------

SQLITE, PG = sqlite.dialect(), postgresql.dialect()
COLUMNS = Session.__table__.c


def _bound(column: str, value: Any, dialect: Any) -> Any:
    kind = COLUMNS[column].type.dialect_impl(dialect)
    processor = kind.bind_processor(dialect)
    return value if processor is None else processor(value)


instants = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.timezones() | st.just(UTC)
)


@given(instants)
def test_a_time_binds_as_the_storages_write_it_and_reads_back_as_they_read_it(when: datetime) -> None:
    text = utc_text(when)  # what both storages write (PostgreSQL's through connect.bind)
    assert _bound("created_at", when, SQLITE) == text
    assert _bound("created_at", when, PG) == bind({"created_at": text})["created_at"]
    read = COLUMNS["created_at"].type.dialect_impl(SQLITE).result_processor(SQLITE, None)(text)
    assert COLUMNS["created_at"].type.process_result_value(read, SQLITE) == stamp(text) == when.astimezone(UTC)


def test_the_clock_of_appends_writes_what_utc_text_writes_of_now() -> None:
    """``now_texts`` formats a second once and then only its microseconds: it must write the instant as
    ``utc_text`` does (a sorted column, compared as text), and the instant a whole slack before it."""
    assert UPDATED_AT_SLACK.total_seconds() == int(UPDATED_AT_SLACK.total_seconds())  # shifted in whole seconds
    for _ in range(3):
        before = utc_text(datetime.now(UTC))
        now, stale = now_texts()
        after = utc_text(datetime.now(UTC))
        assert len(now) == len(before) == 26
        assert before[:19] <= now <= after  # datetime.now rounds the microseconds where now_texts cuts them
        assert stamp(stale) == stamp(now) - UPDATED_AT_SLACK
        time.sleep(0.6)  # into the next second: its text is made again


def test_a_naive_time_is_refused_by_the_models_as_by_the_storages() -> None:
    with pytest.raises(EventEncodeError):
        _bound("updated_at", datetime(2026, 1, 1), SQLITE)


RECORD = SessionRecord(
    session_id=uuid4().hex,
    cwd="/wörk",
    additional_directories=["/a", "/ü b"],
    mcp_servers=[{"name": "files", "args": ["--x"], "weight": 1.5}],
    meta={"owner": "é", "n": [1, 2, {"deep": None}]},
    title="Plan",
    created_at=datetime(2026, 3, 1, 7, 0, 0, 123456, tzinfo=timezone(timedelta(hours=-5))),
    updated_at=datetime(2026, 3, 2, 1, 2, 3, 456, tzinfo=timezone(timedelta(hours=9, minutes=30))),
    released=True,
)
_ROW = ("cwd", "additional_directories", "mcp_servers", "meta", "title", "created_at", "updated_at", "released")


def _model_row(sid: str) -> dict[str, Any]:
    values = {key: getattr(RECORD, key) for key in _ROW}
    return {"session_id": sid, **values, "revision": 0}


def test_every_column_binds_as_the_storages_write_it() -> None:
    written = record_row(RECORD)  # the parameters of UPSERT_SESSION, on SQLite
    assert {key: _bound(key, getattr(RECORD, key), SQLITE) for key in _ROW} == {key: written[key] for key in _ROW}
    on_pg = bind(written)
    assert {key: _bound(key, getattr(RECORD, key), PG) for key in ("created_at", "updated_at", "released")} == {
        key: on_pg[key] for key in ("created_at", "updated_at", "released")
    }


async def test_a_row_the_models_write_is_the_row_a_storage_writes_on_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "rows.db"
    async with SQLiteStorage(db) as storage:
        await storage.save_session(RECORD)
    other = uuid4().hex
    engine = create_engine(f"sqlite:///{db}")
    try:
        with engine.begin() as conn:
            conn.execute(insert(Session).values(_model_row(other)))
        with engine.connect() as conn:
            read = conn.execute(select(*(COLUMNS[k] for k in _ROW)).where(COLUMNS.session_id == RECORD.session_id))
            assert tuple(read.one()) == tuple(getattr(RECORD, k) for k in _ROW)  # aware times, JSON, a boolean
    finally:
        engine.dispose()
    raw = sqlite3.connect(db).execute(
        f"SELECT session_id, {', '.join(_ROW)}, typeof(created_at), typeof(released) FROM sessions ORDER BY id"
    )
    stored, made = raw.fetchall()
    assert (stored[0], made[0]) == (RECORD.session_id, other)
    assert stored[1:] == made[1:]  # byte for byte: the storage's text is the models' text
    assert stored[6] == "2026-03-01 12:00:00.123456" and stored[-2:] == ("text", "integer")


async def test_a_row_the_models_write_is_the_row_a_storage_writes_on_postgresql(pg_url: str) -> None:
    async with PostgresStorage(pg_url) as storage:
        await storage.save_session(RECORD)
    other = uuid4().hex
    engine = create_async_engine(pg_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(insert(Session).values(_model_row(other)))
        async with engine.connect() as conn:
            read = await conn.execute(
                select(*(COLUMNS[k] for k in _ROW)).where(COLUMNS.session_id == RECORD.session_id)
            )
            assert tuple(read.one()) == tuple(getattr(RECORD, k) for k in _ROW)
    finally:
        await engine.dispose()
    conn = await asyncpg.connect(pg_url.replace("+asyncpg", ""))
    try:
        rows = await conn.fetch(f"SELECT session_id, {', '.join(f'{k}::text' for k in _ROW)} FROM sessions ORDER BY id")
    finally:
        await conn.close()
    stored, made = (tuple(r) for r in rows)
    assert (stored[0], made[0]) == (RECORD.session_id, other)
    assert stored[1:] == made[1:]
    assert stored[6] == "2026-03-01 12:00:00.123456"
