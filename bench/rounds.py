"""Interleaved rounds and paired ratios: what keeps the comparison honest on a disk whose speed drifts.

A disk's fsync time can change several-fold within one run. Measured one
store after another, a store that lands in a slow stretch looks slow. So every
workload runs in rounds: in each round every store takes one sample, the order
reversed every other round, and stores are compared round by round (a *paired*
ratio: sessionstore's sample over the other store's sample from the same
round), reported as the median with its min-max and how many rounds it won.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Sample = dict[str, float | list[float]]
"""One round's result for one store: metric key -> the round's value, or several samples (their median counts)."""


@dataclass
class Cell:
    """One store's figures for one metric: a value per round it took part in, and their median."""

    value: float | None = None
    rounds: dict[int, float] = field(default_factory=dict)
    samples: list[float] = field(default_factory=list)
    problem: str | None = None  # "n/a: ...", "not installed", "error: ..."
    extra: dict[str, float] = field(default_factory=dict)
    extra_note: str | None = None  # e.g. some rounds failed


@dataclass
class Entrant:
    """Something measured in the rounds: a store, or a baseline such as ``python -c pass``.

    ``run(round)`` takes one sample; ``warm()`` runs the same code once, small and unmeasured, so that
    no store's first round pays for lazy imports or first-use caches.
    """

    key: str
    run: Callable[[int], Sample]
    warm: Callable[[], object] | None = None
    label: str = ""


def short(exc: BaseException) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split()).replace("|", "/")
    return text[:90]


def spread(count: int, rounds: int) -> set[int]:
    """``count`` rounds out of ``rounds``, spread from the first to the last, so a slow store's few samples
    span the whole run (and its drift) rather than one stretch of it."""
    if count >= rounds:
        return set(range(rounds))
    if count <= 1:
        return {0}
    return {round(i * (rounds - 1) / (count - 1)) for i in range(count)}


def interleave(
    entrants: list[Entrant],
    rounds: int,
    budget: float,
    between: Callable[[int], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Cell]]:
    """Every entrant once per round, in alternating order; ``between(round)`` after each round.

    An entrant whose first sample shows it would need more than ``budget`` seconds for all rounds
    takes part in fewer, spread over the run (``n=`` in the table). A failing sample is counted
    and reported with the cell; an entrant stops after three failures, or two with no success.
    """
    for entrant in entrants:
        if entrant.warm is not None:
            try:
                entrant.warm()
            except Exception:  # a failure shows in the measured rounds, with its message
                pass
    got: dict[str, dict[str, Cell]] = {e.key: {} for e in entrants}
    failures: dict[str, list[str]] = {e.key: [] for e in entrants}
    planned: dict[str, set[int] | None] = {e.key: None for e in entrants}
    stopped: dict[str, str] = {}
    for number in range(rounds):
        order = entrants if number % 2 == 0 else entrants[::-1]
        shown: list[str] = []
        for entrant in order:
            wanted = planned[entrant.key]
            if entrant.key in stopped or (wanted is not None and number not in wanted):
                continue
            gc.collect()  # no store pays for the garbage of the one before it
            start = time.perf_counter()
            try:
                sample = entrant.run(number)
            except Exception as exc:
                failures[entrant.key].append(short(exc))
                failed = failures[entrant.key]
                if len(failed) >= 3 or (not got[entrant.key] and len(failed) >= 2):
                    stopped[entrant.key] = f"error: {failed[-1]}"
                shown.append(f"{entrant.key} failed")
                continue
            spent = time.perf_counter() - start
            if wanted is None:
                planned[entrant.key] = spread(max(1, min(rounds, int(budget / max(spent, 1e-9)))), rounds)
            for metric, value in sample.items():
                cell = got[entrant.key].setdefault(metric, Cell())
                values = value if isinstance(value, list) else [value]
                cell.samples += values
                cell.rounds[number] = statistics.median(values)
            shown.append(f"{entrant.key} " + ", ".join(f"{k}={_brief(v)}" for k, v in sample.items()))
        if between is not None:
            between(number)
        if progress is not None:
            progress(f"round {number + 1}/{rounds}: " + "; ".join(shown))
    for entrant in entrants:
        cells = got[entrant.key]
        failed = failures[entrant.key]
        if not cells:
            why = stopped.get(entrant.key) or (f"error: {failed[-1]}" if failed else "error: no sample")
            got[entrant.key] = {"*": Cell(problem=why)}
            continue
        for cell in cells.values():
            cell.value = statistics.median(cell.samples)
            if failed:
                cell.extra["failed_runs"] = len(failed)
                cell.extra_note = f"{len(failed)} failed run(s): {failed[0]}"
    return got


def _brief(value: float | list[float]) -> str:
    x = statistics.median(value) if isinstance(value, list) else value
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


@dataclass(frozen=True)
class Paired:
    """``ours / theirs`` per shared round: for rates >1 is faster, for times and sizes <1 is better."""

    ratios: list[float]
    won: int  # rounds where ours was better

    @property
    def n(self) -> int:
        return len(self.ratios)

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)

    @property
    def low(self) -> float:
        return min(self.ratios)

    @property
    def high(self) -> float:
        return max(self.ratios)

    def text(self) -> str:
        return f"{self.median:.2f}x ({self.low:.2f}-{self.high:.2f}) won {self.won}/{self.n}"


def paired(ours: Cell | None, theirs: Cell | None, higher: bool) -> Paired | None:
    """Round-by-round ratios of two cells, over the rounds both took part in."""
    if ours is None or theirs is None or ours.problem or theirs.problem:
        return None
    shared = sorted(set(ours.rounds) & set(theirs.rounds))
    pairs = [(ours.rounds[r], theirs.rounds[r]) for r in shared if theirs.rounds[r] > 0 and ours.rounds[r] > 0]
    if not pairs:
        return None
    ratios = [a / b for a, b in pairs]
    won = sum(1 for a, b in pairs if (a > b if higher else a < b))
    return Paired(ratios, won)


def drift(cell: Cell | None) -> float | None:
    """max/min of a cell's per-round values: how much the thing measured moved during the run."""
    if cell is None or cell.problem or len(cell.rounds) < 2:
        return None
    values = [v for v in cell.rounds.values() if v > 0]
    return max(values) / min(values) if values else None


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) by the nearest-rank method: an observed value, never an interpolated one."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]
