"""Registry behaviour beyond the reference suite: connection bounds and session records."""

from __future__ import annotations

import asyncio
from uuid import uuid4

import pytest

from sessionstore import (
    ConnectionOverloadedError,
    InvalidSessionIdError,
    MemoryStorage,
    ModelMessage,
    SessionConfig,
    SessionStore,
    UserMessage,
)


async def test_admit_refuses_past_max_active_prompts_and_frees_on_exit() -> None:
    store = SessionStore(max_active_prompts=2, max_concurrent_turns=1)
    async with store.admit(), store.admit():
        assert store.active_prompts == 2
        with pytest.raises(ConnectionOverloadedError):
            async with store.admit():
                pass  # pragma: no cover
    assert store.active_prompts == 0
    async with store.admit():
        assert store.active_prompts == 1


async def test_an_admitted_prompt_that_fails_gives_its_slot_back() -> None:
    store = SessionStore(max_active_prompts=1, max_concurrent_turns=1)
    with pytest.raises(RuntimeError):
        async with store.admit():
            raise RuntimeError("agent crashed")
    async with store.admit():
        assert store.active_prompts == 1


async def test_running_turn_caps_concurrency_across_sessions() -> None:
    store = SessionStore(max_concurrent_turns=2)
    sessions = [await store.create() for _ in range(5)]
    running = 0
    peak = 0

    async def prompt(session: object) -> None:
        nonlocal running, peak
        async with session.turn(), store.running_turn():  # type: ignore[attr-defined]
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1

    await asyncio.gather(*(prompt(s) for s in sessions))
    assert peak == 2


def test_active_prompts_must_leave_room_for_a_turn() -> None:
    with pytest.raises(ValueError, match="max_active_prompts"):
        SessionStore(max_active_prompts=1, max_concurrent_turns=2)
    with pytest.raises(ValueError):
        SessionStore(max_concurrent_turns=0)


async def test_adopt_rejects_a_stream_id_that_is_not_a_uuid() -> None:
    store = SessionStore()
    with pytest.raises(InvalidSessionIdError):
        await store.get_or_adopt("0" * 32)  # type: ignore[arg-type]


async def test_records_follow_the_session_lifecycle_in_a_catalog_storage() -> None:
    storage = MemoryStorage()
    store = SessionStore(storage=storage, retain_history=True)
    session = await store.create(cwd="/proj", meta={"k": 1})
    page = await store.list_sessions()
    assert [r.session_id for r in page.sessions] == [session.session_id]
    assert page.sessions[0].cwd == "/proj" and page.sessions[0].released is False
    await store.aclose()
    record = await storage.load_session(session.stream_id)
    assert record is not None and record.released is True

    again = SessionStore(storage=storage)
    resumed, adopted = await again.get_or_adopt(session.stream_id)
    assert adopted and resumed.cwd == "/proj" and resumed.meta == {"k": 1}
    overridden, _ = await SessionStore(storage=storage).get_or_adopt(session.stream_id, cwd="/elsewhere")
    assert overridden.cwd == "/elsewhere" and overridden.meta == {"k": 1}


async def test_turn_end_stamps_updated_time_and_order_follows_it() -> None:
    storage = MemoryStorage()
    store = SessionStore(storage=storage)
    older = await store.create()
    newer = await store.create()
    async with older.turn():
        await store.stream(older).send(UserMessage("bump"))
    page = await store.list_sessions()
    assert [r.session_id for r in page.sessions] == [older.session_id, newer.session_id]


async def test_list_pages_with_an_opaque_cursor_and_filters_by_cwd() -> None:
    store = SessionStore()
    made = [await store.create(cwd="/a" if i % 2 else "/b") for i in range(7)]
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.list_sessions(cursor=cursor, limit=3)
        seen += [r.session_id for r in page.sessions]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(s.session_id for s in made) and len(seen) == 7
    only_a = await store.list_sessions(cwd="/a")
    assert {r.cwd for r in only_a.sessions} == {"/a"} and len(only_a.sessions) == 3
    with pytest.raises(ValueError, match="cursor"):
        await store.list_sessions(cursor="garbage!")
    with pytest.raises(ValueError, match="limit"):
        await store.list_sessions(limit=0)


async def test_titles_are_settable_through_the_registry() -> None:
    store = SessionStore()
    session = await store.create()
    await store.set_title(session.session_id, "Fix the build")
    page = await store.list_sessions()
    assert page.sessions[0].title == "Fix the build"


async def test_stream_inbox_and_background_work() -> None:
    store = SessionStore()
    session = await store.create()
    stream = store.stream(session)
    stream.enqueue("a")
    stream.enqueue("b")
    assert stream.take_pending() == ["a", "b"] and stream.pending_messages == []
    gate = asyncio.Event()
    task = stream.spawn_background(gate.wait())
    await store.close(session.session_id)
    assert task.cancelled()


async def test_history_append_and_config_defaults() -> None:
    store = SessionStore.from_config(SessionConfig())
    session = await store.create()
    history = store.stream(session).history
    await history.append(ModelMessage("one"))
    await history.append(ModelMessage("two"))
    assert [e.content for e in await history.get_events()] == ["one", "two"]  # type: ignore[attr-defined]
    assert history.stream_id == session.stream_id
    assert (await store.get_or_adopt(uuid4()))[1] is True


def test_session_config_is_the_one_source_of_defaults_and_rules() -> None:
    import dataclasses
    import inspect

    defaults = SessionConfig()
    parameters = inspect.signature(SessionStore).parameters
    for field in dataclasses.fields(SessionConfig):
        assert parameters[field.name].default == getattr(defaults, field.name), field.name
    # The same rule refuses the same value, whichever way it is given.
    for bad in ({"max_sessions": 0}, {"ttl": -1.0}, {"max_queued": 0}, {"max_active_prompts": 1}):
        with pytest.raises(ValueError) as from_config:
            SessionConfig(**bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError) as from_store:
            SessionStore(**bad)  # type: ignore[arg-type]
        assert str(from_config.value) == str(from_store.value)
