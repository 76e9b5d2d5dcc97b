"""The storage seam: what the registry needs from a backend, and the in-memory one.

:class:`Storage` is exactly AG2's ``ag2.history.Storage`` (four async methods), so
a storage written for one works with the other. A backend that also keeps
session records (context, title, timestamps, released flag) implements
:class:`SessionCatalog` as well; the registry uses it when it is there and
works without it. A storage several processes share implements :class:`Holding`
too, so only the process whose registry has a session live writes it. All three are
deliberately narrow: ``SQLiteStorage`` and ``PostgresStorage`` implement these and
the registry asks for nothing more.
"""

from __future__ import annotations

import base64
import binascii
import inspect
import itertools
import json
import os
import socket
import sys
import time
import types
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, TypeAlias, TypeVar, cast, runtime_checkable
from uuid import UUID

from .errors import (
    EventEncodeError,
    InvalidCursorError,
    InvalidSessionIdError,
    InvalidWindowError,
    ParentSessionMissingError,
    SessionHeldError,
)
from .events import BaseEvent, Tokens, UserMessage

__all__ = [
    "CURRENT_SESSION",
    "SESSION_DEPENDENCY",
    "EventContext",
    "History",
    "MemoryStorage",
    "SessionCatalog",
    "SessionPage",
    "SessionRecord",
    "Storage",
    "StreamId",
    "StreamRef",
    "in_session",
    "opened_from",
]

StreamId: TypeAlias = UUID
"""A conversation's key in storage. A session's id is its stream id's ``hex``."""

BUSY_TIMEOUT = 30.0
"""Seconds a write waits for another writer's lock (another process's on a SQLite file, another transaction's on a
PostgreSQL row) before :class:`~sessionstore.DatabaseBusyError`."""

UPDATED_AT_SLACK = timedelta(seconds=1)
"""A storage keeps a session's ``updated_at`` to within this much of its latest write: restamping it (and its
indexes) on every event of a burst would take each commit from 3 written pages to 5."""


def session_id_of(stream_id: object) -> str:
    """The session id a storage keeps for a stream id (its ``hex``); anything but a UUID is refused."""
    if isinstance(stream_id, UUID):
        return stream_id.hex
    raise InvalidSessionIdError(f"a stream id must be a uuid.UUID, got {type(stream_id).__name__}: {stream_id!r}")


# -- which session a new stream belongs to ----------------------------------------------------------

CURRENT_SESSION: ContextVar[StreamId | None] = ContextVar("sessionstore_current_session", default=None)
"""The session whose turn this task runs (or that started this task): set for the length of a turn by what
runs turns (:meth:`AgentSession.turn`, ``DurableACPAgent``'s prompts, :func:`in_session`). A task inherits
it from the task that created it, so a background task a turn spawned still names its session after the
turn has ended."""

SESSION_DEPENDENCY = "sessionstore.session"
"""The key under which a context's ``dependencies`` (AG2's ``Context``) name the stream it last wrote to."""


@contextmanager
def in_session(stream_id: StreamId) -> Iterator[None]:
    """Run a turn of ``stream_id``'s session: a stream first written in it (or in a task it starts) is stored as
    a subagent of that session, listed under it and deleted with it."""
    token = CURRENT_SESSION.set(stream_id)
    try:
        yield
    finally:
        CURRENT_SESSION.reset(token)


def opened_from(stream_id: StreamId, context: object = None) -> StreamId | None:
    """The session a write to ``stream_id`` comes from (``None``: a session of its own), for a stream with no row.

    AG2 hands a subagent a copy of its parent's ``dependencies`` (``run_task``: ``parent_context.dependencies
    .copy()``, for ``subagent_tool``, ``background_agent_tool`` and ``Agent``'s own subtasks alike), and every
    write with such a context marks them with its own stream (under :data:`SESSION_DEPENDENCY`), so a subagent's
    first write finds its direct parent there, however deeply nested. A context without them (a stream opened
    without its parent's dependencies, or written by sessionstore's own registry) falls back on
    :data:`CURRENT_SESSION`, the session whose turn is running. Either is only read when the stream's row is
    made: a stream that has a row keeps its place.
    """
    dependencies = getattr(context, "dependencies", None)
    named = None
    if isinstance(dependencies, dict):
        named = dependencies.get(SESSION_DEPENDENCY)
        dependencies[SESSION_DEPENDENCY] = stream_id  # what the contexts copied from this one will name
    parent = named if isinstance(named, UUID) else CURRENT_SESSION.get()
    return None if parent is None or parent == stream_id else parent


