"""Child for the full-disk test: fill a (tiny, real) filesystem with one database.

Usage: ``_fill.py DB BALLAST``. ``BALLAST`` is a file on the same filesystem that
is deleted half way, the way a person frees space. Prints one JSON object:
how many appends were acknowledged before the disk filled, the error that
stopped them, the error of a large ``set_history`` on the full disk, whether
the history read back is exactly what was acknowledged, and whether writing
works again once space is freed.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from uuid import UUID

from sessionstore import EventContext, SQLiteStorage, StorageError, UserMessage

STREAM = UUID(int=1)


def described(exc: BaseException) -> dict[str, object]:
    return {"error": type(exc).__name__, "storage_error": isinstance(exc, StorageError), "message": str(exc)}


async def main(path: str, ballast: str) -> None:
    report: dict[str, object] = {}
    context = EventContext.for_stream(STREAM)
    acknowledged: list[UserMessage] = []
    async with SQLiteStorage(path) as storage:
        try:
            for seq in range(100_000):
                event = UserMessage(f"{seq}:" + "x" * 20_000)
                await storage.save_event(event, context)
                acknowledged.append(event)
        except Exception as exc:
            report["append"] = described(exc)
        report["acknowledged"] = len(acknowledged)
        try:
            await storage.set_history(STREAM, [UserMessage("y" * 50_000) for _ in range(40)])
        except Exception as exc:
            report["set_history"] = described(exc)
        report["intact"] = await storage.get_history(STREAM) == acknowledged
        os.remove(ballast)  # free some space: the same storage object must carry on
        await storage.save_event(UserMessage("after"), context)
        report["after"] = await storage.get_history(STREAM) == [*acknowledged, UserMessage("after")]
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
