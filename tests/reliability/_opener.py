"""Child: open several new database files at once from one process, as an application starting up might.

Usage: ``_opener.py FOLDER COUNT``. Opens ``COUNT`` fresh files concurrently
(``asyncio.gather``; each storage prepares its file on a worker thread), writes
one event to each and prints ``ok``. Run as a child because the failure this
looks for has been a segmentation fault.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from uuid import UUID

from sessionstore import EventContext, SQLiteStorage, UserMessage


async def one(path: Path) -> None:
    async with SQLiteStorage(path) as storage:
        await storage.save_event(UserMessage(path.name), EventContext.for_stream(UUID(int=1)))
        assert await storage.get_history(UUID(int=1)) == [UserMessage(path.name)]


async def main(folder: Path, count: int) -> None:
    await asyncio.gather(*(one(folder / f"{n}.db") for n in range(count)))
    print("ok", flush=True)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2])))
