"""What the two durable storages share, written once: :class:`DurableStorage` and :class:`Rewrite`.

:class:`~sessionstore.SQLiteStorage` and :class:`~sessionstore.postgres.PostgresStorage` keep the same sessions
and events with the same statements. What they do alike lives here: a storage's life on an event loop (opened on
first use, bound to one loop, closed with it), the session catalogue (records, listing), the columns of an event's
row, how ``set_history`` finds the first event that differs from the stored ones, and the steps of a fork, of a
rewrite that keeps what it replaced, and of a delete that leaves forks whole (revision 0012), run by both. Each
storage keeps only how it talks to its database: how it opens and closes, how a read and a write run, and its
writes of events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Self, TypeVar

from .codec import Codec, JsonCodec, describe_row
from .errors import (
    ForkedByAnotherRoleError,
    InvalidForkPositionError,
    NoSuchSessionError,
    SettingError,
    StorageError,
)
from .reads import RETENTION, cutoff_of, load_session, retention_of, retention_setting, session_page, stale_sessions
from .schema import queries
from .storage import (
    SessionPage,
    SessionRecord,
    StreamId,
    annotate_context,
    check_limit,
    holder,
    record_row,
    session_id_of,
    storable_text,
    utc_text,
)

__all__ = [
    "DELETE_SESSION",
    "INDEX_DELAY",
    "INDEX_EVERY",
    "RETENTION_BATCH",
    "RETENTION_EVERY",
    "DurableStorage",
    "Rewrite",
    "Steps",
    "event_row",
    "fork_steps",
    "replace_steps",
    "run_steps",
]

RETENTION_EVERY = 60.0
"""Seconds between two passes of the retention policy in an open storage (the first pass comes as it opens). A
pass reads the policy (one row), then removes the stale sessions no live process holds, one per transaction,
as the storage's background work (after the writes waiting: on SQLite, behind them in the write lane)."""
RETENTION_BATCH = 64
"""Stale sessions a pass reads at a time (each then removed in a transaction of its own)."""
INDEX_EVERY = 256
"""A storage brings its search index up to date (in transactions of their own, off the appends' path: SQLite's FTS5
index since revision 0005, PostgreSQL's words since 0015) once it has written this many events since it last did,
:data:`INDEX_DELAY` after the first write it has not indexed, and when it closes; search reads the few events not
yet indexed directly."""
INDEX_DELAY = 1.0
"""Seconds from the first event written since the words were last brought up to date to the time they are (a timer
started by that write, not moved by the writes after it: a steady trickle of writes is indexed every second)."""

T = TypeVar("T")

logger = logging.getLogger(__name__)
Opened = TypeVar("Opened")

Steps = Generator[tuple[str, dict[str, Any]], Any, T]
"""Statements to run in one write transaction, one at a time: each ``(sql, params)`` is answered with its result
(a cursor: ``fetchone()``, ``rowcount``), so the same steps run on SQLite's connection and on PostgreSQL's."""

DELETE_SESSION = (queries.GIVE_SHARED_ROWS, queries.DETACH_HEIRS, queries.DELETE_SESSION)
"""Deleting a session (``:sid``), in one transaction: its forks elsewhere (and those of its subagents and earlier
branches) first get the rows they share copied into their own, so each stays whole; then it goes with its
subagents and earlier branches (``ON DELETE CASCADE``). Every delete runs these: ``drop_history``, ``delete``,
``prune`` and the retention passes."""


