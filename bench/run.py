"""Benchmarks sessionstore against its peers: ``python3 bench/run.py``.

Creates (or reuses) ``bench/.venv`` with the peers and this repo installed,
re-runs itself inside it, and writes ``bench/results.md``, ``bench/results.json``
and ``bench/chart.png``. ``--smoke`` runs every workload at a tiny size in the
current interpreter (what CI and the test suite do); a peer that is not
installed there is reported as "not installed". ``--quick`` is a reduced size
for working on the bench (minutes, not a measurement to publish).

Every workload runs in interleaved rounds (every store once per round, the
order reversed every other round) and sessionstore is compared with each store
round by round: see ``bench/rounds.py`` for why. Sections a, b and lag run
again with every fsync taking 2 ms and 10 ms (``--fsync-ms``), each latency in
a process of its own with the slow-fsync shim preloaded: see ``bench/laptop.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
VENV = BENCH / ".venv"
PEERS = ["openai-agents", "google-adk", "langgraph-checkpoint-sqlite", "sqlite-utils", "matplotlib", "pyinstrument"]

sys.path.insert(0, str(BENCH))

import ag2_mix  # noqa: E402
import cli_bench  # noqa: E402
import footprint  # noqa: E402
import laptop  # noqa: E402
import pg  # noqa: E402
import report  # noqa: E402
import turns  # noqa: E402
import workloads as w  # noqa: E402
from disk import Disk  # noqa: E402
from payloads import make_events  # noqa: E402
from peers import Adapter, Loaded, load  # noqa: E402
from rounds import Cell, Entrant, interleave, short  # noqa: E402

SECTIONS = ("a", "turns", "b", "c", "d", "e", "g", "h", "lag", "memory", "ag2", "cli", "pg")

HOW = [
    "- Every store gets the same events (a fixed mix of user messages ~200 B, tool calls ~150 B, tool results "
    "~600 B, model messages ~800 B; 456 B of JSON on average), converted to its native objects before timing, "
    "and a fresh file for every sample unless said otherwise.",
    "- Rounds: in every round of a workload each store takes one sample, in the table's order in even rounds and "
    "reversed in odd ones; before the first round each store runs the workload once, small and unmeasured (lazy "
    "imports, first-use caches); garbage is collected before every sample (a full collection costs in proportion to "
    "everything the process holds, and would otherwise land in whichever sample happens to trigger it). A store "
    "whose first sample shows it would need more than the time budget for every round takes part in fewer, spread "
    "from the first round to the last (`n=`). Paired ratios compare sessionstore's sample with the other store's "
    "from the same round only.",
    "- (a) one session, one awaited append per event. (b) sessions in one event loop, each appending its events "
    "one await at a time, all at once. (c) processes, each appending to its own session in one shared file; "
    "the span from the first start to the last finish.",
    "- (d) a history written beforehand (once per store); a fresh store object (no cache from the write) reads it "
    "back; the file is in the OS page cache. The floor is `SELECT type, payload ... ORDER BY position` + "
    "`json.loads` per row.",
    "- (e) the history loaded, then calls each passing the previous list plus one new event (the same "
    "objects); per-call median. OpenAI sessions have no replace: `clear_session()` + `add_items(all)`. LangGraph: "
    "a checkpoint with the full list (what every step writes anyway). ADK has no replace operation. The floor "
    "row is the one INSERT + COMMIT such a call comes down to.",
    "- (f) bytes on disk (database + WAL) after (a)'s appends, per 1,000 events, against the raw JSON "
    "bytes of the same events; in brackets also the same ratio for (d)'s file (fixed per-file pages amortised).",
    "- (g) a new `python -c` process: import the library, open a file holding one 100-event session, read it, "
    "exit; wall time including interpreter start. The baselines run in the same rounds.",
    "- (h) one long-lived file per store, holding the given number of events before the first round (written in "
    "sessions of 1,000 by the store's bulk write); each round opens it, appends events one at a time to a new "
    "session, and reads the WAL's size before closing: a WAL that is reused stays small, one that is not "
    "checkpointed grows. ADK has no bulk write, so filling its file would take most of the run: n/a.",
    "- Loop lag: a task sleeping 1 ms again and again on the same event loop while (a) or (b) runs, in samples "
    "of their own (so the ticker does not slow the rates above).",
    "- LangGraph's messages are plain dicts (cheaper to serialise than LangChain message objects, so this "
    "favours LangGraph); every append writes a checkpoint holding the whole history, as a graph step does.",
]


# -- the separate environment --------------------------------------------------------------


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def bootstrap() -> Path:
    """Make bench/.venv with the peers and this repo (with its ag2 and postgres extras); reinstall only when the list
    changes."""
    python = venv_python()
    if not python.exists():
        print(f"creating {VENV}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    stamp = VENV / ".bench-installed"
    this = f"{ROOT}[ag2,postgres]"
    # What is installed, all of it in the stamp: a venv made with other extras or peers is brought up to date.
    wanted = hashlib.sha256(json.dumps([this, PEERS]).encode() + (ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text() != wanted:
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "-e", this], check=True)
        if subprocess.run([*pip, *PEERS]).returncode != 0:
            # One peer failing to install must not take the others with it: it is reported as not installed.
            for peer in PEERS:
                if subprocess.run([*pip, peer]).returncode != 0:
                    print(f"warning: {peer} could not be installed; it will be reported as such", flush=True)
        stamp.write_text(wanted)
    return python


# -- the workloads, as rounds of entrants ---------------------------------------------------------------


@dataclass
class Workload:
    """One workload: which metrics it fills, its rounds, which stores it applies to, and one entrant per store.

    ``entrant`` may prepare (untimed) before returning: a file to read, a long-lived file to append to.
    """

    section: str
    keys: tuple[str, ...]
    rounds: int
    applies: Callable[[type[Adapter]], str | None]
    entrant: Callable[[Loaded], Entrant]


def always(cls: type[Adapter]) -> str | None:
    return None


def on_disk(cls: type[Adapter]) -> str | None:
    return None if cls.persistent else "n/a: nothing on disk"


def bulk_on_disk(cls: type[Adapter]) -> str | None:
    if not cls.persistent:
        return "n/a: nothing on disk"
    return None if cls.bulk_load else "n/a: no bulk write"


def store_workloads(run: report.Run, fresh: w.Fresh, events: list[Any]) -> list[Workload]:
    sizes = run.sizes
    tiny = w.SMOKE

    def adapter(item: Loaded) -> type[Adapter]:
        assert item.adapter is not None
        return item.adapter

    def simple(
        sample: Callable[[type[Adapter], w.Sizes, w.Fresh, list[Any]], Any],
    ) -> Callable[[Loaded], Entrant]:
        def entrant(item: Loaded) -> Entrant:
            cls = adapter(item)
            return Entrant(
                item.key, lambda _r: sample(cls, sizes, fresh, events), lambda: sample(cls, tiny, fresh, events)
            )

        return entrant

    def entrant_c(item: Loaded) -> Entrant:
        cls = adapter(item)
        return Entrant(item.key, lambda _r: w.sample_c(cls, sizes, fresh), lambda: w.sample_c(cls, tiny, fresh))

    def entrant_d(item: Loaded) -> Entrant:
        cls = adapter(item)
        path, ratio = w.prepare_d(cls, sizes, fresh, events)
        if ratio is not None:
            run.json_bytes_d[item.key] = ratio
        return Entrant(
            item.key, lambda _r: w.sample_d(cls, sizes, path, events), lambda: w.sample_d(cls, sizes, path, events)
        )

    def entrant_g(item: Loaded) -> Entrant:
        code = w.prepare_g(adapter(item), sizes, fresh, events)
        return Entrant(item.key, lambda _r: {"g": w.process_ms(code)}, lambda: w.process_ms(code))

    def entrant_h(item: Loaded) -> Entrant:
        cls = adapter(item)
        path = w.prepare_h(cls, sizes, fresh)
        warm = replace(sizes, h_events=min(10, sizes.h_events))
        return Entrant(
            item.key, lambda r: w.sample_h(cls, sizes, path, events, r), lambda: w.sample_h(cls, warm, path, events, -1)
        )

    def entrant_memory(item: Loaded) -> Entrant:
        cls = adapter(item)
        path, size = footprint.prepare_memory(cls, sizes, fresh)
        run.memory_files[item.key] = size

        def one(_round: int) -> Any:
            try:
                return footprint.sample_memory(cls, sizes, path)
            finally:
                shutil.rmtree(path.parent, ignore_errors=True)  # hundreds of MB each: gone once measured

        return Entrant(item.key, one)

    return [
        Workload("a", ("a", "f", "f_json"), sizes.a_rounds, always, simple(w.sample_a)),
        Workload("b", ("b",), sizes.b_rounds, always, simple(w.sample_b)),
        Workload(
            "c", ("c",), sizes.c_rounds, lambda cls: None if cls.multiprocess else "n/a: process memory", entrant_c
        ),
        Workload("d", ("d",), sizes.d_rounds, always, entrant_d),
        Workload(
            "e",
            ("e0", "e1", "e2"),
            sizes.e_rounds,
            lambda cls: None if cls.can_replace else "n/a: no replace operation",
            simple(w.sample_e),
        ),
        Workload("g", ("g",), sizes.g_rounds, on_disk, entrant_g),
        Workload("h", ("h", "hw"), sizes.h_rounds, bulk_on_disk, entrant_h),
        Workload("lag", ("la",), sizes.lag_rounds, always, simple(w.sample_lag_a)),
        Workload("lag", ("lb",), sizes.lag_rounds, always, simple(w.sample_lag_b)),
        Workload("memory", ("m0", "m1", "m2", "m3", "m4", "mp"), 1, bulk_on_disk, entrant_memory),
    ]


def measure_stores(
    run: report.Run, workloads: list[Workload], sections: set[str], disk: Disk, after: Callable[[], None]
) -> None:
    measured = [item for item in run.loaded if item.adapter is not None]
    for workload in workloads:
        if workload.section not in sections:
            for item in measured:
                for key in workload.keys:
                    run.cells[item.key][key] = Cell(problem="not run")
            continue
        print(f"-- workload {'/'.join(workload.keys)}: {workload.rounds} rounds", flush=True)
        entrants: list[Entrant] = []
        for item in measured:
            assert item.adapter is not None
            why = workload.applies(item.adapter)
            if why is None:
                try:
                    entrants.append(workload.entrant(item))
                except Exception as exc:  # preparing failed: the store gets an error cell, the others go on
                    why = f"error: {short(exc)}"
            if why is not None:
                for key in workload.keys:
                    run.cells[item.key][key] = Cell(problem=why)
        if workload.keys == ("g",):
            for name, code in w.BASELINES.items():
                entrants.append(
                    Entrant(
                        f"base:{name}",
                        lambda _r, c=code: {"g": w.process_ms(c)},  # type: ignore[misc]
                        lambda c=code: w.process_ms(c),  # type: ignore[misc]
                    )
                )

        def between(number: int, name: str = workload.keys[0]) -> None:
            disk.probe(f"{name} round {number + 1}")

        got = interleave(entrants, workload.rounds, run.sizes.budget, between, progress=lambda t: print(t, flush=True))
        for key, cells in got.items():
            if key.startswith("base:"):
                run.baselines[key.removeprefix("base:")] = cells.get("g", Cell(problem="error"))
                continue
            failed = cells.get("*")
            persistent = next(i.adapter.persistent for i in run.loaded if i.key == key and i.adapter is not None)
            for metric in workload.keys:
                missing = Cell(problem="error: no value" if persistent else "n/a: nothing on disk")
                run.cells[key][metric] = failed or cells.get(metric) or missing
        after()


def measure_ag2(run: report.Run, fresh: w.Fresh, disk: Disk) -> None:
    """(j): AG2's events against ours, or why it cannot run here."""
    try:
        event_codec = ag2_mix.codec()
        ag2_events, own_events = ag2_mix.conversation(run.sizes.ag2_turns)
    except ImportError as exc:
        run.ag2_problem = f"not installed ({exc})"
        return
    from sessionstore import JsonCodec

    run.ag2_bytes = {
        "ag2": ag2_mix.payload_bytes(ag2_events, event_codec),
        "own": ag2_mix.payload_bytes(own_events, JsonCodec()),
    }
    warm_ag2, warm_own = ag2_events[:9], own_events[:9]
    entrants = [
        Entrant(
            "own",
            lambda _r: ag2_mix.sample_append(fresh.path(), own_events, None),
            lambda: ag2_mix.sample_append(fresh.path(), warm_own, None),
        ),
        Entrant(
            "ag2",
            lambda _r: ag2_mix.sample_append(fresh.path(), ag2_events, event_codec),
            lambda: ag2_mix.sample_append(fresh.path(), warm_ag2, event_codec),
        ),
    ]
    print(f"-- workload j (AG2 events): {run.sizes.ag2_rounds} rounds", flush=True)

    def between(number: int) -> None:
        disk.probe(f"j round {number + 1}")

    got = interleave(entrants, run.sizes.ag2_rounds, 1e9, between, progress=lambda t: print(t, flush=True))
    run.ag2 = {key: cells.get("j") or cells.get("*") or Cell(problem="error") for key, cells in got.items()}


