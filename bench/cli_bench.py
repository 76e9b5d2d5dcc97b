"""The command line on a large file: query times in-process, whole processes against ``sqlite-utils``, memory.

On a file of ``cli_sessions`` sessions x ``cli_events`` events made by
``bench/bigfile.py`` (cached under ``bench/results/raw/``, keyed by the
schema revision, the schema's SQL and bigfile.py's text, since it takes about a
minute to build):

* query time, in this process: ``records.list_sessions`` (what ``list -n 20``
  runs), ``reads.session_page`` (the catalog's first page of 20),
  ``records.read_session`` (``show ID``), ``records.search`` of a word one
  session holds (``needle<n>``), ``records.stats``; each includes opening the file;
* whole processes, interleaved: ``sessionstore list -n 20`` and ``sessionstore
  show ID`` against ``sqlite-utils query`` returning the same rows from the same
  file (checked once, untimed);
* ``sessionstore list --json`` of every session: the process's peak RSS on
  this file against a file of ``cli_small`` sessions (streamed output keeps it flat).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rounds import Cell, Entrant, Sample, interleave
from workloads import Fresh, Sizes

BENCH = Path(__file__).resolve().parent
CACHE = BENCH / "results" / "raw"


def tool(name: str) -> list[str] | None:
    """The console script installed beside this interpreter, as a user would run it."""
    script = Path(sys.executable).parent / (f"{name}.exe" if os.name == "nt" else name)
    return [str(script)] if script.exists() else None


def sessionstore_command() -> list[str]:
    return tool("sessionstore") or [sys.executable, "-m", "sessionstore.cli"]


def build(path: Path, sessions: int, events: int) -> None:
    import bigfile

    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    bigfile.build(partial, sessions, events)
    partial.rename(path)  # only a finished file is ever found under the cached name


def schema(path: Path) -> str:
    """Every table, index, view and trigger of a new database as this code makes it: part of the cache's key,
    so a schema changed within a revision (before it was released) never reuses an old file."""
    import sqlite3

    from sessionstore.sqlite.migrate import prepare

    prepare(path)
    conn = sqlite3.connect(path)
    try:
        return "\n".join(str(sql) for (sql,) in conn.execute("SELECT sql FROM sqlite_master ORDER BY type, name"))
    finally:
        conn.close()


def big_file(sizes: Sizes, fresh: Fresh, cache: bool) -> tuple[Path, str]:
    """The large file, and how it was come by (built now, or reused from the cache)."""
    from sessionstore.schema.revisions import HEAD

    if not cache:
        path = fresh.path()
        build(path, sizes.cli_sessions, sizes.cli_events)
        return path, "built for this run"
    digest = hashlib.sha256(schema(fresh.path()).encode() + (BENCH / "bigfile.py").read_bytes()).hexdigest()[:10]
    name = f"bigfile-r{HEAD}-{digest}-{sizes.cli_sessions}x{sizes.cli_events}.db"
    path = CACHE / name
    if path.exists():
        return path, f"reused from {path.relative_to(BENCH.parent)}"
    CACHE.mkdir(parents=True, exist_ok=True)
    for stale in CACHE.glob(f"bigfile-*-{sizes.cli_sessions}x{sizes.cli_events}.db*"):
        stale.unlink()  # an older schema or builder: never read again
    start = time.perf_counter()
    build(path, sizes.cli_sessions, sizes.cli_events)
    return path, f"built in {time.perf_counter() - start:.0f} s, cached at {path.relative_to(BENCH.parent)}"


def process_ms(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:3])} failed: {done.stderr.strip().splitlines()[-1:]}")
    return elapsed * 1000


# ``sessionstore ARGS`` as the console script runs it, reporting its own peak RSS on the way out. Read from
# inside (VmHWM) because ``ru_maxrss`` of a child counts the memory of the large process that started it.
PEAK = """
import atexit, sys

def peak():
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    sys.stderr.write(f"peak-mib {kib / 1024}\\n")

atexit.register(peak)
from sessionstore.cli import main
sys.argv = ["sessionstore", *sys.argv[1:]]
raise SystemExit(main())
"""


def peak_rss_mib(args: list[str]) -> tuple[float, float]:
    """``(peak RSS in MiB, wall ms)`` of one ``sessionstore ARGS`` process, its output discarded (Linux: VmHWM)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PEAK, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"sessionstore {' '.join(args[:3])} exited {done.returncode}")
    peak = float(done.stderr.strip().splitlines()[-1].split()[1])
    return peak, elapsed * 1000


def json_out(command: list[str]) -> Any:
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


class CliSection:
    """Everything the command-line section reports; ``notes`` carries what could not be measured and why."""

    def __init__(self) -> None:
        self.cells: dict[str, dict[str, Cell]] = {}
        self.notes: list[str] = []
        self.file_note = ""
        self.sessions = 0
        self.events = 0
        self.small_sessions = 0


