"""sessionstore's MemoryStorage: the ceiling (no I/O at all)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID, uuid5

from sessionstore import EventContext, MemoryStorage

from . import Adapter
from .sessionstore_sqlite import to_events

NS = UUID("6f1c1f9e-0000-4000-8000-000000000000")


class Store(Adapter):
    key = "memory"
    durability = "none (process memory)"
    multiprocess = False
    persistent = False

    def convert(self, events: list[Any]) -> list[Any]:
        return to_events(events)

    async def open(self, path: Path) -> None:
        self.storage = MemoryStorage()

    async def append(self, key: str, event: Any) -> None:
        await self.storage.save_event(event, EventContext.for_stream(uuid5(NS, key)))

    async def load(self, key: str, events: list[Any]) -> None:
        await self.storage.set_history(uuid5(NS, key), events)

    async def read(self, key: str) -> list[Any]:
        return list(await self.storage.get_history(uuid5(NS, key)))

    async def replace(self, key: str, events: list[Any]) -> None:
        await self.storage.set_history(uuid5(NS, key), events)