def measure_turns(run: report.Run, loaded: list[Loaded], events: list[Any], fresh: w.Fresh) -> None:
    """(a) against the floor again, the two taking turns every few appends (``bench/turns.py``)."""
    stores = {item.key: item.adapter for item in loaded if item.key in ("raw", "sessionstore") and item.adapter}
    if len(stores) < 2:
        run.turns_problem = "needs the floor and sessionstore (--only leaves one out)"
        return
    sizes = run.sizes
    print(f"-- turns: {sizes.turns_rounds} rounds, turns of {sizes.turns_block}", flush=True)
    run.turns = turns.measure(
        stores, events[: sizes.a], sizes.turns_rounds, sizes.turns_block, fresh.root, lambda t: print(t, flush=True)
    )


# -- the report's surroundings ------------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}"
    )


def load_average() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in [
        "sessionstore",
        "SQLAlchemy",
        "aiosqlite",
        "asyncpg",
        "openai-agents",
        "google-adk",
        "langgraph-checkpoint-sqlite",
        "ag2",
        "sqlite-utils",
    ]:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def write_report(run: report.Run, out: Path, started: datetime, load_before: str, argv: list[str]) -> None:
    stamp = started.strftime("%Y-%m-%d %H:%M UTC")
    out.mkdir(parents=True, exist_ok=True)
    chart_note = report.chart(run, out / "chart.png", stamp)
    sizes = run.sizes
    notes = [
        f"- {item.label}: {item.adapter.durability}"
        for item in run.loaded
        if item.adapter is not None and item.adapter.durability
    ]
    rounds = (
        f"(a) {sizes.a_rounds}, (b) {sizes.b_rounds}, (c) {sizes.c_rounds}, (d) {sizes.d_rounds}, "
        f"(e) {sizes.e_rounds} of {sizes.e_calls} calls, (g) {sizes.g_rounds}, (h) {sizes.h_rounds}, "
        f"loop lag {sizes.lag_rounds}"
    )
    mode = " (smoke mode: tiny sizes, not a measurement)" if run.smoke else ""
    command = " ".join(["python3 bench/run.py", *(a for a in argv if a != "--here")])
    text = [
        f"Run {stamp} on {machine()}{mode}: `{command}`.",
        f"Load average (1/5/15 min) before: {load_before}, after: {load_average()}; "
        f"took {(datetime.now(UTC) - started).total_seconds() / 60:.1f} min.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()) + ".",
        "",
        run.disk.summary() + f" Slowest/fastest probe: {run.disk.drift():.1f}x.",
        "",
        *report.drift_lines(run),
        "",
        report.values_table(run),
        "",
        f"Medians over interleaved rounds: {rounds}; `n=` marks a store that took part in fewer rounds (a slow "
        f"store within a time budget of {sizes.budget:.0f} s per workload). Rates in events/s (higher is better), "
        "times in ms and sizes (lower is better).",
        "",
        "Paired ratios, round by round: sessionstore's sample / the other store's sample from the same round; median "
        "(min-max over the rounds both took part in), and in how many of them sessionstore was better. For rates "
        "above 1x is sessionstore faster, for times and sizes below 1x is sessionstore better.",
        "",
        report.ratios_table(run),
        "",
        report.lag_line(run),
        "",
        report.baselines_line(run),
        "",
        "Settings each store runs with, read from its own connection during the run:",
        "",
        report.pragmas_table(run),
        "",
        f"Memory (a fresh process per store; files of {sizes.mem_sessions} sessions x {sizes.mem_events:,} events "
        f"of ~1 KiB, written by each store's bulk write): resident memory after opening the store, after reading "
        "every session once (all held), after dropping them and collecting garbage, after `malloc_trim(0)` (glibc "
        "hands back the free memory it holds), and after closing the store (+ gc, malloc_trim).",
        "",
        report.memory_table(run),
        "",
        *turns.lines(run.turns, run.turns_problem),
        "",
        *report.ag2_section(run),
        "",
        *report.cli_section(run),
        "",
        *laptop.lines(run.laptop, run.laptop_problem, run.pragmas),
        "",
        *pg.lines(run.pg, run.pg_problem, sizes),
        "",
        "Durability per store:",
        "",
        *notes,
        "",
        "How each workload is run:",
        "",
        *HOW,
        "",
        "Targets (sessionstore):",
        "",
        *report.targets(run),
    ]
    if chart_note:
        text += ["", chart_note]
    (out / "results.md").write_text("\n".join(text) + "\n")

    def cells(found: dict[str, Cell]) -> dict[str, Any]:
        return {k: asdict(c) for k, c in found.items()}

    raw = {
        "started": started.isoformat(),
        "machine": machine(),
        "smoke": run.smoke,
        "sizes": asdict(sizes),
        "fsync_probes_ms": [asdict(p) for p in run.disk.probes],
        "idle_loop_lag_p99_ms": run.idle_lag_ms,
        "baselines_ms": cells(run.baselines),
        "pragmas": {k: {"read": v[0], "journal_mode_on_its_own": v[1]} for k, v in run.pragmas.items()},
        "stores": {
            item.key: {"label": item.label, "problem": item.problem, "cells": cells(run.cells[item.key])}
            for item in run.loaded
        },
        "memory_file_bytes": run.memory_files,
        "ag2": {"problem": run.ag2_problem, "bytes_per_event": run.ag2_bytes, "cells": cells(run.ag2)},
        "cli": None
        if run.cli is None
        else {
            "file": run.cli.file_note,
            "notes": run.cli.notes,
            "cells": {k: cells(v) for k, v in run.cli.cells.items()},
        }
        if run.cli_problem is None
        else {"problem": run.cli_problem},
        "pg": pg.as_json(run.pg, run.pg_problem),
        "laptop": laptop.as_json(run.laptop, run.laptop_problem),
        "turns": turns.as_json(run.turns, run.turns_problem),
    }
    (out / "results.json").write_text(json.dumps(raw, indent=1))


