"""Forking a 10,000-event session: a shared prefix (``storage.fork``) against a copy of it, in time and in size.

    python3 bench/fork.py --rounds 16                      # SQLite and PostgreSQL
    python3 bench/fork.py --rounds 16 --databases sqlite   # no PostgreSQL server binaries here

One database per kind (a file; a database on a throwaway server, ``tests/pg_server.py``) holds one session of
10,000 events (~450 bytes of JSON each, user and model messages in turn), written before the first round. Each
round does both variants, in one order in even rounds and reversed in odd ones: **fork** (``storage.fork(parent)``,
one row sharing the whole history) and **copy** (what forking by copying costs: a new session given the same
10,000 events with ``set_history``, one transaction), on a storage that has written once already (its write
connection open). For each, the time of the call and the bytes the database grew by (SQLite: the file and its WAL
after a checkpoint, ``page_count * page_size``; PostgreSQL: ``pg_total_relation_size`` of the two tables, after
``VACUUM``). The paired ratio is copy over fork in the same round (median,
min-max). Then the read a fork costs: a whole-history read of the fork against one of its parent, on a storage
without a read cache (``cache_bytes=0``; PostgreSQL keeps none), paired likewise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # pg_server: the tests' own server

from sessionstore import ModelMessage, SQLiteStorage, UserMessage  # noqa: E402

EVENTS = 10_000
WORDS = " ".join(f"word{i % 97}" for i in range(64))  # ~440 characters


def history(count: int) -> list[Any]:
    return [(UserMessage if i % 2 == 0 else ModelMessage)(f"{i} {WORDS}") for i in range(count)]


def storage_for(kind: str, where: str, **options: Any) -> Any:
    if kind == "sqlite":
        return SQLiteStorage(where, **options)
    from sessionstore.postgres import PostgresStorage

    return PostgresStorage(where)  # no read cache to turn off


async def size_of(kind: str, where: str) -> int:
    """The database's bytes: a file's pages once its WAL is checkpointed, a server's two tables with indexes."""
    if kind == "sqlite":
        with contextlib.closing(sqlite3.connect(where)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pages, size = (
                conn.execute("PRAGMA page_count").fetchone()[0],
                conn.execute("PRAGMA page_size").fetchone()[0],
            )
            return int(pages * size)
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(where.replace("+asyncpg", ""))
    try:
        await conn.execute("VACUUM")
        return int(await conn.fetchval("SELECT pg_total_relation_size('events') + pg_total_relation_size('sessions')"))
    finally:
        await conn.close()


async def fill(kind: str, where: str) -> UUID:
    parent = uuid4()
    async with storage_for(kind, where) as storage:
        await storage.set_history(parent, history(EVENTS))
    return parent


async def one_round(kind: str, where: str, parent: UUID, order: list[str], events: list[Any]) -> dict[str, float]:
    sample: dict[str, float] = {}
    forked: UUID | None = None
    async with storage_for(kind, where) as storage:
        await storage.touch_session(parent)  # untimed: the storage's first write opens its write connection
        for variant in order:
            before = await size_of(kind, where)
            started = time.perf_counter()
            if variant == "fork":
                forked = await storage.fork(parent)
            else:
                await storage.set_history(uuid4(), events)
            sample[f"{variant} ms"] = (time.perf_counter() - started) * 1e3
            sample[f"{variant} bytes"] = await size_of(kind, where) - before
    assert forked is not None
    async with storage_for(kind, where, cache_bytes=0) as uncached:
        for name, sid in (
            (("parent", parent), ("fork", forked))
            if order[0] == "fork"
            else (
                ("fork", forked),
                ("parent", parent),
            )
        ):
            started = time.perf_counter()
            read = await uncached.get_history(sid)
            sample[f"read {name} ms"] = (time.perf_counter() - started) * 1e3
            assert len(read) == EVENTS
    return sample


def paired(rounds: list[dict[str, float]], key: str, base: str) -> str:
    ratios = sorted(r[key] / r[base] for r in rounds if r[base] > 0)
    if not ratios:
        return "n/a"
    return f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"


def spread(rounds: list[dict[str, float]], key: str) -> str:
    values = sorted(r[key] for r in rounds)
    return f"{statistics.median(values):,.1f} ({values[0]:,.1f}-{values[-1]:,.1f})"


def report(kind: str, rounds: list[dict[str, float]]) -> None:
    print(f"\n{kind}: forking a {EVENTS:,}-event session, {len(rounds)} rounds, median (min-max)")
    print("| | fork (shared prefix) | copy (set_history) | copy / fork, paired |")
    print("| --- | ---: | ---: | ---: |")
    print(
        f"| time, ms | {spread(rounds, 'fork ms')} | {spread(rounds, 'copy ms')}"
        f" | {paired(rounds, 'copy ms', 'fork ms')} |"
    )
    fork_kib = [r["fork bytes"] / 1024 for r in rounds]
    copy_kib = [r["copy bytes"] / 1024 for r in rounds]
    print(
        f"| database grew, KiB | {statistics.median(fork_kib):,.0f} ({min(fork_kib):,.0f}-{max(fork_kib):,.0f})"
        f" | {statistics.median(copy_kib):,.0f} ({min(copy_kib):,.0f}-{max(copy_kib):,.0f}) | |"
    )
    print(
        f"| whole-history read, ms (fork / its parent) | {spread(rounds, 'read fork ms')} |"
        f" {spread(rounds, 'read parent ms')} | fork / parent {paired(rounds, 'read fork ms', 'read parent ms')} |"
    )


@contextlib.contextmanager
def database(kind: str) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield str(Path(folder) / "fork.db")
        return
    from pg_server import running

    with running(durable=True) as server:
        yield server.url(server.create_database())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--databases", default="sqlite,postgres")
    args = parser.parse_args(argv)
    events = history(EVENTS)
    for kind in args.databases.split(","):
        with database(kind) as where:
            parent = asyncio.run(fill(kind, where))
            rounds = []
            for number in range(args.rounds):
                order = ["fork", "copy"] if number % 2 == 0 else ["copy", "fork"]
                rounds.append(asyncio.run(one_round(kind, where, parent, order, events)))
            report(kind, rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
