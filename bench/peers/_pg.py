"""What the PostgreSQL adapters share: the settings that decide what a commit costs, read from a connection."""

from __future__ import annotations

from typing import Any

# Read from each store's own connection during the run, as PRAGMAS are for SQLite: what the server runs with.
SETTINGS = ("synchronous_commit", "fsync", "wal_sync_method")


async def asyncpg_settings(conn: Any) -> dict[str, str]:
    """:data:`SETTINGS` through an asyncpg connection."""
    return {name: str(await conn.fetchval(f"SHOW {name}")) for name in SETTINGS}


async def engine_settings(engine: Any) -> dict[str, str]:
    """:data:`SETTINGS` through a pooled connection of a SQLAlchemy async engine."""
    async with engine.connect() as conn:
        return {name: str((await conn.exec_driver_sql(f"SHOW {name}")).scalar()) for name in SETTINGS}
