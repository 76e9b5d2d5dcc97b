"""One adapter per store, all with the same small async interface.

An adapter's module imports its peer at the top, so a peer that is not
installed fails to import and is reported as such by :func:`load`, never
silently left out.
"""

from __future__ import annotations

import importlib
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The settings that decide what a commit costs and how the WAL is reused, read from each store's own
# connection at run time: the table prints what the store really runs with, not what its docs say.
PRAGMAS = ("journal_mode", "synchronous", "wal_autocheckpoint")
_SYNCHRONOUS = {"0": "OFF", "1": "NORMAL", "2": "FULL", "3": "EXTRA"}


def shown(name: str, value: object) -> str:
    text = str(value)
    return _SYNCHRONOUS.get(text, text) if name == "synchronous" else text


def sqlite_pragmas(conn: sqlite3.Connection) -> dict[str, str]:
    """The :data:`PRAGMAS` of a ``sqlite3`` connection (run on the thread that owns it)."""
    return {name: shown(name, conn.execute(f"PRAGMA {name}").fetchone()[0]) for name in PRAGMAS}


async def query_pragmas(scalar: Callable[[str], Awaitable[object]]) -> dict[str, str]:
    """The :data:`PRAGMAS` through an async connection: ``scalar(sql)`` returns the first column of the first row."""
    return {name: shown(name, await scalar(f"PRAGMA {name}")) for name in PRAGMAS}


async def engine_pragmas(engine: Any) -> dict[str, str]:
    """The :data:`PRAGMAS` of a connection from a SQLAlchemy async engine's pool (set up by its connect hooks)."""
    async with engine.connect() as conn:

        async def scalar(sql: str) -> object:
            return (await conn.exec_driver_sql(sql)).scalar()

        return await query_pragmas(scalar)


async def aiosqlite_pragmas(conn: Any) -> dict[str, str]:
    async def scalar(sql: str) -> object:
        async with conn.execute(sql) as cursor:
            row = await cursor.fetchone()
        return row[0]

    return await query_pragmas(scalar)


# (key, module, label): the order is the table's order.
STORES: list[tuple[str, str, str]] = [
    ("memory", "peers.memory", "sessionstore MemoryStorage (ceiling)"),
    ("raw", "peers.raw", "raw sqlite3 floor"),
    ("sessionstore", "peers.sessionstore_sqlite", "sessionstore SQLiteStorage"),
    ("openai_sqlite", "peers.openai_sqlite", "OpenAI Agents SQLiteSession"),
    ("openai_sqlalchemy", "peers.openai_sqlalchemy", "OpenAI Agents SQLAlchemySession"),
    ("adk_database", "peers.adk_database", "Google ADK DatabaseSessionService"),
    ("adk_sqlite", "peers.adk_sqlite", "Google ADK SqliteSessionService"),
    ("langgraph", "peers.langgraph_sqlite", "LangGraph AsyncSqliteSaver"),
]

# The pg section's stores, all on one PostgreSQL server; ``open()`` takes a database's URL instead of a path.
PG_STORES: list[tuple[str, str, str]] = [
    ("raw_pg", "peers.raw_pg", "raw asyncpg floor"),
    ("sessionstore_pg", "peers.sessionstore_pg", "sessionstore PostgresStorage"),
    ("openai_pg", "peers.openai_pg", "OpenAI Agents SQLAlchemySession"),
    ("adk_pg", "peers.adk_pg", "Google ADK DatabaseSessionService"),
]


class Adapter:
    """A store under test. Sessions are named by a string key; events are native objects."""

    key = ""
    durability = ""
    multiprocess = True  # can several processes share one file?
    persistent = True  # does it write a file at all?
    can_replace = True  # does it have a replace-the-history operation?
    bulk_equals_appends = True  # does load() store what one append per event would?
    bulk_load = True  # can load() write a long history in one go (not one append per event)?
    bench_wal = False  # does the bench put the file in WAL mode for this store (it would not on its own)?
    pg_head = False  # PostgreSQL: does its fresh database start as a copy of one at sessionstore's head?

    def convert(self, events: list[Any]) -> list[Any]:
        """Neutral :class:`payloads.Ev` events to this store's native objects (untimed)."""
        return list(events)

    async def open(self, path: Path) -> None: ...

    async def close(self) -> None: ...

    async def create(self, key: str) -> None:
        """Make the session exist (untimed); most stores need nothing."""

    async def append(self, key: str, event: Any) -> None:
        raise NotImplementedError

    async def settle(self) -> None:
        """Wait for the background work the store's appends started (what its next append would wait behind);
        most stores have none."""

    async def load(self, key: str, events: list[Any]) -> None:
        """Prepare a long history fast (untimed); defaults to appending one by one."""
        for event in events:
            await self.append(key, event)

    async def read(self, key: str) -> list[Any]:
        raise NotImplementedError

    async def replace(self, key: str, events: list[Any]) -> None:
        raise NotImplementedError

    def cold_start_code(self, path: Path, key: str) -> str:
        """Python source a fresh process runs: import, open ``path``, read session ``key``."""
        raise NotImplementedError

    pragma_source = ""  # which connection :meth:`pragmas` reads, for the table

    async def pragmas(self, key: str) -> dict[str, str]:
        """:data:`PRAGMAS` as the connection that writes session ``key`` has them (after a write to it)."""
        raise NotImplementedError("the bench does not know how to reach this store's connection")


@dataclass
class Loaded:
    key: str
    label: str
    adapter: type[Adapter] | None
    problem: str | None  # why it cannot run (e.g. "not installed: No module named 'agents'")


def load(only: set[str] | None = None, stores: list[tuple[str, str, str]] = STORES) -> list[Loaded]:
    out: list[Loaded] = []
    for key, module, label in stores:
        if only is not None and key not in only:
            continue
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            out.append(Loaded(key, label, None, f"not installed ({exc})"))
            continue
        except Exception as exc:  # a broken install is reported, not hidden
            out.append(Loaded(key, label, None, f"cannot import: {type(exc).__name__}: {exc}"))
            continue
        out.append(Loaded(key, label, mod.Store, None))
    return out
