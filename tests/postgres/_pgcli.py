"""Helpers for the command line on PostgreSQL: the installed script in a subprocess, the same sessions written
into a SQLite file and a PostgreSQL database by the storages themselves."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

# The command-line tests' helpers (the script's path, its environment, the conversations they write).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))

from _clitools import (
    TIMEOUT,
    Family,
    Spec,
    child_env,
    conversation,
    now,
    script_path,
    synthetic_export,
    write_db,
    write_family,
)

from sessionstore import BaseEvent, SessionRecord, SQLiteStorage
from sessionstore.postgres import PostgresStorage

__all__ = [
    "TIMEOUT",
    "Family",
    "Spec",
    "child_env",
    "conversation",
    "now",
    "run",
    "script_path",
    "synthetic_export",
    "write_both",
    "write_db",
    "write_family",
    "write_sessions",
]


def run(*args: object, input: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed ``sessionstore`` script, as a person runs it."""
    return subprocess.run(
        [script_path(), *map(str, args)],
        capture_output=True,
        text=True,
        input=input,
        env=env or child_env(),
        timeout=TIMEOUT,
    )


async def write_sessions(
    storage: SQLiteStorage | PostgresStorage, sessions: Sequence[tuple[UUID, Sequence[BaseEvent], dict[str, Any]]]
) -> None:
    for sid, events, record in sessions:
        await storage.save_session(SessionRecord(session_id=sid.hex, **record))
        await storage.set_history(sid, events)


def write_both(db: Path, url: str, sessions: Sequence[tuple[UUID, Sequence[BaseEvent], dict[str, Any]]]) -> None:
    """The same sessions into a SQLite file and a PostgreSQL database, each through its storage."""

    async def main() -> None:
        async with SQLiteStorage(db) as lite, PostgresStorage(url) as pg:
            await write_sessions(lite, sessions)
            await write_sessions(pg, sessions)

    asyncio.run(main())