def fork_steps(sid: str, at: int | None, now: object, new_sid: str) -> Steps[None]:
    """Fork session ``sid`` at position ``at`` (its length when ``None``) as the new session ``new_sid``, sharing
    the history below ``at`` (revision 0012). A fork at or below the session's own ``forked_at`` shares what the
    session shares, so a chain stays as short as it can."""
    if at is not None and (not isinstance(at, int) or isinstance(at, bool) or at < 0):
        raise InvalidForkPositionError(f"a fork's position must be a whole number of zero or more, got {at!r}")
    found = (yield queries.FORK_ORIGIN, {"sid": sid}).fetchone()
    if found is None:
        raise NoSuchSessionError(f"no session {sid} to fork")
    row_id, length = int(found[0]), int(found[3])
    forked_from, forked_at = (None if v is None else int(v) for v in found[1:3])
    if at is None:
        at = length
    if at > length:
        raise InvalidForkPositionError(
            f"session {sid} has {length} events: it can be forked at 0 to {length}, not {at}"
        )
    up = forked_from if forked_from is not None and forked_at is not None and at <= forked_at else row_id
    params = {"sid": new_sid, "id": row_id, "now": now, "forked_from": up, "forked_at": at, "branch_of": None}
    yield queries.FORK_SESSION, params


def replace_steps(
    row_id: int,
    forked_from: int | None,
    forked_at: int | None,
    keep: int,
    length: int,
    *,
    keep_past: bool,
    now: object,
    new_sid: Callable[[], str],
) -> Steps[int]:
    """Before a rewrite replaces the session's events from position ``keep`` on (of ``length``): move them to
    a new earlier branch (a hidden session of its own, ``branch_of`` the session) and re-point the forks that
    read them there, so no row a fork shares changes in place and the past stays readable; without
    ``keep_past``, delete them instead, unless a fork reads them. A rewrite into a fork's shared prefix
    (``keep`` below its ``forked_at``) moves all its own rows and shares less. Returns how many of the
    session's rows went (each counted by its revision)."""
    if keep >= length:
        return 0
    shared_from = forked_at or 0
    read = (yield queries.FORKS_ABOVE, {"id": row_id, "position": keep}).fetchone() is not None
    if keep_past or read:
        branch_from, branch_at = (row_id, keep) if keep >= shared_from else (forked_from, shared_from)
        made = {"sid": new_sid(), "id": row_id, "now": now, "forked_from": branch_from, "forked_at": branch_at}
        branch = (yield queries.FORK_SESSION, {**made, "branch_of": row_id}).fetchone()[0]
        moved = {"id": row_id, "branch": branch, "position": keep}
        gone = int((yield queries.MOVE_EVENTS, moved).rowcount)
        yield queries.REPOINT_FORKS, moved
    else:
        gone = int((yield queries.DELETE_EVENTS_FROM, {"id": row_id, "position": keep}).rowcount)
    if keep < shared_from:
        yield queries.SET_FORKED_AT, {"id": row_id, "position": keep}
    return gone


def run_steps(steps: Steps[T], run: Callable[[str, dict[str, Any]], Any]) -> T:
    """Run ``steps`` with ``run(sql, params)`` (a connection's ``execute``); their result."""
    result = None
    try:
        while True:
            sql, params = steps.send(result)
            result = run(sql, params)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def event_row(codec: Codec, event: Any) -> dict[str, Any]:
    """An event's columns as :data:`queries.APPEND_EVENT` takes them: its type, payload, role, text and text path.

    Encoded when called, on the caller's side: a bad event fails before any write, and a mutable one is stored
    as it is at this call.
    """
    type_name, payload = codec.encode(event)
    row = describe_row(codec, event)
    row["type"], row["payload"] = type_name, payload
    return row


