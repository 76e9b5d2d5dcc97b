"""Sessions held across processes and hosts on PostgreSQL: an advisory lock on the holder's connection.

The same promises as on a file (tests/reliability/test_held_sessions.py): only the holder writes a held session,
the refusal names it, and a holder that dies (its connection closed by the server) is seen at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from uuid import uuid4

import pytest

from sessionstore import EventContext, SessionHeldError, SessionStore, UserMessage
from sessionstore.postgres import PostgresStorage

HERE = Path(__file__).resolve().parent
TIMEOUT = 60.0


async def test_only_the_holder_writes_a_held_session(pg_url: str) -> None:
    stream = uuid4()
    async with PostgresStorage(pg_url) as first, PostgresStorage(pg_url) as second:
        await first.hold(stream)
        await first.save_event(UserMessage("the holder writes"), EventContext.for_stream(stream))
        for attempt in (
            second.save_event(UserMessage("another writer"), EventContext.for_stream(stream)),
            second.set_history(stream, []),
            second.drop_history(stream),
            second.hold(stream),
            SessionStore(storage=second, retain_history=True).get_or_adopt(stream),
        ):
            with pytest.raises(SessionHeldError, match=rf"held by pid {os.getpid()} on "):
                await attempt
        assert [e.content for e in await second.get_history(stream)] == ["the holder writes"]
        await second.save_event(UserMessage("elsewhere"), EventContext.for_stream(uuid4()))  # not held: written
        await first.let_go(stream)
        await second.hold(stream)
        await second.save_event(UserMessage("mine now"), EventContext.for_stream(stream))
        with pytest.raises(SessionHeldError):
            await first.save_event(UserMessage("no longer mine"), EventContext.for_stream(stream))
    async with PostgresStorage(pg_url) as third:  # closing let every hold go, marks included
        await third.hold(stream)
        assert [e.content for e in await third.get_history(stream)] == ["the holder writes", "mine now"]


async def test_a_killed_holder_is_seen_at_once_and_its_session_taken_over(pg_url: str, tmp_path: Path) -> None:
    stream = uuid4()
    ready, release = tmp_path / "ready", tmp_path / "release"
    process = subprocess.Popen(
        [sys.executable, str(HERE / "_pg_holder.py"), pg_url, str(stream), str(ready), str(release)]
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while not ready.exists():
            assert process.poll() is None and time.monotonic() < deadline, "the holder never held the session"
            time.sleep(0.02)
        async with PostgresStorage(pg_url) as storage:
            with pytest.raises(SessionHeldError, match=rf"held by pid {process.pid} on "):
                await storage.save_event(UserMessage("a second window"), EventContext.for_stream(stream))
            process.send_signal(signal.SIGKILL)
            process.wait(TIMEOUT)
            store = SessionStore(storage=storage, retain_history=True)
            deadline = time.monotonic() + 5  # the server notices the closed connection (loopback: at once)
            while True:
                try:
                    session, adopted = await store.get_or_adopt(stream)
                    break
                except SessionHeldError:
                    assert time.monotonic() < deadline, "the dead holder's lock outlived it"
            assert adopted
            async with session.turn():
                await store.stream(session).send(UserMessage("taken over"))
            assert [e.content for e in await storage.get_history(stream)] == ["written by the holder", "taken over"]
            await store.aclose()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(TIMEOUT)
