"""A session is held by one live process at a time, across processes, and a dead holder is seen at once.

Was: the registry's hold lived only inside one process. A second process on the same file (two editor windows)
repaired, appended to and rewrote a session whose turn was running in the first, and the transcript ended with two
results for one tool call. Now the holder has a lock on the file that dies with it, and says who it is in
``sessions.held_by``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from _support import CHILD_TIMEOUT, child, child_env, sqlite3_shell
from databases import Database

from sessionstore import (
    EventContext,
    EventEncodeError,
    SessionHeldError,
    SessionStore,
    SQLiteStorage,
    UserMessage,
)

CLI = [str(Path(sys.executable).with_name("sessionstore"))]  # the installed console script


@contextmanager
def holder_process(tmp_path: Path, db: Path | str | Database, stream: UUID) -> Iterator[subprocess.Popen[bytes]]:
    """A child process holding ``stream`` (through a registry) until the test lets it go or kills it."""
    ready, release = tmp_path / f"ready-{stream.hex}", tmp_path / f"release-{stream.hex}"
    process = subprocess.Popen(child("_holder.py", db, stream, ready, release), env=child_env())
    try:
        deadline = time.monotonic() + CHILD_TIMEOUT
        while not ready.exists():
            assert process.poll() is None, "the holder ended before it held the session"
            assert time.monotonic() < deadline, "the holder never held the session"
            time.sleep(0.02)
        process.release = release  # type: ignore[attr-defined]
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(CHILD_TIMEOUT)


def cli(db: Path | Database, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args, "--db", str(db)], capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=child_env()
    )


async def held_by(database: Database, stream: UUID) -> str | None:
    """``sessions.held_by`` as a person reads it (``sqlite3``, ``psql``): another connection, never a storage."""
    (row,) = await database.rows("SELECT held_by FROM sessions WHERE session_id = ?", stream.hex)
    return row[0]


async def test_a_session_another_process_holds_is_refused_to_every_writer_and_names_its_holder(
    tmp_path: Path, database: Database
) -> None:
    stream = uuid4()
    async with database.storage():
        pass  # made before two processes race to make it
    with holder_process(tmp_path, database, stream) as process:
        async with database.storage() as storage:
            context = EventContext.for_stream(stream)
            for attempt in (
                storage.save_event(UserMessage("a second window's repair"), context),
                storage.set_history(stream, []),
                storage.drop_history(stream),
                storage.hold(stream),
                SessionStore(storage=storage, retain_history=True).get_or_adopt(stream),
            ):
                with pytest.raises(SessionHeldError, match=rf"held by pid {process.pid} on .* since .* UTC"):
                    await attempt
            assert await storage.get_history(stream) == [UserMessage("written by the holder")]  # reading is free
            # Another session of the same database is no one's: written as before.
            await storage.save_event(UserMessage("elsewhere"), EventContext.for_stream(uuid4()))
        mark = await held_by(database, stream)
        assert mark is not None and mark.startswith(f"pid {process.pid} on ")  # what a person sees in the shell

        shown = cli(database, "show", stream.hex)
        assert f"held by pid {process.pid}" in shown.stdout
        assert json.loads(cli(database, "show", stream.hex, "--json").stdout)["session"]["held_by"] == mark
        refused = cli(database, "delete", stream.hex)
        assert refused.returncode == 1
        assert refused.stderr.strip().count("\n") == 0 and f"held by pid {process.pid}" in refused.stderr
        assert "nothing was deleted" in refused.stderr

        process.release.touch()  # type: ignore[attr-defined]
        assert process.wait(CHILD_TIMEOUT) == 0
    # Let go: the mark is gone and anyone may hold it now.
    assert await held_by(database, stream) is None
    async with database.storage() as storage:
        await storage.save_event(UserMessage("mine now"), EventContext.for_stream(stream))
        assert len(await storage.get_history(stream)) == 2


async def test_a_holder_killed_with_sigkill_is_seen_at_once_and_its_session_taken_over(
    tmp_path: Path, database: Database
) -> None:
    stream = uuid4()
    async with database.storage():
        pass
    # No lease to wait out: the file's lock dies with the process; the server ends a dead client's session (and
    # its advisory lock) when its socket closes, at once on loopback, given a few seconds on a loaded machine.
    bound = 1.0 if database.kind == "sqlite" else 5.0
    with holder_process(tmp_path, database, stream) as process:
        async with database.storage() as storage:
            with pytest.raises(SessionHeldError):
                await storage.hold(stream)
            process.send_signal(signal.SIGKILL)
            process.wait(CHILD_TIMEOUT)
            started = time.monotonic()
            store = SessionStore(storage=storage, retain_history=True)
            while True:
                try:
                    session, adopted = await store.get_or_adopt(stream)
                    break
                except SessionHeldError:
                    assert time.monotonic() - started < bound, "the dead holder's lock outlived it"
                    await asyncio.sleep(0.01)
            assert adopted and time.monotonic() - started < bound
            async with session.turn():
                await store.stream(session).send(UserMessage("taken over"))
            assert [e.content for e in await storage.get_history(stream)] == ["written by the holder", "taken over"]
            assert (await held_by(database, stream) or "").startswith(f"pid {os.getpid()} on ")
            await store.aclose()


async def test_a_dead_holders_mark_is_cleared_at_the_next_open(tmp_path: Path) -> None:
    db, stream = tmp_path / "agent.db", uuid4()
    async with SQLiteStorage(db):
        pass
    with holder_process(tmp_path, db, stream) as process:
        process.kill()
        process.wait(CHILD_TIMEOUT)
    # The killed holder let nothing go: its mark stays in the file, but the commands see no live lock.
    assert sqlite3_shell(db, f"SELECT held_by IS NOT NULL FROM sessions WHERE session_id = '{stream.hex}';") == "1"
    assert "not held" in cli(db, "show", stream.hex).stdout
    assert json.loads(cli(db, "show", stream.hex, "--json").stdout)["session"]["held_by"] is None
    async with SQLiteStorage(db):
        pass
    assert sqlite3_shell(db, f"SELECT held_by IS NULL FROM sessions WHERE session_id = '{stream.hex}';") == "1"


async def test_prune_takes_old_sessions_no_live_process_holds_and_never_a_held_one(
    tmp_path: Path, database: Database
) -> None:
    """Was: a session written without a registry (AG2's own ACPAgent on SQLiteStorage) or by a registry whose
    process died was never released, so prune never took it and the database grew for ever."""
    plain, dead, held, fresh = uuid4(), uuid4(), uuid4(), uuid4()
    async with database.storage() as storage:
        for stream in (plain, dead, held, fresh):
            await storage.save_event(UserMessage("old words"), EventContext.for_stream(stream))
    with holder_process(tmp_path, database, dead) as process:
        process.kill()  # its registry never let the session go
    old = datetime(2020, 1, 1, tzinfo=UTC)
    set_old = "UPDATE sessions SET updated_at = ? WHERE session_id = ?"
    for stream in (plain, dead, held):
        await database.rows(set_old, database.time(old), stream.hex)
    with holder_process(tmp_path, database, held) as process:
        await database.rows(set_old, database.time(old), held.hex)  # its adoption restamped it
        dry = cli(database, "prune", "--older-than", "30d")
        assert dry.returncode == 0, dry.stderr
        assert plain.hex[:12] in dry.stdout and dead.hex[:12] in dry.stdout
        assert held.hex[:12] not in dry.stdout and fresh.hex[:12] not in dry.stdout
        done = cli(database, "prune", "--older-than", "30d", "--yes")
        assert done.returncode == 0, done.stderr
        assert "deleted 2 sessions" in done.stdout
        left = await database.rows("SELECT session_id FROM sessions")
        assert {row[0] for row in left} == {held.hex, fresh.hex}
        process.release.touch()  # type: ignore[attr-defined]
        assert process.wait(CHILD_TIMEOUT) == 0
    await database.rows(set_old, database.time(old), held.hex)
    assert "deleted 1 session" in cli(database, "prune", "--older-than", "30d", "--yes").stdout  # let go: prunable


async def test_two_storages_of_one_process_are_two_holders(database: Database) -> None:
    stream = uuid4()
    async with database.storage() as first, database.storage() as second:
        await first.hold(stream)
        await first.hold(stream)  # holding again what it holds is nothing
        with pytest.raises(SessionHeldError, match=f"pid {os.getpid()}"):
            await second.save_event(UserMessage("x"), EventContext.for_stream(stream))
        await first.save_event(UserMessage("the holder writes"), EventContext.for_stream(stream))
        await second.save_event(UserMessage("elsewhere"), EventContext.for_stream(uuid4()))  # not held: written
        await first.let_go(stream)
        await second.hold(stream)
        with pytest.raises(SessionHeldError):
            await first.set_history(stream, [])
        await asyncio.sleep(0)
    async with database.storage() as third:  # closing let every hold go, marks included
        await third.hold(stream)
        assert [e.content for e in await third.get_history(stream)] == ["the holder writes"]


async def test_an_adoption_that_fails_holds_nothing(database: Database) -> None:
    """Was: ``get_or_adopt`` held the session, then could not store its record (a cwd UTF-8 cannot encode) and
    raised with the hold kept: nobody had the session live, yet every other process was refused it until this one
    ended."""
    stream = uuid4()
    async with database.storage() as first, database.storage() as second:
        await first.save_event(UserMessage("stored"), EventContext.for_stream(stream))
        store = SessionStore(storage=first, retain_history=True)
        with pytest.raises(EventEncodeError):
            await store.get_or_adopt(stream, cwd="/work/\udc80")
        assert await held_by(database, stream) is None
        await second.hold(stream)  # another holder may have it (was SessionHeldError)
        await second.save_event(UserMessage("taken"), EventContext.for_stream(stream))
        await second.let_go(stream)
        session, adopted = await store.get_or_adopt(stream, cwd="/work")  # and the first, with a good context
        assert adopted and session.cwd == "/work"
        await store.aclose()
