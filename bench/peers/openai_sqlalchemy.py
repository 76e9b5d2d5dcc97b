"""OpenAI Agents SDK ``SQLAlchemySession`` over sqlite+aiosqlite (WAL set by the SDK)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
from sqlalchemy.ext.asyncio import create_async_engine

from . import Adapter, engine_pragmas
from ._formats import responses_items


class Store(Adapter):
    key = "openai_sqlalchemy"
    durability = "one commit per add_items"

    def convert(self, events: list[Any]) -> list[Any]:
        return responses_items(events)

    async def open(self, path: Path) -> None:
        self.engine = create_async_engine(f"sqlite+aiosqlite:///{path}")
        self.sessions: dict[str, SQLAlchemySession] = {}

    def _session(self, key: str) -> SQLAlchemySession:
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = SQLAlchemySession(key, engine=self.engine, create_tables=True)
        return session

    async def close(self) -> None:
        await self.engine.dispose()

    async def create(self, key: str) -> None:
        await self._session(key).get_items()  # creates the tables

    async def append(self, key: str, event: Any) -> None:
        await self._session(key).add_items([event])

    async def load(self, key: str, events: list[Any]) -> None:
        await self._session(key).add_items(events)

    async def read(self, key: str) -> list[Any]:
        return await self._session(key).get_items()

    async def replace(self, key: str, events: list[Any]) -> None:
        session = self._session(key)
        await session.clear_session()
        await session.add_items(events)

    pragma_source = "a pooled connection of its AsyncEngine (the SDK's connect hook applied)"

    async def pragmas(self, key: str) -> dict[str, str]:
        return await engine_pragmas(self.engine)

    def cold_start_code(self, path: Path, key: str) -> str:
        return f"""
import asyncio
from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
from sqlalchemy.ext.asyncio import create_async_engine
async def main():
    engine = create_async_engine({"sqlite+aiosqlite:///" + str(path)!r})
    items = await SQLAlchemySession({key!r}, engine=engine).get_items()
    await engine.dispose()
    assert items
asyncio.run(main())
"""
