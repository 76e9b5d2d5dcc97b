"""Helpers for the command line on PostgreSQL: the installed script in a subprocess, the same sessions written
into a SQLite file and a PostgreSQL database by the storages themselves."""

from __future__ import annotations

import asyncio
import json
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
    "same_search",
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


def same_search(db: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``sessionstore search ARGS`` on the file and on the server: the same hits, lines and exit, in each database's
    own order (FTS5's bm25 on the file, newest first on PostgreSQL)."""
    lite, pg = run("search", *args, "--db", db), run("search", *args, "--db", url)
    if "--json" in args and lite.returncode == 0:
        assert sorted(map(str, json.loads(pg.stdout))) == sorted(map(str, json.loads(lite.stdout))), args
    assert sorted(pg.stdout.splitlines()) == sorted(lite.stdout.splitlines()), args
    assert (pg.returncode, pg.stderr) == (lite.returncode, lite.stderr), args
    return pg