def measure(sizes: Sizes, fresh: Fresh, cache: bool, progress: Any) -> CliSection:
    from sessionstore import reads, records
    from sessionstore.backend import open_backend
    from sessionstore.schema import queries

    out = CliSection()
    path, out.file_note = big_file(sizes, fresh, cache)
    out.sessions, out.events = sizes.cli_sessions, sizes.cli_events
    number = sizes.cli_sessions // 2
    (hit,) = records.search(path, f"needle{number}")
    sid = hit.session_id
    prefix = sid[:12]  # as `sessionstore list` shows it, and a person types it

    def listing() -> Sample:
        start = time.perf_counter()
        listed = list(records.list_sessions(path, limit=20))
        elapsed = time.perf_counter() - start
        assert len(listed) == min(20, sizes.cli_sessions)
        return {"q_list": elapsed * 1000}

    def first_page() -> Sample:
        start = time.perf_counter()
        with open_backend(path).reading() as conn:
            page = reads.session_page(conn, limit=20)
        elapsed = time.perf_counter() - start
        assert len(page.sessions) == min(20, sizes.cli_sessions)
        return {"q_page": elapsed * 1000}

    def show() -> Sample:
        start = time.perf_counter()
        events = records.read_session(path, prefix).events
        elapsed = time.perf_counter() - start
        assert len(events) == sizes.cli_events
        return {"q_show": elapsed * 1000}

    def search() -> Sample:
        start = time.perf_counter()
        hits = records.search(path, f"needle{number}")
        elapsed = time.perf_counter() - start
        assert len(hits) == 1
        return {"q_search": elapsed * 1000}

    def stats() -> Sample:
        start = time.perf_counter()
        found = records.stats(path)
        elapsed = time.perf_counter() - start
        assert found.sessions == sizes.cli_sessions
        return {"q_stats": elapsed * 1000}

    progress("CLI: query times in-process")
    queries_in = [Entrant(f.__name__, lambda _r, f=f: f()) for f in (listing, first_page, show, search, stats)]  # type: ignore[misc]
    for cells in interleave(queries_in, sizes.cli_rounds, budget=1e9, progress=progress).values():
        out.cells.setdefault("queries", {}).update(cells)

    ours = sessionstore_command()
    theirs = tool("sqlite-utils")
    list_sql = queries.list_sessions(cwd=False, after=False, limit=True, where=queries.TOP_LEVEL)  # what list runs
    commands = {
        "ss_list": [*ours, "--db", str(path), "list", "-n", "20"],
        "ss_show": [*ours, "--db", str(path), "show", prefix],
    }
    if theirs is None:
        out.notes.append("sqlite-utils: not installed in this environment (the full run installs it in bench/.venv)")
    else:
        commands["su_list"] = [*theirs, "query", str(path), list_sql, "-p", "limit", "20"]
        commands["su_show"] = [*theirs, "query", str(path), queries.EVENTS_OF, "-p", "sid", sid]
        # The same rows, checked once: the listed ids in order, and the shown session's event positions.
        ours_list = [s["session_id"] for s in json_out([*ours, "--db", str(path), "list", "-n", "20", "--json"])]
        theirs_list = [row["session_id"] for row in json_out(commands["su_list"])]
        ours_show = [e["position"] for e in json_out([*ours, "--db", str(path), "show", prefix, "--json"])["events"]]
        theirs_show = [row["position"] for row in json_out(commands["su_show"])]
        if ours_list != theirs_list or ours_show != theirs_show:
            out.notes.append("sqlite-utils returned other rows than sessionstore: the comparison is not like for like")
    progress("CLI: whole processes")
    whole = [Entrant(k, lambda _r, c=c, k=k: {k: process_ms(c)}) for k, c in commands.items()]  # type: ignore[misc]
    for key, cells in interleave(whole, sizes.cli_rounds, budget=1e9, progress=progress).items():
        out.cells[key] = cells

    small = fresh.path()
    build(small, sizes.cli_small, sizes.cli_events)
    out.small_sessions = sizes.cli_small
    progress("CLI: list --json of every session, peak RSS")

    def listing(file: Path, key: str) -> Sample:
        peak, ms = peak_rss_mib(["--db", str(file), "list", "--json"])
        return {key: peak, f"{key}_ms": ms}

    everything = [
        Entrant("json_big", lambda _r: listing(path, "json_big")),
        Entrant("json_small", lambda _r: listing(small, "json_small")),
    ]
    for key, cells in interleave(everything, min(3, sizes.cli_rounds), budget=1e9, progress=progress).items():
        out.cells[key] = cells
    return out
