"""Child process: a registry on PostgreSQL holding one session until told to let go, or until it is killed.

``python _pg_holder.py URL STREAM READY RELEASE``, as tests/reliability/_holder.py does on a file.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from uuid import UUID

from sessionstore import SessionStore, UserMessage
from sessionstore.postgres import PostgresStorage


async def main(url: str, stream: str, ready: str, release: str) -> None:
    async with PostgresStorage(url) as storage:
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
