"""Child process: a registry that holds one session of a database until told to let go, or until it is killed.

``python _holder.py DB STREAM READY RELEASE`` (DB a file's path or a PostgreSQL URL): adopts (or creates) the
session STREAM through a registry with retention, appends one event, writes READY, then waits (up to a minute)
for the file RELEASE to appear, closes the registry (letting the session go, retained) and exits 0. Killed
instead, it lets nothing go itself.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any
from uuid import UUID

from sessionstore import SessionStore, SQLiteStorage, UserMessage


def storage_of(db: str) -> Any:
    if db.startswith("postgresql"):
        from sessionstore.postgres import PostgresStorage

        return PostgresStorage(db)
    return SQLiteStorage(db)


async def main(db: str, stream: str, ready: str, release: str) -> None:
    async with storage_of(db) as storage:
        store = SessionStore(storage=storage, retain_history=True)
        session, _ = await store.get_or_adopt(UUID(stream), cwd="/work")
        async with session.turn():
            await store.stream(session).send(UserMessage("written by the holder"))
        Path(ready).write_text("held")
        deadline = time.monotonic() + 60
        while not Path(release).exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
