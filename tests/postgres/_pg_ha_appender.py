"""The application of the failover test: a registry over a PostgresStorage on a multi-host URL, appending to its
sessions and reading them back without pause, and logging what it was told.

``URL LOG SESSIONS``: makes SESSIONS sessions (``store.create``), then, one task per session, sends
``UserMessage("1")``, ``"2"``, ... through the session's stream, while one more task reads every session's
history in turn. Each line of LOG is written after the call it reports returned (one ``write`` each, so lines
never mix):

* ``ready SID...`` once the sessions exist;
* ``ack T SID N``: the send of ``N`` returned (T: ``time.time()`` when it did);
* ``err T SID N ERROR MESSAGE``: it raised ERROR (a StorageError subclass), so ``N`` may or may not be stored; the
  task goes on with ``N + 1``;
* ``read T SID COUNT`` / ``readerr T SID ERROR MESSAGE``: a history read and what it found;
* ``warn MESSAGE``: the storage's warnings (an append settled after a lost connection).

It stops once a file ``LOG.stop`` exists, after the calls under way have returned.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from pathlib import Path
from uuid import UUID

from sessionstore import SessionStore, StorageError, UserMessage
from sessionstore.postgres import PostgresStorage


class _ToLog(logging.Handler):
    def __init__(self, write: object) -> None:
        super().__init__(logging.WARNING)
        self.write = write

    def emit(self, record: logging.LogRecord) -> None:
        self.write(f"warn {record.getMessage()}")  # type: ignore[operator]


async def main(url: str, log_path: str, count: int) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def write(line: str) -> None:
        os.write(log, (line + "\n").encode())

    logging.getLogger("sessionstore").addHandler(_ToLog(write))
    stop = Path(f"{log_path}.stop")
    # A pool smaller than the appenders: some appends wait for a connection and go in batches (APPEND_MANY).
    async with PostgresStorage(url, pool_size=max(1, count // 2)) as storage:
        store = SessionStore(storage=storage, retain_history=True)
        sessions = [await store.create(cwd="/ha") for _ in range(count)]
        write("ready " + " ".join(s.session_id for s in sessions))

        async def append(session: object) -> None:
            stream = store.stream(session)  # type: ignore[arg-type]
            sid = session.session_id  # type: ignore[attr-defined]
            n = 0
            while not stop.exists():
                n += 1
                try:
                    await stream.send(UserMessage(str(n)))
                except StorageError as exc:
                    write(f"err {time.time():.6f} {sid} {n} {type(exc).__name__} {exc}")
                    continue
                write(f"ack {time.time():.6f} {sid} {n}")

        async def read() -> None:
            while not stop.exists():
                for session in sessions:
                    try:
                        history = await storage.get_history(UUID(hex=session.session_id))
                    except StorageError as exc:
                        write(f"readerr {time.time():.6f} {session.session_id} {type(exc).__name__} {exc}")
                        continue
                    write(f"read {time.time():.6f} {session.session_id} {len(history)}")
                await asyncio.sleep(0.01)

        await asyncio.gather(*(append(s) for s in sessions), read())
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
