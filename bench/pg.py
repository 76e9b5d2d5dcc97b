"""The pg section: the PostgreSQL rows, ``python3 bench/run.py --sections pg``.

sessionstore's PostgresStorage against OpenAI's ``SQLAlchemySession`` and ADK's ``DatabaseSessionService``, all
on one throwaway PostgreSQL server (``tests/pg_server.py``, the one the tests start) with PostgreSQL's default
durability: fsync, full_page_writes and synchronous_commit on, so that every acknowledged append has reached the
disk, as on SQLite at ``synchronous=FULL``. Workloads (a), (b), (c) and (d) of ``workloads.py``, each store in a
fresh database for every sample, in the same interleaved rounds and paired ratios as the SQLite tables (the
disk's flush time drifts just as much under a server); and for sessionstore, (c) with 4 processes against the
same with 1, in the same rounds: what a server buys over one file.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import workloads as w
from peers import PG_STORES, Adapter, Loaded, load
from peers._pg import SETTINGS
from rounds import Cell, Entrant, drift, interleave, paired, short

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # pg_server: the tests' own server

OURS = "sessionstore_pg"
SINGLE = "sessionstore_pg:1"  # sessionstore, (c) with one process
FLOOR = "raw_pg"
FLOOR_SINGLE = "raw_pg:1"  # the floor, (c) with one process: how far the machine lets 4 processes scale at all
PEERS = ("openai_pg", "adk_pg")
HEAD = "bench_head"
TARGET_PEERS = 5.0  # (a) and (b): sessionstore's paired median over each peer's
TARGET_PROCESSES = 2.0  # (c): 4 processes over 1


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    unit: str
    higher: bool
    rounds: str


def columns(sizes: w.Sizes) -> list[Column]:
    return [
        Column("a", "(a) sequential append", "events/s", True, "a_rounds"),
        Column("b", f"(b) {sizes.b_sessions} sessions concurrent", "events/s", True, "b_rounds"),
        Column("c", f"(c) {sizes.c_procs} processes, one database", "events/s", True, "c_rounds"),
        Column("d", f"(d) read {sizes.d:,}-event history", "ms", False, "d_rounds"),
    ]


@dataclass
class PgSection:
    """What the pg section measured, or why it could not."""

    loaded: list[Loaded] = field(default_factory=list)
    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)
    settings: dict[str, dict[str, str] | str] = field(default_factory=dict)
    server: str = ""
    problem: str | None = None


class PgFresh:
    """A fresh database for every sample (``path()`` returns its URL): empty, or a copy of one at head."""

    def __init__(self, server: Any, template: str) -> None:
        self.server = server
        self.template = template
        self.made: list[str] = []

    def path(self) -> str:
        name = self.server.create_database(self.template)
        self.made.append(name)
        return str(self.server.url(name))

    def drop(self) -> None:
        for name in self.made:
            self.server.drop_database(name)
        self.made.clear()


def measure(sizes: w.Sizes, events: list[Any], progress: Callable[[str], None]) -> PgSection:
    """Start the server, run (a)-(d) for every PostgreSQL store that imports here, stop and remove the server."""
    from pg_server import running

    from sessionstore.postgres import migrate as pgmigrate

    section = PgSection(loaded=load(None, PG_STORES))
    section.cells = {item.key: {} for item in section.loaded}
    measured = [item for item in section.loaded if item.adapter is not None]
    with running(durable=True) as server:
        section.server = "PostgreSQL " + server.psql("SHOW server_version").strip()
        server.psql(f'CREATE DATABASE "{HEAD}" TEMPLATE template0')
        pgmigrate.migrate(server.url(HEAD))

        def fresh(cls: type[Adapter]) -> PgFresh:
            return PgFresh(server, HEAD if cls.pg_head else "template0")

        for item in measured:
            assert item.adapter is not None
            one = fresh(item.adapter)
            try:
                section.settings[item.key] = w.run(w.store_pragmas(item.adapter, one.path()))  # type: ignore[arg-type]
            except Exception as exc:
                section.settings[item.key] = f"cannot be read: {short(exc)}"
            one.drop()
            progress(f"{item.label}: {section.settings[item.key]}")
        for column in columns(sizes):
            rounds = int(getattr(sizes, column.rounds))
            progress(f"-- pg workload {column.key}: {rounds} rounds")
            made: list[PgFresh] = []
            entrants: list[Entrant] = []
            for item in measured:
                assert item.adapter is not None
                cls = item.adapter
                db = fresh(cls)
                made.append(db)
                try:
                    entrants += entrants_for(column.key, item.key, cls, sizes, db, events)
                except Exception as exc:  # preparing failed: an error cell, the others go on
                    section.cells[item.key][column.key] = Cell(problem=f"error: {short(exc)}")
            got = interleave(entrants, rounds, sizes.budget, progress=progress)
            for key, cells in got.items():
                section.cells.setdefault(key, {})[column.key] = (
                    cells.get("*") or cells.get(column.key) or Cell(problem="error: no value")
                )
            for db in made:
                db.drop()  # a database per sample adds up: gone once the workload is measured
    return section


def entrants_for(
    workload: str, key: str, cls: type[Adapter], sizes: w.Sizes, db: PgFresh, events: list[Any]
) -> list[Entrant]:
    """The entrants of one store for one workload (for sessionstore's (c), also the one-process run)."""
    fresh: Any = db
    tiny = w.SMOKE
    if workload == "a":
        return [
            Entrant(
                key,
                lambda _r: {"a": w.sample_a(cls, sizes, fresh, events)["a"]},
                lambda: w.sample_a(cls, tiny, fresh, events),
            )
        ]
    if workload == "b":
        return [
            Entrant(key, lambda _r: w.sample_b(cls, sizes, fresh, events), lambda: w.sample_b(cls, tiny, fresh, events))
        ]
    if workload == "c":
        out = [Entrant(key, lambda _r: w.sample_c(cls, sizes, fresh), lambda: w.sample_c(cls, tiny, fresh))]
        if key in (OURS, FLOOR):
            one = replace(sizes, c_procs=1)
            out.append(Entrant(f"{key}:1", lambda _r: w.sample_c(cls, one, fresh)))
        return out
    path, _ = w.prepare_d(cls, sizes, fresh, events)
    return [Entrant(key, lambda _r: w.sample_d(cls, sizes, path, events), lambda: w.sample_d(cls, sizes, path, events))]


# -- the report --------------------------------------------------------------------------------------


def _value(cell: Cell | None, column: Column, planned: int) -> str:
    if cell is None:
        return "error"
    if cell.problem is not None:
        return cell.problem
    text = f"{cell.value:,.0f}" if column.unit == "events/s" or (cell.value or 0) >= 100 else f"{cell.value:.1f}"
    if cell.extra_note:
        text += f" ({cell.extra_note})"
    if len(cell.rounds) < planned:
        text += f" n={len(cell.rounds)}"
    return text


def _pair(section: PgSection, ours: str, theirs: str, column: Column) -> Any:
    cells = section.cells
    return paired(cells.get(ours, {}).get(column.key), cells.get(theirs, {}).get(column.key), column.higher)


def lines(section: PgSection | None, problem: str | None, sizes: w.Sizes) -> list[str]:
    """The report's PostgreSQL part: medians, paired ratios, 4 processes against 1, settings, targets."""
    title = "PostgreSQL (pg)"
    if section is None or section.problem is not None:
        return [f"{title}: {problem or (section.problem if section else None) or 'not run'}."]
    cols = columns(sizes)
    out = [
        f"{title}: {section.server}, one throwaway server (`tests/pg_server.py`, PostgreSQL's default durability), "
        "each store in a fresh database for every sample, the same events and interleaved rounds as above; "
        "sessionstore's database is a copy of one at its schema head (the others make their tables themselves).",
        "",
        "| store | " + " | ".join(f"{c.title} [{c.unit}]" for c in cols) + " |",
        "|" + " --- |" * (len(cols) + 1),
    ]
    for item in section.loaded:
        if item.problem is not None:
            out.append(f"| {item.label} | " + " | ".join([item.problem.split(" (")[0]] * len(cols)) + " |")
            continue
        cells = section.cells.get(item.key, {})
        values = [_value(cells.get(c.key), c, int(getattr(sizes, c.rounds))) for c in cols]
        out.append(f"| {item.label} | " + " | ".join(values) + " |")
    out += ["", "| sessionstore PostgresStorage vs | " + " | ".join(c.title for c in cols) + " |"]
    out.append("|" + " --- |" * (len(cols) + 1))
    for item in section.loaded:
        if item.key == OURS or item.problem is not None:
            continue
        row = []
        for c in cols:
            pair = _pair(section, OURS, item.key, c)
            row.append(pair.text() if pair is not None else "-")
        out.append(f"| {item.label} | " + " | ".join(row) + " |")
    c = cols[2]
    scale = _pair(section, OURS, SINGLE, c)
    floor_scale = _pair(section, FLOOR, FLOOR_SINGLE, c)
    out += [
        "",
        f"(c) {sizes.c_procs} processes against 1 (each appending {sizes.c_events} events to its own session, in "
        f"the same rounds): sessionstore 1 process {_value(section.cells.get(SINGLE, {}).get('c'), c, sizes.c_rounds)}"
        f" events/s, {sizes.c_procs} / 1 paired "
        + (scale.text() if scale is not None else "-")
        + f"; the floor 1 process {_value(section.cells.get(FLOOR_SINGLE, {}).get('c'), c, sizes.c_rounds)} events/s, "
        f"{sizes.c_procs} / 1 paired " + (floor_scale.text() if floor_scale is not None else "-") + ".",
    ]
    bounds = []
    for column in cols[:2]:
        for peer in PEERS:
            pair = _pair(section, FLOOR, peer, column)
            label = next((i.label for i in section.loaded if i.key == peer), peer)
            if pair is not None:
                bounds.append(f"{column.title} {pair.median:.2f}x {label}")
    if bounds:
        out += [
            "",
            "The floor against each peer, paired (one INSERT and commit per event: how far ahead any store that "
            "commits every event could be): " + "; ".join(bounds) + ".",
        ]
    floor = section.cells.get("raw_pg", {}).get("a")
    moved = drift(floor)
    if moved is not None:
        out += [
            "",
            f"The floor's (a) moved {moved:.1f}x between rounds (the disk's flush time): compare by the paired ratios.",
        ]
    out += ["", "Settings, read from each store's own connection during the run:", ""]
    out += ["| store | " + " | ".join(SETTINGS) + " | read from |", "|" + " --- |" * (len(SETTINGS) + 2)]
    for item in section.loaded:
        if item.adapter is None or item.key not in section.settings:
            continue
        found = section.settings[item.key]
        values = [found] * len(SETTINGS) if isinstance(found, str) else [found.get(n, "?") for n in SETTINGS]
        out.append(f"| {item.label} | " + " | ".join(values) + f" | {item.adapter.pragma_source} |")
    out += ["", "Targets (sessionstore PostgresStorage):", ""]
    for c in cols[:2]:
        for peer in PEERS:
            pair = _pair(section, OURS, peer, c)
            label = next((i.label for i in section.loaded if i.key == peer), peer)
            if pair is None:
                out.append(f"- {c.title} >= {TARGET_PEERS:.0f}x {label}: not measured")
            else:
                met = "met" if pair.median >= TARGET_PEERS else "**not met**"
                out.append(f"- {c.title} >= {TARGET_PEERS:.0f}x {label}: {met} ({pair.text()})")
    if scale is None:
        out.append(f"- (c) {sizes.c_procs} processes >= {TARGET_PROCESSES:.0f}x 1 process: not measured")
    else:
        met = "met" if scale.median >= TARGET_PROCESSES else "**not met**"
        out.append(f"- (c) {sizes.c_procs} processes >= {TARGET_PROCESSES:.0f}x 1 process: {met} ({scale.text()})")
    return out


def as_json(section: PgSection | None, problem: str | None) -> dict[str, Any]:
    if section is None:
        return {"problem": problem}
    return {
        "problem": section.problem,
        "server": section.server,
        "settings": section.settings,
        "stores": {
            item.key: {
                "label": item.label,
                "problem": item.problem,
                "cells": {k: asdict(c) for k, c in section.cells.get(item.key, {}).items()},
            }
            for item in section.loaded
        },
        "single_process_c": {k: asdict(c) for k, c in section.cells.get(SINGLE, {}).items()},
        "floor_single_process_c": {k: asdict(c) for k, c in section.cells.get(FLOOR_SINGLE, {}).items()},
    }
