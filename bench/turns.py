"""Sequential appends in turns: the stores take turns every few appends, in one process, a store at a time.

Why: this machine's disk drifts by 10x within minutes. Workload (a) times each store's 1,000 appends one after the
other, a second or so apart, so a round's paired ratio against the floor moves by +-30% (0.66-1.05x around a median
of 0.87x in one run of 14 rounds). Here every store appends ``block`` events in turn into a fresh file of its own
(the first to go rotating, the order reversed every other lap), so all of them see the same disk within
milliseconds: a round's paired ratio moves by +-3-5%, and a change of a few percent, or a median near a target,
can be told from the disk's moods.

Each store runs on an event loop of its own, on a thread of its own, and only one at a time. A turn ends once the
background work its appends started is done (:meth:`peers.Adapter.settle`): that work would delay a sequential
writer's next append, so it counts in that store's time and never in another's.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from peers import Adapter

KEY = "s0"
TARGET = 0.85
"""Issue 25's target: sessionstore's sequential appends at this share of the floor's rate (median) ..."""
TARGET_LOW = 0.8
"""... and every round but one at or above this share."""


@dataclass
class TurnsSection:
    count: int  # appends per store and round
    block: int  # appends per turn
    rounds: list[dict[str, float]]  # per round: store key -> seconds spent appending (background work included)
    problem: str | None = None


class OnItsLoop:
    """A store driven on an event loop of its own, one call at a time."""

    def __init__(self, store: Adapter, events: list[Any]) -> None:
        self.store = store
        self.native = store.convert(events)
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def call(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def open(self, path: Path) -> None:
        async def run() -> None:
            await self.store.open(path)
            await self.store.create(KEY)

        self.call(run())

    def timed(self, start: int, stop: int) -> float:
        store, events = self.store, self.native[start:stop]

        async def run() -> float:
            began = time.perf_counter()
            for event in events:
                await store.append(KEY, event)
            await store.settle()
            return time.perf_counter() - began

        return float(self.call(run()))

    def close(self) -> None:
        try:
            self.call(self.store.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)


def one_round(
    folder: Path, stores: dict[str, Callable[[], Adapter]], events: list[Any], block: int
) -> dict[str, float]:
    """Each store's seconds for appending ``events`` in turns of ``block``, each into a fresh file in ``folder``."""
    driven = {key: OnItsLoop(make(), events) for key, make in stores.items()}
    try:
        for key, one in driven.items():
            one.open(folder / f"{key}.db")
        spent = dict.fromkeys(driven, 0.0)
        keys = list(driven)
        for number, start in enumerate(range(0, len(events), block)):
            turn = number % len(keys)
            order = keys[turn:] + keys[:turn]
            for key in order if (number // len(keys)) % 2 == 0 else order[::-1]:
                spent[key] += driven[key].timed(start, start + block)
        return spent
    finally:
        for one in driven.values():
            one.close()


def measure(
    stores: dict[str, Callable[[], Adapter]],
    events: list[Any],
    rounds: int,
    block: int,
    folder: Path | None = None,
    progress: Callable[[str], None] = lambda _text: None,
) -> TurnsSection:
    done: list[dict[str, float]] = []
    for number in range(rounds):
        with tempfile.TemporaryDirectory(dir=folder) as here:
            done.append(one_round(Path(here), stores, events, block))
        progress(f"   turns round {number + 1}/{rounds}: " + ", ".join(f"{k} {v:.3f} s" for k, v in done[-1].items()))
    return TurnsSection(len(events), block, done)


def ratios(section: TurnsSection, ours: str, other: str) -> list[float]:
    """``ours``'s rate over ``other``'s, round by round (above 1: ``ours`` appended faster)."""
    return [spent[other] / spent[ours] for spent in section.rounds]


def lines(
    section: TurnsSection | None, problem: str | None, ours: str = "sessionstore", floor: str = "raw"
) -> list[str]:
    """The report's part: what was run, sessionstore's rate against the floor's, and issue 25's target."""
    title = "Sequential appends in turns with the floor"
    if section is None or section.problem is not None or not section.rounds:
        return [f"{title}: {problem or (section.problem if section else None) or 'not run'}."]
    paired = ratios(section, ours, floor)
    low = sum(r < TARGET_LOW for r in paired)
    per_append = {key: statistics.median(r[key] for r in section.rounds) / section.count * 1e6 for key in (ours, floor)}
    met = statistics.median(paired) >= TARGET and low <= 1
    return [
        f"{title} (`bench/turns.py`): (a)'s workload again, {section.count:,} appends per store into a fresh file "
        f"each round, the stores taking turns every {section.block} appends in one process, each on an event loop "
        "of its own (a turn ends once the background work it started is done), so both see the same disk within "
        f"milliseconds ({len(section.rounds)} rounds). Medians: sessionstore {per_append[ours]:.0f} us per append, "
        f"the floor {per_append[floor]:.0f} us.",
        "",
        f"- **(a) >= {TARGET}x the raw floor in turns (median; every round but one >= {TARGET_LOW}x)**: "
        f"{'met' if met else 'MISSED'}. median {statistics.median(paired):.2f}x, rounds {min(paired):.2f}-"
        f"{max(paired):.2f}x, {len(paired) - low} of {len(paired)} at or above {TARGET_LOW}x",
    ]


def as_json(section: TurnsSection | None, problem: str | None) -> dict[str, Any]:
    return {"problem": problem} if section is None else asdict(section)
