"""How long a delete takes while another process holds an older snapshot, and how soon the text is gone after.

    python3 bench/held_snapshot.py --rounds 5

Each round, in a new file: 30 sessions of ordinary text and one holding four planted words; a real ``sqlite3``
shell opens it, runs ``BEGIN`` and a ``SELECT`` and stays inside that transaction; then ``sessionstore delete``
(a new process) deletes the planted session. Prints how long the command took, how many copies of the words the
real ``grep`` still finds in the file and its ``-wal``, and, once the shell commits (staying open), how long until a
storage opened on the file (the next open) has removed them. The same helpers as
``tests/reliability/test_deleted_is_gone.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "reliability"))

from test_deleted_is_gone import SCRIPT, copies, eventually, fill, planted, snapshot_held  # noqa: E402

from sessionstore import SQLiteStorage  # noqa: E402


async def filled(db: Path, words: list[str]) -> str:
    async with SQLiteStorage(db) as storage:
        return await fill(storage, words)


async def next_open(db: Path, words: list[str]) -> float:
    async with SQLiteStorage(db):
        return await eventually(lambda: copies(db, words) == 0, within=60.0)


def one_round(folder: Path) -> tuple[float, int, float]:
    db = folder / "agent.db"
    words = planted()
    secret = asyncio.run(filled(db, words))
    with snapshot_held(db) as let_go:
        started = time.perf_counter()
        done = subprocess.run([SCRIPT, "--db", db, "delete", secret], capture_output=True, text=True, timeout=60)
        took = time.perf_counter() - started
        assert done.returncode == 0, done.stderr
        left = copies(db, words)
        let_go()
        gone = asyncio.run(next_open(db, words))
    return took, left, gone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = []
    for _ in range(args.rounds):
        folder = Path(tempfile.mkdtemp())
        try:
            results.append(one_round(folder))
        finally:
            shutil.rmtree(folder)
    for name, index, unit in (("delete returned in", 0, " s"), ("copies left", 1, ""), ("gone after", 2, " s")):
        values = [r[index] for r in results]
        print(f"{name}: {statistics.median(values):.2f}{unit} ({min(values):.2f}-{max(values):.2f})")
    print(f"({len(results)} rounds)")


if __name__ == "__main__":
    main()
