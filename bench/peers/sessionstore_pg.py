"""sessionstore's PostgresStorage, through its public API only (a database at head, copied from a template)."""

from __future__ import annotations

from typing import Any
from uuid import uuid5

from sessionstore.postgres import PostgresStorage

from . import Adapter
from ._pg import asyncpg_settings
from .sessionstore_sqlite import NS, context, to_events


class Store(Adapter):
    key = "sessionstore_pg"
    durability = "each save_event returns once committed; the session's row locked FOR UPDATE"
    pg_head = True  # its fresh database is a copy of one migrated to head (what PostgresStorage.open makes)

    def convert(self, events: list[Any]) -> list[Any]:
        return to_events(events)

    async def open(self, path: Any) -> None:
        self.storage = PostgresStorage(str(path))
        await self.storage.open()

    async def close(self) -> None:
        await self.storage.aclose()

    async def append(self, key: str, event: Any) -> None:
        await self.storage.save_event(event, context(key))

    async def load(self, key: str, events: list[Any]) -> None:
        await self.storage.set_history(uuid5(NS, key), events)

    async def read(self, key: str) -> list[Any]:
        return await self.storage.get_history(uuid5(NS, key))

    pragma_source = "a connection of its pool (the one every write but an append uses)"

    async def pragmas(self, key: str) -> dict[str, str]:
        async with (await self.storage._ready()).connection() as conn:
            return await asyncpg_settings(conn)
