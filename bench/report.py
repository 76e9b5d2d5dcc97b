"""The report: tables of medians and paired ratios, the run's conditions, the targets, the chart."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cli_bench import CliSection
from disk import Disk
from peers import PRAGMAS, Loaded
from rounds import Cell, Paired, drift, paired
from workloads import BASELINES, Sizes

OURS = "sessionstore"
PEER_KEYS = ("openai_sqlite", "openai_sqlalchemy", "adk_database", "adk_sqlite", "langgraph")
DRIFT_LIMIT = 2.0
# Where the floor's drift between rounds is the disk's (or the machine's) and not the workload's: not the file
# size (f, hw, fixed) nor the floor's loop lag (which is a whole run's duration, as it never yields).
DRIFT_METRICS = ("a", "b", "c", "d", "e0", "e1", "e2", "g", "h")


@dataclass(frozen=True)
class Metric:
    key: str
    title: str
    unit: str
    higher: bool  # is a higher value better?
    rounds: str  # the Sizes field holding its planned rounds


def metrics(sizes: Sizes) -> list[Metric]:
    e = [f"{n:,}" if n < 1000 else f"{n // 1000:,}k" for n in sizes.e]
    return [
        Metric("a", "(a) sequential append", "events/s", True, "a_rounds"),
        Metric("b", f"(b) {sizes.b_sessions} sessions concurrent", "events/s", True, "b_rounds"),
        Metric("c", f"(c) {sizes.c_procs} processes, one file", "events/s", True, "c_rounds"),
        Metric("d", f"(d) read {sizes.d:,}-event history", "ms", False, "d_rounds"),
        Metric("e0", f"(e) set_history +1 @{e[0]}", "ms", False, "e_rounds"),
        Metric("e1", f"(e) set_history +1 @{e[1]}", "ms", False, "e_rounds"),
        Metric("e2", f"(e) set_history +1 @{e[2]}", "ms", False, "e_rounds"),
        Metric("f", "(f) file size / 1k events", "KiB", False, "a_rounds"),
        Metric("g", "(g) cold start", "ms", False, "g_rounds"),
        Metric("h", f"(h) append to a {sizes.h_base:,}-event file", "events/s", True, "h_rounds"),
        Metric("hw", f"(h) WAL after {sizes.h_events:,} appends", "MiB", False, "h_rounds"),
        Metric("la", "loop lag p99 during (a)", "ms", False, "lag_rounds"),
        Metric("lb", "loop lag p99 during (b)", "ms", False, "lag_rounds"),
    ]


@dataclass
class Run:
    """Everything one run measured, as the report needs it."""

    sizes: Sizes
    smoke: bool
    loaded: list[Loaded]
    cells: dict[str, dict[str, Cell]]
    baselines: dict[str, Cell]
    disk: Disk
    idle_lag_ms: float
    pragmas: dict[str, tuple[dict[str, str] | str, str | None]]
    memory_files: dict[str, int] = field(default_factory=dict)
    ag2: dict[str, Cell] = field(default_factory=dict)
    ag2_bytes: dict[str, float] = field(default_factory=dict)
    ag2_problem: str | None = None
    cli: CliSection | None = None
    cli_problem: str | None = None
    json_bytes_d: dict[str, float] = field(default_factory=dict)
    pg: Any = None  # pg.PgSection
    pg_problem: str | None = None
    laptop: Any = None  # laptop.LaptopSection
    laptop_problem: str | None = None
    turns: Any = None  # turns.TurnsSection
    turns_problem: str | None = None

    def cell(self, store: str, metric: str) -> Cell | None:
        return self.cells.get(store, {}).get(metric)

    def value(self, store: str, metric: str) -> float | None:
        cell = self.cell(store, metric)
        return cell.value if cell is not None and cell.problem is None else None


def fmt(value: float, unit: str) -> str:
    if unit == "events/s" or value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def planned(sizes: Sizes, metric: Metric) -> int:
    return int(getattr(sizes, metric.rounds))


# -- tables ----------------------------------------------------------------------------------------


def values_table(run: Run) -> str:
    cols = metrics(run.sizes)
    head = "| store | " + " | ".join(f"{m.title} [{m.unit}]" for m in cols) + " |"
    lines = [head, "|" + " --- |" * (len(cols) + 1)]
    for item in run.loaded:
        row = [item.label]
        for m in cols:
            cell = run.cell(item.key, m.key)
            if item.problem is not None:
                row.append(item.problem.split(" (")[0])
            elif cell is None or cell.problem is not None:
                row.append(cell.problem if cell is not None and cell.problem else "error")
            else:
                text = fmt(cell.value or 0.0, m.unit)
                if m.key == "f":
                    fj = run.cell(item.key, "f_json")
                    text += f" ({fj.value:.2f}x JSON" if fj is not None and fj.value else " ("
                    if item.key in run.json_bytes_d and item.adapter is not None and item.adapter.bulk_equals_appends:
                        text += f"; {run.sizes.d:,}-event file {run.json_bytes_d[item.key]:.2f}x"
                    text += ")"
                moved = drift(cell)
                if item.key == "raw" and m.key in DRIFT_METRICS and moved is not None and moved > DRIFT_LIMIT:
                    text += f" (**drifted {moved:.1f}x**)"
                if cell.extra_note:
                    text += f" ({cell.extra_note})"
                if len(cell.rounds) < planned(run.sizes, m):
                    text += f" n={len(cell.rounds)}"
                row.append(text)
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def ratios_table(run: Run) -> str:
    cols = [m for m in metrics(run.sizes)]
    head = "| sessionstore SQLiteStorage vs | " + " | ".join(m.title for m in cols) + " |"
    lines = [head, "|" + " --- |" * (len(cols) + 1)]
    for item in run.loaded:
        if item.key == OURS or item.problem is not None:
            continue
        row = [item.label]
        for m in cols:
            pair = paired(run.cell(OURS, m.key), run.cell(item.key, m.key), m.higher)
            row.append(pair.text() if pair is not None else "-")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def drift_lines(run: Run) -> list[str]:
    """A sentence for every workload in which the floor moved more than 2x between rounds."""
    moved = []
    for m in metrics(run.sizes):
        if m.key not in DRIFT_METRICS:
            continue
        cell = run.cell("raw", m.key)
        d = drift(cell)
        if cell is not None and d is not None and d > DRIFT_LIMIT:
            low, high = min(cell.rounds.values()), max(cell.rounds.values())
            moved.append(f"{m.title} {d:.1f}x ({fmt(low, m.unit)}-{fmt(high, m.unit)} {m.unit})")
    if not moved:
        return [f"The floor stayed within {DRIFT_LIMIT:.0f}x between rounds in every workload."]
    return [
        f"**The floor drifted more than {DRIFT_LIMIT:.0f}x between rounds** in " + "; ".join(moved) + ". Absolute "
        "figures from this run depend on when they were taken: compare stores by the paired ratios below."
    ]


def pragmas_table(run: Run) -> str:
    lines = [
        "| store | " + " | ".join(PRAGMAS) + " | read from |",
        "|" + " --- |" * (len(PRAGMAS) + 2),
    ]
    for item in run.loaded:
        if item.key not in run.pragmas or item.adapter is None:
            continue
        found, own = run.pragmas[item.key]
        if isinstance(found, str):
            lines.append(
                f"| {item.label} | " + " | ".join([found] * len(PRAGMAS)) + f" | {item.adapter.pragma_source} |"
            )
            continue
        values = []
        for name in PRAGMAS:
            value = found.get(name, "?")
            if name == "journal_mode" and own is not None:
                value += f" (set by the bench; on its own: {own})"
            values.append(value)
        lines.append(f"| {item.label} | " + " | ".join(values) + f" | {item.adapter.pragma_source} |")
    return "\n".join(lines)


def memory_table(run: Run) -> str:
    s = run.sizes
    lines = [
        f"| store | RSS before [MiB] | after reading {s.mem_sessions} x {s.mem_events:,} events [MiB] "
        "| after dropping them + gc [MiB] | + malloc_trim [MiB] | kept while open: trimmed - before [MiB] "
        "| after closing the store [MiB] | peak [MiB] |",
        "|" + " --- |" * 8,
    ]
    for item in run.loaded:
        cells = run.cells.get(item.key, {})
        first = cells.get("m0")
        if item.problem is not None:
            lines.append(f"| {item.label} | {item.problem.split(' (')[0]} | | | | | | |")
        elif first is None or first.problem is not None:
            why = first.problem if first is not None and first.problem else "error"
            lines.append(f"| {item.label} | {why} | | | | | | |")
        else:
            v = {k: (cells[k].value or 0.0) for k in ("m0", "m1", "m2", "m3", "m4", "mp")}
            lines.append(
                f"| {item.label} | {v['m0']:.0f} | {v['m1']:.0f} | {v['m2']:.0f} | {v['m3']:.0f} "
                f"| {v['m3'] - v['m0']:.0f} | {v['m4']:.0f} | {v['mp']:.0f} |"
            )
    return "\n".join(lines)


def lag_line(run: Run) -> str:
    return (
        f"Event-loop lag: a task sleeping 1 ms in a loop beside the appends, the p99 of how late it woke, in separate "
        f"samples from the rates ({run.sizes.lag_rounds} rounds); on an idle loop its p99 is {run.idle_lag_ms:.2f} ms "
        "here (the resolution of these figures). The floor blocks the loop for every commit: its lag is a commit's "
        "time."
    )


def ag2_section(run: Run) -> list[str]:
    title = f"AG2 events (j): {run.sizes.ag2_turns} turns, {run.sizes.ag2_turns * 9:,} events appended one at a time"
    if run.ag2_problem is not None:
        return [f"{title}: {run.ag2_problem}."]
    own, ag2 = run.ag2.get("own"), run.ag2.get("ag2")
    lines = [
        f"{title}, fresh file each, {run.sizes.ag2_rounds} interleaved rounds:",
        "",
        "| events | per event [us] | payload [bytes/event] | AG2 / own, paired |",
        "| --- | --- | --- | --- |",
    ]
    pair = paired(ag2, own, higher=False)
    for key, label in (("own", "sessionstore's own (JsonCodec)"), ("ag2", "AG2's (AG2Codec)")):
        cell = run.ag2.get(key)
        value = f"{cell.value:,.0f}" if cell is not None and cell.value else (cell.problem if cell else "error")
        ratio = pair.text().replace(" won", " cheaper in") if key == "ag2" and pair is not None else ""
        lines.append(f"| {label} | {value} | {run.ag2_bytes.get(key, 0):.0f} | {ratio} |")
    return lines


def cli_section(run: Run) -> list[str]:
    if run.cli is None:
        return [f"Command line: {run.cli_problem or 'not measured'}."]
    cli = run.cli
    q = cli.cells.get("queries", {})

    def ms(cell: Cell | None) -> str:
        if cell is None or cell.value is None:
            return "-"
        return f"{cell.value:.1f} ms (max {max(cell.samples):.1f})"

    lines = [
        f"Command line, on a file of {cli.sessions:,} sessions x {cli.events} events ({cli.file_note}):",
        "",
        f"- Query time in-process, opening the file included, median of {run.sizes.cli_rounds}: "
        f"`list -n 20` (records.list_sessions) {ms(q.get('q_list'))}; the catalog's first page of 20 "
        f"(reads.session_page) {ms(q.get('q_page'))}; `show ID` (records.read_session) "
        f"{ms(q.get('q_show'))}; `search needle<n>`, one hit (records.search) {ms(q.get('q_search'))}; "
        f"`stats` (records.stats) {ms(q.get('q_stats'))}.",
    ]
    for what, ours_key, theirs_key in (("list -n 20", "ss_list", "su_list"), ("show ID", "ss_show", "su_show")):
        ours = cli.cells.get(ours_key, {}).get(ours_key)
        theirs = cli.cells.get(theirs_key, {}).get(theirs_key)
        text = f"- Whole process `sessionstore {what}`: {ms(ours)}"
        if theirs is not None:
            pair = paired(ours, theirs, higher=False)
            text += f"; `sqlite-utils query` of the same rows {ms(theirs)}"
            if pair is not None:
                text += f"; paired {pair.text()}"
        lines.append(text + ".")
    big = cli.cells.get("json_big", {})
    small = cli.cells.get("json_small", {})
    if big.get("json_big") is not None and small.get("json_small") is not None:
        b, s = big["json_big"].value or 0.0, small["json_small"].value or 0.0
        lines.append(
            f"- `sessionstore list --json` of every session: peak RSS {b:.1f} MiB on the {cli.sessions:,}-session "
            f"file ({(big['json_big_ms'].value or 0) / 1000:.1f} s), {s:.1f} MiB on a {cli.small_sessions:,}-session "
            f"file: {per_session_bytes(run):,.0f} bytes per extra session."
        )
    lines += [f"- {note}" for note in cli.notes]
    return lines


def per_session_bytes(run: Run) -> float:
    assert run.cli is not None
    big = run.cli.cells["json_big"]["json_big"].value or 0.0
    small = run.cli.cells["json_small"]["json_small"].value or 0.0
    return (big - small) * 1024 * 1024 / max(1, run.cli.sessions - run.cli.small_sessions)


# -- targets ------------------------------------------------------------------------------------------


def targets(run: Run) -> list[str]:
    out: list[str] = []

    def check(name: str, ok: bool | None, detail: str) -> None:
        mark = "n/a" if ok is None else ("met" if ok else "MISSED")
        out.append(f"- **{name}**: {mark}. {detail}")

    def pair(metric: str, other: str, higher: bool) -> Paired | None:
        return paired(run.cell(OURS, metric), run.cell(other, metric), higher)

    peers_a = {k: run.value(k, "a") for k in PEER_KEYS}
    measured = {k: v for k, v in peers_a.items() if v}
    if measured and run.value(OURS, "a"):
        fastest = max(measured, key=lambda k: measured[k])
        p = pair("a", fastest, True)
        if p is not None:
            need = math.ceil(12 / 14 * p.n)
            check(
                f"(a) ahead of the fastest peer in >= 12 of 14 paired rounds, median ratio >= 1.3x ({fastest})",
                p.won >= need and p.median >= 1.3,
                f"won {p.won}/{p.n} (needed {need}); median {p.median:.2f}x, rounds {p.low:.2f}-{p.high:.2f}x",
            )
        slow = [(k, pair("a", k, True)) for k in ("adk_database", "openai_sqlalchemy") if k in measured]
        slow_pairs = [(k, q) for k, q in slow if q is not None]
        if slow_pairs:
            check(
                "(a) >= 10x ADK DatabaseSessionService and OpenAI SQLAlchemySession",
                all(q.median >= 10 for _, q in slow_pairs),
                "; ".join(f"{k} {q.median:.1f}x ({q.low:.1f}-{q.high:.1f})" for k, q in slow_pairs),
            )
    else:
        check("(a) vs peers", None, "peers not measured in this run")

    for metric, name in (("b", "(b) ahead of every peer"), ("c", "(c) ahead of every peer")):
        pairs = [(k, pair(metric, k, True)) for k in PEER_KEYS]
        found = [(k, p) for k, p in pairs if p is not None]
        failed = [k for k in PEER_KEYS if run.value(k, metric) is None and (run.cell(k, metric) or Cell()).problem]
        if not found:
            check(name, None, "no peer measured in this run")
            continue
        detail = "; ".join(f"{k} {p.median:.2f}x won {p.won}/{p.n}" for k, p in found)
        if failed:
            detail += "; no figure for " + ", ".join(failed)
        check(name, all(p.median > 1 for _, p in found), detail)
    floor_b = pair("b", "raw", True)
    if floor_b is not None:
        check(
            "(b) >= 2x the raw floor in the same rounds",
            floor_b.median >= 2,
            f"median {floor_b.median:.2f}x, rounds {floor_b.low:.2f}-{floor_b.high:.2f}x",
        )
    lags = [(name, run.cell(OURS, key)) for key, name in (("la", "(a)"), ("lb", "(b)"))]
    measured_lags = [(name, c) for name, c in lags if c is not None and c.samples]
    if measured_lags:
        check(
            "event-loop lag p99 under 5 ms during (a) and (b), in every round",
            all(max(c.samples) < 5 for _, c in measured_lags),
            "; ".join(f"{name} {min(c.samples):.2f}-{max(c.samples):.2f} ms" for name, c in measured_lags),
        )
    floor_d = pair("d", "raw", False)
    if floor_d is not None:
        check(
            "(d) read within 1.5x of raw sqlite3 + json.loads in every round",
            floor_d.high <= 1.5,
            f"rounds {floor_d.low:.2f}-{floor_d.high:.2f}x, median {floor_d.median:.2f}x ({floor_d.n} rounds)",
        )
    e = [run.value(OURS, k) for k in ("e0", "e1", "e2")]
    if all(x is not None for x in e):
        values = [x for x in e if x is not None]
        flat = max(values) / min(values)
        sizes = ", ".join(f"{n:,}" for n in run.sizes.e)
        check(
            f"(e) set_history +1 flat from {sizes} (within 1.5x)",
            flat <= 1.5,
            f"max/min {flat:.2f}x ({', '.join(f'{x:.2f} ms' for x in values)})",
        )
    f_json = run.value(OURS, "f_json")
    if f_json is not None:
        grown = run.json_bytes_d.get(OURS)
        small = f"{f_json:.2f}x for a {run.sizes.a:,}-event file"
        if grown is None:
            check("(f) file <= 1.5x raw JSON", f_json <= 1.5, small)
        else:
            check(f"(f) file <= 1.5x raw JSON ({run.sizes.d:,}-event file)", grown <= 1.5, f"{grown:.2f}x; {small}")
    g_base = run.baselines.get("import sqlalchemy.ext.asyncio, aiosqlite")
    g = paired(run.cell(OURS, "g"), g_base, higher=False)
    if g is not None:
        check(
            "(g) cold start <= 1.5x `import sqlalchemy.ext.asyncio, aiosqlite`",
            g.median <= 1.5,
            f"paired median {g.median:.2f}x ({g.low:.2f}-{g.high:.2f}); {run.value(OURS, 'g'):.0f} ms",
        )
    if run.ag2_problem is not None:
        check("(j) appending AG2 events <= 1.3x appending our own", None, run.ag2_problem)
    else:
        j = paired(run.ag2.get("ag2"), run.ag2.get("own"), higher=False)
        if j is not None:
            check(
                "(j) appending AG2 events <= 1.3x appending our own (time per event)",
                j.median <= 1.3,
                f"paired median {j.median:.2f}x, rounds {j.low:.2f}-{j.high:.2f}x",
            )
    out += cli_targets(run, check)
    return out


def cli_targets(run: Run, check: Any) -> list[str]:
    if run.cli is None:
        check("command line", None, run.cli_problem or "not measured")
        return []
    cli = run.cli
    for what, ours_key, theirs_key in (("list -n 20", "ss_list", "su_list"), ("show ID", "ss_show", "su_show")):
        theirs = cli.cells.get(theirs_key, {}).get(theirs_key)
        p = paired(cli.cells.get(ours_key, {}).get(ours_key), theirs, higher=False)
        name = f"CLI `sessionstore {what}` no slower than `sqlite-utils query`, whole processes"
        if p is None:
            check(name, None, "sqlite-utils not installed here")
        else:
            check(name, p.median <= 1.0, f"paired median {p.median:.2f}x ({p.low:.2f}-{p.high:.2f}) won {p.won}/{p.n}")
    q = cli.cells.get("queries", {})
    for key, what in (("q_list", "list -n 20"), ("q_show", "show ID"), ("q_search", "search, one hit")):
        cell = q.get(key)
        if cell is not None and cell.value is not None:
            check(
                f"CLI `{what}` under 50 ms of query time ({cli.sessions:,} sessions)",
                cell.value < 50,
                f"median {cell.value:.1f} ms, max {max(cell.samples):.1f} ms",
            )
    stats = q.get("q_stats")
    if stats is not None and stats.value is not None:
        check(
            "CLI `stats` under 0.5 s", stats.value < 500, f"median {stats.value:.0f} ms, max {max(stats.samples):.0f}"
        )
    if "json_big" in cli.cells and "json_small" in cli.cells:
        per = per_session_bytes(run)
        big, small = cli.cells["json_big"]["json_big"].value or 0, cli.cells["json_small"]["json_small"].value or 0
        check(
            "CLI `list --json` memory does not grow with the sessions (< 100 bytes per extra session)",
            per < 100,
            f"peak RSS {big:.1f} MiB ({cli.sessions:,} sessions) vs {small:.1f} MiB ({cli.small_sessions:,}): "
            f"{per:,.0f} bytes per extra session",
        )
    return []


# -- the chart ----------------------------------------------------------------------------------------


def chart(run: Run, path: Path, stamp: str) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "chart skipped: matplotlib is not installed"
    cols = metrics(run.sizes)
    fig, axes = plt.subplots(4, 4, figsize=(19, 14))
    loaded = run.loaded
    labels = [item.label.replace(" (ceiling)", "").replace("sessionstore ", "") for item in loaded]
    colors = ["#999999" if i.key in ("memory", "raw") else "#d62728" if i.key == OURS else "#1f77b4" for i in loaded]
    spare = list(axes.flat[len(cols) :])
    by_key = {m.key: m for m in cols}
    for ax, key in zip(spare, ("a", "b", "d"), strict=False):
        ratio_panel(ax, run, by_key[key])
    for ax in spare[3:]:
        ax.axis("off")
    for ax, m in zip(axes.flat, cols, strict=False):
        values, lows, highs, zero = [], [], [], []
        for item in loaded:
            cell = run.cell(item.key, m.key)
            ok = item.problem is None and cell is not None and cell.problem is None and cell.value is not None
            value = cell.value if ok and cell is not None and cell.value is not None else 0.0
            zero.append(bool(ok) and value == 0.0)  # measured as nothing (a lag never seen): no bar, a "0"
            values.append(value)
            rounds = list(cell.rounds.values()) if ok and cell is not None else []
            lows.append(value - min(rounds) if rounds else 0.0)
            highs.append(max(rounds) - value if rounds else 0.0)
        ys = range(len(loaded))
        ax.barh(ys, values, color=colors, xerr=[lows, highs], error_kw={"elinewidth": 0.8, "capsize": 2})
        ax.set_yticks(list(ys), labels, fontsize=8)
        ax.invert_yaxis()
        shown = [x for x in values if x]
        if shown and max(shown) / min(shown) > 10:
            ax.set_xscale("log")
            ax.set_xlim(right=max(shown) * 6)  # room for the value labels right of the longest bar
        elif shown:
            ax.set_xlim(0, max(shown) * 1.4)
        better = "higher" if m.higher else "lower"
        ax.set_title(f"{m.title} [{m.unit}]\n{better} is better; whiskers: min-max over rounds", fontsize=9)
        for y, value, item, nothing in zip(ys, values, loaded, zero, strict=True):
            if value:
                ax.text(value, y, " " + fmt(value, m.unit), va="center", fontsize=7)
            elif nothing:
                ax.text(0.01, y, "0", va="center", fontsize=7, transform=ax.get_yaxis_transform())
            else:
                cell = run.cell(item.key, m.key)
                why = item.problem or (cell.problem if cell is not None and cell.problem else "error")
                ax.text(0.01, y, why.split(" (")[0], va="center", fontsize=7, transform=ax.get_yaxis_transform())
    fig.suptitle(f"sessionstore vs peers, {stamp} (medians of interleaved rounds)", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return None


def ratio_panel(ax: Any, run: Run, m: Metric) -> None:
    """sessionstore's paired ratio against every other store for one metric: median bar, min-max whiskers."""
    rows = []
    for item in run.loaded:
        if item.key in (OURS, "memory") or item.problem is not None:
            continue
        pair = paired(run.cell(OURS, m.key), run.cell(item.key, m.key), m.higher)
        if pair is not None:
            rows.append((item.label.replace("sessionstore ", ""), pair))
    if not rows:
        ax.axis("off")
        return
    ys = range(len(rows))
    medians = [p.median for _, p in rows]
    errors = [[p.median - p.low for _, p in rows], [p.high - p.median for _, p in rows]]
    colors = ["#d62728" if (p.median > 1) == m.higher else "#999999" for _, p in rows]
    ax.barh(ys, medians, color=colors, xerr=errors, error_kw={"elinewidth": 0.8, "capsize": 2})
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(list(ys), [label for label, _ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    for y, (_, p) in zip(ys, rows, strict=True):
        ax.text(p.high, y, f" {p.median:.2f}x, won {p.won}/{p.n}", va="center", fontsize=7)
    ax.set_xlim(right=max(p.high for _, p in rows) * 8)
    ax.set_title(f"{m.title}\nsessionstore / other, paired by round; red: sessionstore better", fontsize=9)


def baselines_line(run: Run) -> str:
    parts = []
    for name in BASELINES:
        cell = run.baselines.get(name)
        if cell is not None and cell.value is not None:
            parts.append(f"`{name}` {cell.value:.0f} ms")
    n = max((len(c.rounds) for c in run.baselines.values()), default=0)
    return f"Cold-start baselines (median of {n} processes, in the same rounds as (g)): " + ", ".join(parts) + "."
