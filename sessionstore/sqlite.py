"""Durable storage in one SQLite file, on SQLAlchemy's async engine over aiosqlite.

How it keeps conversations safe:

* WAL journal, ``synchronous=FULL`` by default, foreign keys on, a busy timeout.
  Every write transaction starts with ``BEGIN IMMEDIATE``, so two processes
  queue for the write lock (bounded by the busy timeout) instead of failing
  with "database is locked" when a read transaction tries to become a write.
* All writes of one storage go through one writer (the *write lane*): one
  dedicated thread holding the write connection runs whole transactions, so a
  transaction costs one thread hop, not one per statement. Writes that arrive
  while a transaction is committing are committed together in the next one
  (group commit), and each caller gets its answer only once its rows are
  committed: durability per call, at a fraction of the fsyncs.
  Reads go through SQLAlchemy's async engine (aiosqlite) and never wait for
  the writer: WAL readers see the last committed state.
* A write is whole or absent. A caller cancelled before its write starts has
  written nothing; once it has started, the transaction commits or rolls back
  whole, whatever happens to the caller.
* ``set_history`` writes only what changed: the common prefix of the stored
  and the new history is left alone. An unchanged event is recognised as the
  same object (events are frozen), checked against ``sessions.revision`` so a
  change made by another process (or by hand) is never missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar, cast
from uuid import UUID

from sqlalchemy import JSON, Text, literal_column, select, type_coerce
from sqlalchemy import event as sa_event
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry

from .codec import Codec, JsonCodec
from .errors import EventEncodeError, InvalidSessionIdError, StorageError, from_sqlite
from .events import BaseEvent
from .migrate import prepare_database
from .models import EVENT_TEXT, Event, Session, utc_text
from .storage import (
    ContextLike,
    SessionPage,
    SessionRecord,
    StreamId,
    check_limit,
    decode_cursor,
    page_of,
    shorten_title,
)

__all__ = ["SQLiteStorage"]

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
T = TypeVar("T")

# One job's work inside the batch transaction (run on the writer thread, with its
# sqlite3 connection), and what to do on the event loop once it has committed.
AfterCommit = Callable[[], None] | None
Work = Callable[[sqlite3.Connection], tuple[T, AfterCommit]]

_SESSIONS = Session.__table__
# JSON columns read as text, decoded row by row (see _json_column).
_SESSION_COLUMNS = [
    type_coerce(column, Text).label(column.name) if isinstance(column.type, JSON) else column
    for column in _SESSIONS.columns
]
# A session with no title is listed under its first user message.
_FIRST_USER_TEXT = (
    select(literal_column(EVENT_TEXT.format(e="events")))
    .where(Event.session == _SESSIONS.c.id, Event.role == "user")
    .order_by(Event.position)
    .limit(1)
    .scalar_subquery()
)
_MAX_BATCH = 256
_CACHE_STREAMS = 256

_FIND_SESSION = "SELECT id, revision, updated_at FROM sessions WHERE session_id = ?"
_NEW_SESSION = (
    "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, title,"
    " created_at, updated_at, released, revision)"
    " VALUES (?, '.', '[]', '[]', '{}', NULL, ?, ?, 0, 0) RETURNING id"
)
# updated_at is kept to within this much of the latest write: restamping it (and
# its two indexes) on every event of a burst would double what each commit writes.
_UPDATED_AT_SLACK = timedelta(seconds=1)
_APPEND_EVENT = (
    "INSERT INTO events (session, position, type, payload, role, text, text_path, created_at)"
    " SELECT ?, COALESCE(MAX(position), -1) + 1, ?, ?, ?, ?, ?, ? FROM events WHERE session = ?"
)
_INSERT_EVENT = (
    "INSERT INTO events (session, position, type, payload, role, text, text_path, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_READ_HISTORY = (
    "SELECT s.id, s.revision, e.type, e.payload FROM sessions AS s"
    " LEFT JOIN events AS e ON e.session = s.id WHERE s.session_id = ? ORDER BY e.position"
)
# The same read, for a history holding text that is not UTF-8 (edited by hand):
# bytes come back as they are and are decoded row by row.
_READ_HISTORY_BYTES = (
    "SELECT s.id, s.revision, CAST(e.type AS BLOB), CAST(e.payload AS BLOB) FROM sessions AS s"
    " LEFT JOIN events AS e ON e.session = s.id WHERE s.session_id = ? ORDER BY e.position"
)
_UPSERT_SESSION = (
    "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, title,"
    " created_at, updated_at, released, revision)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
    " ON CONFLICT (session_id) DO UPDATE SET cwd = excluded.cwd,"
    " additional_directories = excluded.additional_directories, mcp_servers = excluded.mcp_servers,"
    " meta = excluded.meta, title = excluded.title, updated_at = excluded.updated_at,"
    " released = excluded.released"
)


@dataclass(slots=True)
class _Cached:
    """What this process last saw of a session's events, valid while (row id, revision) match.

    ``items`` are the event objects when the codec's events are frozen (handed
    out again, and an unchanged event is the same object), else their stored
    ``(type, payload)`` texts: a mutable event changed after it was written must
    neither be mistaken for the stored one nor change what this process reads.
    """

    row_id: int
    revision: int
    items: list[Any]


_PENDING, _TAKEN, _CANCELLED = 0, 1, 2
_UNSET: Any = object()


@dataclass(slots=True)
class _Job:
    """One write waiting for the writer thread; ``state`` changes only under the storage's job lock."""

    work: Work[Any]
    future: asyncio.Future[Any]
    state: int = _PENDING
    outcome: Any = _UNSET


