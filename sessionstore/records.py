"""Reading what a database holds: sessions, their events, search, counts.

One function per question, each on an open ``sqlite3`` connection, run by the
storage's reader threads and by the command line alike; :func:`reading` opens
a file for them without ever creating or changing it. Nothing here imports
SQLAlchemy: a command that only reads answers as fast as ``sqlite3`` can.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from . import queries
from .database import BUSY_TIMEOUT, HEAD, connect, read_revision
from .errors import AmbiguousSessionIdError, NoSuchSessionError, SchemaError, UsageError, from_sqlite
from .storage import SessionPage, SessionRecord, check_limit, decode_cursor, page_of, stamp, utc_text

__all__ = [
    "SearchHit",
    "Stats",
    "StoredEvent",
    "events_of",
    "fts_query",
    "history",
    "is_current",
    "iter_sessions",
    "list_sessions",
    "load_session",
    "read_session",
    "reading",
    "record_of",
    "resolve",
    "resolve_all",
    "search",
    "session_page",
    "stats",
    "stored_events",
    "text_at",
]


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event row as stored: the payload is its JSON text, undecoded; ``text`` is what a person reads."""

    position: int
    type: str
    payload: str
    created_at: datetime
    role: str | None = None
    text: str | None = None
    # Where the text sits in the payload, when it is not stored on its own.
    text_path: str | None = None

    def to_json(self) -> dict[str, Any]:
        try:
            payload: Any = json.loads(self.payload)
        except ValueError:
            payload = self.payload  # edited by hand into something that is not JSON: shown as it is
        return {
            "position": self.position,
            "type": self.type,
            "payload": payload,
            "role": self.role,
            "text": self.text,
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class SearchHit:
    session_id: str
    title: str | None
    position: int
    type: str
    snippet: str
    role: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "title": self.title,
            "position": self.position,
            "type": self.type,
            "role": self.role,
            "snippet": self.snippet,
        }


@dataclass(frozen=True, slots=True)
class Stats:
    path: str
    sessions: int
    released: int
    events: int
    event_types: dict[str, int] = field(default_factory=dict)
    file_size: int = 0
    wal_size: int = 0
    revision: str | None = None
    head: str = HEAD

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "sessions": self.sessions,
            "released": self.released,
            "events": self.events,
            "event_types": self.event_types,
            "file_size": self.file_size,
            "wal_size": self.wal_size,
            "revision": self.revision,
            "head": self.head,
        }


# -- opening ------------------------------------------------------------------------------------


@contextlib.contextmanager
def reading(db: str | Path, *, busy_timeout: float = BUSY_TIMEOUT) -> Iterator[sqlite3.Connection]:
    """A read-only connection to an existing sessionstore file; SQLite's errors as :class:`StorageError`."""
    path = Path(db).expanduser()
    conn = connect(path, busy_timeout=busy_timeout, write=False, check_tables=True)
    try:
        yield conn
    except sqlite3.Error as exc:
        raise from_sqlite(exc, path) from exc
    finally:
        conn.close()


# A limit past what SQLite's integers hold means "all of them".
_SQL_INT_MAX = 2**63 - 1


def is_current(conn: sqlite3.Connection) -> bool:
    """Whether the file is at this version's schema revision (reading an older one works, with less in it).

    Asked once per command: the storage's own reads skip it (it opened its file at head).
    """
    return read_revision(conn)[0] == HEAD


# -- session records ------------------------------------------------------------------------------

_UNREADABLE = "sessionstore.unreadable"


def record_of(row: Sequence[Any]) -> SessionRecord:
    """A :data:`queries.OVERVIEW` row as a record.

    The one policy for a JSON column edited by hand into something else: the
    record is still listed, the column reads as empty, and its raw text is kept
    under ``meta["sessionstore.unreadable"][column]``, so nothing is silently lost.
    """
    sid, title, title_set, cwd, dirs, servers, meta, created, updated, released, events = row
    unreadable: dict[str, str] = {}
    directories = _json_column(dirs, list, "additional_directories", unreadable)
    mcp_servers = _json_column(servers, list, "mcp_servers", unreadable)
    meta_value = _json_column(meta, dict, "meta", unreadable)
    if unreadable:
        meta_value = {**meta_value, _UNREADABLE: unreadable}
    return SessionRecord(
        session_id=str(sid),
        cwd=str(cwd),
        additional_directories=directories,
        mcp_servers=mcp_servers,
        meta=meta_value,
        title=title,
        created_at=stamp(created),
        updated_at=stamp(updated),
        released=bool(released),
        events=int(events),
        derived_title=title is not None and not title_set,
    )


