"""The SQLite storage's reads of a history: one snapshot, SQLite's own rows, and rows that are not UTF-8."""

from __future__ import annotations

import sqlite3
from itertools import chain, repeat

from ..schema import queries

__all__ = ["State", "history", "recent", "stored_events"]


def _is_bad_utf8(exc: sqlite3.Error) -> bool:
    return "decode to utf-8" in str(exc).lower()


def _texts(type_name: bytes | None, payload: bytes | None) -> tuple[str | None, str | None]:
    """Row bytes as text. Bytes that are not UTF-8 are replaced (U+FFFD), so that
    row decodes to an unknown event instead of hiding the whole history."""
    if type_name is None or payload is None:
        return None, None
    return type_name.decode("utf-8", "replace"), payload.decode("utf-8", "replace")


State = tuple[int, int, int]
"""A session's ``(row id, revision, length)``, read in one snapshot: its history is the same as when last seen
while all three are (the revision counts every change but an append, the length every append; revision 0014)."""


def history(conn: sqlite3.Connection, sid: str) -> tuple[State, list[tuple[str, str]]] | None:
    """A session's ``((row id, revision, length), [(type, payload), ...])`` in order, or ``None`` if it has no row.

    Two statements in one read transaction, so the state and the events come
    from one snapshot; the events' rows are SQLite's own tuples, handed on as
    they are (for a 10,000-event history, a fifth less time than one joined
    statement that repeats the session's columns on every row).
    """
    conn.execute("BEGIN")
    try:
        found = conn.execute(queries.SESSION_STATE, {"sid": sid}).fetchone()
        if found is None:
            return None
        rows = stored_events(conn, int(found[0]), forked=found[3] is not None)
        return (int(found[0]), int(found[1]), int(found[4])), rows
    finally:
        conn.execute("COMMIT")


def recent(conn: sqlite3.Connection, sid: str, last: int) -> tuple[State, list[tuple[str, str]]] | None:
    """A session's ``((row id, revision, length), [(type, payload), ...])`` of its newest ``last`` events, oldest
    first, or ``None`` if it has no row: as :func:`history`, one snapshot, so the state is that of the rows read."""
    conn.execute("BEGIN")
    try:
        found = conn.execute(queries.SESSION_STATE, {"sid": sid}).fetchone()
        if found is None:
            return None
        if found[3] is not None:  # a fork: its segments' newest rows
            params: dict[str, object] = {"id": int(found[0]), "last": last}
            rows = _rows(conn, queries.FORK_RECENT, queries.FORK_RECENT_BYTES, params)
        else:
            rows = _rows(conn, queries.RECENT_EVENTS, queries.RECENT_EVENTS_BYTES, {"sid": sid, "last": last})
        return (int(found[0]), int(found[1]), int(found[4])), rows
    finally:
        conn.execute("COMMIT")


def stored_events(conn: sqlite3.Connection, row_id: int, *, forked: bool) -> list[tuple[str, str]]:
    """A session's ``(type, payload)`` rows in order, by its row id (the writer compares against them); a fork's
    (``forked``: it has a ``forked_from``) through its segments, a session that shares nothing by its own rows."""
    if forked:
        return _rows(conn, queries.FORK_EVENTS, queries.FORK_EVENTS_BYTES, {"id": row_id})
    return _rows(conn, queries.STORED_EVENTS, queries.STORED_EVENTS_BYTES, {"id": row_id})


def _rows(conn: sqlite3.Connection, sql: str, as_bytes: str, params: dict[str, object]) -> list[tuple[str, str]]:
    """``(type, payload)`` rows of ``sql``; if one is not UTF-8, those of ``as_bytes`` (the same rows as bytes),
    decoded row by row."""
    try:
        rows: list[tuple[str, str]] = conn.execute(sql, params).fetchall()
        # Looked at in C (map, not a generator): half the time, ~1 ms of a 10,000-event history's read.
        if all(map(isinstance, chain.from_iterable(rows), repeat(str))):
            return rows
        return [(str(t), str(p)) for t, p in rows]  # a number or NULL put there by hand
    except sqlite3.OperationalError as exc:
        if not _is_bad_utf8(exc):
            raise
        raw = conn.execute(as_bytes, params)
        return [(str(t), str(p)) for t, p in (_texts(*row) for row in raw)]
