"""Why the storage writes through a lane (sessionstore/lane.py): the A/B that justified it.

    python3 bench/group_commit.py [--rounds 5]

The same appends (``synchronous=FULL``, one event per call, every call
returning after its own commit) three ways, on fresh files, interleaved in
rounds with the order alternating, so a disk whose fsync time drifts affects
them alike:

* ``statement hops``: each statement sent to SQLite from the event loop through
  aiosqlite (BEGIN, the two statements of an append, COMMIT): four thread hops
  a call, and concurrent callers queue for the file one whole transaction at a
  time;
* ``transaction hop``: the whole transaction handed to a thread in one hop
  (``asyncio.to_thread``), callers still one transaction each;
* ``lane``: SQLiteStorage, whose writer thread takes whole transactions and
  commits the writes that arrive meanwhile together (group commit).

Prints events/s per way and the paired ratios lane / other, per round and median,
for sequential appends (one caller) and for 50 sessions appending at once.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from uuid import UUID, uuid4

import aiosqlite

from sessionstore import EventContext, ModelMessage, SQLiteStorage
from sessionstore.schema import queries
from sessionstore.sqlite.migrate import prepare

# The token columns of revision 0010, NULL: what an event without usage binds (a commit before it ignores them).
NO_TOKENS: dict[str, None] = dict.fromkeys(
    ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
)

PAYLOAD = '{"content":"' + " ".join(f"word{i % 50}" for i in range(60)) + '"}'
NOW = "2026-01-01 00:00:00.000000"
ROW = {"type": "model_message", "payload": PAYLOAD, "role": "assistant", "text": None, "text_path": "$.content"}
ROW |= NO_TOKENS  # revision 0010's columns


def new_file() -> tuple[Path, UUID]:
    path = Path(tempfile.mkdtemp()) / "lane.db"
    prepare(path)
    return path, uuid4()


def session_row(conn: sqlite3.Connection, sid: str) -> int:
    found = conn.execute(queries.FIND_SESSION, {"sid": sid}).fetchone()
    if found is not None:
        return int(found[0])
    return int(conn.execute(queries.NEW_SESSION, {"sid": sid, "parent": None, "now": NOW}).fetchone()[0])


Append = Callable[[str], Awaitable[None]]


async def statement_hops(path: Path) -> tuple[Append, Callable[[], Awaitable[None]]]:
    conn = await aiosqlite.connect(path, isolation_level=None)
    await conn.execute("PRAGMA synchronous = FULL")
    lock = asyncio.Lock()

    async def append(sid: str) -> None:
        async with lock:  # one connection: one transaction at a time
            await conn.execute("BEGIN IMMEDIATE")
            cursor = await conn.execute(queries.FIND_SESSION, {"sid": sid})
            found = await cursor.fetchone()
            if found is None:
                cursor = await conn.execute(queries.NEW_SESSION, {"sid": sid, "parent": None, "now": NOW})
                found = await cursor.fetchone()
            assert found is not None
            await conn.execute(queries.APPEND_EVENT, {**ROW, "id": found[0], "now": NOW})
            await conn.execute("COMMIT")

    return append, conn.close


async def transaction_hop(path: Path) -> tuple[Append, Callable[[], Awaitable[None]]]:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA synchronous = FULL")
    lock = asyncio.Lock()

    def write(sid: str) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(queries.APPEND_EVENT, {**ROW, "id": session_row(conn, sid), "now": NOW})
        conn.execute("COMMIT")

    async def append(sid: str) -> None:
        async with lock:
            await asyncio.to_thread(write, sid)

    async def close() -> None:
        conn.close()

    return append, close


async def lane(path: Path) -> tuple[Append, Callable[[], Awaitable[None]]]:
    storage = SQLiteStorage(path)
    await storage.open()

    async def append(sid: str) -> None:
        await storage.save_event(ModelMessage("x"), EventContext.for_stream(UUID(hex=sid)))

    return append, storage.aclose


WAYS = {"statement hops": statement_hops, "transaction hop": transaction_hop, "lane": lane}


async def rate(way: str, sessions: int, events: int) -> float:
    path, _ = new_file()
    append, close = await WAYS[way](path)
    ids = [uuid4().hex for _ in range(sessions)]

    async def writer(sid: str) -> None:
        for _ in range(events):
            await append(sid)

    start = time.perf_counter()
    await asyncio.gather(*(writer(sid) for sid in ids))
    elapsed = time.perf_counter() - start
    await close()
    return sessions * events / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for label, sessions, events in (("sequential (1 caller)", 1, 1000), ("50 sessions at once", 50, 20)):
        results: dict[str, list[float]] = {way: [] for way in WAYS}
        for round_number in range(args.rounds):
            order = list(WAYS) if round_number % 2 == 0 else list(reversed(WAYS))
            for way in order:
                results[way].append(asyncio.run(rate(way, sessions, events)))
        print(f"\n{label}: events/s, median of {args.rounds} interleaved rounds")
        for way, rates in results.items():
            print(f"  {way:16} {statistics.median(rates):8,.0f}")
        for way in ("statement hops", "transaction hop"):
            ratios = [a / b for a, b in zip(results["lane"], results[way], strict=True)]
            spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
            print(f"  lane / {way:16} median {statistics.median(ratios):.2f}x (rounds {spread})")


if __name__ == "__main__":
    main()
