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
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from _support import CHILD_TIMEOUT, child, child_env, sqlite3_shell

from sessionstore import (
    EventContext,
    SessionHeldError,
    SessionStore,
    SQLiteStorage,
    UserMessage,
)

CLI = [str(Path(sys.executable).with_name("sessionstore"))]  # the installed console script


@contextmanager
def holder_process(tmp_path: Path, db: Path, stream: UUID) -> Iterator[subprocess.Popen[bytes]]:
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


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args, "--db", str(db)], capture_output=True, text=True, timeout=CHILD_TIMEOUT)


async def test_a_session_another_process_holds_is_refused_to_every_writer_and_names_its_holder(
    tmp_path: Path,
) -> None:
    db, stream = tmp_path / "agent.db", uuid4()
    async with SQLiteStorage(db):
        pass  # made before two processes race to make it
    with holder_process(tmp_path, db, stream) as process:
        async with SQLiteStorage(db) as storage:
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
            # Another session of the same file is no one's: written as before.
            await storage.save_event(UserMessage("elsewhere"), EventContext.for_stream(uuid4()))
        held_by = sqlite3_shell(db, f"SELECT held_by FROM sessions WHERE session_id = '{stream.hex}';")
        assert held_by.startswith(f"pid {process.pid} on ")  # what a person sees in the sqlite3 shell

        shown = cli(db, "show", stream.hex)
        assert f"held by pid {process.pid}" in shown.stdout
        assert json.loads(cli(db, "show", stream.hex, "--json").stdout)["session"]["held_by"] == held_by
        refused = cli(db, "delete", stream.hex)
        assert refused.returncode == 1
        assert refused.stderr.strip().count("\n") == 0 and f"held by pid {process.pid}" in refused.stderr
        assert "nothing was deleted" in refused.stderr

        process.release.touch()  # type: ignore[attr-defined]
        assert process.wait(CHILD_TIMEOUT) == 0
    # Let go: the mark is gone and anyone may hold it now.
    assert sqlite3_shell(db, f"SELECT held_by IS NULL FROM sessions WHERE session_id = '{stream.hex}';") == "1"
    async with SQLiteStorage(db) as storage:
        await storage.save_event(UserMessage("mine now"), EventContext.for_stream(stream))
        assert len(await storage.get_history(stream)) == 2


async def test_a_holder_killed_with_sigkill_is_seen_at_once_and_its_session_taken_over(tmp_path: Path) -> None:
    db, stream = tmp_path / "agent.db", uuid4()
    async with SQLiteStorage(db):
        pass
    with holder_process(tmp_path, db, stream) as process:
        async with SQLiteStorage(db) as storage:
            with pytest.raises(SessionHeldError):
                await storage.hold(stream)
            process.send_signal(signal.SIGKILL)
            process.wait(CHILD_TIMEOUT)
            started = time.monotonic()
            store = SessionStore(storage=storage, retain_history=True)
            session, adopted = await store.get_or_adopt(stream)  # no lease to wait out
            assert adopted and time.monotonic() - started < 1.0
            async with session.turn():
                await store.stream(session).send(UserMessage("taken over"))
            assert [e.content for e in await storage.get_history(stream)] == ["written by the holder", "taken over"]
            who = sqlite3_shell(db, f"SELECT held_by FROM sessions WHERE session_id = '{stream.hex}';")
            assert who.startswith(f"pid {os.getpid()} on ")
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


async def test_prune_takes_old_sessions_no_live_process_holds_and_never_a_held_one(tmp_path: Path) -> None:
    """Was: a session written without a registry (AG2's own ACPAgent on SQLiteStorage) or by a registry whose
    process died was never released, so prune never took it and the file grew for ever."""
    db = tmp_path / "agent.db"
    plain, dead, held, fresh = uuid4(), uuid4(), uuid4(), uuid4()
    async with SQLiteStorage(db) as storage:
        for stream in (plain, dead, held, fresh):
            await storage.save_event(UserMessage("old words"), EventContext.for_stream(stream))
    with holder_process(tmp_path, db, dead) as process:
        process.kill()  # its registry never let the session go
    old = "2020-01-01 00:00:00.000000"
    sqlite3_shell(db, f"UPDATE sessions SET updated_at = '{old}' WHERE session_id != '{fresh.hex}';")
    with holder_process(tmp_path, db, held) as process:
        sqlite3_shell(db, f"UPDATE sessions SET updated_at = '{old}' WHERE session_id = '{held.hex}';")
        dry = cli(db, "prune", "--older-than", "30d")
        assert dry.returncode == 0
        assert plain.hex[:12] in dry.stdout and dead.hex[:12] in dry.stdout
        assert held.hex[:12] not in dry.stdout and fresh.hex[:12] not in dry.stdout
        done = cli(db, "prune", "--older-than", "30d", "--yes")
        assert done.returncode == 0, done.stderr
        assert "deleted 2 sessions" in done.stdout
        left = sqlite3_shell(db, "SELECT group_concat(session_id) FROM (SELECT session_id FROM sessions ORDER BY 1);")
        assert set(left.split(",")) == {held.hex, fresh.hex}
        process.release.touch()  # type: ignore[attr-defined]
        assert process.wait(CHILD_TIMEOUT) == 0
    sqlite3_shell(db, f"UPDATE sessions SET updated_at = '{old}' WHERE session_id = '{held.hex}';")
    assert "deleted 1 session" in cli(db, "prune", "--older-than", "30d", "--yes").stdout  # let go: prunable


async def test_two_storages_of_one_process_are_two_holders(tmp_path: Path) -> None:
    db, stream = tmp_path / "agent.db", uuid4()
    async with SQLiteStorage(db) as first, SQLiteStorage(db) as second:
        await first.hold(stream)
        await first.hold(stream)  # holding again what it holds is nothing
        with pytest.raises(SessionHeldError, match=f"pid {os.getpid()}"):
            await second.save_event(UserMessage("x"), EventContext.for_stream(stream))
        await first.save_event(UserMessage("the holder writes"), EventContext.for_stream(stream))
        await first.let_go(stream)
        await second.hold(stream)
        with pytest.raises(SessionHeldError):
            await first.set_history(stream, [])
        await asyncio.sleep(0)
    async with SQLiteStorage(db) as third:  # closing let every hold go
        await third.hold(stream)
        assert [e.content for e in await third.get_history(stream)] == ["the holder writes"]
