"""Google ADK ``DatabaseSessionService`` over postgresql+asyncpg (the async driver this ADK requires)."""

from __future__ import annotations

from typing import Any

from google.adk.sessions import DatabaseSessionService

from ._adk import AdkStore
from ._pg import engine_settings


class Store(AdkStore):
    key = "adk_pg"
    durability = "one commit per append_event"
    bench_wal = False
    pg_head = False

    def make(self, path: Any) -> Any:
        return DatabaseSessionService(db_url=str(path))

    pragma_source = "a pooled connection of the service's db_engine"

    async def pragmas(self, key: str) -> dict[str, str]:
        return await engine_settings(self.service.db_engine)