def _deliver(jobs: Sequence[_Job]) -> None:
    """Hand a committed transaction's outcomes to their callers (on the event loop)."""
    for job in jobs:
        if job.future.done():  # the caller was cancelled while its write committed
            continue
        if isinstance(job.outcome, BaseException):
            job.future.set_exception(job.outcome)
        else:
            job.future.set_result(job.outcome)


def _is_bad_utf8(exc: sqlite3.Error) -> bool:
    return "decode to utf-8" in str(exc).lower()


def _texts(type_name: bytes | None, payload: bytes | None) -> tuple[str | None, str | None]:
    """Row bytes as text. Bytes that are not UTF-8 are replaced (U+FFFD), so that
    row decodes to an UnknownEvent instead of hiding the whole history."""
    if type_name is None or payload is None:
        return None, None
    return type_name.decode("utf-8", "replace"), payload.decode("utf-8", "replace")


def _stored_events(conn: sqlite3.Connection, row_id: int) -> list[tuple[str, str]]:
    """A session's (type, payload) rows in order, as the writer compares them."""
    query = "SELECT type, payload FROM events WHERE session = ? ORDER BY position"
    try:
        return [(str(t), str(p)) for t, p in conn.execute(query, (row_id,)).fetchall()]
    except sqlite3.OperationalError as exc:
        if not _is_bad_utf8(exc):
            raise
        blobs = "SELECT CAST(type AS BLOB), CAST(payload AS BLOB) FROM events WHERE session = ? ORDER BY position"
        return [(str(t), str(p)) for t, p in (_texts(*row) for row in conn.execute(blobs, (row_id,)).fetchall())]


_UNREADABLE = "sessionstore.unreadable"
J = TypeVar("J", dict[str, Any], list[Any])


def _json_column(text: str | None, kind: type[J], name: str, unreadable: dict[str, str]) -> J:
    """A JSON column's value. A value edited by hand into something else is kept,
    as text, under ``meta["sessionstore.unreadable"][name]``, rather than failing
    the whole listing."""
    try:
        value = json.loads(text) if text is not None else kind()
    except ValueError:
        value = None
    if isinstance(value, kind):
        return value
    unreadable[name] = str(text)
    return kind()


def _hex_id(stream_id: object) -> str:
    if isinstance(stream_id, UUID):
        return stream_id.hex
    raise InvalidSessionIdError(f"a stream id must be a uuid.UUID, got {type(stream_id).__name__}: {stream_id!r}")


def _now() -> datetime:
    return datetime.now(UTC)


def _json(value: object, what: str) -> str:
    # allow_nan=False: bare NaN is not JSON, and SQLite's JSON functions reject it.
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise EventEncodeError(f"cannot store the session's {what}: {exc}") from exc
    return _text(text, what)


