"""Subagents belong to their session (issue 19), on every storage: MemoryStorage, a SQLite file, PostgreSQL.

A stream first written from inside a session's turn (or from a task the turn started) is stored linked to that
session; a context carrying AG2's ``dependencies`` names its direct parent however deep; listing shows sessions
of their own only; deleting or closing a session takes its subagents with it; a subagent of a session that is
gone writes nothing. AG2's own subagent tools are in ``tests/ag2/test_ag2_subagents.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from databases import DATABASES, Database

from sessionstore import (
    EventContext,
    MemoryStorage,
    ModelMessage,
    ParentSessionMissingError,
    SessionRecord,
    SessionStore,
    UserMessage,
    in_session,
)
from sessionstore.storage import CURRENT_SESSION, SESSION_DEPENDENCY


@pytest.fixture(params=("memory", *DATABASES))
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param == "memory":
        yield MemoryStorage()
        return
    # On PostgreSQL, two connections for appends: a burst of writes goes the batched way (APPEND_MANY) too.
    options = {"pool_size": 2} if request.param == "postgres" else {}
    async with Database.of(request.param, request, tmp_path).storage(**options) as opened:
        yield opened


@dataclass
class AG2LikeContext:
    """What AG2's ``Context`` offers a storage beyond ``stream.id``: its ``dependencies`` dict, which ``run_task``
    copies into every subagent's context (``parent_context.dependencies.copy()``)."""

    stream: Any
    dependencies: dict[Any, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, stream_id: UUID, copied_from: AG2LikeContext | None = None) -> AG2LikeContext:
        dependencies = dict(copied_from.dependencies) if copied_from is not None else {}
        return cls(EventContext.for_stream(stream_id).stream, dependencies)


async def say(storage: Any, stream_id: UUID, text: str, context: Any = None) -> None:
    await storage.save_event(UserMessage(text), context or EventContext.for_stream(stream_id))


async def parent_of(storage: Any, stream_id: UUID) -> str | None:
    record = await storage.load_session(stream_id)
    assert record is not None, f"{stream_id.hex} has no row"
    return record.parent_id


async def top_level(storage: Any) -> list[str]:
    return [record.session_id for record in (await storage.list_sessions()).sessions]


async def test_a_stream_first_written_in_a_turn_is_a_subagent_of_that_session(storage: Any) -> None:
    session, child, other, lone = uuid4(), uuid4(), uuid4(), uuid4()
    with in_session(session):
        await say(storage, session, "the session's own prompt")  # the session itself: no parent
        await say(storage, child, "a subagent's objective")
    assert await parent_of(storage, session) is None
    assert await parent_of(storage, child) == session.hex

    with in_session(other):  # a stream that has a row keeps its place, whoever writes to it next
        await say(storage, other, "another session")
        await say(storage, child, "the subagent again, written from another session's turn")
    assert await parent_of(storage, child) == session.hex
    await say(storage, lone, "written outside any turn")
    assert await parent_of(storage, lone) is None
    assert CURRENT_SESSION.get() is None  # the turn's session is set for the turn only

    assert await top_level(storage) == [lone.hex, other.hex, session.hex]
    assert [e.content for e in await storage.get_history(child)] == [
        "a subagent's objective",
        "the subagent again, written from another session's turn",
    ]


async def test_a_subagent_of_a_subagent_names_its_direct_parent(storage: Any) -> None:
    """The turn's session stays the top one all along; the dependencies AG2 copies name the direct parent."""
    session, worker, checker, second = uuid4(), uuid4(), uuid4(), uuid4()
    with in_session(session):
        context = AG2LikeContext.of(session)
        await say(storage, session, "plan", context)
        assert context.dependencies[SESSION_DEPENDENCY] == session  # marked for the contexts copied from it

        worker_context = AG2LikeContext.of(worker, copied_from=context)  # run_task, one level down
        await say(storage, worker, "research", worker_context)
        checker_context = AG2LikeContext.of(checker, copied_from=worker_context)  # and two
        await say(storage, checker, "check the research", checker_context)
        # A second delegation of the session's, after the first returned: the session's again, not the worker's.
        await say(storage, second, "another task", AG2LikeContext.of(second, copied_from=context))

    assert await parent_of(storage, worker) == session.hex
    assert await parent_of(storage, checker) == worker.hex
    assert await parent_of(storage, second) == session.hex
    assert await top_level(storage) == [session.hex]


async def test_a_task_started_in_a_turn_writes_its_subagent_under_the_session_after_the_turn(storage: Any) -> None:
    """A background subagent is an asyncio task the turn created: it inherits the session, and keeps it."""
    session, background = uuid4(), uuid4()
    go = asyncio.Event()

    async def later() -> None:
        await go.wait()
        await say(storage, background, "finished in the background")

    with in_session(session):
        await say(storage, session, "start something long")
        task = asyncio.create_task(later())
    assert CURRENT_SESSION.get() is None  # the turn is over here
    go.set()
    await task
    assert await parent_of(storage, background) == session.hex
    assert await top_level(storage) == [session.hex]


async def test_set_history_of_a_new_stream_in_a_turn_makes_it_a_subagent(storage: Any) -> None:
    session, seeded = uuid4(), uuid4()
    await say(storage, session, "hello")
    with in_session(session):
        await storage.set_history(seeded, [UserMessage("seeded"), ModelMessage("from a trajectory")])
    assert await parent_of(storage, seeded) == session.hex
    assert len(list(await storage.get_history(seeded))) == 2


