"""Laptop disks: (a), (b) and the loop lag again, with every fsync made to take 2 ms, then 10 ms.

The figures above come from a disk whose fsync takes 0.1-0.2 ms; a laptop's takes 1-20 ms (macOS's full fsync
more), and that is where a desktop agent runs and where the choice of which thread commits matters most. For each
latency, ``run.py`` re-runs itself (``--worker-fsync MS OUT``) with the tests' shim preloaded (``shim.py``): every
store of the run, the floor and the peers included, runs in that process, so every fsync and fdatasync of every
connection (sqlite3's, aiosqlite's threads, sessionstore's writer thread) sleeps for exactly that long and never
reaches the real disk: the figures depend on the latency named, not on this machine's disk of the moment.

Checked, not assumed: the disk probes between rounds go through the shim (their median is the latency), and every
sample of a store that writes a file counts the fsyncs that went through the shim (a sample with none fails: that
store's commits did not reach it). Each store's settings are read again from its own connection in that process.

The sizes are cut to what the latency allows (``at``), so that the floor and sessionstore, which sync about once
per event in (a), fit their rounds in the time budget; the peers slower than that take part in fewer (``n=``), as
in every section.
The pg section is not run here: its fsyncs are the server's, in processes the server starts itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import report
import shim
import workloads as w
from disk import Disk
from peers import Adapter, Loaded
from rounds import Cell, Entrant, interleave, paired, short

RUN = Path(__file__).resolve().parent / "run.py"
SECTIONS = ("a", "b", "lag")
DEFAULT = "2,10"
KEYS = ("a", "b", "la", "lb")
FSYNCS = ":fsyncs"  # a metric's key + this: fsyncs through the shim per event, in the timed part (no open, close)
SPARE = 0.7  # the share of the time budget an append's expected cost may take over a workload's rounds
EXTRA_MS = 2.0  # an append's cost beyond its fsync, allowed for: a hop to a thread and back on a busy machine
IDLE = "idle"  # the lag rounds' extra entrant: the ticker on an idle loop, for IDLE_SECONDS
IDLE_SECONDS = 1.0
TARGET_FLOOR_A = 0.9
TARGET_FLOOR_B = 5.0
TARGET_LAG_MS = 5.0


def latencies(text: str) -> list[int]:
    """``"2,10"`` -> ``[2, 10]``; an empty text: none. Raises ValueError on anything but whole milliseconds >= 0."""
    values = [int(part) for part in text.split(",") if part.strip()]
    if any(ms < 0 for ms in values):
        raise ValueError("an fsync latency is a whole number of milliseconds >= 0")
    return values


def at(sizes: w.Sizes, ms: int) -> w.Sizes:
    """The run's sizes, cut so that appends costing one fsync and EXTRA_MS each take at most SPARE of the time
    budget over a workload's rounds: the floor, sessionstore and the peers as quick then take part in every round
    (a first run that allowed for the fsync alone left sessionstore's (a) at 2 ms in 10 of 14)."""
    if ms <= 0:
        return sizes

    def fits(rounds: int) -> int:
        return int(SPARE * sizes.budget / rounds * 1000 / (ms + EXTRA_MS))

    return replace(
        sizes,
        a=min(sizes.a, max(10, fits(sizes.a_rounds))),
        b_events=min(sizes.b_events, max(2, fits(sizes.b_rounds) // sizes.b_sessions)),
    )


@dataclass
class Latency:
    """What one latency's shimmed process measured, or why it could not."""

    ms: int
    sizes: w.Sizes | None = None
    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)
    pragmas: dict[str, Any] = field(default_factory=dict)
    probes: list[dict[str, Any]] = field(default_factory=list)
    disk: str = ""
    idle_lag_ms: float = 0.0
    problem: str | None = None


@dataclass
class LaptopSection:
    loaded: list[Loaded]
    runs: list[Latency] = field(default_factory=list)
    problem: str | None = None


# -- the parent: one shimmed process per latency -----------------------------------------------------------


def measure(
    loaded: list[Loaded],
    values: list[int],
    sections: set[str],
    flags: list[str],
    folder: Path,
    progress: Callable[[str], None],
) -> LaptopSection:
    """Run the shimmed process for each latency (``flags``: the run's size and store options)."""
    section = LaptopSection(loaded)
    try:
        built = shim.build(folder)
    except Exception as exc:
        section.problem = f"error: {short(exc)}"
        return section
    chosen = ",".join(s for s in SECTIONS if s in sections)
    for ms in values:
        speed = folder / f"fsync-{ms}ms"
        speed.write_text(str(ms))
        out = folder / f"laptop-{ms}ms.json"
        progress(f"-- laptop disks: fsync {ms} ms (sections {chosen}), in a process with the shim preloaded")
        done = subprocess.run(
            [sys.executable, str(RUN), "--here", *flags, "--sections", chosen, "--worker-fsync", str(ms), str(out)],
            env=shim.environ(built, speed),
        )
        if done.returncode != 0 or not out.exists():
            section.runs.append(Latency(ms, problem=f"error: the shimmed process exited {done.returncode}"))
            continue
        section.runs.append(from_json(json.loads(out.read_text())))
    return section


def from_json(raw: dict[str, Any]) -> Latency:
    def cell(found: dict[str, Any]) -> Cell:
        return Cell(**(found | {"rounds": {int(k): v for k, v in found["rounds"].items()}}))

    return Latency(
        ms=raw["ms"],
        sizes=w.Sizes(**(raw["sizes"] | {"e": tuple(raw["sizes"]["e"])})),
        cells={key: {m: cell(c) for m, c in cells.items()} for key, cells in raw["cells"].items()},
        pragmas=raw["pragmas"],
        probes=raw["probes"],
        disk=raw["disk"],
        idle_lag_ms=raw["idle_lag_ms"],
    )


def as_json(section: LaptopSection | None, problem: str | None) -> dict[str, Any]:
    if section is None:
        return {"problem": problem}
    return {
        "problem": section.problem,
        "latencies": [
            {
                "ms": run.ms,
                "problem": run.problem,
                "sizes": asdict(run.sizes) if run.sizes is not None else None,
                "fsync_probes_ms": run.probes,
                "idle_loop_lag_p99_ms": run.idle_lag_ms,
                "pragmas": run.pragmas,
                "stores": {key: {m: asdict(c) for m, c in cells.items()} for key, cells in run.cells.items()},
            }
            for run in section.runs
        ],
    }


# -- the child: the stores' rounds with the shim preloaded --------------------------------------------------


def child(
    ms: int, out: Path, sizes: w.Sizes, loaded: list[Loaded], sections: set[str], fresh: w.Fresh, events: list[Any]
) -> None:
    """(a), (b) and the lag (those in ``sections``) for every store, in this process, where the shim must be."""
    if shim.calls() is None:
        raise SystemExit("--worker-fsync: the slow-fsync shim is not preloaded in this process")
    w.METER.read = lambda: shim.calls() or 0
    sizes = at(sizes, ms)
    idle = w.idle_lag()
    disk = Disk(fresh.root, sizes.fsync)
    disk.probe("before")
    measured = [item for item in loaded if item.adapter is not None]
    pragmas = {
        item.key: w.pragmas_of(item.adapter, fresh)[0]
        for item in measured
        if item.adapter is not None and item.adapter.persistent
    }
    samples: dict[str, tuple[str, int, int, Callable[..., w.Sample]]] = {
        # metric: (section, rounds, events per sample, the sample)
        "a": ("a", sizes.a_rounds, sizes.a, w.sample_a),
        "b": ("b", sizes.b_rounds, sizes.b_sessions * sizes.b_events, w.sample_b),
        "la": ("lag", sizes.lag_rounds, sizes.a, w.sample_lag_a),
        "lb": ("lag", sizes.lag_rounds, sizes.b_sessions * sizes.b_events, w.sample_lag_b),
    }
    cells: dict[str, dict[str, Cell]] = {item.key: {} for item in measured}
    for metric, (name, rounds, count, sample) in samples.items():
        if name not in sections:
            continue
        print(f"-- workload {metric} @ {ms} ms fsync: {rounds} rounds", flush=True)
        entrants = [counted(item.adapter, metric, count, sample, sizes, fresh, events) for item in measured]
        if name == "lag":  # the machine's own lag in the same rounds: what a busy machine adds to every store's
            entrants.append(Entrant(IDLE, lambda _r, m=metric: {m: w.idle_lag(IDLE_SECONDS)}))  # type: ignore[misc]

        def between(number: int, metric: str = metric) -> None:
            disk.probe(f"{metric} round {number + 1}")

        got = interleave(entrants, rounds, sizes.budget, between, progress=lambda t: print(t, flush=True))
        for key, found in got.items():
            for wanted in (metric, metric + FSYNCS) if key != IDLE else (metric,):
                missing = Cell(problem="error: no value")
                cells.setdefault(key, {})[wanted] = found.get("*") or found.get(wanted) or missing
    disk.probe("after")
    out.write_text(
        json.dumps(
            {
                "ms": ms,
                "sizes": asdict(sizes),
                "cells": {key: {m: asdict(c) for m, c in found.items()} for key, found in cells.items()},
                "pragmas": pragmas,
                "probes": [asdict(p) for p in disk.probes],
                "disk": disk.summary(),
                "idle_lag_ms": idle,
            }
        )
    )


def counted(
    cls: type[Adapter] | None,
    metric: str,
    count: int,
    sample: Callable[..., w.Sample],
    sizes: w.Sizes,
    fresh: w.Fresh,
    events: list[Any],
) -> Entrant:
    """An entrant whose every sample also says how many fsyncs per event went through the shim."""
    assert cls is not None

    def one(_round: int) -> w.Sample:
        before = w.METER.total
        got = sample(cls, sizes, fresh, events)
        fsyncs = w.METER.total - before
        if cls.persistent and fsyncs == 0:
            raise RuntimeError("no fsync went through the shim: this store's commits did not reach it")
        return {metric: got[metric], metric + FSYNCS: fsyncs / count}

    return Entrant(cls.key, one, lambda: sample(cls, w.SMOKE, fresh, events))


# -- the report ---------------------------------------------------------------------------------------------


def lines(
    section: LaptopSection | None, problem: str | None, pragmas: dict[str, tuple[dict[str, str] | str, str | None]]
) -> list[str]:
    """The report's part: per latency, medians and fsyncs per event, paired ratios, targets."""
    title = "Laptop disks"
    if section is None or section.problem is not None:
        return [f"{title}: {problem or (section.problem if section else None) or 'not run'}."]
    out = [
        f"{title}: (a), (b) and the loop lag again with every fsync and fdatasync taking a fixed latency, in a "
        "process of their own per latency with the tests' shim preloaded (`tests/reliability/_slow_fsync.c`, built "
        "by `bench/shim.py`): every store's connections sync through it and never reach the real disk. Sizes are "
        f"cut so that appends costing one fsync and {EXTRA_MS:.0f} ms more each take at most {SPARE:.0%} of the time "
        "budget over a workload's rounds; the same interleaved rounds and paired ratios as above. Fsyncs per "
        "event: those the shim counted during the timed appends, over the events appended (a sample with none "
        "fails). The pg section is not run here (its fsyncs are the server's, in processes it starts itself).",
    ]
    for run in section.runs:
        out += ["", *latency_lines(section.loaded, run, pragmas)]
    return out


def latency_lines(
    loaded: list[Loaded], run: Latency, pragmas: dict[str, tuple[dict[str, str] | str, str | None]]
) -> list[str]:
    head = f"**a, b and lag @ {run.ms} ms fsync**"
    if run.problem is not None or run.sizes is None:
        return [f"{head}: {run.problem}."]
    sizes = run.sizes
    cols = [m for m in report.metrics(sizes) if m.key in KEYS]
    measured = [m for m in cols if any(m.key in cells for cells in run.cells.values())]
    counts = [m for m in measured if m.key in ("a", "b")] or measured  # the lag samples' counts are the same
    if IDLE in run.cells:
        loaded = [*loaded, Loaded(IDLE, "an idle loop, no store (this machine's own lag)", None, None)]
    out = [
        f"{head}: (a) {sizes.a:,} events, (b) {sizes.b_sessions} sessions x {sizes.b_events} events; rounds "
        f"(a) {sizes.a_rounds}, (b) {sizes.b_rounds}, lag {sizes.lag_rounds}; the ticker's p99 on an idle loop in "
        f"this process {run.idle_lag_ms:.2f} ms. " + run.disk.replace("Disk: fsync", "Probes through the shim: fsync"),
        "",
        "| store | "
        + " | ".join(f"{m.title} [{m.unit}]" for m in measured)
        + " | "
        + " | ".join(f"fsyncs per event, {m.title.split(' ')[0]}" for m in counts)
        + " |",
        "|" + " --- |" * (len(measured) + len(counts) + 1),
    ]
    for item in loaded:
        cells = run.cells.get(item.key, {})
        if item.problem is not None:
            why = item.problem.split(" (")[0]
            out.append(f"| {item.label} | " + " | ".join([why] * (len(measured) + len(counts))) + " |")
            continue
        values = [shown(cells.get(m.key), m.unit, int(getattr(sizes, m.rounds))) for m in measured]
        fsyncs = [shown(cells.get(m.key + FSYNCS), "", 0) for m in counts]
        out.append(f"| {item.label} | " + " | ".join(values + fsyncs) + " |")
    out += [
        "",
        "| sessionstore SQLiteStorage vs | " + " | ".join(m.title for m in measured) + " |",
        "|" + " --- |" * (len(measured) + 1),
    ]
    for item in loaded:
        if item.key == report.OURS or item.problem is not None:
            continue
        pairs = [pair(run, report.OURS, item.key, m) for m in measured]
        out.append(f"| {item.label} | " + " | ".join(p.text() if p else "-" for p in pairs) + " |")
    differ = [
        key for key, found in run.pragmas.items() if key in pragmas and pragmas[key][0] != found and found is not None
    ]
    out += [
        "",
        "Settings read from each store's own connection in this process: "
        + ("the same as in the table above." if not differ else "**differ** for " + ", ".join(differ) + "."),
        "",
        f"Targets @ {run.ms} ms (sessionstore):",
        "",
        *targets(run, cols),
    ]
    return out


def shown(cell: Cell | None, unit: str, planned: int) -> str:
    if cell is None:
        return "-"
    if cell.problem is not None or cell.value is None:
        return cell.problem or "error"
    text = report.fmt(cell.value, unit) if unit else f"{cell.value:.2f}"
    if cell.extra_note:
        text += f" ({cell.extra_note})"
    if planned and len(cell.rounds) < planned:
        text += f" n={len(cell.rounds)}"
    return text


def pair(run: Latency, ours: str, theirs: str, m: report.Metric) -> Any:
    return paired(run.cells.get(ours, {}).get(m.key), run.cells.get(theirs, {}).get(m.key), m.higher)


def targets(run: Latency, cols: list[report.Metric]) -> list[str]:
    by = {m.key: m for m in cols}
    out: list[str] = []

    def check(name: str, ok: bool | None, detail: str) -> None:
        out.append(f"- **{name}**: {'n/a' if ok is None else 'met' if ok else 'MISSED'}. {detail}")

    floor_a = pair(run, report.OURS, "raw", by["a"])
    peers_a = [(k, pair(run, report.OURS, k, by["a"])) for k in report.PEER_KEYS]
    peers_a = [(k, p) for k, p in peers_a if p is not None]
    if floor_a is not None:
        check(
            f"(a) >= {TARGET_FLOOR_A}x the floor",
            floor_a.median >= TARGET_FLOOR_A,
            f"median {floor_a.median:.2f}x, rounds {floor_a.low:.2f}-{floor_a.high:.2f}x",
        )
    if peers_a:
        check(
            "(a) ahead of every peer",
            all(p.median > 1 for _, p in peers_a),
            "; ".join(f"{k} {p.median:.2f}x won {p.won}/{p.n}" for k, p in peers_a),
        )
    else:
        check("(a) ahead of every peer", None, "no peer measured in this run")
    floor_b = pair(run, report.OURS, "raw", by["b"])
    if floor_b is not None:
        check(
            f"(b) >= {TARGET_FLOOR_B:.0f}x the floor",
            floor_b.median >= TARGET_FLOOR_B,
            f"median {floor_b.median:.2f}x, rounds {floor_b.low:.2f}-{floor_b.high:.2f}x",
        )
    lags = [(name, run.cells.get(report.OURS, {}).get(key)) for key, name in (("la", "(a)"), ("lb", "(b)"))]
    found = [(name, c) for name, c in lags if c is not None and c.samples]
    idle = [c for key in ("la", "lb") if (c := run.cells.get(IDLE, {}).get(key)) is not None and c.samples]
    if found:
        check(
            f"loop lag p99 under {TARGET_LAG_MS:.0f} ms during (a) and (b), in every round",
            all(max(c.samples) < TARGET_LAG_MS for _, c in found),
            "; ".join(f"{name} {min(c.samples):.2f}-{max(c.samples):.2f} ms" for name, c in found)
            + (
                f" (an idle loop in the same rounds: {min(min(c.samples) for c in idle):.2f}-"
                f"{max(max(c.samples) for c in idle):.2f} ms)"
                if idle
                else ""
            ),
        )
    return out
