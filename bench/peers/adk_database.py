"""Google ADK ``DatabaseSessionService`` over sqlite+aiosqlite (SQLAlchemy ORM)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.adk.sessions import DatabaseSessionService

from . import engine_pragmas
from ._adk import APP, USER, AdkStore


class Store(AdkStore):
    key = "adk_database"

    def make(self, path: Path) -> Any:
        return DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{path}")

    pragma_source = "a pooled connection of the service's db_engine"

    async def pragmas(self, key: str) -> dict[str, str]:
        return await engine_pragmas(self.service.db_engine)

    def cold_start_code(self, path: Path, key: str) -> str:
        return f"""
import asyncio
from google.adk.sessions import DatabaseSessionService
async def main():
    service = DatabaseSessionService(db_url={"sqlite+aiosqlite:///" + str(path)!r})
    session = await service.get_session(app_name={APP!r}, user_id={USER!r}, session_id={key!r})
    await service.close()
    assert session.events
asyncio.run(main())
"""
