"""One test, both databases: the database a parametrized test runs on (the ``database`` fixture of conftest.py),
storages over it, and its rows as another process sees them (a ``sqlite3`` connection, an ``asyncpg`` one).

A test written against :class:`Database` runs on a SQLite file and on a PostgreSQL database alike; what only one
database has stays in tests of its own (``tests/storage/test_sqlite_storage.py``, ``tests/postgres/``).
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

DATABASES = ("sqlite", "postgres")


@dataclass(frozen=True)
class Database:
    """A SQLite file (``where`` its path) or a PostgreSQL database (``where`` its URL), at the head revision or not
    there yet (a file is made by its first storage)."""

    kind: str
    where: Path | str

    @classmethod
    def of(cls, kind: str, request: Any, tmp_path: Path) -> Database:
        """The test's own database of ``kind`` (``request`` a pytest ``FixtureRequest``): a file in ``tmp_path``,
        or a new database at the head revision on the tests' server (``pg_url``, which skips as it does)."""
        if kind == "sqlite":
            return cls(kind, tmp_path / "agent.db")
        return cls(kind, request.getfixturevalue("pg_url"))

    def __str__(self) -> str:
        return str(self.where)

    def storage(self, **options: Any) -> Any:
        """A new storage over this database (not opened: the constructor does no I/O)."""
        if self.kind == "sqlite":
            from sessionstore import SQLiteStorage

            return SQLiteStorage(self.where, **options)
        from sessionstore.postgres import PostgresStorage

        return PostgresStorage(str(self.where), **options)

    async def rows(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        """What ``sql`` (``?`` for each parameter) returns, on a connection of its own: what another process
        reads, never a storage's cache. A statement that changes rows commits."""
        if self.kind == "sqlite":
            with contextlib.closing(sqlite3.connect(self.where)) as conn, conn:
                return [tuple(row) for row in conn.execute(sql, params).fetchall()]
        import asyncpg  # type: ignore[import-untyped]

        numbered = iter(range(1, len(params) + 1))
        conn = await asyncpg.connect(str(self.where).replace("+asyncpg", ""))
        try:
            return [tuple(row) for row in await conn.fetch(re.sub(r"\?", lambda _: f"${next(numbered)}", sql), *params)]
        finally:
            await conn.close()

    def time(self, when: datetime) -> object:
        """``when`` as :meth:`rows` binds it into a time column: the text a file stores (naive UTC), or a naive
        UTC datetime for PostgreSQL's ``timestamp without time zone``."""
        if self.kind == "sqlite":
            from sessionstore.storage import utc_text

            return utc_text(when)
        return when.astimezone(UTC).replace(tzinfo=None)

    async def event_rows(self, stream_id: UUID) -> list[tuple[Any, ...]]:
        """A session's events as stored: ``(id, position, type, payload)`` in order."""
        return await self.rows(
            "SELECT e.id, e.position, e.type, e.payload FROM events e JOIN sessions s ON s.id = e.session"
            " WHERE s.session_id = ? ORDER BY e.position",
            stream_id.hex,
        )

    async def revision(self, stream_id: UUID) -> int:
        """The session's ``sessions.revision`` (every change to its events counts)."""
        return int((await self.rows("SELECT revision FROM sessions WHERE session_id = ?", stream_id.hex))[0][0])

    async def touched(self) -> bool:
        """Whether anything reached the database: the file exists; a connection other than this one is open."""
        if self.kind == "sqlite":
            return Path(self.where).exists()
        others = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        return bool((await self.rows(others))[0][0])
