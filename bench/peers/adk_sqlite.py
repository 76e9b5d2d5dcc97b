"""Google ADK ``SqliteSessionService`` (aiosqlite, a new connection per call)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.adk.sessions.sqlite_session_service import SqliteSessionService

from . import aiosqlite_pragmas
from ._adk import APP, USER, AdkStore


class Store(AdkStore):
    key = "adk_sqlite"

    def make(self, path: Path) -> Any:
        return SqliteSessionService(str(path))

    pragma_source = "a connection from the service's _get_db_connection() (a new one per call)"

    async def pragmas(self, key: str) -> dict[str, str]:
        async with self.service._get_db_connection() as db:
            return await aiosqlite_pragmas(db)

    def cold_start_code(self, path: Path, key: str) -> str:
        return f"""
import asyncio
from google.adk.sessions.sqlite_session_service import SqliteSessionService
async def main():
    service = SqliteSessionService({str(path)!r})
    session = await service.get_session(app_name={APP!r}, user_id={USER!r}, session_id={key!r})
    await service.close()
    assert session.events
asyncio.run(main())
"""
