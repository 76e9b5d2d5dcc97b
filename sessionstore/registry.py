"""The session registry: live sessions, their turn queues, and their bounds.

A session is one conversation. Its id is a fresh ``uuid4``'s hex and is also the
key its history is stored under, so the id alone is enough to find the
conversation again, from another connection or after a restart (see
:meth:`SessionStore.get_or_adopt`).

The registry bounds itself (an LRU cap and an idle TTL) without ever evicting a
session that has work running, queued or under :meth:`AgentSession.recovery`:
a memory bound is not a licence to kill work a client is waiting on. When
nothing idle can go, admission is refused instead of the cap stretching.

Whether a session's history outlives the registry letting it go is
``retain_history``'s call; an explicit :meth:`SessionStore.close` always deletes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any
from uuid import UUID, uuid4

from .errors import (
    ConnectionOverloadedError,
    InvalidSessionIdError,
    SessionBusyError,
    SessionLimitError,
    StorageError,
    UnknownSessionError,
)
from .storage import Holding, MemoryStorage, SessionCatalog, SessionPage, SessionRecord, Storage, StreamId, in_session
from .stream import SessionStream

__all__ = ["AgentSession", "SessionConfig", "SessionStore"]

logger = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """The registry's tunables, as one value an application can keep in its settings.

    Per session: ``max_sessions`` (LRU cap), ``ttl`` (idle seconds before expiry,
    ``None`` for never), ``max_queued`` (prompts that may wait behind a running
    turn). Per connection: ``max_concurrent_turns`` (turns running at once; more
    wait for a slot) and ``max_active_prompts`` (prompts admitted at once, running
    or waiting; more are refused). ``retain_history`` keeps a let-go session's
    history in ``storage`` so a later process can resume it.

    The one place the registry's defaults and rules live: :class:`SessionStore`
    takes the same names and checks them by building one of these.
    """

    max_sessions: int = 1024
    ttl: float | None = None
    storage: Storage | None = None
    max_queued: int = 8
    max_concurrent_turns: int = 8
    max_active_prompts: int = 64
    retain_history: bool = False

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {self.max_sessions}")
        if self.ttl is not None and self.ttl <= 0:
            raise ValueError(f"ttl must be positive when set, got {self.ttl}")
        if self.max_queued < 1:
            raise ValueError(f"max_queued must be at least 1, got {self.max_queued}")
        if self.max_concurrent_turns < 1:
            raise ValueError(f"max_concurrent_turns must be at least 1, got {self.max_concurrent_turns}")
        if self.max_active_prompts < self.max_concurrent_turns:
            raise ValueError(
                f"max_active_prompts ({self.max_active_prompts}) must be at least max_concurrent_turns "
                f"({self.max_concurrent_turns}), or no turn could ever get a slot"
            )
        if self.retain_history and self.storage is None:
            logger.warning(
                "retain_history=True with the default in-memory storage keeps every history "
                "until the process exits and nothing survives a restart; pass storage=SQLiteStorage(path)"
            )


_DEFAULTS = SessionConfig()


@dataclass(eq=False)
class AgentSession:
    """One live session: identity, client context, and its turn state.

    ``cwd``, ``additional_directories``, ``mcp_servers`` and ``meta`` are the
    client's context, kept verbatim and acted on by nothing here.
    """

    session_id: str
    stream_id: UUID
    cwd: str = "."
    additional_directories: list[str] = field(default_factory=list)
    mcp_servers: list[Any] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    title: str | None = None
    max_queued: int = _DEFAULTS.max_queued
    # Context variables owned by this conversation and handed to every turn.
    variables: dict[Any, Any] = field(default_factory=dict)
    clock: Clock = field(default=time.monotonic, repr=False)
    # When the session was last used: stamped on access and again when a turn
    # ends, so a turn longer than the TTL cannot expire its own session.
    last_active: float = field(default=0.0, repr=False)
    stream: SessionStream | None = field(default=None, repr=False)
    # The task driving the current turn: what cancel() and close() stop.
    turn_task: asyncio.Task[Any] | None = field(default=None, repr=False)
    _turn_lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    _queued: int = field(default=0, repr=False)
    _inflight: int = field(default=0, repr=False)
    _cancelled: bool = field(default=False, repr=False)
    _on_turn_end: Callable[[AgentSession], Awaitable[None]] | None = field(default=None, repr=False)

    @property
    def queued(self) -> int:
        """Prompts waiting behind the running turn (the running one is not counted)."""
        return self._queued

    @property
    def cancelled(self) -> bool:
        """Whether a cancel is still draining this session's queue."""
        return self._cancelled

    @property
    def is_idle(self) -> bool:
        """No turn running or queued, and nobody holding the lock for a repair.

        Only idle sessions may be evicted or expired.
        """
        task = self.turn_task
        return self._inflight == 0 and (task is None or task.done()) and not self._turn_lock.locked()

    async def cancel(self) -> None:
        """Stop the running turn and every prompt queued behind it; nothing else.

        Letting the queue roll on would make a stop button start the next thing
        the user typed. Events already written stay written.
        """
        self._cancelled = self._inflight > 0 or self.turn_task is not None
        task = self.turn_task
        if task is not None and not task.done():
            task.cancel()

    @asynccontextmanager
    async def recovery(self) -> AsyncIterator[None]:
        """Hold the turn lock for a repair or a replay, outside the queue bound and cancel latch.

        A repair rewrites the whole history, so the next prompt must wait for it,
        and it is exactly what has to run while a cancel is still draining.
        """
        async with self._turn_lock:
            yield

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Run one prompt: queue behind the running turn, never interleave with it.

        Raises :class:`SessionBusyError` when ``max_queued`` prompts already
        wait, and ``asyncio.CancelledError`` for a prompt that was queued when
        :meth:`cancel` ran, before it reaches the agent.

        Inside, this is the session whose turn runs (:func:`~sessionstore.in_session`):
        a stream first written during the turn, or by a task it starts, is stored
        as one of its subagents.
        """
        if self._queued >= self.max_queued:
            raise SessionBusyError(self.session_id, self.max_queued)
        waiting = self._turn_lock.locked()
        if waiting:
            self._queued += 1
        self._inflight += 1
        try:
            async with self._turn_lock:
                if waiting:
                    self._queued -= 1
                    waiting = False
                if self._cancelled:
                    raise asyncio.CancelledError
                with in_session(self.stream_id):
                    yield
        finally:
            if waiting:
                self._queued -= 1
            self._inflight -= 1
            self.last_active = self.clock()
            if self._inflight == 0:
                self._cancelled = False
                self.turn_task = None
            if self._on_turn_end is not None:
                await self._notify_turn_end(self._on_turn_end)

    async def _notify_turn_end(self, callback: Callable[[AgentSession], Awaitable[None]]) -> None:
        # Bookkeeping (the stored updated time) must never turn a finished turn
        # into a failed one, so a storage error here is logged, not raised.
        try:
            await callback(self)
        except Exception:
            logger.warning("could not record the end of a turn on session %s", self.session_id, exc_info=True)

    def record(self) -> SessionRecord:
        """This session's context as a storage keeps it."""
        return SessionRecord(
            session_id=self.session_id,
            cwd=self.cwd,
            additional_directories=list(self.additional_directories),
            mcp_servers=list(self.mcp_servers),
            meta=dict(self.meta),
            title=self.title,
        )


