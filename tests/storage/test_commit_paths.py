"""Where a write commits: on the event loop's thread when the lane is idle, on the writer thread otherwise.

The loop's thread saves the hop to the writer thread and back; it must never
cost the agent's other tasks their responsiveness. So the loop never waits for
another process's lock (the batch goes to the writer thread at once), never
takes a large write, checkpoints only while the disk is quick, and a slow commit sends the next ones
to the writer thread until commits there have been quick again
(``tests/reliability/test_slow_disk.py`` does it with a real slow fsync).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import uuid4

import pytest

from sessionstore import EventContext, SQLiteStorage, UserMessage
from sessionstore.sqlite import lane
from sessionstore.sqlite import storage as sqlite_storage


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
    # The first commit (the writer thread's, which opens the connection) is evidence enough, unless a test says
    # otherwise.
    monkeypatch.setattr(lane, "RECOVERY_COMMITS", 1)
    return names


WRITER, LOOP = "sessionstore-writer_0", threading.current_thread().name


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


async def test_a_slow_commit_keeps_the_loop_off_the_disk_until_commits_are_quick_again(
    tmp_path: Path, committers: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measured, not a timer: the loop's thread commits only after RECOVERY_COMMITS quick commits in a row on the
    writer thread, at first and after one of its own was slow; while commits stay slow it never commits again,
    however long that lasts."""
    monkeypatch.setattr(lane, "RECOVERY_COMMITS", 4)
    monkeypatch.setattr(sqlite_storage, "INDEX_DELAY", 60.0)  # no indexing in between: each commit is a write
    stream = EventContext.for_stream(uuid4())

    async with SQLiteStorage(tmp_path / "agent.db") as storage:

        async def write(count: int) -> None:
            for n in range(count):
                await storage.save_event(UserMessage(f"message {n}"), stream)

        await write(5)
        # The first opens the connection; it and the next three, quick, are the evidence.
        assert committers == [WRITER] * 4 + [LOOP]
        monkeypatch.setattr(lane, "LOOP_COMMIT_LIMIT", 0.0)  # every commit is slow from now on
        await write(1)  # on the loop: it proves slow
        await asyncio.sleep(1.2)  # longer than the back-off a timer set before (1 s): no commit measured quick
        await write(6)
        assert committers[5:] == [LOOP] + [WRITER] * 6
        monkeypatch.setattr(lane, "LOOP_COMMIT_LIMIT", 60.0)  # quick again
        await write(6)
        assert committers[12:] == [WRITER] * 4 + [LOOP] * 2
        assert len(await storage.get_history(stream.stream.id)) == 18


async def test_another_process_lock_counts_against_the_loop_too(tmp_path: Path, committers: list[str]) -> None:
    """After a write found the lock taken, the loop commits again only once a commit on the writer thread was
    quick (RECOVERY_COMMITS is 1 here)."""
    path = tmp_path / "agent.db"
    stream = EventContext.for_stream(uuid4())
    async with SQLiteStorage(path) as storage:
        await storage.save_event(UserMessage("opens the connection"), stream)
        await storage.save_event(UserMessage("on the loop"), stream)
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        asyncio.get_running_loop().call_later(0.2, holder.rollback)
        await storage.save_event(UserMessage("waits for the lock, on the writer thread"), stream)
        holder.close()
        await storage.save_event(UserMessage("the loop again: the last commit was quick"), stream)
    assert committers[:4] == [WRITER, LOOP, WRITER, LOOP]


