"""Where a write commits: on the event loop's thread when the lane is idle, on the writer thread otherwise.

The loop's thread saves the hop to the writer thread and back; it must never
cost the agent's other tasks their responsiveness. So the loop never waits for
another process's lock (the batch goes to the writer thread at once), and a
slow commit sends the next ones to the writer thread for a while.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import uuid4

import pytest

from sessionstore import EventContext, SQLiteStorage, UserMessage, lane


@pytest.fixture
def committers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of the thread each write transaction of a lane ran on, in order (the real transaction runs)."""
    names: list[str] = []
    real = lane.transaction

    @contextmanager
    def recorded(conn: sqlite3.Connection, path: Path) -> Iterator[sqlite3.Connection]:
        with real(conn, path) as inside:
            yield inside
        names.append(threading.current_thread().name)

    monkeypatch.setattr(lane, "transaction", recorded)
    # No commit counts as slow unless a test says so: on a loaded machine an fsync can take longer than the limit.
    monkeypatch.setattr(lane, "LOOP_COMMIT_LIMIT", 60.0)
    return names


async def test_an_idle_lane_commits_on_the_loops_thread_and_batches_what_one_iteration_queued(
    tmp_path: Path, committers: list[str]
) -> None:
    stream = EventContext.for_stream(uuid4())
    async with SQLiteStorage(tmp_path / "agent.db") as storage:
        await storage.save_event(UserMessage("first: opens the connection"), stream)
        for n in range(5):
            await storage.save_event(UserMessage(f"one at a time {n}"), stream)
        # Writes made in one loop iteration: the first commits at once, the others share the next transaction,
        # on the loop's thread up to LOOP_BATCH of them, on the writer thread beyond.
        for count in (lane.LOOP_BATCH + 1, lane.LOOP_BATCH + 2):
            writes = [
                storage.save_event(UserMessage(f"at once {n}"), EventContext.for_stream(uuid4())) for n in range(count)
            ]
            await asyncio.gather(*writes)
        assert len(await storage.get_history(stream.stream.id)) == 6
    loop_thread = threading.current_thread().name
    assert committers[0].startswith("sessionstore-writer")
    assert committers[1:6] == [loop_thread] * 5
    assert committers[6:8] == [loop_thread] * 2  # 1 at once, then LOOP_BATCH together
    assert committers[8] == loop_thread and committers[9].startswith("sessionstore-writer")  # 1, then LOOP_BATCH + 1
    # Closing brings the full-text index up to date, on the writer thread (never the loop's: a batch can be long).
    assert len(committers) == 11 and committers[10].startswith("sessionstore-writer")


async def test_the_loop_never_waits_for_another_process_lock(tmp_path: Path, committers: list[str]) -> None:
    path = tmp_path / "agent.db"
    stream = EventContext.for_stream(uuid4())
    async with SQLiteStorage(path) as storage:
        await storage.save_event(UserMessage("opens the connection"), stream)
        await storage.save_event(UserMessage("on the loop"), stream)
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock for 0.5 s
        gaps: list[float] = []

        async def tick() -> None:
            last = time.perf_counter()
            while True:
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        ticker = asyncio.create_task(tick())
        asyncio.get_running_loop().call_later(0.5, holder.rollback)
        started = time.perf_counter()
        await storage.save_event(UserMessage("waits for the lock, on the writer thread"), stream)
        waited = time.perf_counter() - started
        ticker.cancel()
        holder.close()
        assert waited >= 0.45  # it did wait for the lock...
        assert max(gaps) < 0.1  # ...and the loop kept running meanwhile
        assert len(await storage.get_history(stream.stream.id)) == 3
    assert committers[-1].startswith("sessionstore-writer")


async def test_a_slow_commit_sends_the_next_ones_to_the_writer_thread(
    tmp_path: Path, committers: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lane, "LOOP_COMMIT_LIMIT", 0.0)  # every commit counts as slow
    monkeypatch.setattr(lane, "BACKOFF", 60.0)
    stream = EventContext.for_stream(uuid4())
    async with SQLiteStorage(tmp_path / "agent.db") as storage:
        for n in range(4):
            await storage.save_event(UserMessage(f"message {n}"), stream)
    loop_thread = threading.current_thread().name
    # The first opens the connection (writer thread), the second commits on the loop and is slow, the rest wait.
    assert committers[1] == loop_thread
    assert all(name.startswith("sessionstore-writer") for name in committers[2:4])


async def test_a_sequential_writer_yields_to_the_loop_once_per_slice(
    tmp_path: Path, committers: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task writing one event after another commits each at once on the loop's thread, and lets the loop's
    other tasks run once its slice is spent: not after every write (a loop iteration each), never not at all."""
    stream = EventContext.for_stream(uuid4())
    iterations = 0

    async def count() -> None:
        nonlocal iterations
        while True:
            await asyncio.sleep(0)
            iterations += 1

    async with SQLiteStorage(tmp_path / "agent.db") as storage:
        counter = asyncio.create_task(count())
        seen = {}
        for slice_seconds in (0.0, 60.0):
            monkeypatch.setattr(lane, "LOOP_SLICE", slice_seconds)
            # The first round starts right after the first write (answered from the writer thread), as an
            # agent's next append does.
            await storage.save_event(UserMessage(f"{slice_seconds} first"), stream)
            before = iterations
            for n in range(10):
                await storage.save_event(UserMessage(f"{slice_seconds} {n}"), stream)
            seen[slice_seconds] = iterations - before
        counter.cancel()
        assert len(await storage.get_history(stream.stream.id)) == 22
    # A spent slice: the loop ran between every two writes, once (a lone writer's next write is not queued
    # behind its own wake-up: that took two iterations a write).
    assert 10 <= seen[0.0] <= 11
    assert seen[60.0] == 0  # the whole burst within one slice: the other task never ran in between
    loop_thread = threading.current_thread().name
    assert committers[1:22] == [loop_thread] * 21
