"""What row-level security (revision 0011) costs an append and a history read on PostgreSQL, in paired rounds.

    python3 bench/pg_rls.py                  # 16 rounds on a throwaway server (the tests' own, fsync off)
    python3 bench/pg_rls.py --durable        # PostgreSQL's default durability: each commit flushed
    python3 bench/pg_rls.py --rounds 4 --appends 50 --events 1000     # quick

One server, the team of the tests (``tests/postgres/_pgteam.py``, set up by docs/postgresql.md's commands: a
role owning the schema, a person in a group holding the grants). Three ways to read and write the same rows,
each once per round, in alternating order:

* ``owner``: the role that owns the tables, which row-level security does not apply to (the administrator; what
  every deployment that connects as the schema's owner, as before 0011, runs);
* ``policy``: a person, through 0011's policies (``events``' through its session's row: one index probe per row);
* ``column``: a person, on a second database where ``events`` carries its own ``owner`` column (0011's
  alternative: a read's policy is a comparison on the row, the write's check still through ``sessions``).

Per round and way: ``--appends`` sequential ``save_event`` calls to a session of its own (microseconds each), and
``--reads`` whole reads of a ``--events``-event history (milliseconds, the median). Reported as paired ratios
against ``owner``: median (min-max) over the rounds, and in how many rounds the way was faster.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # pg_server: the tests' own server
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "postgres"))

from _pgteam import team
from pg_server import running

from sessionstore import EventContext, ModelMessage, UserMessage
from sessionstore.postgres import PostgresStorage

TEXT = " ".join(f"word{i % 50}" for i in range(60))
# 0011's alternative: the events carry their owner (and its policy compares it); a write is checked through its
# session still, else a role could write into another's session.
COLUMN = (
    "ALTER TABLE events ADD COLUMN owner text NOT NULL DEFAULT CURRENT_USER;"
    " DROP POLICY events_owner ON events;"
    " CREATE POLICY events_owner ON events USING (owner = current_user) WITH CHECK (EXISTS (SELECT FROM sessions"
    " WHERE sessions.id = events.session AND sessions.owner = current_user))"
)


async def appends(storage: PostgresStorage, count: int) -> float:
    """Microseconds per append, ``count`` in a row to a new session (its first event made before the clock)."""
    context = EventContext.for_stream(uuid4())
    await storage.save_event(UserMessage("first"), context)
    started = time.perf_counter()
    for _ in range(count):
        await storage.save_event(UserMessage(TEXT), context)
    return (time.perf_counter() - started) / count * 1e6


async def reads(storage: PostgresStorage, sid: UUID, count: int, events: int) -> float:
    """Milliseconds for one whole history read, the median of ``count``."""
    times = []
    for _ in range(count):
        started = time.perf_counter()
        got = await storage.get_history(sid)
        times.append((time.perf_counter() - started) * 1e3)
        assert len(got) == events, (len(got), events)
    return statistics.median(times)


def paired(ours: list[float], base: list[float]) -> str:
    ratios = [o / b for o, b in zip(ours, base, strict=True)]
    won = sum(r < 1 for r in ratios)
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}), faster in {won}/{len(ratios)}"


async def bench(urls: dict[str, str], history: dict[str, UUID], args: argparse.Namespace) -> dict[str, Any]:
    storages = {way: PostgresStorage(url) for way, url in urls.items()}
    got: dict[str, dict[str, list[float]]] = {way: {"append": [], "read": []} for way in urls}
    try:
        for storage in storages.values():
            await storage.__aenter__()
        for number in range(args.rounds):
            order = list(storages) if number % 2 == 0 else list(storages)[::-1]
            for way in order:
                got[way]["append"].append(await appends(storages[way], args.appends))
                got[way]["read"].append(await reads(storages[way], history[way], args.reads, args.events))
            shown = "; ".join(f"{w} {got[w]['append'][-1]:.0f} us, {got[w]['read'][-1]:.1f} ms" for w in storages)
            print(f"round {number + 1}/{args.rounds}: {shown}", flush=True)
    finally:
        for storage in storages.values():
            await storage.aclose()
    return got


async def fill(url: str, events: int) -> UUID:
    sid = uuid4()
    async with PostgresStorage(url) as storage:
        await storage.set_history(sid, [(UserMessage if i % 2 else ModelMessage)(TEXT) for i in range(events)])
    return sid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--durable", action="store_true", help="fsync on (PostgreSQL's defaults)")
    args = parser.parse_args()
    with running(durable=args.durable) as server:
        first, second = team(server), team(server)
        try:
            server.psql(COLUMN, second.database)
            urls = {"owner": first.url("owner"), "policy": first.url("ann"), "column": second.url("ann")}
            # The histories are a person's (ann's); the owner reads ann's on the first database.
            mine = asyncio.run(fill(first.url("ann"), args.events))
            history = {"owner": mine, "policy": mine, "column": asyncio.run(fill(second.url("ann"), args.events))}
            got = asyncio.run(bench(urls, history, args))
        finally:
            first.remove()
            second.remove()
    print(f"\n{args.rounds} rounds, {args.appends} appends and {args.reads} reads of {args.events} events per way")
    for way in ("policy", "column"):
        for metric, unit in (("append", "us"), ("read", "ms")):
            median = statistics.median(got[way][metric])
            base = statistics.median(got["owner"][metric])
            print(
                f"{way:7} {metric:6} {median:8.1f} {unit} (owner {base:.1f}): "
                f"{paired(got[way][metric], got['owner'][metric])}"
            )


if __name__ == "__main__":
    main()