async def test_a_write_too_large_for_the_loop_runs_on_the_writer_thread(
    tmp_path: Path, committers: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """More rows than LOOP_WRITE_ROWS, more text than LOOP_WRITE_SIZE, a deletion of a whole session, or a history
    the cache does not stand for: never on the loop's thread, and whole and correct all the same."""
    monkeypatch.setattr(sqlite_storage, "INDEX_DELAY", 60.0)  # no indexing in between: each commit is a write
    path = tmp_path / "agent.db"
    stream = EventContext.for_stream(uuid4())
    others = [EventContext.for_stream(uuid4()) for _ in range(3)]

    async def on(thread: str, write: Awaitable[None]) -> None:
        before = len(committers)
        await write
        assert committers[before:] == [thread] * max(1, len(committers) - before)  # a deletion merges the index too

    async with SQLiteStorage(path) as storage:
        await on(WRITER, storage.save_event(UserMessage("opens the connection"), stream))
        await on(LOOP, storage.save_event(UserMessage("small"), stream))
        await on(WRITER, storage.save_event(UserMessage("x" * (lane.LOOP_WRITE_SIZE + 1)), stream))
        await on(LOOP, storage.save_event(UserMessage("x" * (lane.LOOP_WRITE_SIZE - 100)), stream))
        history = await storage.get_history(stream.stream.id)
        rows = [UserMessage(f"row {n}") for n in range(lane.LOOP_WRITE_ROWS + 1)]
        await on(WRITER, storage.set_history(stream.stream.id, [*history, *rows]))
        history = await storage.get_history(stream.stream.id)
        await on(LOOP, storage.set_history(stream.stream.id, history[:-3]))  # a few rows deleted
        await on(LOOP, storage.set_history(stream.stream.id, history))  # and written again
        await on(WRITER, storage.set_history(stream.stream.id, history[:2]))  # many deleted
        for context in others:
            await on(LOOP, storage.save_event(UserMessage("hello"), context))
        # The writes of one loop iteration are weighed together: the first commits at once, the next two (each
        # small enough alone) share a transaction too large for the loop.
        before = len(committers)
        half = "y" * (lane.LOOP_WRITE_SIZE // 2 + 1)
        await asyncio.gather(
            *(storage.save_event(UserMessage(text), c) for text, c in zip(["a", half, half], others, strict=True))
        )
        assert committers[before:] == [LOOP, WRITER]
        await on(WRITER, storage.drop_history(others[0].stream.id))  # every event of a session
        assert await storage.get_history(stream.stream.id) == history[:2]
    async with SQLiteStorage(path) as storage:  # a new cache: the histories on file are not known to it
        await on(WRITER, storage.save_event(UserMessage("opens the connection"), others[1]))
        await on(WRITER, storage.set_history(others[2].stream.id, [UserMessage("replaced")]))
        await on(LOOP, storage.set_history(uuid4(), [UserMessage("a new session's history")]))
        assert [len(await storage.get_history(c.stream.id)) for c in others] == [0, 3, 1]


@pytest.mark.parametrize("quick", [True, False], ids=["quick disk", "disk not quick enough"])
async def test_the_loop_checkpoints_the_wal_in_its_commits_only_while_the_disk_is_quick(
    tmp_path: Path, committers: list[str], monkeypatch: pytest.MonkeyPatch, quick: bool
) -> None:
    """SQLite checkpoints in the commit that finds the WAL past its threshold: megabytes copied into the file and
    syncs. While the loop's commits take under half LOOP_COMMIT_LIMIT its connection does that as the floor's
    does, at CHECKPOINT_PAGES; else never on its own (its WAL grows past 1,000 pages, nothing copied), and after
    LOOP_RUN commits there the next goes to the writer thread, which checkpoints (indexing usually brings one
    sooner; not here)."""
    monkeypatch.setattr(sqlite_storage, "INDEX_EVERY", 10**6)
    monkeypatch.setattr(sqlite_storage, "INDEX_DELAY", 60.0)
    monkeypatch.setattr(lane.WriteLane, "_syncs_quick", property(lambda self: quick))
    run = 600
    monkeypatch.setattr(lane, "LOOP_RUN", run)
    path = tmp_path / "agent.db"
    wal = Path(f"{path}-wal")
    frame = 4096 + 24
    stream = EventContext.for_stream(uuid4())
    async with SQLiteStorage(path) as storage:
        await storage.save_event(UserMessage("opens the connection"), stream)
        size = path.stat().st_size
        for n in range(run):
            await storage.save_event(UserMessage(f"{n} " + "z" * 1500), stream)
        assert committers[1:] == [LOOP] * run
        if quick:
            assert path.stat().st_size > size  # copied into the file, each time the WAL reached the threshold
            assert wal.stat().st_size < 2 * lane.CHECKPOINT_PAGES * frame  # (its size is its largest yet)
        else:
            assert wal.stat().st_size > 1000 * frame  # past SQLite's checkpoint threshold...
            assert path.stat().st_size == size  # ...and nothing copied into the file
            await storage.save_event(UserMessage("one more"), stream)
            assert committers[-1] == WRITER  # where the WAL is checkpointed
            assert path.stat().st_size > size
        assert len(await storage.get_history(stream.stream.id)) == run + 1 + (not quick)


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
    # A spent slice: the loop ran between every two writes (a lone writer's next write is not queued behind its
    # own wake-up), three times, since each commit took longer than the slice of 0 s: once for the tasks ready,
    # twice more for those whose timers came due during the commit (a timer is made ready behind this task's
    # wake-up, and wakes its task an iteration later).
    assert 30 <= seen[0.0] <= 33
    assert seen[60.0] == 0  # the whole burst within one slice: the other task never ran in between
    loop_thread = threading.current_thread().name
    assert committers[1:22] == [loop_thread] * 21


@pytest.mark.parametrize("disk", ["quick", "slow"])
async def test_background_work_shares_callers_commits_only_on_a_disk_known_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disk: str
) -> None:
    """Indexing shares the callers' transactions only once a commit proved the disk slow (a sync of its own costs
    more there than the work); on a quick disk, and at first (before any commit was timed), it runs alone, so a
    caller's write never waits for a batch of indexing (it kept 40 batches in a row of a 10,000-event load in the
    next calls: set_history +1 at 10k went from 0.45 to 1.74 ms)."""
    if disk == "slow":
        monkeypatch.setattr(lane, "LOOP_COMMIT_LIMIT", 0.0)  # every commit timed counts as slow
    shared: list[bool] = []
    commit = lane.WriteLane._commit

    def recording(self: lane.WriteLane, jobs: list[lane._Job]) -> list[object]:
        kinds = {job.background for job in jobs}
        shared.append(kinds == {True, False})
        return commit(self, jobs)  # type: ignore[return-value]

    monkeypatch.setattr(lane.WriteLane, "_commit", recording)
    stream = EventContext.for_stream(uuid4())
    async with SQLiteStorage(tmp_path / "agent.db") as storage:
        history = [UserMessage(f"loaded {n}") for n in range(sqlite_storage.INDEX_EVERY * 4)]
        await storage.set_history(stream.stream.id, history)  # indexing queued: four batches
        for n in range(12):
            await storage.save_event(UserMessage(f"then {n}"), stream)
    assert any(shared) == (disk == "slow")
