"""Several processes on one file at once: nothing lost, each writer's order kept, never "database is locked"."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path
from uuid import UUID

import pytest
from _support import CHILD_TIMEOUT, child, child_env, sqlite3_shell

from sessionstore import DatabaseBusyError, EventContext, SQLiteStorage, UserMessage

WRITERS = 8
EVENTS_EACH = 500  # half into its own session, half into the shared one


def test_eight_processes_append_to_one_file_at_once(tmp_path: Path) -> None:
    # The file does not exist yet: the writers also race to create it.
    db = tmp_path / "shared.db"
    shared = UUID(int=0xFFFF)
    procs = [
        subprocess.Popen(
            child("_appender.py", db, writer, shared.hex, EVENTS_EACH),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for writer in range(WRITERS)
    ]
    for proc in procs:  # all open, then all start together
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == "ready\n", proc.communicate(timeout=CHILD_TIMEOUT)[1]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for writer, proc in enumerate(procs):
        out, err = proc.communicate(timeout=CHILD_TIMEOUT)
        assert proc.returncode == 0 and out == "done\n", f"writer {writer} surfaced an error:\n{err}"
        assert "locked" not in err and "Traceback" not in err, err

    async def contents(storage: SQLiteStorage, stream_id: UUID) -> list[str]:
        events = await storage.get_history(stream_id)
        assert all(isinstance(e, UserMessage) for e in events)
        return [e.content for e in events if isinstance(e, UserMessage)]

    async def read() -> tuple[list[list[str]], list[str]]:
        async with SQLiteStorage(db) as storage:
            own = [await contents(storage, UUID(int=w + 1)) for w in range(WRITERS)]
            return own, await contents(storage, shared)

    own, both = asyncio.run(read())
    half = EVENTS_EACH // 2
    for writer in range(WRITERS):
        assert own[writer] == [f"{writer}:{seq}" for seq in range(half)]
    assert len(both) == WRITERS * half and len(set(both)) == len(both)
    by_writer: defaultdict[int, list[int]] = defaultdict(list)
    for content in both:
        writer, seq = map(int, content.split(":"))
        by_writer[writer].append(seq)
    assert {w: seqs for w, seqs in by_writer.items()} == {w: list(range(half)) for w in range(WRITERS)}
    # All of it really interleaved: the shared session is not eight runs of one writer each.
    runs = sum(1 for a, b in itertools.pairwise(both) if a.split(":")[0] != b.split(":")[0])
    assert runs > WRITERS


async def test_a_lock_held_past_the_busy_timeout_is_a_clear_error(tmp_path: Path) -> None:
    """Another process (the sqlite3 shell) sits on the write lock: a typed error after busy_timeout, nothing lost."""
    db = tmp_path / "busy.db"
    stream_id = UUID(int=5)
    async with SQLiteStorage(db) as storage:
        await storage.save_event(UserMessage("before"), EventContext.for_stream(stream_id))
    holder = subprocess.Popen(
        [shutil.which("sqlite3") or "sqlite3", str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        holder.stdin.write("BEGIN IMMEDIATE;\nSELECT 'holding';\n")
        holder.stdin.flush()
        assert holder.stdout.readline() == "holding\n"
        async with SQLiteStorage(db, busy_timeout=0.2) as storage:
            with pytest.raises(DatabaseBusyError) as caught:
                await storage.save_event(UserMessage("blocked"), EventContext.for_stream(stream_id))
            assert str(db) in str(caught.value) and "another process" in str(caught.value)
            # Reads do not need the write lock: WAL readers carry on.
            assert await storage.get_history(stream_id) == [UserMessage("before")]
            holder.stdin.write("COMMIT;\n")
            holder.stdin.close()
            holder.wait(CHILD_TIMEOUT)
            # The same storage writes again once the lock is free; the refused write left nothing behind.
            await storage.save_event(UserMessage("after"), EventContext.for_stream(stream_id))
            assert await storage.get_history(stream_id) == [UserMessage("before"), UserMessage("after")]
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_one_process_opening_several_new_files_at_once(tmp_path: Path) -> None:
    """Creating (migrating) several files at the same time in one process: each gets its own, whole schema."""
    for attempt in range(3):
        folder = tmp_path / str(attempt)
        folder.mkdir()
        done = subprocess.run(
            child("_opener.py", folder, 6), capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=child_env()
        )
        assert done.returncode == 0 and done.stdout == "ok\n", f"exit {done.returncode}:\n{done.stderr[-3000:]}"
        for n in range(6):
            assert sqlite3_shell(folder / f"{n}.db", "PRAGMA integrity_check;") == "ok"
