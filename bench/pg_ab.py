"""Some of the pg section's workloads, in more rounds: sessionstore against the floor and a peer, paired.

``python3 bench/pg_ab.py --workloads a,d --rounds 16`` runs (a) sequential appends and (d) reading a
10,000-event history on one throwaway durable server (``tests/pg_server.py``, PostgreSQL's default fsync and
synchronous_commit), exactly as ``bench/run.py --sections pg`` does (``pg.entrants_for``: a fresh database per
sample, the same events), with only ``--stores`` taking part (default: sessionstore, the asyncpg floor and OpenAI's
``SQLAlchemySession``), and prints sessionstore's paired ratio against each: the quick check of issue 25's
"(a) at least 0.8x the asyncpg floor" and issue 23's "(d) at least as fast as ``SQLAlchemySession``". It runs in the
interpreter it is started with (the peers must be importable there: ``bench/.venv/bin/python``).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pg
import workloads as w
from payloads import make_events
from peers import PG_STORES, load
from rounds import Entrant, interleave, paired


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="a,d", help="comma-separated, of a,b,d")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--stores", default=f"{pg.OURS},{pg.FLOOR},openai_pg")
    args = parser.parse_args(argv)
    from pg_server import running

    from sessionstore.postgres import migrate as pgmigrate

    sizes = replace(w.Sizes(), budget=600.0)
    events = make_events(max(sizes.a, sizes.d, sizes.b_events))
    wanted = args.stores.split(",")
    stores = [item for item in load(None, PG_STORES) if item.key in wanted and item.adapter is not None]
    missing = set(wanted) - {item.key for item in stores}
    if missing:
        print(f"not importable here: {', '.join(sorted(missing))}", file=sys.stderr)
    with running(durable=True) as server:
        server.psql(f'CREATE DATABASE "{pg.HEAD}" TEMPLATE template0')
        pgmigrate.migrate(server.url(pg.HEAD))
        for workload in args.workloads.split(","):
            made: list[pg.PgFresh] = []
            entrants: list[Entrant] = []
            for item in stores:
                cls: Any = item.adapter
                db = pg.PgFresh(server, pg.HEAD if cls.pg_head else "template0")
                made.append(db)
                entrants += [e for e in pg.entrants_for(workload, item.key, cls, sizes, db, events) if ":" not in e.key]
            got = interleave(entrants, args.rounds, sizes.budget, progress=lambda line: print(line, flush=True))
            higher = workload != "d"
            cells = {key: cells.get("*") or cells.get(workload) for key, cells in got.items()}
            ours = cells.get(pg.OURS)
            for key, cell in cells.items():
                if cell is not None and cell.value is not None:
                    print(f"({workload}) {key}: median {cell.value:,.1f} {'events/s' if higher else 'ms'}")
            for key, cell in cells.items():
                if key == pg.OURS:
                    continue
                pair = paired(ours, cell, higher)
                print(f"({workload}) {pg.OURS} / {key}, paired: {pair.text() if pair else '-'}", flush=True)
            for db in made:
                db.drop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