def _json_column(text: object, kind: type, name: str, unreadable: dict[str, str]) -> Any:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    if isinstance(value, kind):
        return value
    if text is not None:
        unreadable[name] = str(text)
    return kind()


# The sessions of a file from before session_overview had every column it lists (revision 0003):
# stored titles only, counts included.
_LEGACY_OVERVIEW = (
    "(SELECT session_id, title, title IS NOT NULL AS title_set, cwd, additional_directories, mcp_servers, meta,"
    " created_at, updated_at, released, (SELECT count(*) FROM events AS c WHERE c.session = sessions.id) AS events"
    " FROM sessions) AS session_overview"
)


def _overview(sql: str, current: bool) -> str:
    return sql if current else sql.replace("FROM session_overview", f"FROM {_LEGACY_OVERVIEW}")


def iter_sessions(
    conn: sqlite3.Connection,
    *,
    cwd: str | None = None,
    limit: int | None = None,
    where: str = "",
    current: bool = True,
    **params: Any,
) -> Iterator[SessionRecord]:
    """Sessions most recently active first, one at a time (a listing of every session never holds them all)."""
    sql = queries.list_sessions(cwd=cwd is not None, after=False, limit=limit is not None, where=where)
    bound = None if limit is None else min(limit, _SQL_INT_MAX)
    for row in conn.execute(_overview(sql, current), {"cwd": cwd, "limit": bound, **params}):
        yield record_of(row)


def session_page(
    conn: sqlite3.Connection, *, cwd: str | None = None, cursor: str | None = None, limit: int | None = None
) -> SessionPage:
    """One page of sessions, newest first by creation, after ``cursor`` (see :class:`~sessionstore.SessionCatalog`).

    By creation, not last activity: ``created_at`` never changes, so a walk
    through the pages lists every session that exists for the whole walk
    exactly once, however sessions are written meanwhile.
    """
    check_limit(limit)
    params: dict[str, Any] = {"cwd": cwd, "limit": None if limit is None else min(limit + 1, _SQL_INT_MAX)}
    if cursor is not None:
        when, after = decode_cursor(cursor)
        params.update(before=utc_text(when), before_id=after)
    sql = queries.list_sessions(
        cwd=cwd is not None, after=cursor is not None, limit=limit is not None, order="created_at"
    )
    rows = [record_of(row) for row in conn.execute(sql, params)]
    return page_of(rows, limit)


def load_session(conn: sqlite3.Connection, sid: str, *, current: bool = True) -> SessionRecord | None:
    """The stored record of one session (its title only if one was set), or ``None``."""
    sql = _overview(queries.OVERVIEW + " WHERE session_id = :sid", current)
    rows = conn.execute(sql, {"sid": sid}).fetchall()
    if not rows:
        return None
    record = record_of(rows[0])
    return replace(record, title=None, derived_title=False) if record.derived_title else record


# -- ids ------------------------------------------------------------------------------------------


