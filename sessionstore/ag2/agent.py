"""``DurableACPAgent``: AG2's ``ACPAgent`` with its sessions kept in one SQLite file.

Where an application had ``ACPAgent(agent, ...)`` it writes
``DurableACPAgent(agent, "agent.db", ...)``. Everything ``ACPAgent`` does stays
as it is (prompts, cancel, tools, ``session/load`` with replay); what changes:

* AG2's history goes to ``SQLiteStorage(path, codec=AG2Codec())`` (or to the
  storage given instead of a path: any that keeps session records, such as a
  ``PostgresStorage`` with ``codec=AG2Codec()``), so a conversation outlives
  the process that had it;
* every session has a row (context, title, times, released flag) kept in step
  with AG2's own registry, so ``session/list`` can list sessions of earlier
  processes and ``sessionstore list``/``prune`` see them too;
* ``session/list``, ``session/resume``, ``session/close`` and ``session/fork`` are served on every
  connection, however it was made (resume, close and fork are routed by the SDK only
  with its unstable protocol on, which AG2's ``serve``, behind ``run_stdio`` and
  ``ag2.acp.testing.connect``, leaves off: the agent turns it on for its own
  connection), and a title can be set with the extension method
  ``_sessionstore/set_title``. ``session/delete`` has no route in the SDK
  (0.12); ``sessionstore delete ID`` deletes a session from the file;
* a prompt that fails is answered with a message saying why, credentials masked
  (:mod:`.failures`), and the prompt stays in the session.

AG2 1.2 has no public hook for any of that, so it leans on a few of AG2's
private names. All of them are touched in one place, the block marked
"AG2 internals" below, and :data:`TESTED_AG2_VERSIONS` says which AG2 releases
that block was checked against.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.metadata
import json
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

import acp
from acp import schema
from acp.agent.router import build_agent_router
from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
from acp.router import MessageRouter
from acp.stdio import stdio_streams
from ag2 import Agent
from ag2.acp import ACPAgent, SessionConfig
from ag2.acp.agent import _ConnectionScope  # AG2 internals: see the block below
from ag2.acp.executor import HUMAN_INPUT_ERROR_CATEGORY, AgentExecutor, heal_cancelled_turn, isolate_variables
from ag2.acp.guard import serve as ag2_serve
from ag2.acp.mappers import prompt_to_inputs
from ag2.acp.sessions import AgentSession, SessionLimitError, SessionStore, UnknownSessionError
from ag2.agent import _get_stream_turn_lock  # AG2 internals: see the block below
from ag2.events import BaseEvent, ModelRequest, TextInput
from ag2.exceptions import HumanInputError
from ag2.history import unanswered_tool_calls
from pydantic import BaseModel

from ..durable import DurableStorage
from ..errors import EventEncodeError, InvalidCursorError, NoSuchSessionError, SessionHeldError
from ..reads import usage_json
from ..registry import storage_catalog
from ..sqlite import SQLiteStorage
from ..storage import EventContext, Holding, SessionCatalog, SessionRecord, Storage, in_session, record_row
from .codec import AG2Codec
from .failures import describe_failure, known_secrets

if TYPE_CHECKING:
    from ag2.stream import MemoryStream

__all__ = ["SET_TITLE_METHOD", "TESTED_AG2_VERSIONS", "DurableACPAgent"]

logger = logging.getLogger(__name__)

Prompt = TypeVar("Prompt", bound=Callable[..., Awaitable[Any]])

TESTED_AG2_VERSIONS = ("1.2.1",)
"""AG2 releases the "AG2 internals" block below was read against and tested with.

``tests/ag2/test_acp_agent.py`` fails when the installed AG2 is not one of them:
a new release has to be checked (and added here) before it is trusted.
"""

SET_TITLE_METHOD = "_sessionstore/set_title"
"""The ACP extension request a client sends to name a session: ``{"sessionId": ..., "title": ...}``.

