"""What the full-text index's ``detail`` level costs on disk: ``none``, ``column`` and ``full`` (revision 0008's).

``python3 bench/fts_detail.py [--events 10000] [--sessions 10]``: for each level, a fresh file at head whose
``events_fts`` is declared with that level (everything else as sessionstore makes it), the bench's events
(``payloads.make_events``, as in (a)/(f)) appended one ``save_event`` at a time over a few sessions, the storage
closed (its last batch indexed, the WAL checkpointed into the file); then the file's size, its ratio to the
events' raw JSON, and what the level adds over ``none``. Sizes do not drift with the disk: one pass each.

``detail=full`` keeps each word's positions, which phrases (``"build red"``), ``NEAR`` and a column filter need;
``column`` keeps which column (a column filter, no phrases); ``none`` only which events.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import sys
import tempfile
from pathlib import Path
from uuid import UUID, uuid5

sys.path.insert(0, str(Path(__file__).resolve().parent))

from payloads import json_bytes, make_events
from peers.sessionstore_sqlite import to_events

from sessionstore import EventContext, SQLiteStorage
from sessionstore.schema.queries import UNINDEXED_EVENTS
from sessionstore.sqlite import migrate

LEVELS = ("none", "column", "full")
NS = UUID("6f1c1f9e-0000-4000-8000-0000000000f5")


def declare(path: Path, detail: str) -> None:
    """A file at head with ``events_fts`` declared at ``detail`` (its triggers write to it by name)."""
    migrate.prepare_database(path)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        sql = str(conn.execute("SELECT sql FROM sqlite_master WHERE name = 'events_fts'").fetchone()[0])
        if "detail=full" not in sql:
            raise SystemExit(f"events_fts is not declared detail=full at head: {sql}")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DROP TABLE events_fts")
        conn.execute(sql.replace("detail=full", f"detail={detail}"))
        conn.execute("COMMIT")


async def write(path: Path, events: list[object], sessions: int) -> None:
    per = -(-len(events) // sessions)
    async with SQLiteStorage(path) as storage:
        for number in range(sessions):
            context = EventContext.for_stream(uuid5(NS, str(number)))
            for event in events[number * per : (number + 1) * per]:
                await storage.save_event(event, context)


def file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=10)
    args = parser.parse_args()
    neutral = make_events(args.events)
    raw = json_bytes(neutral)
    events = to_events(neutral)
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as folder:
        for detail in LEVELS:
            path = Path(folder) / f"{detail}.db"
            declare(path, detail)
            asyncio.run(write(path, events, args.sessions))
            with contextlib.closing(sqlite3.connect(path)) as conn:
                left = conn.execute(UNINDEXED_EVENTS).fetchone()[0]
                phrase = _phrase_works(conn)
            if left:
                raise SystemExit(f"detail={detail}: the storage left {left} events unindexed")
            sizes[detail] = file_bytes(path)
            print(
                f"detail={detail:<6} {sizes[detail] / 1024:9,.0f} KiB  {sizes[detail] / raw:.2f}x the JSON"
                f"  +{(sizes[detail] - sizes['none']) / raw:.2f}x over none"
                f"  ({(sizes[detail] - sizes['none']) * 1000 / args.events / 1024:.1f} KiB per 1,000 events)"
                f"  phrases: {'yes' if phrase else 'no'}",
                flush=True,
            )
    corpus = f"{args.events:,} events ({raw / 1024:,.0f} KiB of JSON), {args.sessions} sessions"
    print(f"{corpus}, SQLite {sqlite3.sqlite_version}")


def _phrase_works(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT count(*) FROM events_fts WHERE events_fts MATCH '\"the file\"'").fetchone()
    except sqlite3.OperationalError:
        return False
    return True


if __name__ == "__main__":
    main()
