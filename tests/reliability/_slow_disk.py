"""Child of test_slow_disk.py: a storage on a disk whose fsync takes what $SLOW_FSYNC_FILE says, the event loop's
lag measured by a 1 ms ticker all along (opening and closing the storage included). Prints one JSON object.

    python _slow_disk.py DB slow     # the disk slow from the start: appends, concurrent writes, records
    python _slow_disk.py DB turns    # quick, then slow, then quick again
    python _slow_disk.py DB large    # quick; one set_history of 10,000 events into an idle lane
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4

from sessionstore import EventContext, SessionRecord, SQLiteStorage, UserMessage
from sessionstore.sqlite import lane

TICK = 0.001
STALL = 0.050
"""A lag past this is a stall: the bound the test holds the loop to."""

# Each transaction of the lane, in order: (the phase it committed in, whether on the event loop's thread).
commits: list[tuple[str, bool]] = []
phase = "open"
real_transaction = lane.transaction


@contextmanager
def recorded(conn: sqlite3.Connection, path: Path) -> Iterator[sqlite3.Connection]:
    with real_transaction(conn, path) as inside:
        yield inside
    commits.append((phase, threading.current_thread() is threading.main_thread()))


lane.transaction = recorded  # type: ignore[assignment]


class Ticker:
    """How late each 1 ms sleep wakes up, by phase (the sleep under way when it stops counts too)."""

    def __init__(self) -> None:
        self.lags: list[tuple[str, float]] = []
        self._since = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            self._since = time.perf_counter()
            await asyncio.sleep(TICK)
            self.lags.append((phase, time.perf_counter() - self._since - TICK))

    async def start(self) -> None:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)

    async def stop(self) -> None:
        assert self._task is not None
        self.lags.append((phase, time.perf_counter() - self._since - TICK))
        self._task.cancel()


def set_fsync(ms: int) -> None:
    Path(os.environ["SLOW_FSYNC_FILE"]).write_text(str(ms))


def probe_fsync() -> float:
    """Seconds one fsync takes now (the shim at work)."""
    with tempfile.TemporaryFile() as file:
        file.write(b"x")
        started = time.perf_counter()
        os.fsync(file.fileno())
        return time.perf_counter() - started


async def appends(storage: SQLiteStorage, seconds: float, latencies: list[float] | None = None) -> int:
    """Sequential appends to one session for ``seconds``; how many."""
    context = EventContext.for_stream(uuid4())
    done = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        started = time.perf_counter()
        await storage.save_event(UserMessage(f"append {done} " + "w" * 400), context)
        if latencies is not None:
            latencies.append(time.perf_counter() - started)
        done += 1
    return done


async def others(storage: SQLiteStorage, seconds: float) -> int:
    """Writes of several tasks at once, and session records, now and then, for ``seconds``; how many events."""
    done = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        streams = [uuid4() for _ in range(3)]
        writes: list[Any] = [storage.save_event(UserMessage("at once"), EventContext.for_stream(s)) for s in streams]
        writes.append(storage.save_session(SessionRecord(session_id=uuid4().hex, cwd="/w", title="a record")))
        writes.append(storage.set_history(uuid4(), [UserMessage(f"history {n}") for n in range(5)]))
        await asyncio.gather(*writes)
        await storage.set_title(streams[0], "titled")
        done += 3 + 5
        await asyncio.sleep(0.2)
    return done


async def main(db: Path, scenario: str) -> dict[str, Any]:
    global phase
    out: dict[str, Any] = {"probe": probe_fsync()}
    ticker = Ticker()
    await ticker.start()
    storage = SQLiteStorage(db)
    await storage.open()
    if scenario == "slow":
        phase = "slow"
        latencies: list[float] = []
        counts = await asyncio.gather(appends(storage, 4.0, latencies), others(storage, 4.0))
        out["events"] = sum(counts)
        out["fastest_append"] = min(latencies)
    elif scenario == "turns":
        phase = "quick"
        out["events"] = await appends(storage, 0.5)
        set_fsync(800)
        phase = "slow"
        out["events"] += await appends(storage, 4.0)
        set_fsync(0)
        phase = "quick again"
        out["events"] += await appends(storage, 1.0)
    elif scenario == "large":
        phase = "warm-up"
        events = [UserMessage(f"event {n} " + "w" * 450) for n in range(10_000)]
        out["events"] = await appends(storage, 0.3) + len(events)
        await asyncio.sleep(0.05)
        phase = "large"
        started = time.perf_counter()
        await storage.set_history(uuid4(), events)
        out["large_seconds"] = time.perf_counter() - started
        await asyncio.sleep(0.05)  # the ticker's wake-up after the write is measured in this phase
        phase = "after"
        out["events"] += await appends(storage, 0.2)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    phase = "close"
    await storage.aclose()
    await ticker.stop()
    out["lags"] = ticker.lags
    out["commits"] = commits
    with sqlite3.connect(db) as conn:
        out["stored"] = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))))
