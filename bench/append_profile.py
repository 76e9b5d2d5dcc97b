"""Where the time of one append goes, for the sessionstore found on ``sys.path``; two versions side by side.

    python3 bench/append_profile.py                       # this checkout
    python3 bench/append_profile.py --against REV         # and git revision REV, in alternating rounds

Each round, in a fresh file at ``synchronous=FULL``: 1,000 sequential ``save_event`` calls (the whole append as
an agent sees it), then the same two statements and COMMIT on a plain connection (what the database costs
without Python around it), and the WAL frames each commit wrote. With ``--against``, REV is checked out into a
temporary worktree and the two run in alternating rounds (the disk's speed drifts), each in its own process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from uuid import uuid4

# The token columns of revision 0010, NULL: what an event without usage binds (a commit before it ignores them).
NO_TOKENS: dict[str, None] = dict.fromkeys(
    ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
)

HERE = Path(__file__).resolve().parent
COUNT = 1000
PAYLOAD_TEXT = " ".join(f"word{i % 50}" for i in range(60))


def measure() -> dict[str, float]:
    """One round in this process: microseconds per append, per bare commit, and WAL frames per commit."""
    from sessionstore import EventContext, SQLiteStorage, UserMessage
    from sessionstore.schema import queries

    folder = Path(tempfile.mkdtemp())
    path = folder / "append.db"
    context = EventContext.for_stream(uuid4())

    async def appends() -> float:
        async with SQLiteStorage(path) as storage:
            await storage.save_event(UserMessage("first"), context)
            started = time.perf_counter()
            for _ in range(COUNT):
                await storage.save_event(UserMessage(PAYLOAD_TEXT), context)
            return (time.perf_counter() - started) / COUNT * 1e6

    append_us = asyncio.run(appends())
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    row_id = conn.execute(queries.FIND_SESSION, {"sid": context.stream.id.hex}).fetchone()[0]
    params = {"id": row_id, "type": "user_message", "payload": json.dumps({"content": PAYLOAD_TEXT})}
    params |= {"role": "user", "text": None, "text_path": "$.content", "now": "2026-11-30 00:00:00.000000"}
    params |= NO_TOKENS  # revision 0010's columns (a commit before it ignores the keys)
    started = time.perf_counter()
    for _ in range(COUNT):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(queries.FIND_SESSION, {"sid": context.stream.id.hex}).fetchone()
        conn.execute(queries.APPEND_EVENT, params)
        conn.execute("COMMIT")
    commit_us = (time.perf_counter() - started) / COUNT * 1e6
    frames = os.path.getsize(f"{path}-wal") / (4096 + 24) / COUNT
    conn.close()
    return {"append_us": append_us, "bare_commit_us": commit_us, "wal_frames_per_commit": frames}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="a git revision to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure()))
        return
    versions = {"this checkout": HERE.parent}
    worktree = None
    if args.against:
        worktree = Path(tempfile.mkdtemp()) / "against"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(worktree), args.against], check=True)
        versions = {args.against: worktree, **versions}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in versions}
    try:
        for number in range(args.rounds):
            order = list(versions.items())
            for name, root in order if number % 2 == 0 else reversed(order):
                env = os.environ | {"PYTHONPATH": str(root)}
                done = subprocess.run(
                    [sys.executable, __file__, "--one"], env=env, capture_output=True, text=True, check=True
                )
                results[name].append(json.loads(done.stdout))
    finally:
        if worktree is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], check=False)
    for name, samples in results.items():
        medians = {key: statistics.median(s[key] for s in samples) for key in samples[0]}
        print(
            f"{name}: append {medians['append_us']:.0f} us, bare commit {medians['bare_commit_us']:.0f} us,"
            f" {medians['wal_frames_per_commit']:.1f} WAL frames per commit (median of {len(samples)} rounds)"
        )
    if len(results) == 2:
        (old, new) = results.values()
        ratios = [o["append_us"] / n["append_us"] for o, n in zip(old, new, strict=True)]
        print(
            f"paired: this checkout appends {statistics.median(ratios):.2f}x as fast"
            f" ({min(ratios):.2f}-{max(ratios):.2f}), faster in {sum(r > 1 for r in ratios)} of {len(ratios)} rounds"
        )


if __name__ == "__main__":
    main()
