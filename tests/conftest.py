"""Fixtures shared by every test.

``database``: a test that takes it runs once on a SQLite file and once on a PostgreSQL database
(``databases.Database``: storages over it, its rows read behind their back).

PostgreSQL: one throwaway server for the whole run (``pg_server.py``), started by the first test that needs it
and stopped at the end whatever happens; each test gets a database of its own. The high-availability tests get a
primary and a standby of their own (``pg_pair``). It is never skipped in CI: a
server that cannot start fails those tests loudly. Elsewhere ``SESSIONSTORE_PG_TESTS=off`` skips them, for a
machine without PostgreSQL.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from databases import DATABASES, Database
from pg_server import PostgresServer, ServerUnavailable, replicated, running

T = TypeVar("T")

HEAD_TEMPLATE = "sessionstore_head"
"""A database built at head once per run; every test's database at head is a copy (instant, where a
migration per test would take a second)."""


def _started(servers: contextlib.AbstractContextManager[T]) -> Iterator[T]:
    """``servers`` entered for the fixture's life; skipped where SESSIONSTORE_PG_TESTS=off (never in CI), failed
    loudly if they cannot start."""
    if os.environ.get("SESSIONSTORE_PG_TESTS") == "off" and os.environ.get("CI") != "true":
        pytest.skip("SESSIONSTORE_PG_TESTS=off: the PostgreSQL tests are not run on this machine")
    try:
        started = servers.__enter__()
    except ServerUnavailable as exc:
        pytest.fail(f"no PostgreSQL server for the tests: {exc}", pytrace=False)
    try:
        yield started
    finally:
        servers.__exit__(None, None, None)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    yield from _started(running())


@pytest.fixture
def pg_own_server() -> Iterator[PostgresServer]:
    """A server of this test's own, for a test that kills it (with no database of sessionstore's yet)."""
    yield from _started(running())


@pytest.fixture
def pg_pair() -> Iterator[tuple[PostgresServer, PostgresServer, str]]:
    """``(primary, standby, database)``: a primary and a synchronous streaming standby of their own
    (``pg_server.replicated``), with a database at head on both. Only the high-availability tests use it (they
    kill and promote servers); every other test has the one shared server."""
    from sessionstore.postgres import migrate as pgmigrate

    database = "ha"
    pair = replicated(database, prepare=lambda primary: pgmigrate.migrate(primary.url(database)))
    for primary, standby in _started(pair):
        yield primary, standby, database


def _head_template(server: PostgresServer) -> str:
    if not server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{HEAD_TEMPLATE}'").strip():
        from sessionstore.postgres import migrate as pgmigrate

        server.psql(f'CREATE DATABASE "{HEAD_TEMPLATE}" TEMPLATE template0')
        pgmigrate.migrate(server.url(HEAD_TEMPLATE))
    return HEAD_TEMPLATE


@pytest.fixture
def pg_url(pg_server: PostgresServer) -> Iterator[str]:
    """A new database at the head revision, for this test alone: its URL (with a password in it)."""
    name = pg_server.create_database(_head_template(pg_server))
    yield pg_server.url(name)
    pg_server.drop_database(name)


@pytest.fixture
def pg_empty_url(pg_server: PostgresServer) -> Iterator[str]:
    """A new, empty database (no schema), for this test alone: its URL."""
    name = pg_server.create_database()
    yield pg_server.url(name)
    pg_server.drop_database(name)


@pytest.fixture(params=DATABASES)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    """The test's own database, SQLite then PostgreSQL (skipped as every PostgreSQL test is, see above): a file
    not made yet, or a new database at the head revision."""
    return Database.of(request.param, request, tmp_path)
