"""The SQLite storage's reads of a history: one snapshot, SQLite's own rows, and rows that are not UTF-8."""

from __future__ import annotations

import sqlite3

from ..schema import queries

__all__ = ["history", "stored_events"]


def _is_bad_utf8(exc: sqlite3.Error) -> bool:
    return "decode to utf-8" in str(exc).lower()


def _texts(type_name: bytes | None, payload: bytes | None) -> tuple[str | None, str | None]:
    """Row bytes as text. Bytes that are not UTF-8 are replaced (U+FFFD), so that
    row decodes to an unknown event instead of hiding the whole history."""
    if type_name is None or payload is None:
        return None, None
    return type_name.decode("utf-8", "replace"), payload.decode("utf-8", "replace")


def history(conn: sqlite3.Connection, sid: str) -> tuple[int, int, list[tuple[str, str]]] | None:
    """A session's ``(row id, revision, [(type, payload), ...])`` in order, or ``None`` if it has no row.

    Two statements in one read transaction, so the revision and the events come
    from one snapshot; the events' rows are SQLite's own tuples, handed on as
    they are (for a 10,000-event history, a fifth less time than one joined
    statement that repeats the session's columns on every row).
    """
    conn.execute("BEGIN")
    try:
        found = conn.execute(queries.FIND_SESSION, {"sid": sid}).fetchone()
        if found is None:
            return None
        return int(found[0]), int(found[1]), stored_events(conn, int(found[0]))
    finally:
        conn.execute("COMMIT")


def stored_events(conn: sqlite3.Connection, row_id: int) -> list[tuple[str, str]]:
    """A session's ``(type, payload)`` rows in order, by its row id (the writer compares against them)."""
    try:
        rows: list[tuple[str, str]] = conn.execute(queries.STORED_EVENTS, {"id": row_id}).fetchall()
        if all(type(t) is str and type(p) is str for t, p in rows):
            return rows
        return [(str(t), str(p)) for t, p in rows]  # a number or NULL put there by hand
    except sqlite3.OperationalError as exc:
        if not _is_bad_utf8(exc):
            raise
        raw = conn.execute(queries.STORED_EVENTS_BYTES, {"id": row_id})
        return [(str(t), str(p)) for t, p in (_texts(*row) for row in raw)]