def _text(value: str, what: str) -> str:
    """``value`` if SQLite can store it as UTF-8 text; refused up front otherwise, before any write."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise EventEncodeError(
                f"cannot store the session's {what}: it holds a lone surrogate {value[exc.start]!r}, which UTF-8"
                " cannot encode (typical of a path os.fsdecode made from non-UTF-8 bytes); pass valid Unicode text"
            ) from None
    return value


def _described(codec: Codec, event: Any) -> tuple[str | None, str | None, str | None]:
    """The event's (role, text, text_path) row values, from the codec's description.

    The text is stored only where no path says where it is in the payload; text
    that UTF-8 cannot hold (lone surrogates) is stored with replacement
    characters: it is for reading and searching, the payload keeps it exactly.
    """
    role, text, *rest = codec.describe(event)
    path = rest[0] if rest else None
    if path is not None:
        return role, None, path
    if text is not None and not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    return role, text, None


def _record_hex(record: SessionRecord) -> str:
    try:
        return _hex_id(record.stream_id)
    except ValueError:
        raise InvalidSessionIdError(f"a session id must be 32 hex digits, got {record.session_id!r}") from None


class SQLiteStorage:
    """Sessions and their events in one SQLite file.

    Implements :class:`~sessionstore.Storage` and :class:`~sessionstore.SessionCatalog`.
    The constructor does no I/O; the file is opened (created at mode 0600,
    brought to the current schema) on first use or on ``async with``.

    ``synchronous`` is SQLite's durability setting: ``FULL`` (default) survives
    power loss for every acknowledged write; ``NORMAL`` survives a process crash
    but may lose the last transactions on power loss. ``busy_timeout`` is how
    long (seconds) a write waits for another process's write lock.
    ``max_pages`` caps the file's size in pages (SQLite's ``max_page_count``):
    a write past it fails whole with :class:`~sessionstore.DatabaseFullError`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout: float = 30.0,
        codec: Codec | None = None,
        auto_upgrade: bool = True,
        read_pool_size: int = 4,
        max_pages: int | None = None,
    ) -> None:
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        if busy_timeout < 0:
            raise ValueError(f"busy_timeout must not be negative, got {busy_timeout}")
        if max_pages is not None and max_pages < 1:
            raise ValueError(f"max_pages must be positive when set, got {max_pages}")
        self.max_pages = max_pages
        self.path = Path(path).expanduser()
        self.synchronous = synchronous
        self.busy_timeout = busy_timeout
        self.codec: Codec = codec if codec is not None else JsonCodec()
        self.auto_upgrade = auto_upgrade
        self._read_pool_size = read_pool_size
        self._reader: AsyncEngine | None = None
        self._write_thread: ThreadPoolExecutor | None = None
        self._write_conn: sqlite3.Connection | None = None
        self._pending: deque[_Job] = deque()
        self._job_lock = threading.Lock()
        # Set while no flush is queued or running on the writer thread (event-loop side).
        self._idle = asyncio.Event()
        self._idle.set()
        self._guard: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opening: asyncio.Lock | None = None
        # Read by the event loop, updated by the writer thread after each commit.
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._cache_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SQLiteStorage({str(self.path)!r}, synchronous={self.synchronous!r})"

    # -- lifecycle ------------------------------------------------------------------

    async def __aenter__(self) -> SQLiteStorage:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def open(self) -> None:
        """Open the file now rather than on first use (creating and migrating it if needed)."""
        await self._ready()

    async def _ready(self) -> ThreadPoolExecutor:
        loop = asyncio.get_running_loop()
        if self._write_thread is not None and self._loop is loop:
            return self._write_thread
        if self._loop is not None and self._loop is not loop and not self._loop.is_closed():
            raise StorageError(f"{self} is in use by another event loop; use one SQLiteStorage per event loop")
        if self._opening is None or self._loop is not loop:
            # First use, or the loop it was opened on has closed (asyncio.run
            # called again): start over on this loop. What belonged to the old
            # one was closed with it (see _close_with_loop).
            self._opening = asyncio.Lock()
            self._loop = loop
            self._write_thread = None
            self._reader = None
            self._idle = asyncio.Event()
            self._idle.set()
        async with self._opening:
            if self._write_thread is None:
                await asyncio.to_thread(self._prepare_file)
                reader = self._engine(pool_size=self._read_pool_size)
                try:
                    # One reader connection now, so the first read does not pay
                    # for starting its thread and connecting.
                    async with reader.connect() as conn:
                        await conn.exec_driver_sql("SELECT 1")
                except (DBAPIError, sqlite3.Error) as exc:
                    await reader.dispose()
                    raise from_sqlite(exc, self.path) from exc
                self._reader = reader
                self._write_thread = ThreadPoolExecutor(1, thread_name_prefix="sessionstore-writer")
                self._guard = loop.create_task(self._close_with_loop(), name=f"sessionstore guard {self.path}")
            return self._write_thread

    def _prepare_file(self) -> None:
        # Creates the file (0600, in private folders) if needed, and brings it to the current schema.
        prepare_database(self.path, auto_upgrade=self.auto_upgrade, busy_timeout=self.busy_timeout)

    def _pragmas(self) -> tuple[str, ...]:
        return (
            "PRAGMA foreign_keys = ON",
            f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}",
            f"PRAGMA synchronous = {self.synchronous}",
            *(() if self.max_pages is None else (f"PRAGMA max_page_count = {int(self.max_pages)}",)),
        )

    def _engine(self, *, pool_size: int) -> AsyncEngine:
        engine = create_async_engine(
            f"sqlite+aiosqlite:///{self.path}",
            pool_size=pool_size,
            max_overflow=0,
            connect_args={"timeout": self.busy_timeout},
        )
        pragmas = self._pragmas()

        @sa_event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
            # Reads only: every query is one statement, a consistent snapshot on
            # its own, so the driver opens no transaction that could hold a WAL
            # snapshot (and block checkpoints) between reads.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            for pragma in pragmas:
                cursor.execute(pragma)
            cursor.close()

        return engine

    async def aclose(self) -> None:
        """Finish queued writes, stop the writer and close the file. Reopens on next use."""
        guard = self._guard
        self._guard = None
        if self._loop is asyncio.get_running_loop():
            await self._dispose()
        if guard is not None and not guard.done():
            guard.cancel()

    async def _close_with_loop(self) -> None:
        # Waits for ever; cancelled when the loop shuts down with the storage
        # still open (asyncio.run cancels every task), so the connections are
        # closed on their own loop rather than by the garbage collector after it.
        try:
            await asyncio.Event().wait()
        finally:
            try:
                current = asyncio.current_task()
            except RuntimeError:  # collected after its loop stopped: nothing left to close on
                current = None
            if current is not None and self._guard is current:
                await self._dispose()

    async def _dispose(self) -> None:
        await self._idle.wait()  # queued writes commit and their callers hear back first
        reader, writer = self._reader, self._write_thread
        self._reader = None
        self._write_thread = None
        with self._cache_lock:
            self._cache.clear()
        if writer is not None:
            # Queued behind every flush already submitted: those writes finish first.
            await asyncio.get_running_loop().run_in_executor(writer, self._close_write_conn)
            writer.shutdown(wait=False)
        if reader is not None:
            await reader.dispose()

    # -- the write lane ---------------------------------------------------------------

    async def _submit(self, work: Work[T]) -> T:
        """Queue ``work``; return its result once the transaction holding it has committed.

        Group commit: while the writer thread commits one transaction, the
        writes that arrive queue up, and the next transaction takes them all.
        The thread answers a whole transaction's callers with one call back
        into the event loop, and the next transaction starts only after they
        have run: the writes they queue in reply share it, and the thread's
        Python code never competes with the loop's for the GIL.
        """
        writer = await self._ready()
        loop = asyncio.get_running_loop()
        job = _Job(work, loop.create_future())
        with self._job_lock:
            self._pending.append(job)
        if self._idle.is_set():
            self._idle.clear()
            writer.submit(self._flush, loop)
        try:
            return cast(T, await job.future)
        except asyncio.CancelledError:
            with self._job_lock:
                if job.state == _PENDING:
                    job.state = _CANCELLED  # not started: it will never be written
            raise

    # -- the writer thread ------------------------------------------------------------------

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        """Commit the queued jobs (at most ``_MAX_BATCH``) in one transaction and report back."""
        jobs: list[_Job] = []
        with self._job_lock:
            while self._pending and len(jobs) < _MAX_BATCH:
                job = self._pending.popleft()
                if job.state == _PENDING:
                    job.state = _TAKEN
                    jobs.append(job)
        try:
            for job, outcome in zip(jobs, self._commit(jobs) if jobs else [], strict=True):
                if isinstance(outcome, BaseException):
                    job.outcome = outcome
                    continue
                result, after_commit = outcome
                if after_commit is not None:
                    # In commit order, so the cache follows the file.
                    with self._cache_lock:
                        after_commit()
                job.outcome = result
        except BaseException as exc:  # a bug here must fail the callers, never leave them waiting
            for job in jobs:
                if job.outcome is _UNSET:
                    job.outcome = exc
            raise
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
                loop.call_soon_threadsafe(self._delivered, jobs, loop)

    def _delivered(self, jobs: Sequence[_Job], loop: asyncio.AbstractEventLoop) -> None:
        _deliver(jobs)
        # Scheduled behind the wake-ups of the callers just answered, so the
        # writes they queue in reply are there when the next flush starts.
        loop.call_soon(self._next_flush, loop)

    def _next_flush(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._job_lock:
            more = bool(self._pending)
        if more and self._write_thread is not None:
            self._write_thread.submit(self._flush, loop)
        else:
            self._idle.set()

    def _connection(self) -> sqlite3.Connection:
        if self._write_conn is None:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
            for pragma in self._pragmas():
                conn.execute(pragma)
            self._write_conn = conn
        return self._write_conn

    def _close_write_conn(self) -> None:
        conn, self._write_conn = self._write_conn, None
        if conn is not None:
            conn.close()

    def _commit(self, jobs: Sequence[_Job]) -> list[tuple[Any, AfterCommit] | BaseException]:
        """Run ``jobs`` in one transaction; on failure, each alone so one bad write fails alone."""
        try:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                outcomes: list[tuple[Any, AfterCommit] | BaseException] = [job.work(conn) for job in jobs]
                conn.execute("COMMIT")
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            return outcomes
        except Exception as exc:
            if len(jobs) > 1:
                return [self._commit([job])[0] for job in jobs]
            if isinstance(exc, StorageError) or not isinstance(exc, sqlite3.Error):
                return [exc]
            return [from_sqlite(exc, self.path)]

    # -- helpers run inside a write transaction ------------------------------------------

    @staticmethod
    def _ensure_session(conn: sqlite3.Connection, sid: str, now: datetime, stamp: str) -> tuple[int, int]:
        """The session's (row id, revision), creating the row if needed and stamping ``updated_at``.

        ``stamp`` is ``now`` as stored text, which the caller also writes on its rows.
        """
        row = conn.execute(_FIND_SESSION, (sid,)).fetchone()
        if row is None:
            return int(conn.execute(_NEW_SESSION, (sid, stamp, stamp)).fetchone()[0]), 0
        if row[2] < utc_text(now - _UPDATED_AT_SLACK):
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (stamp, row[0]))
        return int(row[0]), int(row[1])

    def _cache_put(self, sid: str, entry: _Cached) -> None:
        self._cache[sid] = entry
        self._cache.move_to_end(sid)
        while len(self._cache) > _CACHE_STREAMS:
            self._cache.popitem(last=False)

    # -- Storage ----------------------------------------------------------------------------

    async def save_event(self, event: BaseEvent, context: ContextLike) -> None:
        """Append one event; returns once it is committed."""
        sid = _hex_id(context.stream.id)
        codec = self.codec
        # Encoded now, on the caller's side: a bad event fails before any write,
        # and a mutable event is stored as it is at this call.
        type_name, payload = codec.encode(event)
        described = _described(codec, event)
        item = event if codec.frozen_events else (type_name, payload)

        def work(conn: sqlite3.Connection) -> tuple[None, Callable[[], None]]:
            now = _now()
            stamp = utc_text(now)
            row_id, revision = self._ensure_session(conn, sid, now, stamp)
            conn.execute(_APPEND_EVENT, (row_id, type_name, payload, *described, stamp, row_id))

            def after_commit() -> None:
                cached = self._cache.get(sid)
                if cached is not None and cached.row_id == row_id and cached.revision == revision:
                    cached.items.append(item)
                    cached.revision += 1
                else:
                    self._cache.pop(sid, None)

            return None, after_commit

        await self._submit(work)

    async def get_history(self, stream_id: StreamId) -> list[BaseEvent]:
        """The session's events in order (empty for an unknown stream)."""
        sid = _hex_id(stream_id)
        await self._ready()
        assert self._reader is not None
        try:
            async with self._reader.connect() as conn:
                raw = await conn.get_raw_connection()
                driver = raw.driver_connection
                assert driver is not None
                try:
                    rows = await driver.execute_fetchall(_READ_HISTORY, (sid,))
                except sqlite3.OperationalError as exc:
                    if not _is_bad_utf8(exc):
                        raise
                    raw_rows = await driver.execute_fetchall(_READ_HISTORY_BYTES, (sid,))
                    rows = [(row_id, rev, *_texts(t, p)) for row_id, rev, t, p in raw_rows]
        except (DBAPIError, sqlite3.Error) as exc:
            raise from_sqlite(exc, self.path) from exc
        if not rows:
            return []
        row_id, revision = int(rows[0][0]), int(rows[0][1])
        frozen = self.codec.frozen_events
        if frozen:
            with self._cache_lock:
                cached = self._cache.get(sid)
                if cached is not None and cached.row_id == row_id and cached.revision == revision:
                    return list(cached.items)
        decode = self.codec.decode
        events = [decode(type_name, payload) for _, _, type_name, payload in rows if type_name is not None]
        items = list(events) if frozen else [(t, p) for _, _, t, p in rows if t is not None]
        with self._cache_lock:
            self._cache_put(sid, _Cached(row_id, revision, items))
        return events

    async def set_history(self, stream_id: StreamId, events: Iterable[BaseEvent]) -> None:
        """Replace the session's events in one transaction, writing only what changed."""
        sid = _hex_id(stream_id)
        new = list(events)
        codec = self.codec
        frozen = codec.frozen_events
        encode = codec.encode
        # Frozen events are encoded in the transaction, only from the first change
        # on (a bad one fails there and the transaction rolls back). Mutable ones
        # are encoded all, now: they are stored as they are at this call, and
        # compared by their text, never by identity.
        encoded = None if frozen else [encode(event) for event in new]
        described = None if frozen else [_described(codec, event) for event in new]

        def work(conn: sqlite3.Connection) -> tuple[None, Callable[[], None]]:
            now_dt = _now()
            now = utc_text(now_dt)
            row_id, revision = self._ensure_session(conn, sid, now_dt, now)
            with self._cache_lock:
                cached = self._cache.get(sid)
            keep = 0
            if encoded is not None:
                valid = cached is not None and cached.row_id == row_id and cached.revision == revision
                stored_texts = cached.items if valid and cached is not None else _stored_events(conn, row_id)
                stored_count = len(stored_texts)
                limit = min(stored_count, len(new))
                while keep < limit and encoded[keep] == stored_texts[keep]:
                    keep += 1
            elif cached is not None and cached.row_id == row_id and cached.revision == revision:
                old = cached.items
                stored_count = len(old)
                limit = min(stored_count, len(new))
                # List equality runs in C and short-cuts on identity, so the usual
                # call (the history it read, plus new events) costs a pointer
                # compare per stored event. An event == to the stored one (frozen
                # dataclass equality) is not rewritten.
                if new[:limit] == old[:limit]:
                    keep = limit
                while keep < limit and (new[keep] is old[keep] or encode(new[keep]) == encode(old[keep])):
                    keep += 1
            else:
                stored = _stored_events(conn, row_id)
                stored_count = len(stored)
                limit = min(stored_count, len(new))
                while keep < limit and encode(new[keep]) == stored[keep]:
                    keep += 1
            changes = 0
            if keep < stored_count:
                deleted = conn.execute("DELETE FROM events WHERE session = ? AND position >= ?", (row_id, keep))
                changes += deleted.rowcount
            if encoded is None or described is None:
                rows = [
                    (row_id, keep + i, *encode(item), *_described(codec, item), now)
                    for i, item in enumerate(new[keep:])
                ]
            else:
                rows = [
                    (row_id, position, *encoded[position], *described[position], now)
                    for position in range(keep, len(new))
                ]
            if rows:
                conn.executemany(_INSERT_EVENT, rows)
                changes += len(rows)

            def after_commit() -> None:
                self._cache_put(sid, _Cached(row_id, revision + changes, new if encoded is None else encoded))

            return None, after_commit

        await self._submit(work)

    async def drop_history(self, stream_id: StreamId) -> None:
        """Delete the session and all its events."""
        sid = _hex_id(stream_id)

        def work(conn: sqlite3.Connection) -> tuple[None, Callable[[], None]]:
            conn.execute("DELETE FROM sessions WHERE session_id = ?", (sid,))

            def after_commit() -> None:
                self._cache.pop(sid, None)

            return None, after_commit

        await self._submit(work)

    # -- SessionCatalog -----------------------------------------------------------------------

    async def save_session(self, record: SessionRecord) -> None:
        sid = _record_hex(record)
        params = (
            sid,
            _text(record.cwd, "cwd"),
            _json(list(record.additional_directories), "additional_directories"),
            _json(list(record.mcp_servers), "mcp_servers"),
            _json(dict(record.meta), "meta"),
            None if record.title is None else _text(record.title, "title"),
            utc_text(record.created_at),
            utc_text(record.updated_at),
            int(record.released),
        )

        def work(conn: sqlite3.Connection) -> tuple[None, None]:
            conn.execute(_UPSERT_SESSION, params)
            return None, None

        await self._submit(work)

    async def load_session(self, stream_id: StreamId) -> SessionRecord | None:
        sid = _hex_id(stream_id)
        rows = await self._select_sessions(select(*_SESSION_COLUMNS).where(_SESSIONS.c.session_id == sid))
        return rows[0] if rows else None

    async def touch_session(self, stream_id: StreamId, *, released: bool | None = None) -> None:
        sid = _hex_id(stream_id)
        now = utc_text(_now())

        def work(conn: sqlite3.Connection) -> tuple[None, None]:
            if released is None:
                conn.execute("UPDATE sessions SET updated_at = ? WHERE session_id = ?", (now, sid))
            else:
                conn.execute(
                    "UPDATE sessions SET updated_at = ?, released = ? WHERE session_id = ?",
                    (now, int(released), sid),
                )
            return None, None

        await self._submit(work)

    async def set_title(self, stream_id: StreamId, title: str | None) -> None:
        sid = _hex_id(stream_id)
        if title is not None:
            _text(title, "title")

        def work(conn: sqlite3.Connection) -> tuple[None, None]:
            conn.execute("UPDATE sessions SET title = ? WHERE session_id = ?", (title, sid))
            return None, None

        await self._submit(work)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> SessionPage:
        """Sessions newest first (``updated_at``, then id), ``limit`` at a time."""
        check_limit(limit)
        columns = _SESSIONS.c
        query = select(*_SESSION_COLUMNS).order_by(columns.updated_at.desc(), columns.session_id.desc())
        if cwd is not None:
            query = query.where(columns.cwd == cwd)
        if cursor is not None:
            when, after = decode_cursor(cursor)
            query = query.where(
                (columns.updated_at < when) | ((columns.updated_at == when) & (columns.session_id < after))
            )
        if limit is not None:
            query = query.limit(limit + 1)
        return page_of(await self._select_sessions(query, derive_titles=True), limit)

    async def _select_sessions(self, query: Any, *, derive_titles: bool = False) -> list[SessionRecord]:
        if derive_titles:
            query = query.add_columns(_FIRST_USER_TEXT.label("first_user_text"))
        await self._ready()
        assert self._reader is not None
        try:
            async with self._reader.connect() as conn:
                rows = (await conn.execute(query)).all()
        except (DBAPIError, sqlite3.Error) as exc:
            raise from_sqlite(exc, self.path) from exc
        records = []
        for row in rows:
            unreadable: dict[str, str] = {}
            meta = _json_column(row.meta, dict, "meta", unreadable)
            records.append(
                SessionRecord(
                    session_id=row.session_id,
                    cwd=row.cwd,
                    additional_directories=_json_column(
                        row.additional_directories, list, "additional_directories", unreadable
                    ),
                    mcp_servers=_json_column(row.mcp_servers, list, "mcp_servers", unreadable),
                    meta={**meta, **({_UNREADABLE: unreadable} if unreadable else {})},
                    title=row.title
                    if row.title is not None or not derive_titles
                    else shorten_title(row.first_user_text),
                    created_at=row.created_at,
                    updated_at=row.updated_at,
                    released=bool(row.released),
                )
            )
        return records
