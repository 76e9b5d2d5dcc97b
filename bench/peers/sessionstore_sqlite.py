"""sessionstore's SQLiteStorage, through its public API only (:meth:`Store.settle` aside, which only waits)."""

from __future__ import annotations

import asyncio
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any
from uuid import UUID, uuid5

import sessionstore
from sessionstore import EventContext

from . import Adapter, sqlite_pragmas

NS = UUID("6f1c1f9e-0000-4000-8000-000000000000")


@cache
def context(key: str, package: ModuleType = sessionstore) -> EventContext:
    """The session's context, made once: an agent holds it, as the OpenAI adapter holds its SQLiteSession."""
    made: EventContext = package.EventContext.for_stream(uuid5(NS, key))
    return made


def to_events(events: list[Any], package: ModuleType = sessionstore) -> list[Any]:
    """``package``'s events (another version's, imported under another name, in ``bench/ab_inproc.py``)."""
    out: list[Any] = []
    for e in events:
        if e.kind == "user":
            out.append(package.UserMessage(e.data["content"]))
        elif e.kind == "model":
            out.append(package.ModelMessage(e.data["content"]))
        elif e.kind == "tool_call":
            out.append(package.ToolCall(e.data["call_id"], e.data["name"], dict(e.data["arguments"])))
        else:
            out.append(package.ToolResult(e.data["call_id"], e.data["content"]))
    return out


class Store(Adapter):
    key = "sessionstore"
    durability = "each save_event returns once committed (group commit under concurrency)"
    package: ModuleType = sessionstore

    def convert(self, events: list[Any]) -> list[Any]:
        return to_events(events, self.package)

    async def open(self, path: Path) -> None:
        self.storage = self.package.SQLiteStorage(path)
        await self.storage.open()

    async def close(self) -> None:
        await self.storage.aclose()

    async def append(self, key: str, event: Any) -> None:
        await self.storage.save_event(event, context(key, self.package))

    async def settle(self) -> None:
        """Indexing new events, and a checkpoint handed to the writer thread (private names, in every version
        ``bench/ab_inproc.py`` compares)."""
        storage = self.storage
        while True:
            indexing = getattr(storage, "_indexing", None)
            lane = getattr(storage, "_opened", None)
            if indexing is not None:
                await asyncio.wait([indexing])
            elif lane is not None and not lane._idle.is_set():
                await lane._idle.wait()
            else:
                return

    async def load(self, key: str, events: list[Any]) -> None:
        await self.storage.set_history(uuid5(NS, key), events)

    async def read(self, key: str) -> list[Any]:
        return await self.storage.get_history(uuid5(NS, key))

    async def replace(self, key: str, events: list[Any]) -> None:
        await self.storage.set_history(uuid5(NS, key), events)

    pragma_source = "the write lane's connection (the one every write uses)"

    async def pragmas(self, key: str) -> dict[str, str]:
        # A job on the write lane runs with the connection every write uses.
        return await self.storage._submit(lambda conn: (sqlite_pragmas(conn), None))

    def cold_start_code(self, path: Path, key: str) -> str:
        return f"""
import asyncio, uuid
from sessionstore import SQLiteStorage
async def main():
    async with SQLiteStorage({str(path)!r}) as storage:
        events = await storage.get_history(uuid.uuid5(uuid.UUID({str(NS)!r}), {key!r}))
    assert events
asyncio.run(main())
"""
