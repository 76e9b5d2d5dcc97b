"""Callers cancelled at every point inside a write on PostgreSQL: each write whole or absent, in order, and the
storage still works."""

from __future__ import annotations

import asyncio
import contextlib
from uuid import uuid4

import asyncpg  # type: ignore[import-untyped]

from sessionstore import EventContext, ModelMessage, UserMessage
from sessionstore.postgres import PostgresStorage

# After 0..11 event-loop iterations (before the transaction starts, while it connects), then growing delays
# (while it runs, commits, and after).
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


async def stored(url: str, sid: str) -> list[str]:
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        rows = await conn.fetch(
            "SELECT e.payload::json ->> 'content' FROM events e JOIN sessions s ON s.id = e.session"
            " WHERE s.session_id = $1 ORDER BY e.position",
            sid,
        )
    finally:
        await conn.close()
    return [r[0] for r in rows]


async def test_cancelled_writes_are_whole_or_absent_and_keep_their_order(pg_url: str) -> None:
    async with PostgresStorage(pg_url) as storage:
        appended, rewritten = uuid4(), uuid4()
        attempted: list[str] = []
        outcomes = set()
        generations: list[list[str]] = []
        for n, step in enumerate(STEPS):
            text = f"e{n}"
            attempted.append(text)
            outcomes.add(
                await cancel_after(step, storage.save_event(UserMessage(text), EventContext.for_stream(appended)))
            )
            history = [f"g{n}:{j}" for j in range(1 + n % 5)] + ["x" * 10_000] * (n % 3)
            generations.append(history)
            await cancel_after(step, storage.set_history(rewritten, [ModelMessage(t) for t in history]))
            # The next write returns only after the cancelled ones have ended: they are there or not, whole,
            # and nothing after them can overtake them.
            await storage.save_event(UserMessage(f"after {n}"), EventContext.for_stream(appended))
            events = await stored(pg_url, appended.hex)
            assert events[-1] == f"after {n}"
            assert [e for e in events if not e.startswith("after")] == [t for t in attempted if t in events]
            assert await stored(pg_url, rewritten.hex) in [[], *generations]
        assert outcomes == {True, False}  # cancelled both before and after its commit
        assert len(await storage.get_history(appended)) == len(await stored(pg_url, appended.hex))
