"""One adapter per store, all with the same small async interface.

An adapter's module imports its peer at the top, so a peer that is not
installed fails to import and is reported as such by :func:`load`, never
silently left out.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


class Adapter:
    """A store under test. Sessions are named by a string key; events are native objects."""

    key = ""
    durability = ""
    multiprocess = True  # can several processes share one file?
    persistent = True  # does it write a file at all?
    can_replace = True  # does it have a replace-the-history operation?
    bulk_equals_appends = True  # does load() store what one append per event would?

    def convert(self, events: list[Any]) -> list[Any]:
        """Neutral :class:`payloads.Ev` events to this store's native objects (untimed)."""
        return list(events)

    async def open(self, path: Path) -> None: ...

    async def close(self) -> None: ...

    async def create(self, key: str) -> None:
        """Make the session exist (untimed); most stores need nothing."""

    async def append(self, key: str, event: Any) -> None:
        raise NotImplementedError

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


@dataclass
class Loaded:
    key: str
    label: str
    adapter: type[Adapter] | None
    problem: str | None  # why it cannot run (e.g. "not installed: No module named 'agents'")


def load(only: set[str] | None = None) -> list[Loaded]:
    out: list[Loaded] = []
    for key, module, label in STORES:
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
