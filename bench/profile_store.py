"""Profiles sessionstore on one workload: ``bench/.venv/bin/python bench/profile_store.py d``.

Workloads: ``a`` (1,000 sequential appends), ``b`` (50 sessions x 100 concurrent
appends), ``d`` (cold read of a 10,000-event history), ``e`` (set_history +1
on a 10,000-event history, 20 calls). Prints cProfile's top functions by
cumulative and by own time; ``--pyinstrument`` uses pyinstrument instead.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from payloads import make_events
from peers.sessionstore_sqlite import Store


async def setup(path: Path, count: int) -> tuple[Store, list[Any]]:
    store = Store()
    events = store.convert(make_events(count))
    await store.open(path)
    await store.create("s0")
    return store, events


def workload(name: str, folder: Path) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    """(prepare, timed) coroutines for ``name``; both run on one loop."""
    path = folder / "profile.db"
    state: dict[str, Any] = {}

    async def prepare() -> None:
        if name == "a":
            state["store"], state["events"] = await setup(path, 1000)
        elif name == "b":
            state["store"], state["events"] = await setup(path, 100)
        elif name == "d":
            store, events = await setup(path, 10_000)
            await store.load("s0", events)
            await store.close()
            state["store"] = Store()
            await state["store"].open(path)
        elif name == "e":
            store, events = await setup(path, 10_020)
            await store.load("s0", events[:10_000])
            state["store"], state["events"] = store, events

    async def timed() -> None:
        store = state["store"]
        if name == "a":
            for event in state["events"]:
                await store.append("s0", event)
        elif name == "b":

            async def one(key: str) -> None:
                for event in state["events"]:
                    await store.append(key, event)

            await asyncio.gather(*(one(f"s{i}") for i in range(50)))
        elif name == "d":
            await store.read("s0")
        elif name == "e":
            events = state["events"]
            history = events[:10_000]
            for event in events[10_000:]:
                history = [*history, event]
                await store.replace("s0", history)

    return prepare, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["a", "b", "d", "e"])
    parser.add_argument("--pyinstrument", action="store_true")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        prepare, timed = workload(args.workload, Path(folder))

        async def run() -> None:
            await prepare()
            if args.pyinstrument:
                from pyinstrument import Profiler

                profiler = Profiler(async_mode="enabled")
                profiler.start()
                await timed()
                profiler.stop()
                print(profiler.output_text(unicode=False, color=False, show_all=False))
            else:
                profile = cProfile.Profile()
                profile.enable()
                await timed()
                profile.disable()
                stats = pstats.Stats(profile).strip_dirs()
                stats.sort_stats("cumulative").print_stats(args.top)
                stats.sort_stats("tottime").print_stats(args.top)

        asyncio.run(run())


if __name__ == "__main__":
    main()