def missing_parent(stream_id: StreamId, parent: StreamId) -> ParentSessionMissingError:
    """The error for a stream opened from a session that has no row (deleted meanwhile, or never stored)."""
    return ParentSessionMissingError(
        f"stream {stream_id.hex} was opened from session {parent.hex}, which is not stored (deleted, or never"
        " written): its events would belong to no conversation, so nothing was written"
    )


def holder() -> str:
    """A storage of this process as ``sessions.held_by`` names a holder:
    ``pid 4242 on laptop (example.py, storage 1) since 2026-12-02 10:11:12 UTC``.

    The program is its file's name only (a command line may carry secrets); the storage's number tells apart two
    storages of one process, which hold apart too.
    """
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    since = shown_time(datetime.now(UTC))
    storage = next(_storages)
    return f"pid {os.getpid()} on {socket.gethostname()} ({program or 'python'}, storage {storage}) since {since}"


_storages = itertools.count(1)


def held_error(sid: str, marked: str | None) -> SessionHeldError:
    """The one message for a session another storage holds, naming the holder as its mark says."""
    who = marked or "another storage of this database (it has not marked who yet)"
    return SessionHeldError(f"session {sid} is held by {who}: only its holder may write it until it lets it go")


class StreamRef(Protocol):
    @property
    def id(self) -> StreamId: ...


class ContextLike(Protocol):
    """What ``save_event`` reads from its context: ``context.stream.id``."""

    @property
    def stream(self) -> StreamRef: ...


@dataclass(frozen=True, slots=True)
class _Stream:
    id: StreamId


@dataclass(frozen=True, slots=True)
class EventContext:
    """The smallest context ``save_event`` accepts; AG2's ``Context`` works too."""

    stream: StreamRef

    @classmethod
    def for_stream(cls, stream_id: StreamId) -> EventContext:
        return cls(stream=_Stream(stream_id))


def annotate_context(storage: object, codec: object) -> None:
    """Give this storage's ``save_event`` the ``context`` annotation the codec's framework injects by.

    AG2 subscribes a storage's ``save_event`` itself when every event is kept
    (``MemoryStream(storage, persist_all=True)``) and fills ``context`` by its
    annotation, which must then be AG2's own ``Context``. This layer never imports
    AG2, so the codec names it (``AG2Codec.context_annotation``). The method is
    copied with that annotation, not wrapped: an append pays no extra call.
    """
    annotation = getattr(codec, "context_annotation", None)
    if annotation is None:
        return
    method = type(storage).save_event  # type: ignore[attr-defined]
    copy = types.FunctionType(
        method.__code__, method.__globals__, method.__name__, method.__defaults__, method.__closure__
    )
    copy.__kwdefaults__ = method.__kwdefaults__
    copy.__qualname__ = method.__qualname__
    copy.__doc__ = method.__doc__
    copy.__annotations__ = {**method.__annotations__, "context": annotation}
    storage.save_event = types.MethodType(copy, storage)  # type: ignore[attr-defined]


@runtime_checkable
class Storage(Protocol):
    """Where a conversation's events live, keyed by stream id."""

    async def save_event(self, event: BaseEvent, context: ContextLike) -> None: ...

    async def get_history(self, stream_id: StreamId) -> Iterable[BaseEvent]: ...

    async def set_history(self, stream_id: StreamId, events: Iterable[BaseEvent]) -> None: ...

    async def drop_history(self, stream_id: StreamId) -> None: ...


