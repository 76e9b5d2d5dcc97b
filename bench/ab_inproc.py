"""Sequential appends of this checkout against git revision REV and the floor, paired in blocks in one process.

    python3 bench/ab_inproc.py --against REV [--rounds 10] [--block 50] [--dir DIR]

Why: this machine's disk drifts by 10x within minutes, so two versions timed a second apart (``append_profile.py``,
one process each) differ by +-30% round to round, more than a change worth making. Here the three stores take turns
every ``--block`` appends (1,000 in all, a fresh file each, rotating who goes first), so each sees the same disk
within milliseconds: the paired ratio of a whole round moved by +-3-5% where the other moved by +-30%.

Each store runs on an event loop of its own, on a thread of its own, and only one at a time: the background work a
block started (indexing, a checkpoint handed to the writer thread) finishes inside that block's time, as it would
delay the next append of a sequential writer, and never in another store's. REV's ``sessionstore`` is imported as
``sessionstore_against``, so both versions live in this process; REV must have this checkout's schema revision.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import io
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from types import ModuleType
from typing import Any
from uuid import uuid4

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from payloads import make_events  # noqa: E402
from peers import raw  # noqa: E402

import sessionstore  # noqa: E402

COUNT = 1000
AGAINST = "sessionstore_against"


def import_revision(revision: str, folder: Path) -> ModuleType:
    """REV's package as :data:`AGAINST`, its migration scripts inside it (where it looks for them, to know its head
    revision: the files are made at head by this checkout, as Alembic's operations are registered process-wide)."""
    archive = subprocess.run(
        ["git", "archive", revision, "sessionstore", "migrations"], cwd=HERE.parent, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    package = folder / AGAINST
    (folder / "sessionstore").rename(package)
    (folder / "migrations").rename(package / "migrations")
    sys.path.insert(0, str(folder))
    return importlib.import_module(AGAINST)


def to_events(package: ModuleType) -> list[Any]:
    events = []
    for e in make_events(COUNT):
        if e.kind == "user":
            events.append(package.UserMessage(e.data["content"]))
        elif e.kind == "model":
            events.append(package.ModelMessage(e.data["content"]))
        elif e.kind == "tool_call":
            events.append(package.ToolCall(e.data["call_id"], e.data["name"], dict(e.data["arguments"])))
        else:
            events.append(package.ToolResult(e.data["call_id"], e.data["content"]))
    return events


class Sessionstore:
    """One version's SQLiteStorage, a session warmed by one event (as an agent's is)."""

    def __init__(self, package: ModuleType, path: Path) -> None:
        self.package = package
        self.path = path
        self.events = to_events(package)

    async def open(self) -> None:
        async with sessionstore.SQLiteStorage(self.path):
            pass  # the schema, made by this checkout's migrations (see import_revision)
        self.storage = self.package.SQLiteStorage(self.path)
        await self.storage.open()
        self.context = self.package.EventContext.for_stream(uuid4())
        await self.storage.save_event(self.events[0], self.context)

    async def append(self, start: int, stop: int) -> None:
        storage, context = self.storage, self.context
        for event in self.events[start:stop]:
            await storage.save_event(event, context)
        await self.settle()

    async def settle(self) -> None:
        """Wait for the background work these appends started (private names: both versions have them)."""
        storage = self.storage
        while True:
            indexing = getattr(storage, "_indexing", None)
            lane = getattr(storage, "_opened", None)
            if indexing is not None:
                await asyncio.wait([indexing])
            elif lane is not None and not lane._idle.is_set():
                await lane._idle.wait()
            else:
                return

    async def close(self) -> None:
        await self.storage.aclose()


class Floor:
    """The benchmark's floor (``peers/raw.py``), blocking its loop as it does there."""

    def __init__(self, path: Path) -> None:
        self.store = raw.Store()
        self.path = path
        self.events = self.store.convert(make_events(COUNT))

    async def open(self) -> None:
        await self.store.open(self.path)
        await self.store.create("k")

    async def append(self, start: int, stop: int) -> None:
        for event in self.events[start:stop]:
            await self.store.append("k", event)

    async def close(self) -> None:
        await self.store.close()


class OnItsLoop:
    """A store driven on an event loop of its own, one call at a time."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def call(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def timed(self, start: int, stop: int) -> float:
        async def run() -> float:
            began = time.perf_counter()
            await self.store.append(start, stop)
            return time.perf_counter() - began

        return float(self.call(run()))

    def close(self) -> None:
        self.call(self.store.close())
        self.loop.call_soon_threadsafe(self.loop.stop)


def one_round(folder: Path, against: ModuleType, block: int) -> dict[str, float]:
    stores = {
        "floor": OnItsLoop(Floor(folder / "floor.db")),
        "against": OnItsLoop(Sessionstore(against, folder / "against.db")),
        "this": OnItsLoop(Sessionstore(sessionstore, folder / "this.db")),
    }
    for driven in stores.values():
        driven.call(driven.store.open())
    spent = dict.fromkeys(stores, 0.0)
    names = list(stores)
    for number, start in enumerate(range(0, COUNT, block)):
        turn = number % len(names)
        order = names[turn:] + names[:turn]
        for name in order if (number // len(names)) % 2 == 0 else order[::-1]:
            spent[name] += stores[name].timed(start, start + block)
    for driven in stores.values():
        driven.close()
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="a git revision to compare with")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--block", type=int, default=50, help="appends per turn (default: 50)")
    parser.add_argument("--dir", help="where the files go (default: the system's temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as code:
        against = import_revision(args.against, Path(code))
        rounds = []
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory(dir=args.dir) as folder:
                rounds.append(one_round(Path(folder), against, args.block))
    print(
        f"{COUNT} sequential appends in blocks of {args.block}, {args.rounds} rounds, sqlite {sqlite3.sqlite_version}"
    )
    for name in ("against", "this"):
        ratios = [r["floor"] / r[name] for r in rounds]
        label = args.against if name == "against" else "this checkout"
        print(
            f"{label}: {statistics.median(r[name] for r in rounds) / COUNT * 1e6:.0f} us per append,"
            f" {statistics.median(ratios):.3f}x the floor's rate ({min(ratios):.2f}-{max(ratios):.2f},"
            f" at or above 0.8x in {sum(x >= 0.8 for x in ratios)} of {len(ratios)})"
        )
    paired = [r["against"] / r["this"] for r in rounds]
    print(
        f"paired: this checkout appends {statistics.median(paired):.3f}x as fast as {args.against}"
        f" ({min(paired):.2f}-{max(paired):.2f}), faster in {sum(x > 1 for x in paired)} of {len(paired)} rounds"
    )


if __name__ == "__main__":
    main()
