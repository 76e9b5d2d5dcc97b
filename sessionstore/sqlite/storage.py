"""Durable storage in one SQLite file: the async face of the write lane and the record reads.

How it keeps conversations safe:

* WAL journal, ``synchronous=FULL`` by default, foreign keys on, a busy
  timeout (:mod:`sessionstore.sqlite.connect`). Every write transaction starts with
  ``BEGIN IMMEDIATE``, so two processes queue for the write lock instead of
  failing with "database is locked".
* All writes of one storage go through its write lane (:mod:`sessionstore.sqlite.lane`):
  whole transactions, group commit, committed on the event loop's thread while
  commits are quick and on a writer thread otherwise, and every call returns
  only after its own commit. Reads run on a few reader threads (the catalogue's
  with the same functions as the command line, :mod:`sessionstore.reads`) and
  never wait for the writer: WAL readers see the last committed state.
* ``set_history`` writes only what changed: the common prefix of the stored
  and the new history is left alone. An unchanged event is recognised as the
  same object when the codec's events are frozen, else by its stored text;
  either way checked against the session's revision and length, so a change
  made by another process (or by hand) is never missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import re
import sqlite3
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeVar

from ..codec import Codec, decode_all, quick_ready
from ..durable import (
    DELETE_SESSION,
    INDEX_DELAY,
    INDEX_EVERY,
    DurableStorage,
    Rewrite,
    event_row,
    fork_steps,
    replace_steps,
    run_steps,
)
from ..errors import StorageError, from_sqlite
from ..schema import queries
from ..storage import (
    BUSY_TIMEOUT,
    ContextLike,
    StreamId,
    check_last,
    held_error,
    missing_parent,
    newest,
    now_texts,
    opened_from,
    session_id_of,
    utc_text,
)
from .connect import (
    SCRUB_WAIT,
    SYNCHRONOUS,
    Synchronous,
    connect,
    deleted_mark,
    mark_deleted,
    scrub_log,
    transaction,
)
from .holds import Holds
from .lane import Work, WriteLane, size_unknown, will_write
from .migrate import prepare
from .reads import State, history, recent, stored_events
from .search import index_new_events, merge_index

__all__ = ["SQLiteStorage"]


def _new_sid() -> str:
    return uuid.uuid4().hex


T = TypeVar("T")

CACHE_BYTES = 32 * 1024 * 1024
"""How much stored text (payloads) the read cache may stand for, by default: the histories this process read or
wrote last, kept so a read or a ``set_history`` of an unchanged history costs no decoding. Decoded events take a
few times their text in memory."""
SCRUB_RETRY = 0.5
"""Seconds between two tries, in the background, to finish removing deleted text that another process's older
snapshot held in the file (:func:`~sessionstore.sqlite.connect.scrub_log`): it is gone within this long of that
process letting go. A try that finds the snapshot still held costs a connection and a lock taken
and given back at once."""


def _history_and_size(
    conn: sqlite3.Connection, sid: str, last: int | None
) -> tuple[State, list[tuple[str, str]], int] | None:
    """:func:`~sessionstore.sqlite.reads.history` (or, with ``last``, :func:`~sessionstore.sqlite.reads.recent`),
    and the size of its payloads (what the cache counts), summed on the reader's thread while the rows it just
    made are in that core's cache: on the event loop's thread, for a history of 10,000 events, 1.7-2 ms instead
    of 0.3."""
    found = history(conn, sid) if last is None else recent(conn, sid, last)
    if found is None:
        return None
    state, rows = found
    return state, rows, sum(map(len, map(itemgetter(1), rows)))  # in C: a third of a generator's time


_APPEND_COLUMNS = itemgetter(*re.findall(r":(\w+)", queries.INSERT_EVENT))
_APPEND = re.sub(r":\w+", "?", queries.INSERT_EVENT)
""":data:`~sessionstore.schema.queries.INSERT_EVENT` with its parameters by position (``_APPEND_COLUMNS(row)``), for
one append: bound by name, each of its 13 parameters is a new string and a lookup. With one coroutine per write
(``_submit``) and no lock taken for a session not cached, sequential appends ran 1.011x as fast (faster in 32 of 48
rounds, ``bench/ab_inproc.py``): Python run right after each commit's fsync costs several times its usual time."""


