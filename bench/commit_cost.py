"""Where the time between the raw floor and a sequential ``save_event`` goes, in paired rounds on this disk.

    python3 bench/commit_cost.py [--rounds 10] [--dir /dev/shm]

Each round appends the benchmark's 1,000 events (``payloads.py``) one commit at a time, in a fresh file each, four
ways (the order reversed every other round, as in ``run.py``):

* ``floor``: the benchmark's raw floor, ``peers/raw.py`` (one INSERT of pre-encoded JSON and COMMIT per event,
  the next position kept in memory);
* ``statements``: what sessionstore's promises cost the database, with no Python around them: on a file made by
  ``SQLiteStorage``, with the write lane's settings, ``BEGIN IMMEDIATE``, the session's state read under the write
  lock (another process may have appended), the 13-column row (role, text, tokens, time), ``COMMIT``; the events'
  words indexed 256 at a time in transactions of their own; rows encoded beforehand;
* ``+ codec``: the same, each typed event encoded and described (``event_row``) inside the loop;
* ``sessionstore``: ``SQLiteStorage.save_event`` through the benchmark's adapter, ``peers/sessionstore_sqlite.py``.

Reported: each one's median time per append, and its paired ratio to the floor's rate in the same round (median,
min-max). ``--dir /dev/shm`` takes the disk out: what is left is CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from payloads import make_events
from peers import raw, sessionstore_sqlite

from sessionstore.durable import INDEX_EVERY, event_row
from sessionstore.schema import queries
from sessionstore.sqlite.lane import CHECKPOINT_PAGES
from sessionstore.sqlite.search import index_new_events

EVENTS = make_events(1000)
NOW = "2026-01-01 00:00:00.000000"


async def floor(folder: Path) -> float:
    store = raw.Store()
    native = store.convert(EVENTS)
    await store.open(folder / "floor.db")
    await store.create("k")
    started = time.perf_counter()
    for event in native:
        await store.append("k", event)
    elapsed = time.perf_counter() - started
    await store.close()
    return elapsed


async def sessionstore(folder: Path) -> float:
    store = sessionstore_sqlite.Store()
    native = store.convert(EVENTS)
    await store.open(folder / "sessionstore.db")
    await store.storage.save_event(native[0], sessionstore_sqlite.context("k"))  # the session's row, as a warm agent
    started = time.perf_counter()
    for event in native:
        await store.append("k", event)
    elapsed = time.perf_counter() - started
    await store.close()
    return elapsed


async def statements(folder: Path, *, encode: bool) -> float:
    store = sessionstore_sqlite.Store()
    native = store.convert(EVENTS)
    path = folder / "statements.db"
    await store.open(path)
    await store.storage.save_event(native[0], sessionstore_sqlite.context("k"))
    codec = store.storage.codec
    await store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in ("synchronous = FULL", "foreign_keys = ON", "secure_delete = ON"):
        conn.execute(f"PRAGMA {pragma}")
    conn.execute(f"PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES}")
    sid = sessionstore_sqlite.context("k").stream.id.hex
    ready = None if encode else [event_row(codec, event) for event in native]
    started = time.perf_counter()
    for i, event in enumerate(native):
        row = event_row(codec, event) if ready is None else ready[i]
        conn.execute("BEGIN IMMEDIATE")
        state = conn.execute(queries.SESSION_STATE, {"sid": sid}).fetchone()
        row["id"], row["position"], row["now"] = state[0], state[4], NOW
        conn.execute(queries.INSERT_EVENT, row)
        conn.execute("COMMIT")
        if (i + 1) % INDEX_EVERY == 0:
            conn.execute("BEGIN IMMEDIATE")
            index_new_events(conn)
            conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


async def statements_only(folder: Path) -> float:
    return await statements(folder, encode=False)


async def statements_and_codec(folder: Path) -> float:
    return await statements(folder, encode=True)


VARIANTS: dict[str, Callable[[Path], Any]] = {
    "floor": floor,
    "statements": statements_only,
    "+ codec": statements_and_codec,
    "sessionstore": sessionstore,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--dir", help="where the files go (default: the system's temporary folder)")
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    names = list(VARIANTS)
    for round_ in range(args.rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            with tempfile.TemporaryDirectory(dir=args.dir) as folder:
                times[name].append(asyncio.run(VARIANTS[name](Path(folder))))
    print(f"{len(EVENTS)} sequential appends, {args.rounds} rounds, in {args.dir or tempfile.gettempdir()}")
    for name in names:
        ratios = [f / t for f, t in zip(times["floor"], times[name], strict=True)]
        print(
            f"{name:14} {statistics.median(times[name]) / len(EVENTS) * 1e6:6.0f} us per append,"
            f" {statistics.median(ratios):.2f}x the floor's rate ({min(ratios):.2f}-{max(ratios):.2f})"
        )


if __name__ == "__main__":
    main()
