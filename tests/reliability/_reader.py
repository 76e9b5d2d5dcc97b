"""Child: read every session of a file once, as a desktop agent does over a day, and report memory.

Usage: ``_reader.py DB CACHE_BYTES``. Prints JSON: resident set size (bytes)
before opening, after reading each history once (each dropped at once), and
after a garbage collection.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys

from sessionstore import SQLiteStorage


def rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def main(db: str, cache_bytes: int) -> None:
    before = rss()
    async with SQLiteStorage(db, cache_bytes=cache_bytes) as storage:
        page = await storage.list_sessions()
        for record in page.sessions:
            events = await storage.get_history(record.stream_id)
            assert events
            del events
        gc.collect()
        after = rss()
        print(json.dumps({"before": before, "after": after, "sessions": len(page.sessions)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