ACP has no request for it; ``title: null`` (or blank) clears the title, after
which the session is listed under its first prompt again.
"""

USAGE_META = "sessionstore/usage"
"""The key of a session's usage in the ``_meta`` of each ``session/list`` entry: its tokens by kind and their total
(absent when it spent nothing)."""
FORK_META = "sessionstore/fork"
"""The key of where a fork came from in the ``_meta`` of a ``session/list`` entry (ACP's session info has no field
for it): ``{"forked_from": <session id>, "forked_at": <position>}``, as ``sessionstore list --json`` names them
(absent for a session that is no fork)."""
DEFAULT_LIST_PAGE_SIZE = 50


def _listed_meta(record: SessionRecord) -> dict[str, Any] | None:
    """A ``session/list`` entry's ``_meta``: what the session spent, summed in SQL (revision 0010), and where a fork
    came from (revision 0012); None when there is neither."""
    meta: dict[str, Any] = {}
    if record.usage and any(record.usage):  # a listing gives every session its Tokens, zeros included
        meta[USAGE_META] = usage_json(record.usage)
    if record.forked_from is not None:
        meta[FORK_META] = {"forked_from": record.forked_from, "forked_at": record.forked_at}
    return meta or None


def _json_servers(servers: list[Any]) -> list[Any]:
    """MCP server declarations as plain JSON (AG2 keeps them as the SDK's pydantic models)."""
    return [s.model_dump(mode="json", by_alias=True) if isinstance(s, BaseModel) else s for s in servers]


def _record(session: AgentSession, *, stored: SessionRecord | None = None) -> SessionRecord:
    """The row for ``session``'s current context, live (not released).

    Title and times are carried over from ``stored``: loading or resuming a session is not activity in it,
    and ``updatedAt`` stays the end of its last turn.
    """
    now = datetime.now(UTC)
    return SessionRecord(
        session_id=session.session_id,
        cwd=session.cwd,
        additional_directories=list(session.additional_directories),
        mcp_servers=_json_servers(list(session.mcp_servers)),
        meta=dict(session.meta),
        title=stored.title if stored is not None else None,
        created_at=stored.created_at if stored is not None else now,
        updated_at=stored.updated_at if stored is not None else now,
        released=False,
    )


def _storable_context(
    cwd: str, additional_directories: list[str] | None, mcp_servers: list[Any] | None, meta: dict[str, Any]
) -> None:
    """:class:`~sessionstore.EventEncodeError` for a load's, resume's or fork's context the row cannot hold (text
    UTF-8 cannot encode, NaN), by the one rule for a row, before anything is written or held: a fork made, a hold
    taken or a live session's context changed for a request then refused would outlive the refusal."""
    record_row(
        SessionRecord(
            session_id="0" * 32,  # any valid id: only the context is asked about
            cwd=cwd,
            additional_directories=list(additional_directories or []),
            mcp_servers=_json_servers(list(mcp_servers or [])),
            meta=meta,
        )
    )


RESOURCE_NOT_FOUND = -32002  # ACP's code for an unknown session (acp.RequestError.resource_not_found)
INTERNAL_ERROR = -32603  # JSON-RPC's, which AG2 answers a failed turn with


def _not_found(session_id: str) -> acp.RequestError:
    # The same answer AG2 gives for an id it does not know.
    return acp.RequestError.resource_not_found(f"acp-session:{session_id}")


def _parse_id(session_id: object) -> UUID:
    if not isinstance(session_id, str):
        raise acp.RequestError.invalid_params({"reason": "sessionId must be a string"})
    try:
        return UUID(session_id)
    except ValueError:
        raise _not_found(session_id) from None


def _in_its_session(prompt: Prompt) -> Prompt:
    """Run a ``session/prompt`` handler inside its session (:func:`~sessionstore.in_session`).

    AG2 runs the turn in a task it creates inside the handler, and a background subagent in a task created
    inside that one; each inherits the session from the task that made it. So a subagent AG2 opens without
    handing it the turn's dependencies is still stored under this session, not beside it.
    """

    @functools.wraps(prompt)
    async def in_session_of(self: Any, session_id: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            stream_id = UUID(session_id)
        except (TypeError, ValueError, AttributeError):
            return await prompt(self, session_id, *args, **kwargs)  # AG2's own answer for a bad id
        with in_session(stream_id):
            return await prompt(self, session_id, *args, **kwargs)

    return cast(Prompt, in_session_of)


# -- AG2 internals -------------------------------------------------------------------------------------------------
# From here down to "end of AG2 internals", this module uses names AG2 keeps private. Read against ag2/acp/agent.py,
# sessions.py, guard.py and ag2/agent.py of the versions in TESTED_AG2_VERSIONS; the names are listed in
# AG2_INTERNALS / AG2_INTERNAL_SLOTS, which the tests check against the installed AG2.
#
# * ag2.acp.agent._ConnectionScope, the per-connection object ACPAgent.bind returns: subclassed to serve the session
#   methods AG2 leaves out (list, resume, close, set_title), to stamp turn ends and to advertise them
#   (_capabilities). Uses its _owner, _client, _sessions, _require_session_scope and _parse_session_id.
# * ag2.acp.sessions.SessionStore, AG2's registry (the executor needs its MemoryStream per session): subclassed so
#   the rows follow it. Uses _lock and _sessions (to pop a session on close), _discard (stops a session's work:
#   close and disconnect), _release (eviction and expiry), _retain.
# * ACPAgent: _session_config (the registry's config), _observe (the on_session hook), _scope; and the served
#   Agent's _agent_variables, which seed an adopted session as AG2's own load seeds it.
# * ACPAgent._executor, the AgentExecutor that runs each turn: replaced by one (built with the same options) whose
#   run_turn, inside the session's turn, tells the client why a turn failed and keeps the prompt (below).
# * ag2.agent._get_stream_turn_lock: the lock AG2's load holds while repairing, so a repair never runs under a
#   turn driving the same stream from another connection; resume holds it too.
# * acp's AgentSideConnection._conn._handler, the connection's router: the SDK routes session/resume and
#   session/close only on a connection made with its unstable protocol on, and ag2.acp.guard.serve (behind
#   ACPAgent.run_stdio, DurableACPAgent.serve and ag2.acp.testing.connect) makes it with it off. The scope's
#   on_connect, which the SDK calls once the router is built and before a message is read, puts in a router
#   built with it on (and the _meta guard for list/resume/close); guard.serve then wraps that in AG2's guard as
#   it wraps any. Where the router is not found there, resume and close are not advertised.

AG2_INTERNALS: dict[type, tuple[str, ...]] = {
    _ConnectionScope: (
        "_capabilities",
        "_require_session_scope",
        "_parse_session_id",
        "load_session",
        "prompt",
        "on_connect",
    ),
    SessionStore: ("_discard", "_release", "forget", "get_or_adopt", "create", "stream", "get"),
    ACPAgent: ("_observe", "bind", "sessions", "agent"),
    AgentExecutor: ("run_turn", "agent"),
}
"""The private (and overridden) names this module relies on, per class; the tests check they all exist."""
AG2_INTERNAL_SLOTS: dict[type, tuple[str, ...]] = {
    _ConnectionScope: ("_owner", "_client", "_sessions"),
    SessionStore: ("_lock", "_sessions", "_retain"),
    ACPAgent: ("_session_config", "_scope", "_executor"),
}
"""Instance attributes read or written here, as AG2 declares them in ``__slots__``."""


class _DurableSessions(SessionStore):
    """AG2's registry, with each session's row kept in step in the catalog.

    * created: row written before the id is handed out (a failed write unregisters the session);
    * adopted by load or resume: row written back with the request's context, ``released`` cleared, title and
      creation time kept;
    * forgotten (a refused new session or load): a row this registry made is deleted again, a row that was
      there before is put back as it was;
    * let go (close, eviction, expiry, the connection ending): with ``retain_history`` the row stays, marked
      released, its ``updated_at`` still the last activity; without, it is deleted with its events.

    Each session it has live it also holds (when the storage can: ``Holding``), from before anything is read or
    repaired until it is let go: another process on the file (a second editor window) is refused a session this
    one has live, with an error naming this process, and takes it over at once when this process ends.
    """

    __slots__ = ("_catalog", "_found", "_holding")

    def __init__(self, catalog: SessionCatalog, config: SessionConfig) -> None:
        super().__init__(
            max_sessions=config.max_sessions,
            ttl=config.ttl,
            storage=config.storage,
            max_queued=config.max_queued,
            max_concurrent_turns=config.max_concurrent_turns,
            max_active_prompts=config.max_active_prompts,
            retain_history=config.retain_history,
        )
        self._catalog = catalog
        self._holding: Holding | None = catalog if isinstance(catalog, Holding) else None
        # The row as it was before this registry adopted the session (None: there was none), kept until the
        # session is let go, so a refused load can put it back exactly.
        self._found: dict[str, SessionRecord | None] = {}

    @property
    def catalog(self) -> SessionCatalog:
        return self._catalog

    async def create(self, **context: Any) -> AgentSession:
        session = await super().create(**context)
        try:
            await self._catalog.save_session(_record(session))
            if self._holding is not None:
                await self._holding.hold(session.stream_id)
        except BaseException:
            await super().forget(session.session_id)
            raise
        self._found[session.session_id] = None
        return session

    async def get_or_adopt(self, stream_id: UUID, **context: Any) -> tuple[AgentSession, bool]:
        session, adopted = await super().get_or_adopt(stream_id, **context)
        if not adopted:
            return session, adopted
        if self._holding is not None:
            try:
                await self._holding.hold(stream_id)  # before anything is read or repaired
            except SessionHeldError as exc:
                await super().forget(session.session_id)
                raise acp.RequestError.invalid_request({"reason": str(exc)}) from exc
            except BaseException:
                await super().forget(session.session_id)
                raise
        try:
            stored = await self._catalog.load_session(stream_id)
            if stored is not None and not session.meta:
                # The request carried no _meta: the session keeps what it was created with, as a live one does.
                session.meta = dict(stored.meta)
            await self._catalog.save_session(_record(session, stored=stored))
        except BaseException:
            await super().forget(session.session_id)
            if self._holding is not None:  # not adopted: kept held, it would be refused to every other process
                await self._holding.let_go(stream_id)
            raise
        self._found[session.session_id] = stored
        return session, adopted

    async def save_context(self, session: AgentSession) -> None:
        """Write the session's current context (a live session's load or resume refreshes it)."""
        stored = await self._catalog.load_session(session.stream_id)
        await self._catalog.save_session(_record(session, stored=stored))

    async def forget(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        await super().forget(session_id)
        if session is None or session_id not in self._found:
            return
        found = self._found.pop(session_id)
        if found is not None:
            await self._catalog.save_session(found)
        elif not list(await self.storage.get_history(session.stream_id)):
            await self.storage.drop_history(session.stream_id)
            return
        if self._holding is not None:
            await self._holding.let_go(session.stream_id)

    async def let_go(self, session_id: str) -> None:
        """``session/close``: stop the session's work and let it go, retained or deleted per ``retain_history``.

        AG2's own ``close`` (kept as it is) always deletes. ACP's ``session/close`` only frees what the agent holds
        for the session, so whether its history outlives that is ``retain_history``'s call, as for a disconnect;
        ``sessionstore delete`` is the deliberate delete.
        """
        async with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is None:
            raise UnknownSessionError(session_id)
        await self._discard(session, drop=not self._retain)

    async def _discard(self, session: AgentSession, *, drop: bool) -> None:
        await super()._discard(session, drop=drop)
        await self._let_go(session, drop=drop)

    async def _release(self, session: AgentSession) -> None:
        await super()._release(session)
        await self._let_go(session, drop=not self._retain)

    async def _let_go(self, session: AgentSession, *, drop: bool) -> None:
        self._found.pop(session.session_id, None)
        if drop:
            return  # AG2 dropped the history, which deletes the row and its events
        # Bookkeeping: a failure is logged, so one session's row cannot keep the others from being let go.
        try:
            stored = await self._catalog.load_session(session.stream_id)
            if stored is not None and not stored.released:
                # Not touch_session: letting go is not activity, and updatedAt is what session/list and
                # sessionstore prune read as the last activity.
                await self._catalog.save_session(replace(stored, released=True))
            if self._holding is not None:
                await self._holding.let_go(session.stream_id)
        except Exception:
            logger.warning("could not let session %s go", session.session_id, exc_info=True)


class _DurableScope(_ConnectionScope):
    """One client connection: AG2's scope plus session/list, resume, close and set_title."""

    __slots__ = ("_routes_unstable",)

    def __init__(self, owner: DurableACPAgent, client: acp.Client | None) -> None:
        super().__init__(owner, client)
        self._sessions = _DurableSessions(owner._catalog, owner._session_config)
        self._routes_unstable = False

    def on_connect(self, conn: Any) -> None:
        """The SDK hands over the connection: route resume and close on it, whoever made it (see the block)."""
        super().on_connect(conn)
        self._routes_unstable = _route_unstable_methods(conn, self)
        _guard_receive(conn)

    @property
    def durable(self) -> _DurableSessions:
        return cast(_DurableSessions, self._sessions)

    def _capabilities(self) -> schema.AgentCapabilities:
        capabilities = super()._capabilities()
        # Only what this connection routes: resume and close need the router on_connect put in.
        routed = self._routes_unstable
        capabilities.session_capabilities = schema.SessionCapabilities(
            list=schema.SessionListCapabilities(),
            resume=schema.SessionResumeCapabilities() if routed else None,
            close=schema.SessionCloseCapabilities() if routed else None,
            fork=schema.SessionForkCapabilities() if routed else None,
            additional_directories=schema.SessionAdditionalDirectoriesCapabilities(),
        )
        return capabilities

    def _adopt_context(
        self, cwd: str, additional_directories: list[str] | None, mcp_servers: list[Any] | None, meta: dict[str, Any]
    ) -> dict[str, Any]:
        """What an adopted session is seeded with: the request's context, the agent's variables (as AG2's load)."""
        owner = cast(DurableACPAgent, self._owner)
        return {
            "cwd": cwd,
            "additional_directories": list(additional_directories or []),
            "mcp_servers": list(mcp_servers or []),
            "meta": meta,
            "variables": isolate_variables(owner.agent._agent_variables),
        }

    async def _adopt_stored(self, stream_id: UUID, context: dict[str, Any]) -> AgentSession | None:
        """Adopt a session from its row alone (it may have no events); None when it is live here, or has no row."""
        with contextlib.suppress(UnknownSessionError):
            await self._sessions.get(stream_id.hex)
            return None
        if await self.durable.catalog.load_session(stream_id) is None:
            return None
        try:
            session, adopted = await self._sessions.get_or_adopt(stream_id, **context)
        except SessionLimitError as exc:
            raise acp.RequestError.invalid_request({"reason": str(exc)}) from exc
        return session if adopted else None

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """AG2's load (replay, repair), for any stored session; the row follows the request's context."""
        self._require_session_scope()
        stream_id = self._parse_session_id(session_id)
        _storable_context(cwd, additional_directories, mcp_servers, dict(kwargs))
        try:
            await super().load_session(cwd, stream_id.hex, mcp_servers, additional_directories, **kwargs)
        except acp.RequestError as exc:
            # AG2 knows a session only by its events. One stored before its first prompt (its process was
            # killed, or it was let go unused) has a row and no events; it is listed, so it loads too.
            if exc.code != RESOURCE_NOT_FOUND:
                raise
            context = self._adopt_context(cwd, additional_directories, mcp_servers, dict(kwargs))
            early = await self._adopt_stored(stream_id, context)
            if early is None:
                raise
            try:
                await super().load_session(cwd, stream_id.hex, mcp_servers, additional_directories, **kwargs)
            except BaseException:
                await self._sessions.forget(early.session_id)
                raise
        # The replay went out; refreshing the row's context is bookkeeping, so a failure is logged, not raised.
        try:
            await self.durable.save_context(await self._sessions.get(stream_id.hex))
        except Exception:
            logger.warning("could not store the context of loaded session %s", stream_id.hex, exc_info=True)

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> schema.ResumeSessionResponse:
        """``session/load`` without the replay: the client already shows the conversation.

        A transcript cut short (the process died mid-tool) is repaired as load repairs it, so the next prompt
        sends the provider a valid conversation.
        """
        self._require_session_scope()
        stream_id = self._parse_session_id(session_id)
        meta = dict(kwargs)
        _storable_context(cwd, additional_directories, mcp_servers, meta)
        try:
            session = await self._sessions.get(stream_id.hex)
        except UnknownSessionError:
            context = self._adopt_context(cwd, additional_directories, mcp_servers, meta)
            adopted = None
            if list(await self._sessions.storage.get_history(stream_id)):
                try:
                    adopted, _ = await self._sessions.get_or_adopt(stream_id, **context)
                except SessionLimitError as exc:
                    raise acp.RequestError.invalid_request({"reason": str(exc)}) from exc
            else:
                adopted = await self._adopt_stored(stream_id, context)
            if adopted is None:
                raise _not_found(stream_id.hex) from None
            try:
                await cast(DurableACPAgent, self._owner)._observe(adopted, "loaded")
                await self._repair(adopted)
            except BaseException:
                await self._sessions.forget(adopted.session_id)
                raise
            return schema.ResumeSessionResponse()
        session.cwd = cwd
        session.additional_directories = list(additional_directories or [])
        session.mcp_servers = list(mcp_servers or [])
        if meta:
            session.meta = meta
        await self.durable.save_context(session)
        return schema.ResumeSessionResponse()

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> schema.ForkSessionResponse:
        """``session/fork``: a new session whose history is the stored one's so far, shared in the storage rather
        than copied (it records where it came from), adopted live on this connection with the request's context,
        as a resume adopts one (a transcript cut short is repaired); its id. The session forked, live here or
        elsewhere, is not written."""
        self._require_session_scope()
        stream_id = self._parse_session_id(session_id)
        _storable_context(cwd, additional_directories, mcp_servers, dict(kwargs))
        fork = getattr(self._sessions.storage, "fork", None)
        if fork is None:
            raise acp.RequestError.method_not_found("session/fork (this storage cannot fork)")
        try:
            new_id = await fork(stream_id)
        except NoSuchSessionError:
            raise _not_found(stream_id.hex) from None
        context = self._adopt_context(cwd, additional_directories, mcp_servers, dict(kwargs))
        try:
            forked, _ = await self._sessions.get_or_adopt(new_id, **context)
        except SessionLimitError as exc:
            raise acp.RequestError.invalid_request({"reason": str(exc)}) from exc
        try:
            await cast(DurableACPAgent, self._owner)._observe(forked, "loaded")
            await self._repair(forked)
        except BaseException:
            await self._sessions.forget(forked.session_id)
            raise
        return schema.ForkSessionResponse(session_id=new_id.hex)

    async def _repair(self, session: AgentSession) -> None:
        stream: MemoryStream = self._sessions.stream(session)
        async with session.recovery():
            turn_lock = _get_stream_turn_lock(stream)
            if turn_lock.locked():
                raise acp.RequestError.invalid_request(
                    {"reason": f"ACP session {session.session_id!r} is in use by another connection."}
                )
            async with turn_lock:
                if unanswered_tool_calls(list(await stream.history.get_events())):
                    closed = await heal_cancelled_turn(stream)
                    logger.debug("closed %d unanswered tool call(s) resuming %s", closed, session.session_id)

    async def close_session(self, session_id: str, **kwargs: Any) -> schema.CloseSessionResponse:
        """Stop the session's work and let it go: kept, marked released, with ``retain_history``; else deleted."""
        self._require_session_scope()
        stream_id = self._parse_session_id(session_id)
        try:
            await self.durable.let_go(stream_id.hex)
        except UnknownSessionError:
            raise _not_found(stream_id.hex) from None
        return schema.CloseSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> schema.ListSessionsResponse:
        """Stored sessions newest first by creation (a walk sees each once), ``list_page_size`` a page."""
        self._require_session_scope()
        owner = cast(DurableACPAgent, self._owner)
        try:
            page = await self.durable.catalog.list_sessions(cwd=cwd, cursor=cursor, limit=owner.list_page_size)
        except InvalidCursorError as exc:  # a cursor this agent did not issue
            raise acp.RequestError.invalid_params({"reason": str(exc)}) from exc
        return schema.ListSessionsResponse(
            sessions=[
                schema.SessionInfo(
                    session_id=record.session_id,
                    cwd=record.cwd,
                    additional_directories=list(record.additional_directories) or None,
                    title=record.title,
                    updated_at=record.updated_at.isoformat(),
                    field_meta=_listed_meta(record),
                )
                for record in page.sessions
            ],
            next_cursor=page.next_cursor,
        )

    @_in_its_session
    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> schema.PromptResponse:
        """AG2's turn; when it ends (done, cancelled or failed), ``updatedAt`` is stamped and sent to the client.

        A prompt refused before any turn ran (unknown session, queue full) is no activity and stamps nothing;
        neither does a turn abandoned because the connection is closing (letting the session go records it).
        """
        try:
            response = await super().prompt(session_id, prompt, **kwargs)
        except acp.RequestError as exc:
            if exc.code == INTERNAL_ERROR:  # the turn ran and failed
                await self._turn_ended(session_id)
            raise
        await self._turn_ended(session_id)
        return response

    async def _turn_ended(self, session_id: str) -> None:
        # Bookkeeping must never turn a finished turn into a failed one: errors are logged, not raised.
        try:
            session = await self._sessions.get(session_id)
        except UnknownSessionError:
            return
        try:
            await self.durable.catalog.touch_session(session.stream_id)
            stored = await self.durable.catalog.load_session(session.stream_id)
        except Exception:
            logger.warning("could not record the end of a turn on session %s", session_id, exc_info=True)
            return
        if stored is not None:
            await self._notify(session_id, updated_at=stored.updated_at.isoformat())

    async def _notify(self, session_id: str, **fields: Any) -> None:
        """Send a ``session_info_update`` (title, updatedAt); a client that cannot take it is no error."""
        client = self._client
        if client is None:
            return
        update = schema.SessionInfoUpdate(session_update="session_info_update", **fields)
        try:
            await client.session_update(session_id=session_id, update=update)
        except Exception:
            logger.debug("could not send session_info_update for %s", session_id, exc_info=True)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if f"_{method}" != SET_TITLE_METHOD:
            raise acp.RequestError.method_not_found(f"_{method}")
        self._require_session_scope()
        return await self._set_title(params)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def _set_title(self, params: dict[str, Any]) -> dict[str, Any]:
        stream_id = _parse_id(params.get("sessionId"))
        title = params.get("title")
        if title is not None and not isinstance(title, str):
            raise acp.RequestError.invalid_params({"reason": "title must be a string or null"})
        title = (title or "").strip() or None
        catalog = self.durable.catalog
        if await catalog.load_session(stream_id) is None:
            raise _not_found(stream_id.hex)
        try:
            await catalog.set_title(stream_id, title)
        except ValueError as exc:  # text SQLite cannot store (EventEncodeError)
            raise acp.RequestError.invalid_params({"reason": str(exc)}) from exc
        with contextlib.suppress(UnknownSessionError):
            await self._sessions.get(stream_id.hex)
            await self._notify(stream_id.hex, title=title)
        return {"sessionId": stream_id.hex, "title": title}


class _DurableExecutor(AgentExecutor):
    """AG2's executor; a turn that fails is answered with why (no secrets), and its prompt stays in the session.

    AG2 answers a failed turn with a bare "Internal error", and a turn that failed before its prompt reached the
    stream (the model could not even be set up: no API key) leaves no trace of the prompt. Here, still inside
    the session's turn (so the next prompt cannot start in between):

    * the prompt is stored if the turn did not store it, so a load or a later process shows what was asked;
      the next model call then gets it before the new prompt, two user messages in a row, as plain AG2 leaves
      them after a provider error (it stores the prompt before calling the provider);
    * tool calls left unanswered are closed, as AG2 does after a failure;
    * the client gets ``Internal error``'s code with a message saying why, redacted (:mod:`.failures`).
    """

    __slots__ = ()

    async def run_turn(
        self,
        *,
        session: AgentSession,
        store: SessionStore,
        client: acp.Client,
        blocks: Any,
        meta: dict[str, Any] | None = None,
    ) -> str:
        stream = store.stream(session)
        stored: list[ModelRequest] = []

        async def watch(event: BaseEvent) -> None:
            # Subscribed after the stream's storage, so called only once the event is stored.
            if isinstance(event, ModelRequest):
                stored.append(event)

        watching = stream.subscribe(watch)
        try:
            return await super().run_turn(session=session, store=store, client=client, blocks=blocks, meta=meta)
        except Exception as exc:
            kept = bool(stored) or await _keep_prompt(store.storage, stream.id, blocks)
            try:
                await heal_cancelled_turn(stream)
            except Exception:
                logger.warning("could not repair the history of session %s", session.session_id, exc_info=True)
            message, data = describe_failure(exc, secrets=known_secrets(self.agent.config), prompt_kept=kept)
            if isinstance(exc, HumanInputError):
                data["category"] = HUMAN_INPUT_ERROR_CATEGORY  # as AG2 marks it
            logger.warning("session %s: %s", session.session_id, message)
            logger.debug("the failed turn's exception (may quote secrets)", exc_info=exc)
            raise acp.RequestError(INTERNAL_ERROR, message, data) from exc
        finally:
            stream.unsubscribe(watching)


def _run_turns_durably(server: ACPAgent, agent: Agent, options: dict[str, Any]) -> None:
    """Replace the executor ACPAgent built with a durable one, built from the same options as AG2 builds it."""
    server._executor = _DurableExecutor(
        agent, stream_thoughts=options.get("stream_thoughts", False), hitl_hook=options.get("hitl_hook")
    )


async def _keep_prompt(storage: Any, stream_id: UUID, blocks: Any) -> bool:
    """Store a failed turn's prompt as the turn would have (a failure to is logged: the turn failed already)."""
    request = ModelRequest(prompt_to_inputs(blocks) or [TextInput("")])
    try:
        await storage.save_event(request, EventContext.for_stream(stream_id))
    except Exception:
        logger.warning("could not store the prompt of a failed turn on %s", stream_id.hex, exc_info=True)
        return False
    return True


_SESSION_REQUESTS: dict[str, type[BaseModel]] = {
    "session/list": schema.ListSessionsRequest,
    "session/resume": schema.ResumeSessionRequest,
    "session/close": schema.CloseSessionRequest,
    "session/fork": schema.ForkSessionRequest,
}
"""Requests AG2's _meta guard does not know (it guards what ACPAgent serves); guarded the same way here."""


def _reserved(model: type[BaseModel]) -> frozenset[str]:
    names = {name for name in model.model_fields if name != "field_meta"}
    names.update(f.alias for name, f in model.model_fields.items() if f.alias and name != "field_meta")
    return frozenset(names)


_RESERVED = {method: _reserved(model) for method, model in _SESSION_REQUESTS.items()}


def _guard_more(handler: Any) -> Any:
    """Refuse a request whose ``_meta`` would overwrite one of its own fields (the SDK merges ``_meta`` in), and
    answer a value of the request the storage refuses as invalid params, with why."""

    async def guarded(method: str, params: Any = None, is_notification: bool = False) -> Any:
        reserved = _RESERVED.get(method)
        meta = params.get("_meta") if isinstance(params, dict) else None
        if reserved and isinstance(meta, dict) and reserved.intersection(meta):
            listed = ", ".join(sorted(reserved.intersection(meta)))
            raise acp.RequestError.invalid_params({"reason": f"_meta may not contain the request field(s): {listed}"})
        try:
            return await handler(method, params, is_notification)
        except EventEncodeError as exc:
            # Only the request's own values reach the storage outside a turn (cwd, directories, MCP servers,
            # _meta: text UTF-8 cannot hold, NaN); a turn's failures are answered by its executor. The SDK would
            # answer "Internal error".
            raise acp.RequestError.invalid_params({"reason": str(exc)}) from exc

    return guarded


def _route_unstable_methods(conn: Any, scope: _DurableScope) -> bool:
    """Give ``conn`` a router for ``scope`` with the SDK's unstable protocol on; False if its router is not there.

    Done in ``on_connect``, before the connection reads anything, so every request meets the new router; whoever
    made the connection wraps it afterwards as they would have wrapped the first (AG2's serve: its _meta guard).
    """
    inner: Any = getattr(conn, "_conn", None)
    if not isinstance(getattr(inner, "_handler", None), MessageRouter):
        logger.warning("this ACP connection's router is not where it was; session/resume and close are not served")
        return False
    inner._handler = _guard_more(build_agent_router(cast(Any, scope), use_unstable_protocol=True))
    return True


def _guard_receive(conn: Any) -> None:
    """Let no line a client sends end the agent (and every live turn with it).

    The SDK's receive loop (acp ``Connection._receive_loop`` over ``NdjsonTransport.receive``) takes a JSON ``null``
    for the end of input, and raises out of the loop, ending the connection, on a message that is not an object (a
    batch, a number) or whose ``id`` or ``error`` has the wrong type. Its transport's ``receive`` is replaced here,
    over the same framing (``_read_line``), by one that hands the loop only well-formed messages: a line that is not
    JSON is answered -32700, a value that is not a JSON-RPC message -32600 (``id`` null, as JSON-RPC asks), a
    malformed response is logged and dropped. Left as it was if the transport is not where SDK 0.12 keeps it.
    """
    transport: Any = getattr(getattr(conn, "_conn", None), "_transport", None)
    read_line = getattr(transport, "_read_line", None)
    if read_line is None or not callable(getattr(transport, "send", None)):
        logger.warning("this ACP connection's transport is not where it was; malformed lines are left to the SDK")
        return

    async def refuse(code: int, message: str, reason: str) -> None:
        logger.warning("ignored a line from the client: %s", reason)
        error = {"code": code, "message": message, "data": {"reason": reason}}
        await transport.send({"jsonrpc": "2.0", "id": None, "error": error})

    async def receive() -> dict[str, Any] | None:
        while True:
            raw = await read_line()
            if not raw:
                return None  # the end of input (only this: a null line is a message, answered below)
            line = raw.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                await refuse(-32700, "Parse error", f"not JSON ({type(exc).__name__}), {len(line)} bytes")
                continue
            problem = _malformed(message)
            if problem is None:
                return cast(dict[str, Any], message)
            if isinstance(message, dict) and "method" not in message and "id" in message:
                logger.warning("ignored a malformed response from the client: %s", problem)  # nothing to answer
                continue
            await refuse(-32600, "Invalid Request", problem)

    transport.receive = receive


def _malformed(message: object) -> str | None:
    """Why ``message`` is not a JSON-RPC message the SDK can take, or None."""
    if isinstance(message, list):
        return "a batch (JSON array): batches are not served, send one message a line"
    if not isinstance(message, dict):
        return f"a JSON {type(message).__name__ if message is not None else 'null'}, not a JSON-RPC message"
    request_id = message.get("id")
    if isinstance(request_id, bool) or not (request_id is None or isinstance(request_id, (str, int, float))):
        return "id must be a string, a number or null"
    if "method" in message and not isinstance(message["method"], str):
        return "method must be a string"
    if "method" not in message and not (message.get("error") is None or isinstance(message["error"], dict)):
        return "a response's error must be an object"
    return None


# -- end of AG2 internals ------------------------------------------------------------------------------------------


def installed_ag2_version() -> str:
    return importlib.metadata.version("ag2")


class DurableACPAgent(ACPAgent):
    """``ACPAgent`` whose sessions are durable, listable and resumable, in one SQLite file.

    ``DurableACPAgent(agent, "agent.db", retain_history=True, ...)`` takes every other argument ``ACPAgent``
    takes. ``storage`` is a path (opened as ``SQLiteStorage(path, codec=AG2Codec())``, closed when serving
    ends) or a ready storage that keeps session records (the caller opens and closes it).

    ``retain_history`` (default ``True``: this is the durable agent) decides what happens to a session the
    agent lets go of, on ``session/close``, on eviction or expiry, or when the client disconnects: kept and
    marked released (``sessionstore prune`` deletes released sessions once old enough), or deleted. A process
    that dies keeps everything written so far either way. A ``sessions=SessionConfig(...)`` tunes the registry's
    bounds as for ``ACPAgent``; its ``storage`` and ``retain_history`` come from the arguments here.

    ``list_page_size`` is how many sessions one ``session/list`` page holds (ACP has no limit parameter).
    """

    __slots__ = ("_catalog", "_owns_storage", "_storage", "list_page_size")

    def __init__(
        self,
        agent: Agent,
        storage: str | os.PathLike[str] | Storage,
        *,
        retain_history: bool = True,
        sessions: bool | SessionConfig = True,
        list_page_size: int = DEFAULT_LIST_PAGE_SIZE,
        **acp_agent_options: Any,
    ) -> None:
        if not isinstance(list_page_size, int) or list_page_size < 1:
            raise ValueError(f"list_page_size must be a positive integer, got {list_page_size!r}")
        config = sessions if isinstance(sessions, SessionConfig) else None
        if config is not None and config.storage is not None:
            raise ValueError("pass the storage as DurableACPAgent's second argument, not in SessionConfig(storage=)")
        if config is not None and config.retain_history and not retain_history:
            raise ValueError("retain_history=False contradicts SessionConfig(retain_history=True)")
        if isinstance(storage, (str, os.PathLike)):
            store: Storage = SQLiteStorage(storage, codec=AG2Codec())
            owns = True
        else:
            store, owns = storage, False
            codec = getattr(store, "codec", None)
            if isinstance(store, DurableStorage) and not isinstance(codec, AG2Codec):
                # Either database's storage: the plain JSON codec refuses AG2's events at the first prompt.
                raise ValueError(f"a {type(store).__name__} for AG2 events needs codec=AG2Codec()")
        catalog = storage_catalog(store) if isinstance(store, Storage) else None
        if catalog is None:
            raise TypeError(f"{storage!r} is not a storage that keeps session records (Storage and SessionCatalog)")
        full = replace(config or SessionConfig(), storage=cast(Any, store), retain_history=retain_history)
        super().__init__(agent, sessions=full, **acp_agent_options)
        _run_turns_durably(self, agent, acp_agent_options)
        self._storage = store
        self._catalog = catalog
        self._owns_storage = owns
        self.list_page_size = list_page_size
        version = installed_ag2_version()
        if version not in TESTED_AG2_VERSIONS:
            logger.warning(
                "sessionstore's DurableACPAgent was tested with AG2 %s, not %s; it relies on AG2 internals",
                ", ".join(TESTED_AG2_VERSIONS),
                version,
            )

    @property
    def storage(self) -> Storage:
        return self._storage

    def bind(self, client: acp.Client | None) -> _DurableScope:
        """A fresh per-connection scope (the SDK calls this once per connection), with the durable registry."""
        scope = _DurableScope(self, client)
        self._scope = scope
        return scope

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one client over the given streams until it disconnects.

        The file is opened first, so a bad path fails before the handshake, with its own message.
        """
        opener = getattr(self._storage, "open", None)
        if opener is not None:
            await opener()
        await ag2_serve(self.bind, reader, writer)

    async def run_stdio(self, *, buffer_limit_bytes: int | None = None) -> None:
        """Serve over stdin/stdout until the client disconnects or the process gets SIGTERM.

        SIGTERM (how editors stop agents) ends serving the same way a disconnect does, so the live sessions
        are let go properly (released, or deleted without ``retain_history``) before the process exits.
        """
        limit = DEFAULT_STDIO_BUFFER_LIMIT_BYTES if buffer_limit_bytes is None else buffer_limit_bytes
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        terminated = False

        def terminate() -> None:
            nonlocal terminated
            terminated = True
            if task is not None:
                task.cancel()

        handled = False
        if task is not None and hasattr(signal, "SIGTERM"):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal.SIGTERM, terminate)
                handled = True
        try:
            reader, writer = await stdio_streams(limit=limit)
            await self.serve(reader, writer)
        except asyncio.CancelledError:
            if not terminated or task is None:
                raise
            task.uncancel()
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGTERM)
            await self.aclose()

    async def __aenter__(self) -> DurableACPAgent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the storage if this agent opened it from a path (a storage passed in is the caller's).

        ``run_stdio`` does this when it returns; after ``serve`` (which may be called for several connections)
        it is the caller's to do, or ``async with DurableACPAgent(...) as server:``.
        """
        if self._owns_storage:
            closer = getattr(self._storage, "aclose", None)
            if closer is not None:
                await closer()