class RecentReads(Protocol):
    """A storage that reads a history's newest events alone (``get_history(..., last=N)``): sessionstore's own.
    AG2's :class:`Storage` protocol has no such argument, so :class:`History` asks for it only where it is."""

    async def get_history(self, stream_id: StreamId, *, last: int | None = None) -> Iterable[BaseEvent]: ...


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session as a storage keeps it: its client context and bookkeeping.

    ``released`` is true once the registry let the session go with its history
    retained, so it can be listed and resumed by a later process.

    ``parent_id`` is the id of the session this one's stream was opened from
    (an AG2 subagent's; ``None`` for a session of its own). The storage sets it
    when the stream's row is made (see :func:`opened_from`) and never changes
    it: a saved record ignores it.

    ``forked_from`` and ``forked_at``: the session a fork was forked from and at which position (revision 0012;
    ``None`` for a session that shares nothing, and once what it was forked from is deleted: it then holds its
    whole history itself). ``branch_of``: for an earlier branch (events a rewrite replaced), the session it
    belongs to. All three are the storage's to set: a saved record ignores them.

    Listings fill in three more: ``events`` (how many the session has),
    ``derived_title`` (true when ``title`` was made from the first user message
    by :func:`derive_title` because none was set) and ``usage`` (the tokens its
    usage events add up to, summed in SQL). A record that is saved ignores them.
    """

    session_id: str
    cwd: str = "."
    additional_directories: list[str] = field(default_factory=list)
    mcp_servers: list[Any] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    title: str | None = None
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    updated_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    released: bool = False
    parent_id: str | None = None
    events: int | None = None
    derived_title: bool = False
    usage: Tokens | None = None
    forked_from: str | None = None
    forked_at: int | None = None
    branch_of: str | None = None

    @property
    def stream_id(self) -> StreamId:
        return UUID(hex=self.session_id)


@dataclass(frozen=True, slots=True)
class SessionPage:
    """One page of :meth:`SessionCatalog.list_sessions`, newest first."""

    sessions: list[SessionRecord]
    next_cursor: str | None


@runtime_checkable
class SessionCatalog(Protocol):
    """Session records beside the history: what ``session/list`` and resume need."""

    async def save_session(self, record: SessionRecord) -> None:
        """Insert or replace the record (its events are untouched)."""
        ...

    async def load_session(self, stream_id: StreamId) -> SessionRecord | None: ...

    async def touch_session(self, stream_id: StreamId, *, released: bool | None = None) -> None:
        """Stamp ``updated_at`` now; set ``released`` when given."""
        ...

    async def set_title(self, stream_id: StreamId, title: str | None) -> None: ...

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> SessionPage:
        """Sessions of their own (not subagents) newest first by creation, ``limit`` at a time, from after ``cursor``.

        By creation time, which never changes: paging through while sessions
        are written lists each session that exists for the whole walk exactly once.
        """
        ...


@runtime_checkable
class Holding(Protocol):
    """A storage whose sessions a process holds while its registry has them live (revision 0007).

    Only the holder may repair, append to, rewrite or delete a held session: another storage, in this process or
    another, gets :class:`~sessionstore.SessionHeldError` naming the holder. The hold dies with its holder (a
    ``kill -9`` included), so a session a dead process held is taken over at once.
    """

    async def hold(self, stream_id: StreamId) -> None: ...

    async def let_go(self, stream_id: StreamId) -> None: ...


def encode_cursor(created_at: datetime, session_id: str) -> str:
    """An opaque keyset cursor: the sort key of the last row on the page."""
    raw = json.dumps([created_at.isoformat(), session_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: object) -> tuple[datetime, str]:
    """The sort key a cursor holds; :class:`InvalidCursorError` for anything :func:`encode_cursor` did not make.

    A client may send anything as a cursor (a number, deep nesting, a year its zone pushes past year 1 in UTC):
    every such value is the same clear error, never whatever a parser or the database would raise.
    """
    shown = repr(cursor) if len(repr(cursor)) <= 80 else f"{repr(cursor)[:77]}..."
    try:
        if not isinstance(cursor, str) or len(cursor) > _CURSOR_MAX:
            raise ValueError("not a cursor string")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        decoded = json.loads(raw)
        if not (isinstance(decoded, list) and len(decoded) == 2 and all(isinstance(x, str) for x in decoded)):
            raise ValueError("not a cursor's fields")
        stamp, session_id = decoded
        when = datetime.fromisoformat(stamp)
        UUID(hex=session_id)
        if when.tzinfo is None:
            raise ValueError("naive timestamp")
        when.astimezone(UTC)  # as the database compares it
        return when, session_id
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError, OverflowError) as exc:
        raise InvalidCursorError(f"invalid session list cursor: {shown}") from exc


_CURSOR_MAX = 512  # a cursor this module makes is under 100 characters


TITLE_LENGTH = 80


def derive_title(text: object, length: int = TITLE_LENGTH) -> str | None:
    """The title of a session nobody named: its first user message, on one line, at most ``length`` characters.

    Line breaks and tabs become spaces, spaces at either end go, and a longer
    text is cut to ``length - 1`` characters and an ellipsis. The
    ``session_overview`` view applies the same rule in SQL (revision 0003), so
    a listing, the command line and a person's ``sqlite3`` agree.
    """
    if not isinstance(text, str):
        return None
    flat = text.replace("\r", " ").replace("\n", " ").replace("\t", " ").strip(" ")
    if not flat:
        return None
    return flat if len(flat) <= length else flat[: length - 1] + "…"


_SLACK_SECONDS = int(UPDATED_AT_SLACK.total_seconds())  # whole seconds (a test says so): now_texts shifts those
_seconds: tuple[int, str, str] = (0, "", "")  # the last second now_texts met: it, and its and slack's earlier text


def now_texts() -> tuple[str, str]:
    """The current instant as stored text (:func:`utc_text`), and the instant :data:`UPDATED_AT_SLACK` before it.

    Each append stamps its row with the first and compares its session's ``updated_at`` with the second: formatted
    once a second and then only the microseconds (0.6 us, where two ``utc_text`` of ``datetime.now`` took 3).
    """
    global _seconds
    now = time.time()
    second = int(now)
    known = _seconds
    if known[0] != second:
        # One tuple, swapped whole: a thread reading it meanwhile gets the old second's or the new one's.
        known = _seconds = (second, _second_text(second), _second_text(second - _SLACK_SECONDS))
    micro = f".{int((now - second) * 1_000_000):06d}"
    return known[1] + micro, known[2] + micro


def _second_text(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).isoformat(" ")[:19]


def utc_text(value: datetime) -> str:
    """How a timestamp is stored: naive UTC text, ``YYYY-MM-DD HH:MM:SS.ffffff``, readable and sortable as it is.

    The one rule for a session's times, everywhere: they are instants, so a
    naive datetime (which could mean any of 24 hours) is refused, not guessed.
    """
    if value.tzinfo is UTC:  # datetime.now(UTC): no conversion to make
        return value.isoformat(" ", "microseconds")[:26]
    if value.tzinfo is None or value.utcoffset() is None:
        raise EventEncodeError(f"a session's timestamp must be timezone-aware (datetime.now(UTC)), got {value!r}")
    try:
        # isoformat, not strftime: twice as fast, and it writes a year below 1000 with its
        # four digits, as SQLite's own strftime does, where strftime("%Y") need not.
        return value.astimezone(UTC).isoformat(" ", "microseconds")[:26]
    except OverflowError:
        raise EventEncodeError(f"{value!r} is out of range once converted to UTC") from None


def shown_time(when: datetime, *, seconds: bool = True) -> str:
    """The one rule for a time shown to a person (the command line, the demo, a holder's mark): UTC, zone written.

    UTC rather than local time because that is what the file stores, so ``sqlite3``, Datasette, the JSON output
    and a colleague's machine in another zone all show the same instant as the same text.
    """
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC")


def stamp(text: object) -> datetime:
    """A stored timestamp (naive UTC text, or ISO 8601 with an offset) as an aware UTC datetime."""
    when = datetime.fromisoformat(str(text))
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def storable_text(value: str, what: str) -> str:
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


def json_text(value: object, what: str) -> str:
    """How a session's JSON column is stored: compact UTF-8 text (the models' JSON type binds the same)."""
    # allow_nan=False: bare NaN is not JSON, and SQLite's JSON functions reject it.
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise EventEncodeError(f"cannot store the session's {what}: {exc}") from exc
    return storable_text(text, what)


def record_row(record: SessionRecord) -> dict[str, object]:
    """A record as the ``sessions`` row the storage writes (:data:`queries.UPSERT_SESSION`'s parameters).

    The one rule for what a session row may hold, for the storage, the memory
    storage and import alike: a 32-hex id, UTF-8 text, plain JSON (no NaN),
    aware timestamps. :class:`EventEncodeError` (or :class:`InvalidSessionIdError`)
    before anything is written otherwise.
    """
    sid = record.session_id
    if not isinstance(sid, str) or len(sid) != 32 or sid.strip("0123456789abcdef"):
        raise InvalidSessionIdError(f"a session id must be 32 lowercase hex digits, got {sid!r}")
    if not isinstance(record.cwd, str) or (record.title is not None and not isinstance(record.title, str)):
        raise EventEncodeError("a session's cwd and title must be text")
    return {
        "sid": sid,
        "cwd": storable_text(record.cwd, "cwd"),
        "additional_directories": json_text(list(record.additional_directories), "additional_directories"),
        "mcp_servers": json_text(list(record.mcp_servers), "mcp_servers"),
        "meta": json_text(dict(record.meta), "meta"),
        "title": None if record.title is None else storable_text(record.title, "title"),
        "created_at": utc_text(record.created_at),
        "updated_at": utc_text(record.updated_at),
        "released": int(record.released),
    }


MOST_EVENTS = 2**63 - 1
"""More events than any history holds: the largest count both databases bind, what a larger ``last`` becomes."""


def check_last(last: int | None) -> int | None:
    """``last`` as ``get_history`` takes it: ``None`` (every event) or a whole number of zero or more (``True``
    is refused: a flag passed where a count was meant), at most :data:`MOST_EVENTS`."""
    if last is not None and (not isinstance(last, int) or isinstance(last, bool) or last < 0):
        raise InvalidWindowError(f"last must be None or a whole number of zero or more, got {last!r}")
    return last if last is None else min(last, MOST_EVENTS)


E = TypeVar("E")


def newest(events: Sequence[E], last: int | None) -> list[E]:
    """A new list of the last ``last`` of ``events`` in their order (all of them for ``None``, or when there are
    fewer)."""
    return list(events if last is None else events[max(len(events) - last, 0) :])


def check_limit(limit: int | None) -> int | None:
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    return limit


class MemoryStorage:
    """History and session records in process memory: fast, and gone at exit.

    The ceiling the durable storages are measured against, and the default of
    :class:`~sessionstore.SessionStore` when no storage is given.
    """

    def __init__(self) -> None:
        self._events: defaultdict[StreamId, list[BaseEvent]] = defaultdict(list)
        self._records: dict[StreamId, SessionRecord] = {}

    async def save_event(self, event: BaseEvent, context: ContextLike) -> None:
        stream_id = context.stream.id
        self._ensure_record(stream_id, opened_from(stream_id, context))
        self._events[stream_id].append(event)

    async def get_history(self, stream_id: StreamId, *, last: int | None = None) -> Iterable[BaseEvent]:
        """The stream's events in order; with ``last``, only its newest ``last`` (see :func:`check_last`)."""
        check_last(last)
        return newest(self._events.get(stream_id, []), last)

    async def set_history(self, stream_id: StreamId, events: Iterable[BaseEvent]) -> None:
        new = list(events)
        self._ensure_record(stream_id, opened_from(stream_id))
        self._events[stream_id] = new

    async def drop_history(self, stream_id: StreamId) -> None:
        """Delete the session, its subagents (theirs too) and all their events."""
        doomed = [stream_id]
        for parent in doomed:  # grows as it goes: every generation below
            doomed += [r.stream_id for r in self._records.values() if r.parent_id == parent.hex]
        for gone in doomed:
            self._events.pop(gone, None)
            self._records.pop(gone, None)

    def _ensure_record(self, stream_id: StreamId, parent: StreamId | None) -> None:
        """Stamp the session's record, made first if missing (under ``parent``, which must have one)."""
        record = self._records.get(stream_id)
        now = datetime.now(UTC)
        if record is not None:
            self._records[stream_id] = replace(record, updated_at=now)
            return
        if parent is not None and parent not in self._records:
            raise missing_parent(stream_id, parent)
        parent_id = None if parent is None else parent.hex
        self._records[stream_id] = SessionRecord(
            session_id=stream_id.hex, created_at=now, updated_at=now, parent_id=parent_id
        )

    async def save_session(self, record: SessionRecord) -> None:
        record_row(record)  # the same rule as every storage: refused here what a file would refuse
        stored = self._records.get(record.stream_id)
        self._records[record.stream_id] = replace(record, parent_id=None if stored is None else stored.parent_id)

    async def load_session(self, stream_id: StreamId) -> SessionRecord | None:
        return self._records.get(stream_id)

    async def touch_session(self, stream_id: StreamId, *, released: bool | None = None) -> None:
        record = self._records.get(stream_id)
        if record is not None:
            flag = record.released if released is None else released
            self._records[stream_id] = replace(record, updated_at=datetime.now(UTC), released=flag)

    async def set_title(self, stream_id: StreamId, title: str | None) -> None:
        record = self._records.get(stream_id)
        if record is not None:
            self._records[stream_id] = replace(record, title=title)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> SessionPage:
        check_limit(limit)
        after = decode_cursor(cursor) if cursor is not None else None
        rows = sorted(self._records.values(), key=lambda r: (r.created_at, r.session_id), reverse=True)
        rows = [r for r in rows if r.parent_id is None]  # a subagent is listed with its session, not beside it
        if cwd is not None:
            rows = [r for r in rows if r.cwd == cwd]
        if after is not None:
            rows = [r for r in rows if (r.created_at, r.session_id) < after]
        return page_of([self._listed(r) for r in rows], limit)

    def _listed(self, record: SessionRecord) -> SessionRecord:
        events = self._events.get(record.stream_id, [])
        if record.title is not None:
            return replace(record, events=len(events))
        first = next((e for e in events if isinstance(e, UserMessage)), None)
        title = None if first is None else derive_title(first.content)
        return replace(record, events=len(events), title=title, derived_title=title is not None)


def page_of(rows: Sequence[SessionRecord], limit: int | None) -> SessionPage:
    """Cut ``rows`` (already filtered and ordered) to a page with its cursor."""
    if limit is None or len(rows) <= limit:
        return SessionPage(sessions=list(rows), next_cursor=None)
    page = list(rows[:limit])
    last = page[-1]
    return SessionPage(sessions=page, next_cursor=encode_cursor(last.created_at, last.session_id))


def takes_last(storage: Storage) -> bool:
    """Whether ``storage.get_history`` takes ``last`` (:class:`RecentReads`)."""
    try:
        return "last" in inspect.signature(storage.get_history).parameters
    except (TypeError, ValueError):  # no signature to read (a builtin, a C extension)
        return False


class History:
    """One stream's slice of a storage: the view a turn reads and rewrites."""

    def __init__(self, storage: Storage, stream_id: StreamId) -> None:
        self._storage = storage
        self._stream_id = stream_id
        self._recent_reads: bool | None = None  # whether storage.get_history takes last; looked at once

    @property
    def stream_id(self) -> StreamId:
        return self._stream_id

    async def get_events(self, *, last: int | None = None) -> list[BaseEvent]:
        """The stream's events in order; with ``last``, only its newest ``last``, oldest of them first.

        A storage whose ``get_history`` takes ``last`` (sessionstore's) reads only those; any other
        :class:`Storage` is read whole and cut here.
        """
        check_last(last)
        if last is None:
            return list(await self._storage.get_history(self._stream_id))
        if self._recent_reads is None:
            self._recent_reads = takes_last(self._storage)
        if self._recent_reads:
            return list(await cast(RecentReads, self._storage).get_history(self._stream_id, last=last))
        return newest(list(await self._storage.get_history(self._stream_id)), last)

    async def replace(self, events: Iterable[BaseEvent]) -> None:
        await self._storage.set_history(self._stream_id, events)

    async def append(self, event: BaseEvent) -> None:
        await self._storage.save_event(event, EventContext.for_stream(self._stream_id))
