"""Reading the newest events of a long session: ``get_history(stream_id, last=50)`` at 1k, 10k and 100k events.

    python3 bench/recent_window.py --rounds 16                      # SQLite and PostgreSQL
    python3 bench/recent_window.py --rounds 16 --databases sqlite   # no PostgreSQL server binaries here

One database per kind (a file; a database on a throwaway server, ``tests/pg_server.py``) holds three sessions of
1,000, 10,000 and 100,000 events (~450 bytes of JSON each, user and model messages in turn), written once before
the first round; then PostgreSQL gets ``VACUUM ANALYZE``, as autovacuum would after so many writes. Each round
reads the newest ``--last`` events of each session ``--reads`` times on one open storage (the median read is the
round's sample), the sessions in one order in even rounds and reversed in odd ones; the ratio of a long session's
sample to the 1,000-event session's from the same round is the paired ratio (median, min-max over the rounds): near
1.0 when a window's time does not grow with the history. For contrast, the same rounds time one whole-history read
of each session on a storage without a read cache (``cache_bytes=0``; PostgreSQL keeps none).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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

SIZES = (1_000, 10_000, 100_000)
WORDS = " ".join(f"word{i % 97}" for i in range(64))  # ~440 characters


def history(count: int) -> list[Any]:
    return [(UserMessage if i % 2 == 0 else ModelMessage)(f"{i} {WORDS}") for i in range(count)]


def storage_for(kind: str, where: str, **options: Any) -> Any:
    if kind == "sqlite":
        return SQLiteStorage(where, **options)
    from sessionstore.postgres import PostgresStorage

    return PostgresStorage(where)  # no read cache to turn off


async def fill(kind: str, where: str) -> dict[int, UUID]:
    streams = {size: uuid4() for size in SIZES}
    async with storage_for(kind, where) as storage:
        for size, stream_id in streams.items():
            events = history(size)
            for start in range(0, size, 10_000):  # transactions of 10,000 rows
                await storage.set_history(stream_id, events[: start + 10_000])
    if kind == "postgres":
        import asyncpg  # type: ignore[import-untyped]

        conn = await asyncpg.connect(where.replace("+asyncpg", ""))
        try:
            await conn.execute("VACUUM ANALYZE")
        finally:
            await conn.close()
    return streams


async def one_round(kind: str, where: str, streams: dict[int, UUID], order: list[int], args: Any) -> dict[str, float]:
    """Microseconds: the median of ``args.reads`` window reads per session, and one whole read of each."""
    sample: dict[str, float] = {}
    async with storage_for(kind, where) as storage, storage_for(kind, where, cache_bytes=0) as uncached:
        for size in order:
            times = []
            for _ in range(args.reads):
                started = time.perf_counter()
                window = await storage.get_history(streams[size], last=args.last)
                times.append(time.perf_counter() - started)
                assert len(window) == args.last and window[-1].content.startswith(f"{size - 1} ")
            sample[f"window {size}"] = statistics.median(times) * 1e6
            started = time.perf_counter()
            whole = await uncached.get_history(streams[size])
            sample[f"whole {size}"] = (time.perf_counter() - started) * 1e6
            assert len(whole) == size
    return sample


def paired(rounds: list[dict[str, float]], key: str, base: str) -> str:
    ratios = sorted(r[key] / r[base] for r in rounds)
    return f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"


def report(kind: str, rounds: list[dict[str, float]], last: int) -> None:
    print(f"\n{kind}: newest {last} events, median of the rounds' samples (us), and paired ratio to 1,000 events")
    print("| events | window read | ratio to 1k | whole history read | ratio to 1k |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for size in SIZES:
        window = statistics.median(r[f"window {size}"] for r in rounds)
        whole = statistics.median(r[f"whole {size}"] for r in rounds)
        print(
            f"| {size:,} | {window:,.0f} | {paired(rounds, f'window {size}', f'window {SIZES[0]}')} "
            f"| {whole:,.0f} | {paired(rounds, f'whole {size}', f'whole {SIZES[0]}')} |"
        )


@contextlib.contextmanager
def database(kind: str) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield str(Path(folder) / "recent.db")
        return
    from pg_server import running

    with running(durable=True) as server:
        yield server.url(server.create_database())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--reads", type=int, default=20, help="window reads per session per round (their median)")
    parser.add_argument("--last", type=int, default=50)
    parser.add_argument("--databases", default="sqlite,postgres")
    args = parser.parse_args(argv)
    for kind in args.databases.split(","):
        with database(kind) as where:
            streams = asyncio.run(fill(kind, where))
            rounds = []
            for number in range(args.rounds):
                order = list(SIZES) if number % 2 == 0 else list(reversed(SIZES))
                rounds.append(asyncio.run(one_round(kind, where, streams, order, args)))
            report(kind, rounds, args.last)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