def _matches(cached: _Cached, state: State) -> bool:
    return cached.row_id == state[0] and cached.revision == state[1] and len(cached.items) == state[2]


def _close_readers(readers: ThreadPoolExecutor | None, opened: list[sqlite3.Connection]) -> None:
    if readers is not None:
        readers.shutdown()
    for conn in opened:
        conn.close()


@dataclass(slots=True)
class _Cached:
    """What this process last saw of a session's events, valid while its (row id, revision, length) match the
    session's (:data:`~sessionstore.sqlite.reads.State`; the length is the number of items).

    ``items`` are the event objects when the codec's events are frozen (handed
    out again, and an unchanged event is the same object), else their stored
    ``(type, payload)`` texts: a mutable event changed after it was written must
    neither be mistaken for the stored one nor change what this process reads.
    """

    row_id: int
    revision: int
    items: list[Any]
    size: int
    """The bytes of stored text the items stand for (what the cache's bound counts)."""


class SQLiteStorage(DurableStorage[WriteLane]):
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
    ``cache_bytes`` bounds the read cache by the stored text it stands for
    (:data:`CACHE_BYTES` by default; 0 turns it off).

    ``keep_past``: a ``set_history`` that replaces stored events (AG2's compaction) keeps them as the session's
    earlier branch (``show --all``, search, export; deleted with the session). ``False`` deletes them instead,
    unless a fork still reads them.
    A file (or ``-wal``/``-shm``) owned by another user or writable by others
    is refused with :class:`~sessionstore.UnsafeFileError` unless
    ``allow_shared_file``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout: float = BUSY_TIMEOUT,
        codec: Codec | None = None,
        auto_upgrade: bool = True,
        read_pool_size: int = 4,
        max_pages: int | None = None,
        allow_shared_file: bool = False,
        cache_bytes: int = CACHE_BYTES,
        keep_past: bool = True,
    ) -> None:
        if synchronous not in SYNCHRONOUS:
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        if busy_timeout < 0:
            raise ValueError(f"busy_timeout must not be negative, got {busy_timeout}")
        if max_pages is not None and max_pages < 1:
            raise ValueError(f"max_pages must be positive when set, got {max_pages}")
        if read_pool_size < 1:
            raise ValueError(f"read_pool_size must be at least 1, got {read_pool_size}")
        if cache_bytes < 0:
            raise ValueError(f"cache_bytes must not be negative, got {cache_bytes}")
        super().__init__(codec=codec, auto_upgrade=auto_upgrade, keep_past=keep_past)
        self.cache_bytes = cache_bytes
        self._cached_bytes = 0
        self.path = Path(path).expanduser()
        self.synchronous = synchronous
        self.busy_timeout = busy_timeout
        self.max_pages = max_pages
        self.allow_shared_file = allow_shared_file
        self._read_pool_size = read_pool_size
        # The write lane is the base's _opened; the readers' threads are there from the same moment.
        self._readers: ThreadPoolExecutor | None = None
        # Reader connections not in use, and every one opened (to close them all).
        self._idle_readers: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._all_readers: list[sqlite3.Connection] = []
        # Read by the event loop and the readers, updated after each commit by the thread that committed it.
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._cache_lock = threading.Lock()
        # Events written (counted by the write jobs, in commit order), the count when the index was last brought
        # up to date, and what does it next (the last three on the event loop's side).
        self._written_events = 0
        self._indexed_events = 0
        self._indexing: asyncio.Task[None] | None = None
        self._index_timer: asyncio.TimerHandle | None = None
        # The sessions this storage holds (a registry has them live): their locks, and what their marks say.
        self._holds = Holds(self.path)
        # Finishing the removal of deleted text in the background (see _scrub), and the storage closing.
        self._scrubbing: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()

    _top_level = queries.TOP_LEVEL

    def __repr__(self) -> str:
        return f"SQLiteStorage({str(self.path)!r}, synchronous={self.synchronous!r})"

    # -- lifecycle (the rest is DurableStorage's) ------------------------------------

    def _new_loop(self) -> None:
        self._indexing, self._index_timer = None, None
        self._scrubbing = None

    async def _open(self, loop: asyncio.AbstractEventLoop) -> WriteLane:
        # Creates the file (0600, in private folders) if needed, brings it to the current schema, and opens one
        # reader, so the first read does not wait for it: on the first reader thread, so that the thread too is
        # there and has run (a first read of 10,000 events on a thread just started took 2 ms more).
        readers = ThreadPoolExecutor(self._read_pool_size, thread_name_prefix="sessionstore-reader")
        try:
            trailing, mark = await loop.run_in_executor(readers, self._prepare)
        except BaseException:
            readers.shutdown(wait=False)
            raise
        self._readers = readers
        lane = WriteLane(self.path, self._connection, self._cache_lock)
        lane.start()
        self._closing = asyncio.Event()
        if trailing:  # left behind by a writer that stopped without closing
            self._start_indexing()
        if mark:  # deleted text another process's snapshot held when this or another storage deleted it
            self._start_scrubbing()
        return lane

    def _prepare(self) -> tuple[bool, int]:
        """Bring the file to head and open the first reader; whether the full-text index trails the events, and
        the file's mark of deleted text left in it (:func:`~sessionstore.sqlite.connect.mark_deleted`)."""
        prepare(
            self.path,
            auto_upgrade=self.auto_upgrade,
            busy_timeout=self.busy_timeout,
            allow_shared_file=self.allow_shared_file,
        )
        reader = self._reader()
        self._clear_dead_holders(reader)
        self._idle_readers.put(reader)
        quick_ready()  # before any read, off the event loop
        return reader.execute(queries.NEXT_MARK, {"batch": 1}).fetchone()[0] is not None, deleted_mark(reader)

    def _clear_dead_holders(self, reader: sqlite3.Connection) -> None:
        """Clear the marks of holders whose locks are gone (processes that ended without letting go); a write
        connection is opened only when there are some."""
        dead = [(row_id, who) for row_id, who in reader.execute(queries.MARKED_HELD) if not self._held(row_id)]
        if dead:
            with contextlib.closing(self._connection()) as conn, transaction(conn, self.path):
                conn.executemany(queries.CLEAR_HOLDER, [{"id": row_id, "who": who} for row_id, who in dead])

    def _held(self, row_id: int) -> bool:
        return self._holds.holds(row_id) or self._holds.held_elsewhere(row_id)

    def _connection(self) -> sqlite3.Connection:
        return connect(
            self.path, busy_timeout=self.busy_timeout, synchronous=self.synchronous, max_pages=self.max_pages
        )

    def _reader(self) -> sqlite3.Connection:
        conn = connect(self.path, busy_timeout=self.busy_timeout, write=False)
        self._all_readers.append(conn)
        return conn

    async def _dispose(self) -> None:
        lane, readers = self._opened, self._readers
        if self._scrubbing is not None:
            self._closing.set()  # its last try, waiting SCRUB_WAIT for another process to let go
            await asyncio.wait([self._scrubbing])
        if lane is not None:
            if self._indexing is not None:
                await asyncio.wait([self._indexing])
            if self._written_events != self._indexed_events:
                self._start_indexing()
            if self._indexing is not None:
                await asyncio.wait([self._indexing])
            if self._holds.held:
                held = self._holds.held

                def unmark(conn: sqlite3.Connection) -> tuple[None, None]:
                    conn.executemany(queries.CLEAR_HOLDER, [{"id": i, "who": self._holder} for i in held])
                    return None, None

                with contextlib.suppress(StorageError):  # the locks go below whatever happens; marks are cleared
                    await lane.submit(unmark)  # by the next open then
            await lane.close()  # queued writes commit and their callers hear back first
        self._holds.close()
        self._opened = None
        self._readers = None
        with self._cache_lock:
            self._cache.clear()
            self._cached_bytes = 0
        opened, self._all_readers = self._all_readers, []
        self._idle_readers = queue.SimpleQueue()
        # Off the loop's thread: the last connection to close checkpoints the WAL into the file (fsyncs).
        await asyncio.get_running_loop().run_in_executor(None, _close_readers, readers, opened)

    # -- running work --------------------------------------------------------------------

    def _submit(self, work: Work[T], *, background: bool = False) -> Coroutine[Any, Any, T]:
        """The lane's :meth:`~WriteLane.submit` itself once open on this loop: one coroutine per write, not two."""
        lane = self._opened
        if lane is None or self._loop is not asyncio.get_running_loop():  # not open (yet), or on another loop
            return self._submit_when_ready(work, background)
        return lane.submit(work, background=background)

    async def _submit_when_ready(self, work: Work[T], background: bool) -> T:
        return await (await self._ready()).submit(work, background=background)

    async def _read(self, read: Callable[..., T], *args: Any) -> T:
        """Run ``read(connection, *args)`` on a reader thread."""
        await self._ready()
        assert self._readers is not None
        return await asyncio.get_running_loop().run_in_executor(self._readers, self._run_read, read, args)

    async def _write_row(self, sql: str, params: dict[str, Any]) -> None:
        size = sum(len(value) for value in params.values() if isinstance(value, str))

        def work(conn: sqlite3.Connection) -> tuple[None, None]:
            will_write(1, size)
            conn.execute(sql, params).fetchall()
            return None, None

        await self._submit(work)

    def _run_read(self, read: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            conn = self._idle_readers.get_nowait()
        except queue.Empty:
            conn = self._reader()
        try:
            return read(conn, *args)
        except sqlite3.Error as exc:
            raise from_sqlite(exc, self.path) from exc
        finally:
            self._idle_readers.put(conn)

    # -- the full-text index, brought up to date in batches ---------------------------------

    def _written(self) -> None:
        """After a write: bring the index up to date when enough events were written, or soon after the last."""
        unindexed = self._written_events - self._indexed_events
        loop = self._loop
        if loop is None or self._indexing is not None or not unindexed:
            return
        if unindexed >= INDEX_EVERY:
            self._start_indexing()
        elif self._index_timer is None:
            self._index_timer = loop.call_later(INDEX_DELAY, self._start_indexing)

    def _start_indexing(self) -> None:
        """Bring the index up to date now, in the background (unless that is under way already)."""
        if self._index_timer is not None:
            self._index_timer.cancel()
            self._index_timer = None
        if self._indexing is None and self._readers is not None and self._loop is not None:  # open, or opening
            self._indexing = self._loop.create_task(self._index())

    async def _index(self) -> None:
        def work(conn: sqlite3.Connection) -> tuple[tuple[bool, int], None]:
            return (index_new_events(conn), deleted_mark(conn)), None

        before, self._indexed_events = self._indexed_events, self._written_events
        try:
            # A batch per transaction, in the background: the storage's other writes go first.
            more, mark = True, 0
            while more:
                more, mark = await self._submit(work, background=True)
        except StorageError:
            # The events are committed whatever happens here, and search reads those not indexed: a later
            # write tries again.
            self._indexed_events = before
            return
        finally:
            self._indexing = None
        if mark:  # another process deleted while one held an older snapshot: finish it here when it lets go
            self._start_scrubbing()
        self._written()  # what was written meanwhile

    # -- deleted means gone ------------------------------------------------------------------

    async def _merge_index(self) -> None:
        """Merge the full-text index's segments until the deleted events' words are gone from them: a step per
        transaction, in the background, interleaved with the lane's other writes (as the SQLite backend's
        ``forget_deleted``)."""

        def merge(conn: sqlite3.Connection) -> tuple[bool, None]:
            return merge_index(conn), None

        while await self._submit(merge, background=True):
            pass

    async def _forget_deleted(self, mark: int) -> None:
        """After a delete that set ``mark``: merge the index and empty the write-ahead log (waiting
        ``SCRUB_WAIT`` at most for another process's older snapshot); if that process still holds it, finish
        in the background once it lets go."""
        await self._merge_index()
        if not await asyncio.to_thread(scrub_log, self.path, mark):
            self._start_scrubbing()

    def _start_scrubbing(self) -> None:
        if self._scrubbing is None and self._loop is not None and not self._closing.is_set():
            self._scrubbing = self._loop.create_task(self._scrub())

    async def _scrub(self) -> None:
        """Finish removing deleted text from the file once no other process holds an older snapshot: every
        ``SCRUB_RETRY`` seconds, until the file's mark is clear; when the storage closes, one last try that waits
        ``SCRUB_WAIT`` (if that fails too, the next storage to open the file carries on)."""
        merged = seen = 0
        try:
            while mark := await self._read(deleted_mark):
                if mark != merged:  # a delete since the last merge (this storage's, or another process's)
                    if mark != seen and not self._closing.is_set():
                        # Maybe one of a long command's transactions (prune, delete: each marks anew, and the
                        # command merges itself at its end): merge once the mark holds still, not after each,
                        # which would rewrite the whole index as often and take the lock from that command.
                        seen = mark
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._closing.wait(), SCRUB_RETRY)
                        continue
                    await self._merge_index()
                    merged = mark
                if self._closing.is_set():
                    await asyncio.to_thread(scrub_log, self.path, mark, SCRUB_WAIT)
                    return
                if not await asyncio.to_thread(scrub_log, self.path, mark, 0.0):
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._closing.wait(), SCRUB_RETRY)
        except StorageError:
            return  # the file's mark stays: the next storage to open it tries again
        finally:
            self._scrubbing = None

    # -- inside a write transaction -------------------------------------------------------

    @staticmethod
    def _ensure_session(
        conn: sqlite3.Connection, stream_id: StreamId, parent: StreamId | None, stamp: str, stale: str
    ) -> tuple[State, int | None, str | None]:
        """The session's state, ``forked_from`` and holder's mark, creating the row if needed and stamping
        ``updated_at``.

        A row made here is made under ``parent``'s (the session the stream was opened from, which must have
        one; :func:`~sessionstore.storage.opened_from`). ``stamp`` and ``stale`` are :func:`now_texts`: the
        caller writes the first on its rows, and a session stamped before the second is stamped again.
        """
        sid = stream_id.hex
        row = conn.execute(queries.SESSION_STATE, {"sid": sid}).fetchone()
        if row is None:
            parent_row = None
            if parent is not None:
                found = conn.execute(queries.FIND_SESSION, {"sid": parent.hex}).fetchone()
                if found is None:
                    raise missing_parent(stream_id, parent)
                parent_row = found[0]
            made = conn.execute(queries.NEW_SESSION, {"sid": sid, "parent": parent_row, "now": stamp})
            return (int(made.fetchone()[0]), 0, 0), None, None
        row_id, revision, updated_at, forked_from, length, marked = row
        if updated_at < stale:
            conn.execute(queries.STAMP_SESSION, {"now": stamp, "id": row_id})
        return (row_id, revision, length), forked_from, marked

    def _cache_put(self, sid: str, entry: _Cached) -> None:
        """Keep ``entry`` as the latest, and let the oldest go while the cache stands for more than its bound."""
        self._cache_drop(sid)
        if entry.size > self.cache_bytes:
            return  # larger than the whole cache: read from the file each time instead
        self._cache[sid] = entry
        self._cached_bytes += entry.size
        while self._cached_bytes > self.cache_bytes:
            self._cached_bytes -= self._cache.popitem(last=False)[1].size

    def _cache_drop(self, sid: str) -> None:
        old = self._cache.pop(sid, None)
        if old is not None:
            self._cached_bytes -= old.size

    def _cache_grow(self, entry: _Cached, item: Any, size: int) -> None:
        entry.items.append(item)
        entry.size += size
        self._cached_bytes += size
        while self._cached_bytes > self.cache_bytes and self._cache:
            self._cached_bytes -= self._cache.popitem(last=False)[1].size

    def _cached(self, sid: str, state: State) -> _Cached | None:
        with self._cache_lock:
            cached = self._cache.get(sid)
        return cached if cached is not None and _matches(cached, state) else None

    # -- Storage ----------------------------------------------------------------------------

    async def save_event(self, event: Any, context: ContextLike) -> None:
        """Append one event; returns once it is committed."""
        stream_id = context.stream.id
        sid = session_id_of(stream_id)
        parent = opened_from(stream_id, context)
        row = event_row(self.codec, event)
        payload = row["payload"]
        item = event if self.codec.frozen_events else (row["type"], payload)

        def work(conn: sqlite3.Connection) -> tuple[None, Callable[[], None] | None]:
            will_write(1, len(payload))
            stamp, stale = now_texts()
            state, _, marked = self._ensure_session(conn, stream_id, parent, stamp, stale)
            row_id, _, length = state
            if marked is not None:
                self._refuse_held(conn, row_id, sid)
            # At the session's length, read under the write lock taken with the transaction: nobody else can
            # append in between.
            row["id"], row["position"], row["now"] = row_id, length, stamp
            conn.execute(_APPEND, _APPEND_COLUMNS(row))
            self._written_events += 1
            if self._cache.get(sid) is None:
                # Nothing to update (the lock is for what a reader may see; a history a reader caches meanwhile
                # was read before this commit, and its state tells it apart).
                return None, None

            def after_commit() -> None:
                cached = self._cache.get(sid)
                if cached is not None and _matches(cached, state):
                    self._cache_grow(cached, item, len(payload))
                else:
                    self._cache_drop(sid)

            return None, after_commit

        await self._submit(work)
        self._written()

    async def get_history(self, stream_id: StreamId, *, last: int | None = None) -> list[Any]:
        """The session's events in order (empty for an unknown stream); with ``last``, only its newest ``last``,
        oldest of them first (all of them if it has fewer; :class:`~sessionstore.InvalidWindowError` for a
        ``last`` that is not a whole number of zero or more).

        A window is read by itself, one range of an index however long the history (the events before it are
        never read nor decoded), in one snapshot with the session's state. The read cache: a window is cut from
        the cached history when that history is the one on disk at the window's state (so never stale after
        another process wrote), else decoded from its rows; a window shorter than ``last`` is the whole history
        and is cached as a full read is. Any other window leaves the cache as it was: it is not a history
        ``set_history`` could compare against.
        """
        sid = session_id_of(stream_id)
        last = check_last(last)
        if last == 0:
            return []
        found = await self._read(_history_and_size, sid, last)
        if found is None:
            return []
        state, rows, size = found
        frozen = self.codec.frozen_events
        if frozen:
            cached = self._cached(sid, state)
            if cached is not None:
                return newest(cached.items, last)
        events = decode_all(self.codec, rows)
        if last is None or len(rows) < last:  # the whole history
            with self._cache_lock:
                self._cache_put(sid, _Cached(state[0], state[1], list(events) if frozen else rows, size))
        return events

    async def set_history(self, stream_id: StreamId, events: Iterable[Any]) -> None:
        """Replace the session's events in one transaction, writing only what changed."""
        sid = session_id_of(stream_id)
        parent = opened_from(stream_id)
        # Frozen events are encoded in the transaction, only from the first change on (a bad one fails there and
        # the transaction rolls back). Mutable ones are encoded all, now: they are stored as they are at this call.
        rewrite = Rewrite(self.codec, events, eager=False)
        new = rewrite.events

        def work(conn: sqlite3.Connection) -> tuple[None, Callable[[], None]]:
            now, stale = now_texts()
            state, forked_from, marked = self._ensure_session(conn, stream_id, parent, now, stale)
            row_id, _, length = state
            if marked is not None:
                self._refuse_held(conn, row_id, sid)
            cached = self._cached(sid, state)
            if cached is None:
                if length:
                    size_unknown()  # the stored history is read first
                stored = stored_events(conn, row_id, forked=forked_from is not None)
                stored_count = len(stored)
                keep = rewrite.unchanged(stored)
                kept_size = sum(len(payload) for _, payload in stored[:keep])
            else:  # this process's cache stands for the file's rows; it knows its size, not each row's
                stored_count = len(cached.items)
                keep = rewrite.unchanged(cached.items, objects=self.codec.frozen_events)
                kept_size = cached.size * keep // stored_count if stored_count else 0
            will_write(stored_count - keep + len(new) - keep)
            revision = state[1]
            if keep < stored_count:
                forked_at = None
                if forked_from is not None:
                    forked_at = conn.execute(queries.FORK_ORIGIN, {"sid": sid}).fetchone()[2]
                steps = replace_steps(
                    row_id,
                    forked_from,
                    forked_at,
                    keep,
                    stored_count,
                    keep_past=self.keep_past,
                    now=now,
                    new_sid=_new_sid,
                )
                run_steps(steps, conn.execute)
                # The revision as the steps leave it (their deletes and moves, counted by the triggers).
                revision = int(conn.execute(queries.SESSION_STATE, {"sid": sid}).fetchone()[1])
            rows = []
            for row in rewrite.rows(row_id, keep, now):
                will_write(0, len(row["payload"]))
                rows.append(row)
            if rows:
                conn.executemany(queries.INSERT_EVENT, rows)
                self._written_events += len(rows)

            size = kept_size + sum(len(str(row["payload"])) for row in rows)

            def after_commit() -> None:
                items = new if rewrite.encoded is None else rewrite.encoded
                self._cache_put(sid, _Cached(row_id, revision, items, size))

            return None, after_commit

        await self._submit(work)
        self._written()

    async def drop_history(self, stream_id: StreamId) -> None:
        """Delete the session, its subagents and all their events, unrecoverably, from the file, its index and its
        log.

        Returns once the deletion is committed and, unless another process holds an older snapshot of the file
        (a ``sqlite3`` shell inside a transaction, a backup, a replicator), the deleted text is gone; if one
        does, after :data:`~sessionstore.sqlite.connect.SCRUB_WAIT` at most, and the storage removes the text in the
        background as soon as that process lets go (when it closes, or the next storage to open the file, at the
        latest).
        """
        sid = session_id_of(stream_id)

        def work(conn: sqlite3.Connection) -> tuple[int, Callable[[], None]]:
            size_unknown()  # every event of the session, overwritten
            found = conn.execute(queries.HOLDER, {"sid": sid}).fetchone()
            if found is not None:
                self._refuse_held(conn, int(found[0]), sid)
            for sql in DELETE_SESSION:
                conn.execute(sql, {"sid": sid})

            def after_commit() -> None:
                self._cache_drop(sid)
                if found is not None:
                    self._holds.release(int(found[0]))  # a hold of its own goes with it

            return mark_deleted(conn), after_commit

        await self._forget_deleted(await self._submit(work))

    async def fork(self, stream_id: StreamId, *, at: int | None = None) -> StreamId:
        """A new session whose history is this one's first ``at`` events (all of them when ``None``), shared,
        not copied (revision 0012); its id. The session forked is not written, so forking one another storage
        holds is allowed. :class:`~sessionstore.InvalidForkPositionError` for ``at`` outside 0 to its length,
        :class:`~sessionstore.NoSuchSessionError` for a session with no row."""
        sid = session_id_of(stream_id)
        new = uuid.uuid4()
        steps = fork_steps(sid, at, utc_text(datetime.now(UTC)), new.hex)

        def work(conn: sqlite3.Connection) -> tuple[None, None]:
            run_steps(steps, conn.execute)
            return None, None

        await self._submit(work)
        return new

    # -- retention (DurableStorage's passes) ----------------------------------------------------

    async def _remove_stale(self, row_id: int, sid: str, cutoff: str) -> tuple[bool, int]:
        def work(conn: sqlite3.Connection) -> tuple[tuple[bool, int], Callable[[], None] | None]:
            size_unknown()  # every event of the session, overwritten
            # Asked inside the write transaction: a holder marks its hold in a write of its own, after its lock.
            found = conn.execute(queries.FIND_SESSION, {"sid": sid}).fetchone()
            if found is None or found[2] >= cutoff or self._held(row_id):
                return (False, 0), None  # gone, written to since it was found, or held
            for sql in DELETE_SESSION:  # as delete: its forks keep their shared rows, its branches go with it
                conn.execute(sql, {"sid": sid})
            return (True, mark_deleted(conn)), lambda: self._cache_drop(sid)

        return await self._submit(work, background=True)

    async def _removed(self, mark: int) -> None:
        await self._forget_deleted(mark)

    # -- holds (the SessionCatalog is DurableStorage's, over _read and _write_row) ---------------

    async def hold(self, stream_id: StreamId) -> None:
        """Hold the session for this storage (a registry has it live), making its row if it has none.

        :class:`~sessionstore.SessionHeldError`, naming the holder, while another storage in any process holds it:
        only the holder may then repair, append to, rewrite or delete it. Held until :meth:`let_go`, a drop, this
        storage closing, or its process ending (a ``kill -9`` included: the lock dies with it).
        """
        sid = session_id_of(stream_id)

        def work(conn: sqlite3.Connection) -> tuple[None, None]:
            found = conn.execute(queries.HOLDER, {"sid": sid}).fetchone()
            if found is None:
                made = conn.execute(
                    queries.NEW_SESSION, {"sid": sid, "parent": None, "now": utc_text(datetime.now(UTC))}
                )
                found = (made.fetchone()[0], None)
            row_id, marked = int(found[0]), found[1]
            if self._holds.holds(row_id):
                return None, None
            if not self._holds.take(row_id):
                raise held_error(sid, marked)
            try:
                conn.execute(queries.HOLD_SESSION, {"id": row_id, "who": self._holder})
            except BaseException:
                self._holds.release(row_id)
                raise
            return None, None

        await self._submit(work)

    async def let_go(self, stream_id: StreamId) -> None:
        """Stop holding the session (nothing if this storage does not hold it)."""
        sid = session_id_of(stream_id)

        def work(conn: sqlite3.Connection) -> tuple[None, Callable[[], None] | None]:
            found = conn.execute(queries.HOLDER, {"sid": sid}).fetchone()
            if found is None or not self._holds.holds(int(found[0])):
                return None, None
            row_id = int(found[0])
            conn.execute(queries.LET_GO_SESSION, {"id": row_id, "who": self._holder})
            return None, lambda: self._holds.release(row_id)

        await self._submit(work)

    def _refuse_held(self, conn: sqlite3.Connection, row_id: int, sid: str) -> None:
        """Inside a write: refuse it if another storage holds the session (the write lock keeps the answer true
        until the commit: a holder marks its hold in a write transaction of its own, right after taking its
        lock, so a write that finds the session unmarked need not ask: it commits before any hold begins)."""
        if self._holds.held_elsewhere(row_id):
            marked = conn.execute(queries.HOLDER, {"sid": sid}).fetchone()
            raise held_error(sid, marked[1] if marked is not None else None)
