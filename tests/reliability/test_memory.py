"""The read cache is bounded in bytes: reading many long histories does not keep them all in memory.

A desktop agent reads many long sessions over a day. The storage keeps the
histories it read last (so an unchanged history costs no decoding), up to
``cache_bytes`` of stored text, not a number of sessions however large each.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from uuid import uuid4

from _support import CHILD_TIMEOUT, child

from sessionstore import ModelMessage, SQLiteStorage

MIB = 1024 * 1024


def read_all(db: Path, cache_bytes: int) -> dict[str, int]:
    done = subprocess.run(child("_reader.py", db, cache_bytes), capture_output=True, text=True, timeout=CHILD_TIMEOUT)
    assert done.returncode == 0, done.stderr
    result: dict[str, int] = json.loads(done.stdout)
    return result


def test_reading_many_long_histories_keeps_at_most_the_bound(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"

    async def write() -> None:
        async with SQLiteStorage(db) as storage:
            for n in range(30):  # 30 sessions of 2,000 one-kilobyte events: 60 MB of text
                await storage.set_history(uuid4(), [ModelMessage(f"{n}:{i} " + "x" * 1000) for i in range(2000)])

    asyncio.run(write())
    bounded = read_all(db, 8 * MIB)
    grown = bounded["after"] - bounded["before"]
    assert bounded["sessions"] == 30
    # What is left after reading 60 MB: the 8 MB the cache may keep, decoded, and the interpreter's own.
    assert grown < 30 * MIB, f"{grown / MIB:.0f} MiB kept after reading"
    unbounded = read_all(db, 1024 * MIB)  # a bound above everything: every history kept, as a count-bound did
    assert unbounded["after"] - unbounded["before"] > 50 * MIB