class Rewrite:
    """One ``set_history`` call: the new events, how many of them are the stored ones, and the rows of the rest.

    Events the codec makes mutable are encoded at once (``encoded``): they are stored as they are at this call,
    and compared by their text, never by identity. Frozen ones are too when ``eager``; otherwise each is encoded
    only when it is compared or written, so a call that appends to a long history encodes the new events only.
    """

    __slots__ = ("codec", "described", "encoded", "events")

    def __init__(self, codec: Codec, events: Iterable[Any], *, eager: bool) -> None:
        self.codec = codec
        self.events = list(events)
        now = eager or not codec.frozen_events
        self.encoded = [codec.encode(event) for event in self.events] if now else None
        self.described = [describe_row(codec, event) for event in self.events] if now else None

    def unchanged(self, stored: Sequence[Any], *, objects: bool = False) -> int:
        """How many of the new events, from the first, are the stored ones at their positions: their rows stay,
        and the call writes from the first difference on.

        ``stored`` holds the stored rows' ``(type, payload)`` texts or, with ``objects``, the frozen events this
        process last wrote or read there (valid while the session's revision is the one it saw). An event that
        is the same object as, or ``==`` to, the stored one is not rewritten.
        """
        new = self.events
        limit = min(len(stored), len(new))
        keep = 0
        if self.encoded is not None:
            encoded = self.encoded
            while keep < limit and encoded[keep] == stored[keep]:
                keep += 1
            return keep
        encode = self.codec.encode
        if objects:
            # List equality runs in C and short-cuts on identity, so the usual call (the history it read, plus
            # new events) costs a pointer compare per stored event.
            if new[:limit] == stored[:limit]:
                return limit
            while keep < limit and (new[keep] is stored[keep] or encode(new[keep]) == encode(stored[keep])):
                keep += 1
            return keep
        while keep < limit and encode(new[keep]) == stored[keep]:
            keep += 1
        return keep

    def rows(self, row_id: int, start: int, now: object) -> Iterator[dict[str, Any]]:
        """:data:`queries.INSERT_EVENT`'s parameters for the events from position ``start`` on, one at a time
        (an event not encoded yet is encoded as it is reached: a bad one fails there)."""
        codec, encoded, described = self.codec, self.encoded, self.described
        for position in range(start, len(self.events)):
            if encoded is None or described is None:
                event = self.events[position]
                (type_name, payload), description = codec.encode(event), describe_row(codec, event)
            else:
                (type_name, payload), description = encoded[position], described[position]
            yield {"id": row_id, "position": position, "type": type_name, "payload": payload, "now": now} | description


