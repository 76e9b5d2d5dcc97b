"""What one single-event commit costs, piece by piece: sessionstore's statements without Python in between.

    python3 bench/commit_cost.py

Runs the write lane's statements for one append (find the session, insert the
event) in a loop at ``synchronous=FULL`` on a file made by SQLiteStorage, then
again with the full-text index trigger and/or the revision trigger dropped, so
each one's share of a commit shows (1,000 commits each; every variant once per round, five rounds,
reported as medians and as paired ratios to the first), beside the benchmark's raw floor.
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import tempfile
import time
from uuid import UUID, uuid4

from sessionstore import EventContext, ModelMessage, SQLiteStorage
from sessionstore.schema import queries

# The token columns of revision 0010, NULL: what an event without usage binds (a commit before it ignores them).
NO_TOKENS: dict[str, None] = dict.fromkeys(
    ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
)

PAYLOAD = '{"content":"' + " ".join(f"word{i % 50}" for i in range(120)) + '"}'


def fresh_file() -> tuple[str, UUID]:
    path, sid = f"{tempfile.mkdtemp()}/commit.db", uuid4()

    async def make() -> None:
        async with SQLiteStorage(path) as storage:
            await storage.save_event(ModelMessage("first"), EventContext.for_stream(sid))

    asyncio.run(make())
    return path, sid


def per_commit_us(drop: list[str], commits: int = 1000) -> float:
    path, sid = fresh_file()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")
    for trigger in drop:
        conn.execute(f"DROP TRIGGER {trigger}")
    now = "2026-01-01 00:00:00.000000"
    start = time.perf_counter()
    for _ in range(commits):
        conn.execute("BEGIN IMMEDIATE")
        row_id = conn.execute(queries.FIND_SESSION, {"sid": sid.hex}).fetchone()[0]
        conn.execute(
            queries.APPEND_EVENT,
            {"id": row_id, "type": "model_message", "payload": PAYLOAD, "now": now}
            | {"role": "assistant", "text": None, "text_path": "$.content"}
            | NO_TOKENS,
        )
        conn.execute("COMMIT")
    conn.close()
    return (time.perf_counter() - start) / commits * 1e6


def floor_us(commits: int = 1000) -> float:
    """The benchmark's raw floor (``bench/peers/raw.py``): one INSERT and COMMIT per event, nothing else."""
    path = f"{tempfile.mkdtemp()}/floor.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        "CREATE TABLE events (id INTEGER PRIMARY KEY, session TEXT NOT NULL, position INTEGER NOT NULL,"
        " type TEXT NOT NULL, payload TEXT NOT NULL, UNIQUE (session, position))"
    )
    key = uuid4().hex
    start = time.perf_counter()
    for position in range(commits):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO events VALUES (NULL, ?, ?, 'model_message', ?)", (key, position, PAYLOAD))
        conn.execute("COMMIT")
    conn.close()
    return (time.perf_counter() - start) / commits * 1e6


VARIANTS: list[tuple[str, list[str] | None]] = [
    ("everything sessionstore keeps", []),
    ("without the revision trigger", ["events_revision_insert"]),
    ("without the full-text index trigger", ["events_fts_insert"]),
    ("without either", ["events_fts_insert", "events_revision_insert"]),
    ("the raw floor (bench/peers/raw.py)", None),
]


def main() -> None:
    # The disk's speed drifts within minutes: every variant runs once per round, and each is reported as the
    # median of its ratios to the first variant in the same round.
    rounds = 5
    times: dict[str, list[float]] = {label: [] for label, _ in VARIANTS}
    for _ in range(rounds):
        for label, drop in VARIANTS:
            times[label].append(floor_us() if drop is None else per_commit_us(drop))
    base = times[VARIANTS[0][0]]
    for label, _ in VARIANTS:
        ratio = statistics.median(b / t for b, t in zip(base, times[label], strict=True))
        print(f"{label:40} {statistics.median(times[label]):6.0f} us per commit, {ratio:.2f}x as fast (paired)")


if __name__ == "__main__":
    main()
