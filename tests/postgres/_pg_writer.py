"""A writer process for the concurrency tests: appends to sessions, or rewrites one, and logs what was acknowledged.

``append URL ACKS NAME COUNT SESSION...``: for i in range(COUNT), appends ``NAME:i`` to each SESSION in turn;
``rewrite URL ACKS NAME COUNT SESSION``: COUNT times, replaces SESSION's history with a generation of its own
(``NAME:g:j`` for j < 1 + g % 7). Each call that returned is logged to ACKS (one line, written after the
call returned); a call that failed (the server restarting) is logged as ``? ...`` and the writer goes on. The
writer stops early once a file ``ACKS.stop`` exists.
"""

from __future__ import annotations

import asyncio
import os
import sys
from uuid import UUID

from sessionstore import EventContext, StorageError, UserMessage
from sessionstore.postgres import PostgresStorage


async def main(mode: str, url: str, acks: str, name: str, count: int, sessions: list[UUID]) -> None:
    log = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    storage = PostgresStorage(url)
    stop = f"{acks}.stop"
    for i in range(count):
        if os.path.exists(stop):
            break
        for sid in sessions:
            text = f"{name}:{i}"
            try:
                if mode == "append":
                    await storage.save_event(UserMessage(text), EventContext.for_stream(sid))
                else:
                    await storage.set_history(sid, [UserMessage(f"{text}:{j}") for j in range(1 + i % 7)])
            except StorageError as exc:
                os.write(log, f"? {sid.hex} {text} {type(exc).__name__}\n".encode())
                await asyncio.sleep(0.05)
                continue
            os.write(log, f"{sid.hex} {text}\n".encode())
    await storage.aclose()


if __name__ == "__main__":
    mode, url, acks, name, count, *ids = sys.argv[1:]
    asyncio.run(main(mode, url, acks, name, int(count), [UUID(hex=i) for i in ids]))
