"""Bring a database file to the schema this code expects, before first use.

Interim: until the Alembic migrations land, a new file is created straight
from the models and stamped with the baseline revision; this module is the one
place that knows how a schema comes to exist.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.schema import CreateIndex, CreateTable

from .errors import SchemaTooNewError, from_sqlite
from .models import TRIGGERS, Base

__all__ = ["HEAD", "prepare_database"]

HEAD = "0001"


def _current_revision(conn: sqlite3.Connection) -> str | None:
    has_table = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'").fetchone()
    if not has_table:
        return None
    row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return None if row is None else str(row[0])


def _create_schema(conn: sqlite3.Connection) -> None:
    dialect = sqlite_dialect.dialect()
    for table in Base.metadata.sorted_tables:
        conn.execute(str(CreateTable(table).compile(dialect=dialect)))
        for index in table.indexes:
            conn.execute(str(CreateIndex(index).compile(dialect=dialect)))
    for ddl in TRIGGERS.values():
        conn.execute(ddl)
    conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
    conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (HEAD,))


def prepare_database(path: Path, *, auto_upgrade: bool = True, busy_timeout: float = 30.0) -> None:
    """Make ``path`` a database at ``HEAD``: create it, or leave it be."""
    del auto_upgrade  # meaningful once there is more than one revision
    try:
        conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    except sqlite3.Error as exc:
        raise from_sqlite(exc, path) from exc
    try:
        if _current_revision(conn) == HEAD:
            return
        conn.execute("BEGIN IMMEDIATE")  # one process creates; the others wait, then see HEAD
        revision = _current_revision(conn)
        if revision is None:
            _create_schema(conn)
        elif revision != HEAD:
            conn.execute("ROLLBACK")
            raise SchemaTooNewError(f"{path} is at schema revision {revision!r}, unknown to this sessionstore")
        conn.execute("COMMIT")
        conn.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise from_sqlite(exc, path) from exc
    finally:
        conn.close()
