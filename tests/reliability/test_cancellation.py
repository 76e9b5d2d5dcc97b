"""Callers cancelled at every point inside a write: each write whole or absent, in order, and the storage still
works, on both databases.

A cancelled ``save_event`` or ``set_history`` either never started (nothing
written) or committed whole; which one it was is not the caller's to know, but
the database must never hold half of it, a later write must never land before
it, and the storage's own view (a SQLite storage's cache) must never disagree
with the database.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from uuid import UUID, uuid4

from databases import Database

from sessionstore import BaseEvent, EventContext, JsonCodec, ModelMessage, ToolResult, UserMessage

# Where to cancel: after 0..11 event-loop iterations (before the write is
# queued, while it waits in SQLite's lane or for a PostgreSQL connection, as the
# writer thread picks it up), then after growing delays (while the transaction
# runs or commits, just after it committed, and well after). The last points
# leave even a slow disk time to finish.
STEPS = [*range(12), *(0.0002 * 1.5**k for k in range(18))]


async def cancel_after(step: float, coro: object) -> bool:
    """Run ``coro`` as a task and cancel it at ``step``; True if it had finished by then."""
    task = asyncio.ensure_future(coro)  # type: ignore[arg-type]
    if isinstance(step, int):
        for _ in range(step):
            if task.done():
                break
            await asyncio.sleep(0)
    else:
        await asyncio.wait([task], timeout=step)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
        return True
    return False


async def stored_rows(database: Database, stream_id: UUID) -> list[tuple[int, str, str]]:
    """The rows as another process sees them, bypassing the storage and its cache."""
    return [row[1:] for row in await database.event_rows(stream_id)]


async def settle(storage: Any) -> None:
    """Wait until a cancelled write that had already started has finished.

    A write the writer had already begun goes on after its caller is cancelled
    (that is what makes it whole); a storage starts a write only once the
    earlier ones have ended (SQLite's lane runs them in order; PostgreSQL's
    waits for those whose caller was cancelled), so any later write returning
    means the earlier one is done, one way or the other.
    """
    await storage.touch_session(uuid4())  # matches no row: a write that changes nothing


async def fresh_history(database: Database, stream_id: UUID) -> list[BaseEvent]:
    async with database.storage() as other:
        return list(await other.get_history(stream_id))


async def test_cancelled_save_event_is_whole_or_absent_and_keeps_its_order(database: Database) -> None:
    async with database.storage() as storage:
        stream_id = uuid4()
        context = EventContext.for_stream(stream_id)
        attempted: list[str] = []
        outcomes = set()
        for steps in STEPS:
            # A few bystanders in the same group commit, so cancellation also
            # lands while other callers' writes share the transaction.
            bystanders = [
                asyncio.ensure_future(storage.save_event(ModelMessage(f"by {steps}.{i}"), context)) for i in range(3)
            ]
            content = f"cancelled at {steps}"
            attempted.append(content)
            outcomes.add(await cancel_after(steps, storage.save_event(UserMessage(content), context)))
            await asyncio.gather(*bystanders)  # unaffected by their neighbour's cancellation
            # The next write returns only after the cancelled one has ended: nothing after it overtakes it.
            await storage.save_event(UserMessage(f"after {steps}"), context)
            assert (await stored_rows(database, stream_id))[-1][2] == f'{{"content":"after {steps}"}}'
            history = await storage.get_history(stream_id)
            assert history == await fresh_history(database, stream_id)  # the cache never disagrees with the file
        # Both sides of the race were really exercised.
        assert outcomes == {True, False}
        history = await storage.get_history(stream_id)
        texts = [e.content for e in history if isinstance(e, UserMessage) and not e.content.startswith("after")]
        # Each cancelled event is there once or not at all, in the order the calls were made.
        assert texts == [c for c in attempted if c in texts]
        assert len(set(texts)) == len(texts)
        # Every bystander made it, exactly once.
        by = [e.content for e in history if isinstance(e, ModelMessage)]
        assert sorted(by) == sorted(f"by {s}.{i}" for s in STEPS for i in range(3))
        # And the storage still takes writes.
        await storage.save_event(UserMessage("last"), context)
        assert (await storage.get_history(stream_id))[-1] == UserMessage("last")
    assert [p for p, _, _ in await stored_rows(database, stream_id)] == list(range(len(history) + 1))


def big_history(tag: str, n: int) -> list[BaseEvent]:
    """A long history with some large events, sharing a prefix with other tags."""
    shared = [UserMessage(f"shared {i}") for i in range(n // 2)]
    own: list[BaseEvent] = [
        ToolResult(call_id=f"{tag}{i}", content={"blob": tag * 2000} if i % 50 == 0 else i) for i in range(n - n // 2)
    ]
    return shared + own


async def test_cancelled_set_history_is_old_or_new_never_a_mix(database: Database) -> None:
    versions = {tag: big_history(tag, n) for tag, n in (("a", 2000), ("b", 800), ("c", 2500), ("d", 10))}
    codec = JsonCodec()
    rows_of = {tag: [(i, *codec.encode(e)) for i, e in enumerate(events)] for tag, events in versions.items()}
    tags = list(versions)
    async with database.storage() as storage:
        stream_id = uuid4()
        await storage.set_history(stream_id, versions["a"])
        current = "a"
        outcomes = set()
        for number, steps in enumerate(STEPS):
            target = tags[(tags.index(current) + 1 + number % (len(tags) - 1)) % len(tags)]
            outcomes.add(await cancel_after(steps, storage.set_history(stream_id, versions[target])))
            await settle(storage)
            on_disk = await stored_rows(database, stream_id)
            assert on_disk in (rows_of[current], rows_of[target]), f"step {steps}: a set_history landed in part"
            current = current if on_disk == rows_of[current] else target
            # The storage's own view agrees with the file, whichever way it went.
            assert await storage.get_history(stream_id) == versions[current]
        assert outcomes == {True, False}
        # Still usable: an ordinary append and rewrite go through, and a fresh reader agrees.
        await storage.save_event(UserMessage("after"), EventContext.for_stream(stream_id))
        assert await fresh_history(database, stream_id) == [*versions[current], UserMessage("after")]
        await storage.set_history(stream_id, versions["d"])
        assert await fresh_history(database, stream_id) == versions["d"]


async def test_cancelled_while_opening_leaves_a_usable_storage(database: Database) -> None:
    stream_id = uuid4()
    for steps in range(12):
        storage = database.storage()
        await cancel_after(steps, storage.save_event(UserMessage(f"try {steps}"), EventContext.for_stream(stream_id)))
        # The same object recovers from a cancelled open: the next call opens it properly.
        await storage.save_event(UserMessage(f"then {steps}"), EventContext.for_stream(stream_id))
        await storage.aclose()
    texts = [e.content for e in await fresh_history(database, stream_id) if isinstance(e, UserMessage)]
    assert [t for t in texts if t.startswith("then")] == [f"then {s}" for s in range(12)]
    if database.kind == "sqlite":  # a file's pages: a server has no such check to run
        assert await database.rows("PRAGMA integrity_check") == [("ok",)]


async def test_timeouts_around_writes_never_leave_half_a_write(database: Database) -> None:
    """``asyncio.wait_for`` is how applications usually cancel: same guarantee."""
    async with database.storage() as storage:
        stream_id = uuid4()
        history = big_history("t", 2000)
        for attempt in range(10):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(storage.set_history(stream_id, history[: 1000 + attempt * 100]), 0.0005)
            await settle(storage)
            on_disk = await fresh_history(database, stream_id)
            assert len(on_disk) in (0, *range(1000, 2001, 100)) and on_disk == history[: len(on_disk)]
            assert await storage.get_history(stream_id) == on_disk
