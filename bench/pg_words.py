"""Sequential appends on PostgreSQL with the search words on the append's path or off it, paired with the floor.

``python3 bench/pg_words.py --rounds 16`` (from ``bench/.venv``, as ``bench/pg_ab.py``) starts one throwaway
durable server (``tests/pg_server.py``: PostgreSQL's default fsync and synchronous_commit) and, in alternating
order each round, appends 1,000 events one at a time (``workloads.append_sequential``, (a) of the benchmark) with:

* ``floor``: the asyncpg floor (``peers/raw_pg.py``: one autocommit ``INSERT`` per event);
* ``words on the append``: ``PostgresStorage`` on a database at head whose queue trigger is dropped and 0009's GIN
  index over the words' expression put back on ``events``: the append statement as it was before revision 0015;
* ``words later``: ``PostgresStorage`` at head (0015): each append queues its event, the storage indexes the
  queue in the background, during the timed appends.

Each variant gets a fresh database per sample. Printed: each round's rates, the medians, and the paired ratios
(median (min-max), rounds won), higher is faster.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import asyncpg  # type: ignore[import-untyped]  # noqa: E402
import workloads as w  # noqa: E402
from payloads import make_events  # noqa: E402
from peers import raw_pg, sessionstore_pg  # noqa: E402
from pg_server import running  # noqa: E402

from sessionstore.postgres import migrate as pgmigrate  # noqa: E402

EVENTS = 1000
# Revision 0009's index, on the append's path again (its expression written as 0009 and 0003 write it).
ON_THE_APPEND = (
    "DROP TRIGGER events_words_insert ON events; CREATE INDEX events_fts_0009 ON events USING gin"
    " (sessionstore_search_words(CASE WHEN text_path IS NULL THEN text"
    " ELSE sessionstore_json_text(payload, text_path) END)) WHERE role IS NOT NULL"
)


async def sample(cls: Any, url: Any, events: list[Any]) -> float:
    elapsed, _, _ = await w.append_sequential(cls, url, events)  # a URL where a path goes, as pg.PgFresh gives
    return len(events) / elapsed


def paired(results: dict[str, list[float]], a: str, b: str) -> str:
    ratios = [x / y for x, y in zip(results[a], results[b], strict=True)]
    won = sum(r > 1 for r in ratios)
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) won {won}/{len(ratios)}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=16)
    args = parser.parse_args(argv)
    events = make_events(EVENTS)
    with running(durable=True) as server:
        head = server.create_database()
        pgmigrate.migrate(server.url(head))
        variants: dict[str, tuple[Any, str, str | None]] = {
            "floor": (raw_pg.Store, "template0", None),
            "words on the append": (sessionstore_pg.Store, head, ON_THE_APPEND),
            "words later": (sessionstore_pg.Store, head, None),
        }
        results: dict[str, list[float]] = {name: [] for name in variants}

        async def run_round(order: list[str]) -> str:
            line = []
            for name in order:
                cls, template, ddl = variants[name]
                db = server.create_database(template=template)
                url = server.url(db)
                if ddl:
                    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
                    await conn.execute(ddl)
                    await conn.close()
                results[name].append(await sample(cls, url, events))
                server.drop_database(db)
                line.append(f"{name} {results[name][-1]:,.0f}")
            return "; ".join(line)

        for n in range(args.rounds):
            order = list(variants) if n % 2 == 0 else list(reversed(variants))
            print(f"round {n + 1}/{args.rounds}: {asyncio.run(run_round(order))}", flush=True)
    for name, rates in results.items():
        print(f"{name}: median {statistics.median(rates):,.0f} events/s")
    print(f"words later / floor, paired: {paired(results, 'words later', 'floor')}")
    print(f"words on the append / floor, paired: {paired(results, 'words on the append', 'floor')}")
    print(f"words later / words on the append, paired: {paired(results, 'words later', 'words on the append')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
