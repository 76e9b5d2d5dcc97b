"""OpenAI Agents SDK ``SQLAlchemySession`` over postgresql+asyncpg (its tables made by the SDK)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import create_async_engine

from ._pg import engine_settings
from .openai_sqlalchemy import Store as OnSqlite


class Store(OnSqlite):
    key = "openai_pg"
    pg_head = False

    async def open(self, path: Any) -> None:
        self.engine = create_async_engine(str(path))
        self.sessions = {}

    pragma_source = "a pooled connection of its AsyncEngine"

    async def pragmas(self, key: str) -> dict[str, str]:
        return await engine_settings(self.engine)
