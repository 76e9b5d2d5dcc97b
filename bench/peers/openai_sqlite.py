"""OpenAI Agents SDK ``SQLiteSession`` (sqlite3 in worker threads, WAL set by the SDK)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agents import SQLiteSession

from . import Adapter, sqlite_pragmas
from ._formats import responses_items


class Store(Adapter):
    key = "openai_sqlite"
    durability = "one commit per add_items"

    def convert(self, events: list[Any]) -> list[Any]:
        return responses_items(events)

    async def open(self, path: Path) -> None:
        self.path = path
        self.sessions: dict[str, SQLiteSession] = {}

    def _session(self, key: str) -> SQLiteSession:
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = SQLiteSession(key, self.path)
        return session

    async def close(self) -> None:
        for session in self.sessions.values():
            session.close()

    async def create(self, key: str) -> None:
        self._session(key)

    async def append(self, key: str, event: Any) -> None:
        await self._session(key).add_items([event])

    async def load(self, key: str, events: list[Any]) -> None:
        await self._session(key).add_items(events)

    async def read(self, key: str) -> list[Any]:
        return await self._session(key).get_items()

    async def replace(self, key: str, events: list[Any]) -> None:
        # No replace operation: clear and add everything (two transactions).
        session = self._session(key)
        await session.clear_session()
        await session.add_items(events)

    pragma_source = "SQLiteSession._get_connection() in a worker thread (one connection per thread, as add_items)"

    async def pragmas(self, key: str) -> dict[str, str]:
        session = self._session(key)
        return await asyncio.to_thread(lambda: sqlite_pragmas(session._get_connection()))

    def cold_start_code(self, path: Path, key: str) -> str:
        return f"""
import asyncio
from agents import SQLiteSession
async def main():
    session = SQLiteSession({key!r}, {str(path)!r})
    items = await session.get_items()
    session.close()
    assert items
asyncio.run(main())
"""
