"""The PostgreSQL floor: asyncpg, one INSERT per event committed on its own (autocommit).

The same durability as every store on the server (synchronous_commit and fsync on): one round trip and one
WAL flush per event, no session row, no lock, no trigger: nothing that stores an event can cost less. A pool of
as many connections as PostgresStorage keeps at most (10), for (b)'s concurrent sessions.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from . import Adapter
from ._pg import asyncpg_settings

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS raw_events (id BIGSERIAL PRIMARY KEY, session TEXT NOT NULL,"
    " position INTEGER NOT NULL, type TEXT NOT NULL, payload TEXT NOT NULL, UNIQUE (session, position))"
)


class Store(Adapter):
    key = "raw_pg"
    durability = "autocommit INSERT per event (one round trip, one WAL flush)"
    pg_head = False

    def convert(self, events: list[Any]) -> list[Any]:
        return [(e.type_name, e.json()) for e in events]

    async def open(self, path: Any) -> None:
        url = str(path).replace("postgresql+asyncpg://", "postgresql://")
        self.conn = await asyncpg.create_pool(url, min_size=1, max_size=10)
        await self.conn.execute(SCHEMA)
        self.next: dict[str, int] = {}

    async def close(self) -> None:
        await self.conn.close()

    async def create(self, key: str) -> None:
        sql = "SELECT COALESCE(MAX(position), -1) + 1 FROM raw_events WHERE session = $1"
        found = await self.conn.fetchval(sql, key)
        self.next[key] = int(found)

    async def append(self, key: str, event: Any) -> None:
        position = self.next[key]
        self.next[key] = position + 1  # taken before the await: concurrent tasks of one key never share one
        await self.conn.execute(
            "INSERT INTO raw_events (session, position, type, payload) VALUES ($1, $2, $3, $4)", key, position, *event
        )

    async def load(self, key: str, events: list[Any]) -> None:
        start = self.next[key]
        await self.conn.executemany(
            "INSERT INTO raw_events (session, position, type, payload) VALUES ($1, $2, $3, $4)",
            [(key, start + i, t, p) for i, (t, p) in enumerate(events)],
        )
        self.next[key] = start + len(events)

    async def read(self, key: str) -> list[Any]:
        rows = await self.conn.fetch("SELECT type, payload FROM raw_events WHERE session = $1 ORDER BY position", key)
        return [(t, json.loads(p)) for t, p in rows]

    pragma_source = "its asyncpg connection"

    async def pragmas(self, key: str) -> dict[str, str]:
        async with self.conn.acquire() as conn:
            return await asyncpg_settings(conn)