async def test_dropping_a_session_drops_its_subagents_theirs_and_all_their_events(storage: Any) -> None:
    session, worker, checker, sibling, kept = uuid4(), uuid4(), uuid4(), uuid4(), uuid4()
    await say(storage, kept, "another conversation")
    with in_session(session):
        context = AG2LikeContext.of(session)
        await say(storage, session, "plan", context)
        worker_context = AG2LikeContext.of(worker, copied_from=context)
        await say(storage, worker, "research", worker_context)
        await say(storage, checker, "check", AG2LikeContext.of(checker, copied_from=worker_context))
        await say(storage, sibling, "other task", AG2LikeContext.of(sibling, copied_from=context))

    await storage.drop_history(worker)  # a subagent alone: its own subagent goes with it, its session stays
    assert await storage.load_session(worker) is None and await storage.load_session(checker) is None
    assert list(await storage.get_history(checker)) == []
    assert await parent_of(storage, sibling) == session.hex

    await storage.drop_history(session)
    for gone in (session, sibling):
        assert await storage.load_session(gone) is None
        assert list(await storage.get_history(gone)) == []
    assert await top_level(storage) == [kept.hex]
    assert [e.content for e in await storage.get_history(kept)] == ["another conversation"]


async def test_a_subagent_of_a_deleted_session_writes_nothing(storage: Any) -> None:
    """Left to write on, it would come back as a conversation of its own; refused instead, nothing written."""
    session, late, seeded = uuid4(), uuid4(), uuid4()
    await say(storage, session, "hello")
    await storage.drop_history(session)
    with in_session(session):
        with pytest.raises(ParentSessionMissingError, match=f"opened from session {session.hex}"):
            await say(storage, late, "a background subagent still running")
        with pytest.raises(ParentSessionMissingError):
            await storage.set_history(seeded, [UserMessage("seeded")])
    for stream in (late, seeded):
        assert await storage.load_session(stream) is None
        assert list(await storage.get_history(stream)) == []
    assert (await storage.list_sessions()).sessions == []


async def test_many_subagents_at_once_each_under_its_session(storage: Any) -> None:
    """Written together (on PostgreSQL, some in one batched statement): each row under its own parent, and one
    whose parent is gone fails alone."""
    sessions = [uuid4() for _ in range(3)]
    for session in sessions:
        await say(storage, session, "hello")
    gone = uuid4()
    await say(storage, gone, "soon deleted")
    await storage.drop_history(gone)
    children = {uuid4(): sessions[n % 3] for n in range(24)}
    orphan = uuid4()

    async def write(child: UUID, session: UUID) -> None:
        with in_session(session):
            await say(storage, child, f"task for {session.hex}")

    outcomes = await asyncio.gather(
        *(write(child, session) for child, session in children.items()), write(orphan, gone), return_exceptions=True
    )
    assert outcomes[:-1] == [None] * len(children)
    assert isinstance(outcomes[-1], ParentSessionMissingError)
    for child, session in children.items():
        assert await parent_of(storage, child) == session.hex
    assert await storage.load_session(orphan) is None
    assert sorted(await top_level(storage)) == sorted(s.hex for s in sessions)


async def test_listing_pages_through_sessions_of_their_own_only(storage: Any) -> None:
    sessions = []
    for n in range(5):
        session = uuid4()
        sessions.append(session)
        with in_session(session):
            await say(storage, session, f"session {n}")
            await say(storage, uuid4(), f"subagent of session {n}")  # newer than its session
    walked: list[str] = []
    cursor = None
    while True:
        page = await storage.list_sessions(limit=2, cursor=cursor)
        walked += [record.session_id for record in page.sessions]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert walked == [s.hex for s in reversed(sessions)]
    assert all(record.parent_id is None for record in (await storage.list_sessions()).sessions)


async def test_a_saved_record_neither_sets_nor_changes_a_parent(storage: Any) -> None:
    session, child, made = uuid4(), uuid4(), uuid4()
    with in_session(session):
        await say(storage, session, "hello")
        await say(storage, child, "task")
    await storage.save_session(SessionRecord(session_id=child.hex, cwd="/elsewhere", title="renamed"))
    assert await parent_of(storage, child) == session.hex
    await storage.save_session(SessionRecord(session_id=made.hex, parent_id=session.hex))
    assert await parent_of(storage, made) is None  # a client's session: its own


async def test_the_registry_runs_each_turn_in_its_session_and_close_takes_the_subagents(storage: Any) -> None:
    store = SessionStore(storage=storage, retain_history=True)
    session = await store.create(cwd="/w")
    kept = await store.create(cwd="/w")
    subagent = uuid4()
    async with session.turn():
        await store.stream(session).send(UserMessage("delegate this"))
        await say(storage, subagent, "delegated")  # a stream AG2 would open on the session's storage
    async with kept.turn():
        await store.stream(kept).send(UserMessage("no subagents here"))
    assert await parent_of(storage, subagent) == session.session_id
    assert [r.session_id for r in (await store.list_sessions()).sessions] == [kept.session_id, session.session_id]

    await store.close(session.session_id)  # the conversation is over: its subagent goes with it
    assert await storage.load_session(subagent) is None
    await store.aclose()  # retained: kept stays, released
    assert await top_level(storage) == [kept.session_id]