def resolve(conn: sqlite3.Connection, prefix: str) -> str:
    """The full id of the one stored session whose id starts with ``prefix`` (dashes and case ignored)."""
    cleaned = prefix.strip().lower().replace("-", "")
    if not cleaned or len(cleaned) > 32 or re.fullmatch(r"[0-9a-f]+", cleaned) is None:
        raise NoSuchSessionError(f"not a session id: {prefix!r} (ids are hex digits; any unique prefix works)")
    rows = conn.execute(queries.RESOLVE_PREFIX, {"low": cleaned, "high": cleaned + "g"}).fetchall()
    if not rows:
        raise NoSuchSessionError(f"no session matches {prefix!r}")
    if len(rows) > 1:
        ids = [str(r[0]) for r in rows]
        # As many digits as it takes to tell the candidates apart (git does the same).
        width = max(8, 1 + max(_common(a, b) for a, b in itertools.pairwise(ids)))
        shown = ", ".join(sid[:width] for sid in ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise AmbiguousSessionIdError(f"{prefix!r} is ambiguous: it matches {shown}; give more digits")
    return str(rows[0][0])


def _common(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def resolve_all(conn: sqlite3.Connection, prefixes: Sequence[str]) -> list[str]:
    """Each prefix's full id, in order, each once; the first that matches none or several fails them all."""
    ids: list[str] = []
    for prefix in prefixes:
        sid = resolve(conn, prefix)
        if sid not in ids:
            ids.append(sid)
    return ids


# -- events -----------------------------------------------------------------------------------------


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


def text_at(payload: str, path: str) -> str | None:
    """The text at a simple JSON path (``$.a.b``, ``$.a[0]``, ``$."$key"``) of a payload; ``None`` if not there.

    A string is returned as it is; a list or an object as its compact JSON (as
    SQLite's ``json_extract`` gives them); anything else as its JSON text.
    """
    try:
        value: Any = json.loads(payload)
    except ValueError:
        return None
    for quoted, plain, index in re.findall(r'\.(?:"([^"]*)"|([^.\[]+))|\[(\d+)\]', path.removeprefix("$")):
        name = quoted or plain
        if name and isinstance(value, dict) and name in value:
            value = value[name]
        elif index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return None
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def events_of(conn: sqlite3.Connection, sid: str, *, current: bool = True) -> list[StoredEvent]:
    """A session's events as stored, each with its role and text, in order."""
    if not current and "role" not in {str(row[1]) for row in conn.execute("PRAGMA table_info(events)")}:
        return _legacy_events(conn, sid)
    events = []
    for position, kind, payload, created, role, text, path in conn.execute(queries.EVENTS_OF, {"sid": sid}):
        shown = text_at(payload, path) if path is not None else text
        events.append(StoredEvent(int(position), str(kind), str(payload), stamp(created), role, shown, path))
    return events


def _legacy_events(conn: sqlite3.Connection, sid: str) -> list[StoredEvent]:
    # A file from before revision 0003 stores no role or text: only sessionstore's own
    # event types existed then, and its codec describes them.
    from .codec import legacy_description

    rows = conn.execute(
        "SELECT e.position, e.type, e.payload, e.created_at FROM events AS e JOIN sessions AS s"
        " ON s.id = e.session WHERE s.session_id = :sid ORDER BY e.position",
        {"sid": sid},
    )
    events = []
    for position, kind, payload, created in rows:
        role, text, path = legacy_description(str(kind), str(payload))
        events.append(StoredEvent(int(position), str(kind), str(payload), stamp(created), role, text, path))
    return events


# -- the commands' reads ------------------------------------------------------------------------------


def list_sessions(db: str | Path, *, cwd: str | None = None, limit: int | None = None) -> Iterator[SessionRecord]:
    """``sessionstore list``: stored sessions newest first, streamed (the file stays open while iterated)."""
    check_limit(limit)
    with reading(db) as conn:
        yield from iter_sessions(conn, cwd=cwd, limit=limit, current=is_current(conn))


def read_session(db: str | Path, prefix: str) -> tuple[SessionRecord, list[StoredEvent]]:
    """``sessionstore show``: a session (by id or unique prefix) and its events, from one snapshot."""
    with reading(db) as conn:
        conn.execute("BEGIN")
        sid = resolve(conn, prefix)
        current = is_current(conn)
        (record,) = iter_sessions(conn, where="session_id = :sid", sid=sid, current=current)
        return record, events_of(conn, sid, current=current)


def fts_query(text: str) -> str:
    """Plain words to an FTS5 query matching events that hold all of them.

    Each word becomes one quoted term, so punctuation (``-``, ``:``, quotes) is
    never read as query syntax; words are cut where the index's tokenizer cuts
    them (letters, digits and ``_``), because the index (``detail=none``) has no
    phrase queries.
    """
    return " ".join(f'"{word}"' for word in re.findall(r"\w+", text))


def search(db: str | Path, text: str, *, raw: bool = False, limit: int = 20) -> list[SearchHit]:
    """``sessionstore search``: events whose text matches, best first. ``raw`` takes FTS5 query syntax as it is.

    Exact however far the index trails (revision 0005): the events past its mark
    are indexed into a scratch index of this connection's own, and both are
    searched in one snapshot, so no committed event is missed.
    """
    query = text if raw else fts_query(text)
    if not query.strip():
        raise UsageError(f"nothing to search for in {text!r} (words are letters, digits and _)")
    limit = min(limit, _SQL_INT_MAX)
    with reading(db) as conn:
        revision = read_revision(conn)[0]
        if revision != HEAD:
            raise SchemaError(
                f"{db} has no full-text index at schema revision {revision!r} (this sessionstore's is {HEAD});"
                " run `sessionstore db upgrade`"
            )
        try:
            with _new_events_index(conn) as table:
                params = {"query": query, "limit": limit}
                rows = conn.execute(queries.SEARCH, params).fetchall()
                if table is not None:
                    rows += conn.execute(queries.search_in(table), params).fetchall()
        except sqlite3.OperationalError as exc:
            if "fts5" in str(exc).lower() or "syntax" in str(exc).lower():
                raise UsageError(f"not a valid full-text query: {text!r} ({exc})") from None
            raise
    rows.sort(key=lambda row: row[-1])  # by rank; bm25 of the two indexes are alike enough to interleave
    return [SearchHit(str(s), t, int(p), str(k), str(snip), role) for s, t, p, k, role, snip, _ in rows[:limit]]


_NEW_EVENTS = "new_events"
# The index's own options but where its text comes from: the scratch index tokenizes exactly as it does.
_CONTENT_OPTION = re.compile(r"\s*\bcontent(?:_rowid)?\s*=\s*'[^']*'\s*,?")


@contextlib.contextmanager
def _new_events_index(conn: sqlite3.Connection) -> Iterator[str | None]:
    """One read snapshot, and in it a temporary FTS5 table of the events ``events_fts`` does not hold yet (None
    when it holds them all).

    The temp schema is the connection's own, in memory: the database file is
    not written (``query_only`` is lifted only while the scratch table exists).
    """
    conn.execute("BEGIN")
    try:
        new = conn.execute(queries.SEARCH_NEW_EVENTS).fetchall()
        if not new:
            yield None
            return
        sql = str(conn.execute("SELECT sql FROM sqlite_master WHERE name = 'events_fts'").fetchone()[0])
        options = _CONTENT_OPTION.sub(" ", sql[sql.index("(") + 1 : sql.rindex(")")]).strip()
        conn.execute("PRAGMA query_only = OFF")
        try:
            conn.execute(f"CREATE VIRTUAL TABLE temp.{_NEW_EVENTS} USING fts5({options})")
            try:
                conn.executemany(f"INSERT INTO temp.{_NEW_EVENTS} (rowid, text) VALUES (?, ?)", new)
                yield _NEW_EVENTS
            finally:
                conn.execute("COMMIT")
                conn.execute(f"DROP TABLE temp.{_NEW_EVENTS}")
        finally:
            conn.execute("PRAGMA query_only = ON")
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def stats(db: str | Path) -> Stats:
    """``sessionstore stats``: counts, file size and schema revision."""
    path = Path(db).expanduser()
    with reading(path) as conn:
        conn.execute("BEGIN")
        sessions, released = conn.execute(queries.SESSION_COUNT).fetchone()
        types = dict(conn.execute("SELECT type, count(*) FROM events GROUP BY type ORDER BY count(*) DESC"))
        revision = read_revision(conn)[0]
    wal = Path(f"{path}-wal")
    return Stats(
        path=str(path),
        sessions=int(sessions),
        released=int(released),
        events=sum(int(n) for n in types.values()),
        event_types={str(k): int(v) for k, v in types.items()},
        file_size=path.stat().st_size,
        wal_size=wal.stat().st_size if wal.exists() else 0,
        revision=revision,
    )