class DurableStorage(Generic[Opened]):
    """A storage over a database: the :class:`~sessionstore.Storage` of its subclass and this
    :class:`~sessionstore.SessionCatalog`.

    The database is reached on first use (or ``async with``, or :meth:`open`) on the running event loop, and
    ``Opened`` is what the subclass's writes then go through (SQLite's write lane, PostgreSQL's engine). A storage
    serves one loop at a time: from a second live loop it raises :class:`~sessionstore.StorageError`; once its loop
    has closed (``asyncio.run`` called again), the next use opens it anew on the new one.

    A subclass says how it talks to its database: :meth:`_open`, :meth:`_dispose`, :meth:`_read`,
    :meth:`_write_row`, and :meth:`_new_loop` for what it keeps per loop.
    """

    _top_level: str
    """How a listing page leaves subagents out, in its database's words (as its backend's ``top_level``)."""

    def __init__(self, *, codec: Codec | None, auto_upgrade: bool, keep_past: bool = True) -> None:
        self.codec: Codec = codec if codec is not None else JsonCodec()
        self.keep_past = keep_past
        annotate_context(self, self.codec)
        self.auto_upgrade = auto_upgrade
        self._opened: Opened | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opening: asyncio.Lock | None = None
        self._guard: asyncio.Task[None] | None = None
        self._holder = holder()  # how this storage marks the sessions it holds (sessions.held_by)
        # The retention policy, applied in the background while the storage is open (see _retain).
        self.retention_every = RETENTION_EVERY
        self._retaining: asyncio.Task[None] | None = None
        # The unreadable policy last logged: said once, not at every pass, until it changes.
        self._bad_setting: str | None = None
        self._retire = asyncio.Event()

    # -- lifecycle ------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def open(self) -> None:
        """Reach the database now rather than on first use (creating it, or bringing its schema to the current
        revision, if needed)."""
        await self._ready()

    async def _ready(self) -> Opened:
        loop = asyncio.get_running_loop()
        opened = self._opened
        if opened is not None and self._loop is loop:
            return opened
        if self._loop is not None and self._loop is not loop and not self._loop.is_closed():
            raise StorageError(f"{self} is in use by another event loop; use one {type(self).__name__} per event loop")
        if self._opening is None or self._loop is not loop:
            # First use, or the loop it was opened on has closed (asyncio.run called again): start over on this
            # loop. What belonged to the old one was closed with it (see _close_with_loop).
            self._opening = asyncio.Lock()
            self._loop = loop
            self._opened = None
            self._new_loop()
        async with self._opening:
            if self._opened is None:
                self._opened = opened = await self._open(loop)
                self._guard = loop.create_task(self._close_with_loop(), name=f"sessionstore guard {self!r}")
                self._retire = asyncio.Event()
                self._retaining = loop.create_task(self._retain(), name=f"sessionstore retention {self!r}")
                return opened
            return self._opened

    async def aclose(self) -> None:
        """Let the writes under way finish, then close every connection. Reopens on next use."""
        guard, self._guard = self._guard, None
        if self._loop is asyncio.get_running_loop():
            await self._stop_retaining()
            await self._dispose()
        if guard is not None and not guard.done():
            guard.cancel()

    async def _close_with_loop(self) -> None:
        # Waits for ever; cancelled when the loop shuts down with the storage still open (asyncio.run cancels
        # every task), so the connections are closed on their own loop rather than by the garbage collector after.
        try:
            await asyncio.Event().wait()
        finally:
            try:
                current = asyncio.current_task()
            except RuntimeError:  # collected after its loop stopped: nothing left to close on
                current = None
            if current is not None and self._guard is current:
                await self._stop_retaining()
                await self._dispose()

    def _new_loop(self) -> None:
        """Forget what belonged to the previous event loop (the storage starts over on a new one)."""

    async def _open(self, loop: asyncio.AbstractEventLoop) -> Opened:
        """Reach the database (creating it or upgrading its schema if needed); what the writes go through."""
        raise NotImplementedError

    async def _dispose(self) -> None:
        """Finish the writes under way and close every connection (``_opened`` back to ``None``)."""
        raise NotImplementedError

    # -- retention ------------------------------------------------------------------------------

    async def set_retention(self, max_age: timedelta | None) -> None:
        """Store the database's retention policy (``None``: off): every storage open on it (this one at once, the
        others at their next pass) then removes the sessions of their own not updated for ``max_age`` that no live
        process holds, with their subagents and events. :class:`~sessionstore.UsageError` below a second."""
        if max_age is None:
            await self._write_row(queries.DROP_SETTING, {"name": RETENTION})
        else:
            await self._write_row(queries.PUT_SETTING, retention_setting(max_age))
        self._wake_retention()

    async def retention(self) -> timedelta | None:
        """The database's retention policy, or ``None`` when it has none."""
        return await self._read(retention_of)

    async def apply_retention(self) -> list[str]:
        """One pass of the retention policy now (as the storage runs one every :data:`RETENTION_EVERY` seconds):
        the ids of the sessions it removed."""
        max_age = await self._read(retention_of)
        if max_age is None:
            return []
        cutoff = cutoff_of(max_age, datetime.now(UTC))
        removed: list[str] = []
        mark, more = 0, True
        while more and not self._retire.is_set():
            found = await self._read(stale_sessions, cutoff, RETENTION_BATCH)
            before = len(removed)
            for row_id, sid, _ in found:
                if self._retire.is_set():
                    break
                try:
                    gone, mark = await self._remove_stale(row_id, sid, cutoff)
                except ForkedByAnotherRoleError:  # kept, as a held one is; the later ones still go
                    logger.info("%s: retention keeps %s: another role's fork shares its events", self, sid)
                    continue
                if gone:
                    removed.append(sid)
            # A full batch that removed something: read the next (a batch of held sessions alone ends the pass).
            more = len(found) == RETENTION_BATCH and len(removed) > before
        if removed:
            await self._removed(mark)
        return removed

    async def _retain(self) -> None:
        """Apply the policy as the storage opens and every :attr:`retention_every` seconds until it closes. A pass
        that fails (the database busy, gone for a while) is tried again at the next."""
        while not self._retire.is_set():
            await self._retain_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._retire.wait(), self.retention_every)

    def _wake_retention(self) -> None:
        """A policy just set: apply it now rather than at the next pass."""
        task = self._retaining
        if task is not None and not task.done() and self._loop is not None:
            self._loop.create_task(self._retain_once())

    async def _retain_once(self) -> None:
        try:
            await self.apply_retention()
            self._bad_setting = None
        except SettingError as exc:  # edited by hand: no pass until a person sets it again
            if str(exc) != self._bad_setting:
                logger.warning("%s: no retention pass: %s", self, exc)
            self._bad_setting = str(exc)
        except StorageError as exc:  # the database busy or gone for a while: the next pass tries again
            logger.info("%s: retention left for its next pass: %s", self, exc)
        except Exception:  # never the end of the task that runs the passes
            logger.exception("%s: a retention pass failed", self)

    async def _stop_retaining(self) -> None:
        """Let a pass under way finish the session it is removing, and stop."""
        self._retire.set()
        task, self._retaining = self._retaining, None
        if task is not None and not task.done() and task is not asyncio.current_task():
            await asyncio.wait([task])

    async def _remove_stale(self, row_id: int, sid: str, cutoff: str) -> tuple[bool, int]:
        """Remove one stale session in a short transaction of its own, unless a live process holds it or it was
        written to since it was found (``cutoff``: updated before it); whether it went, and (SQLite) the file's
        mark of deleted text."""
        raise NotImplementedError

    async def _removed(self, mark: int) -> None:
        """After a pass removed sessions: what a deletion needs done after it (SQLite: the deleted text scrubbed)."""

    # -- running work ---------------------------------------------------------------------

    async def _read(self, read: Callable[..., T], *args: Any) -> T:
        """``read(connection, *args)``: one of the reads of :mod:`sessionstore.reads`, on a
        :class:`~sessionstore.reads.Connection` of this storage's database."""
        raise NotImplementedError

    async def _write_row(self, sql: str, params: dict[str, Any]) -> None:
        """Run one statement of :mod:`~sessionstore.schema.queries` on one session's row, in a transaction of its
        own; return once it has committed. ``params`` as SQLite binds them (times as :func:`utc_text`,
        ``released`` an integer)."""
        raise NotImplementedError

    # -- SessionCatalog -----------------------------------------------------------------------

    async def save_session(self, record: SessionRecord) -> None:
        """Insert or replace the record (its events are untouched)."""
        await self._write_row(queries.UPSERT_SESSION, record_row(record))

    async def load_session(self, stream_id: StreamId) -> SessionRecord | None:
        """The stored record (its title only if one was set), or ``None``."""
        return await self._read(load_session, session_id_of(stream_id))

    async def touch_session(self, stream_id: StreamId, *, released: bool | None = None) -> None:
        """Stamp ``updated_at`` now; set ``released`` when given."""
        params = {
            "sid": session_id_of(stream_id),
            "now": utc_text(datetime.now(UTC)),
            "released": None if released is None else int(released),
        }
        await self._write_row(queries.TOUCH_SESSION, params)

    async def set_title(self, stream_id: StreamId, title: str | None) -> None:
        params = {"sid": session_id_of(stream_id), "title": None if title is None else storable_text(title, "title")}
        await self._write_row(queries.SET_TITLE, params)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> SessionPage:
        """Sessions of their own (not subagents) newest first by creation (then id), ``limit`` at a time, after
        ``cursor`` (see :func:`~sessionstore.reads.session_page`)."""
        check_limit(limit)
        if cwd is not None:
            # A cwd no row can hold (text UTF-8 cannot encode) is refused as writing it is, not with the driver's
            # UnicodeEncodeError from inside the read.
            storable_text(cwd, "cwd")
        top = self._top_level
        return await self._read(lambda conn: session_page(conn, cwd=cwd, cursor=cursor, limit=limit, top_level=top))