# -- main ----------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, current interpreter (CI)")
    parser.add_argument("--quick", action="store_true", help="reduced sizes, for working on the bench")
    parser.add_argument("--here", action="store_true", help="run in the current interpreter (no bench/.venv)")
    parser.add_argument("--out", type=Path, default=BENCH, help="folder for results.md, results.json, chart.png")
    parser.add_argument("--only", help="comma-separated store keys (memory and raw are always run)")
    parser.add_argument("--sections", help=f"comma-separated, of {','.join(SECTIONS)} (default: all)")
    parser.add_argument(
        "--fsync-ms",
        default=laptop.DEFAULT,
        help=f"fsync latencies in ms at which sections a, b and lag run again (default {laptop.DEFAULT}; '' for none)",
    )
    parser.add_argument("--worker-append", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--worker-fsync", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--worker-memory", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker_append:
        key, path, session, count = args.worker_append
        w.worker_append(key, path, session, int(count))
        return 0
    if args.worker_memory:
        key, path, sessions = args.worker_memory
        footprint.worker_memory(key, path, int(sessions))
        return 0
    if not (args.smoke or args.here) and Path(sys.prefix).resolve() != VENV.resolve():
        python = bootstrap()
        return subprocess.run([str(python), __file__, "--here", *argv]).returncode

    sizes = w.SMOKE if args.smoke else w.QUICK if args.quick else w.Sizes()
    sections = set(SECTIONS if not args.sections else args.sections.split(","))
    unknown = sections - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    try:
        fsync_ms = laptop.latencies(args.fsync_ms)
    except ValueError as exc:
        parser.error(f"--fsync-ms: {exc}")
    only = None if not args.only else {"memory", "raw", *args.only.split(",")}
    loaded = load(only)
    events = make_events(max(sizes.a, sizes.d, max(sizes.e) + sizes.e_calls, sizes.b_events, sizes.h_events))
    fresh = w.Fresh()
    started = datetime.now(UTC)
    load_before = load_average()
    progress = os.environ.get("BENCH_PROGRESS")
    disk = Disk(fresh.root, sizes.fsync)
    run = report.Run(
        sizes=sizes,
        smoke=args.smoke,
        loaded=loaded,
        cells={item.key: {} for item in loaded},
        baselines={},
        disk=disk,
        idle_lag_ms=0.0,
        pragmas={},
    )
    if args.worker_fsync:
        ms, out = args.worker_fsync
        try:
            laptop.child(int(ms), Path(out), sizes, loaded, sections, fresh, events)
        finally:
            shutil.rmtree(fresh.root, ignore_errors=True)
        return 0
    for item in loaded:
        if item.adapter is None:
            print(f"{item.label}: {item.problem}", flush=True)

    def after() -> None:
        if progress:
            Path(progress).write_text(report.values_table(run))

    try:
        disk.probe("before")
        run.idle_lag_ms = w.idle_lag()
        for item in loaded:
            if item.adapter is not None and item.adapter.persistent:
                run.pragmas[item.key] = w.pragmas_of(item.adapter, fresh)
                print(f"{item.label}: {run.pragmas[item.key]}", flush=True)
        measure_stores(run, store_workloads(run, fresh, events), sections, disk, after)
        if fsync_ms and sections & set(laptop.SECTIONS):
            flags = [*(["--smoke"] if args.smoke else []), *(["--quick"] if args.quick else [])]
            flags += ["--only", args.only] if args.only else []
            run.laptop = laptop.measure(loaded, fsync_ms, sections, flags, fresh.root, lambda t: print(t, flush=True))
        else:
            run.laptop_problem = "not run"
        if "turns" in sections:
            measure_turns(run, loaded, events, fresh)
        else:
            run.turns_problem = "not run"
        if "ag2" in sections:
            measure_ag2(run, fresh, disk)
        else:
            run.ag2_problem = "not run"
        if "cli" in sections:
            try:
                run.cli = cli_bench.measure(sizes, fresh, cache=not args.smoke, progress=lambda t: print(t, flush=True))
            except Exception as exc:
                run.cli_problem = f"error: {short(exc)}"
        else:
            run.cli_problem = "not run"
        if "pg" in sections:
            try:
                run.pg = pg.measure(sizes, events, progress=lambda t: print(t, flush=True))
            except Exception as exc:  # no server here (no binaries): said in the report, the rest stands
                run.pg_problem = f"error: {short(exc)}"
        else:
            run.pg_problem = "not run"
        disk.probe("after")
    finally:
        shutil.rmtree(fresh.root, ignore_errors=True)

    write_report(run, args.out, started, load_before, argv)
    print((args.out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
