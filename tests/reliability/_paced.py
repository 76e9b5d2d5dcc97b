"""Child: an agent appending at its own pace while maintenance runs on the same file.

Usage: ``_paced.py DB STOPFILE OUT``. Appends one event at a time to its own
session until STOPFILE exists, timing each call; writes ``{"appends": n,
"slowest": seconds}`` to OUT as JSON. Prints ``ready`` after its first append.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from uuid import uuid4

from sessionstore import EventContext, SQLiteStorage, UserMessage


async def main(db: str, stop: Path, out: Path) -> None:
    context = EventContext.for_stream(uuid4())
    slowest, appends = 0.0, 0
    async with SQLiteStorage(db) as storage:
        await storage.save_event(UserMessage("first"), context)
        print("ready", flush=True)
        while not stop.exists():
            started = time.monotonic()
            await storage.save_event(UserMessage(f"step {appends}"), context)
            slowest = max(slowest, time.monotonic() - started)
            appends += 1
            await asyncio.sleep(0.002)  # an agent between two events
    out.write_text(json.dumps({"appends": appends, "slowest": slowest}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])))
