"""Multi-process child: one of several writers sharing one database file.

Usage: ``_appender.py DB WRITER SHARED_HEX COUNT``. Opens the file (racing the
other writers to create it), prints ``ready``, waits for ``go`` on stdin so all
writers start together, then appends ``COUNT`` events: half to its own session
and half to the shared one, from two concurrent tasks. Event content is
``"<writer>:<seq>"``. Exits 0 and prints ``done`` only if every call succeeded;
any exception propagates and fails the exit code.
"""

from __future__ import annotations

import asyncio
import sys
from uuid import UUID

from sessionstore import EventContext, SQLiteStorage, UserMessage


async def append(storage: SQLiteStorage, stream_id: UUID, writer: int, count: int) -> None:
    context = EventContext.for_stream(stream_id)
    for seq in range(count):
        await storage.save_event(UserMessage(f"{writer}:{seq}"), context)


async def main(path: str, writer: int, shared: UUID, count: int) -> None:
    async with SQLiteStorage(path) as storage:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        own = UUID(int=writer + 1)
        await asyncio.gather(append(storage, own, writer, count // 2), append(storage, shared, writer, count // 2))
    print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), UUID(hex=sys.argv[3]), int(sys.argv[4])))