def default_storage() -> Storage:
    """The storage a :class:`SessionStore` gets when none is given: in memory.

    Looked up at construction time, so a test run can point every default
    store at another backend (the project's port of the reference suite does).
    """
    return MemoryStorage()


default_storage_factory: Callable[[], Storage] = default_storage

_CONTEXT_KEYS = ("cwd", "additional_directories", "mcp_servers", "meta", "title")


class SessionStore:
    """A bounded LRU registry of :class:`AgentSession` over one :class:`Storage`.

    With a storage that also keeps session records (:class:`SessionCatalog`, as
    :class:`~sessionstore.SQLiteStorage` does) each session's row is written
    when it is created or adopted, stamped when a turn ends, and marked released
    (retained) or deleted when the registry lets it go.
    """

    def __init__(
        self,
        *,
        max_sessions: int = _DEFAULTS.max_sessions,
        ttl: float | None = _DEFAULTS.ttl,
        storage: Storage | None = None,
        max_queued: int = _DEFAULTS.max_queued,
        max_concurrent_turns: int = _DEFAULTS.max_concurrent_turns,
        max_active_prompts: int = _DEFAULTS.max_active_prompts,
        retain_history: bool = _DEFAULTS.retain_history,
        clock: Clock = time.monotonic,
    ) -> None:
        config = SessionConfig(
            max_sessions=max_sessions,
            ttl=ttl,
            storage=storage,
            max_queued=max_queued,
            max_concurrent_turns=max_concurrent_turns,
            max_active_prompts=max_active_prompts,
            retain_history=retain_history,
        )
        self._configure(config, clock)

    @classmethod
    def from_config(cls, config: SessionConfig, *, clock: Clock | None = None) -> SessionStore:
        store = cls.__new__(cls)  # the config was checked when it was made
        store._configure(config, clock or time.monotonic)
        return store

    def _configure(self, config: SessionConfig, clock: Clock) -> None:
        # `is None`, not `or`: a supplied storage may be falsy while empty.
        self._storage: Storage = default_storage_factory() if config.storage is None else config.storage
        self._catalog: SessionCatalog | None = storage_catalog(self._storage)
        self._holding: Holding | None = self._storage if isinstance(self._storage, Holding) else None
        self._max_sessions = config.max_sessions
        self._ttl = config.ttl
        self._max_queued = config.max_queued
        self._max_active_prompts = config.max_active_prompts
        self._active_prompts = 0
        self._turn_slots = asyncio.Semaphore(config.max_concurrent_turns)
        self._retain = config.retain_history
        self._clock = clock
        # Insertion order is LRU order: get() moves a session to the end.
        self._sessions: OrderedDict[str, AgentSession] = OrderedDict()
        self._lock = asyncio.Lock()

    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def retains_history(self) -> bool:
        return self._retain

    @property
    def max_queued(self) -> int:
        return self._max_queued

    @property
    def active_prompts(self) -> int:
        """Prompts admitted on this connection, running or waiting."""
        return self._active_prompts

    def __len__(self) -> int:
        return len(self._sessions)

    # -- connection-wide bounds -------------------------------------------------

    @asynccontextmanager
    async def admit(self) -> AsyncIterator[None]:
        """Admit one prompt against ``max_active_prompts``, or raise :class:`ConnectionOverloadedError`.

        Wrap the whole prompt, outside the session's turn: a prompt parked in a
        session's queue still holds a request handler, which is the cost bounded.
        """
        if self._active_prompts >= self._max_active_prompts:
            raise ConnectionOverloadedError(self._max_active_prompts)
        self._active_prompts += 1
        try:
            yield
        finally:
            self._active_prompts -= 1

    @asynccontextmanager
    async def running_turn(self) -> AsyncIterator[None]:
        """Hold one of ``max_concurrent_turns`` slots; waits rather than refuses.

        Take it inside the session's turn, so a prompt queued on a busy session
        does not sit on a slot another session could use.
        """
        async with self._turn_slots:
            yield

    # -- sessions -----------------------------------------------------------------

    async def create(self, **context: Any) -> AgentSession:
        """Mint a session (fresh uuid4) with ``context`` and register it.

        Room is made first, so the new session can never be its own eviction
        victim. With a session catalog the row is written before the session is
        registered: a failed write leaves no half-made session behind.
        """
        async with self._lock:
            now = self._clock()
            await self._evict_expired(now)
            await self._make_room()
            session = self._build(uuid4(), now, context)
            if self._catalog is not None:
                await self._catalog.save_session(session.record())
            if self._holding is not None:
                await self._holding.hold(session.stream_id)
            self._sessions[session.session_id] = session
            return session

    async def get_or_adopt(self, stream_id: StreamId, **context: Any) -> tuple[AgentSession, bool]:
        """The live session for ``stream_id``, or one registered over its stored history.

        The ``session/load`` seam. Returns ``(session, adopted)``. Context given
        here seeds an adopted session only; what it leaves out comes from the
        stored record, when the storage keeps one. A live session keeps its own.
        """
        if not isinstance(stream_id, UUID):
            raise InvalidSessionIdError(f"a stream id must be a uuid.UUID, got {type(stream_id).__name__}")
        async with self._lock:
            now = self._clock()
            await self._evict_expired(now)
            live = self._sessions.get(stream_id.hex)
            if live is not None:
                self._touch(live, now)
                return live, False
            await self._make_room()
            if self._holding is not None:
                # First: another process that has the session live keeps it (SessionHeldError names it).
                await self._holding.hold(stream_id)
            try:
                stored = await self._catalog.load_session(stream_id) if self._catalog is not None else None
                if stored is not None:
                    for key in _CONTEXT_KEYS:
                        context.setdefault(key, getattr(stored, key))
                session = self._build(stream_id, now, context)
                if self._catalog is not None:
                    record = session.record()
                    if stored is not None:
                        record = replace(record, created_at=stored.created_at)
                    await self._catalog.save_session(record)
            except BaseException:
                # Not adopted (a context the row cannot store, say): a hold kept now would refuse the session to
                # every other process until this one ends, with nobody here having it live.
                if self._holding is not None:
                    await self._holding.let_go(stream_id)
                raise
            self._sessions[session.session_id] = session
            return session, True

    async def fork(self, session: AgentSession, *, at: int | None = None) -> AgentSession:
        """A new live session whose history is ``session``'s first ``at`` events (all of them when ``None``),
        shared in the storage rather than copied, with its client context; it records where it came from
        (:attr:`SessionRecord.forked_from`, ``forked_at``). The storage must fork
        (:class:`~sessionstore.SQLiteStorage`, :class:`~sessionstore.postgres.PostgresStorage`), else
        :class:`~sessionstore.StorageError`."""
        fork = getattr(self._storage, "fork", None)
        if fork is None:
            raise StorageError(f"{type(self._storage).__name__} cannot fork a session; use a durable storage")
        new_id = await fork(session.stream_id, at=at)
        forked, _ = await self.get_or_adopt(new_id)
        return forked

    async def get(self, session_id: str) -> AgentSession:
        """A live session, now the most recently used; :class:`UnknownSessionError` if none."""
        async with self._lock:
            now = self._clock()
            await self._evict_expired(now)
            session = self._sessions.get(session_id)
            if session is None:
                raise UnknownSessionError(session_id)
            self._touch(session, now)
            return session

    def stream(self, session: AgentSession) -> SessionStream:
        """The session's one stream, made on first use and kept for its lifetime."""
        if session.stream is None:
            session.stream = SessionStream(self._storage, session.stream_id)
        return session.stream

    async def set_title(self, session_id: str, title: str | None) -> None:
        """Name a live session; stored at once when the storage keeps records."""
        session = await self.get(session_id)
        session.title = title
        if self._catalog is not None:
            await self._catalog.set_title(session.stream_id, title)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> SessionPage:
        """Sessions newest first by creation, for ACP's ``session/list``, retained ones included; subagents
        are not listed (they belong to their session).

        From the storage's records when it keeps them; otherwise only the live
        sessions of this registry can be listed.
        """
        if self._catalog is not None:
            return await self._catalog.list_sessions(cwd=cwd, cursor=cursor, limit=limit)
        fallback = MemoryStorage()
        for session in self._sessions.values():
            await fallback.save_session(session.record())
        return await fallback.list_sessions(cwd=cwd, cursor=cursor, limit=limit)

    async def close(self, session_id: str) -> None:
        """End a conversation: stop its work, wait for it to unwind, delete its history.

        Deletes even with ``retain_history``: retention is for sessions that were
        let go, and a close says the conversation is over.
        """
        async with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            raise UnknownSessionError(session_id)
        await self._discard(session, drop=True)

    async def forget(self, session_id: str) -> None:
        """Unregister a session without touching its work or its history (undoes a refused adoption)."""
        async with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is not None and self._holding is not None:
            await self._holding.let_go(session.stream_id)

    async def aclose(self) -> None:
        """Stop and let go of every session: the shutdown path.

        A connection going away is not the client ending its conversations, so
        with ``retain_history`` their histories stay, marked released.
        """
        async with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for session in sessions:
            await self._discard(session, drop=not self._retain)

    # -- internals ------------------------------------------------------------------

    def _build(self, stream_id: UUID, now: float, context: dict[str, Any]) -> AgentSession:
        session = AgentSession(
            session_id=stream_id.hex,
            stream_id=stream_id,
            max_queued=self._max_queued,
            clock=self._clock,
            last_active=now,
            **context,
        )
        if self._catalog is not None:
            session._on_turn_end = self._stamp_turn_end
        return session

    async def _stamp_turn_end(self, session: AgentSession) -> None:
        if self._catalog is not None:
            await self._catalog.touch_session(session.stream_id)

    def _touch(self, session: AgentSession, now: float) -> None:
        session.last_active = now
        self._sessions.move_to_end(session.session_id)

    async def _discard(self, session: AgentSession, *, drop: bool) -> None:
        # Wait for the cancelled turn to unwind before deleting: otherwise its
        # last writes could land after the purge, for a session that is gone.
        await session.cancel()
        task = session.turn_task
        if task is not None and not task.done():
            with suppress(asyncio.CancelledError, Exception):
                await task
        if session.stream is not None:
            await session.stream.stop_background()
        await self._let_go(session, drop=drop)

    async def _let_go(self, session: AgentSession, *, drop: bool) -> None:
        if drop:
            await self._storage.drop_history(session.stream_id)  # a hold goes with the session
            return
        if self._catalog is not None:
            await self._catalog.touch_session(session.stream_id, released=True)
        if self._holding is not None:
            await self._holding.let_go(session.stream_id)

    async def _evict_expired(self, now: float) -> None:
        if self._ttl is None:
            return
        expired = [sid for sid, s in self._sessions.items() if s.is_idle and now - s.last_active > self._ttl]
        for sid in expired:
            await self._let_go(self._sessions.pop(sid), drop=not self._retain)

    async def _make_room(self) -> None:
        while len(self._sessions) >= self._max_sessions:
            victim = next((sid for sid, s in self._sessions.items() if s.is_idle), None)
            if victim is None:
                raise SessionLimitError(self._max_sessions)
            await self._let_go(self._sessions.pop(victim), drop=not self._retain)


def storage_catalog(storage: Storage) -> SessionCatalog | None:
    """The storage as a :class:`SessionCatalog` if it keeps session records, else ``None``."""
    return storage if isinstance(storage, SessionCatalog) else None
