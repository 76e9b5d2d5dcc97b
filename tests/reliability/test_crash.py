"""SIGKILL a writer at random moments: every acknowledged write survives, whole, in order, exactly once.

Each *lane* is one database file that goes through a series of crashes: a child
(``_writer.py``) appends to three sessions and rewrites a fourth, acknowledging
on a pipe after each call returns, and is killed with SIGKILL at a random moment
(now and then so early that it dies while opening or creating the file). After
each kill this process, a fresh one for the file, checks the file and resumes
every session through the registry, as a restarted agent would. The next round
then writes into the same, recovered file. Lanes run in parallel.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from _support import CHILD_TIMEOUT, child, child_env
from _writer import context, event

from sessionstore import SessionStore, SQLiteStorage

LANES = 4
ROUNDS_PER_LANE = 13  # 52 crashes in all
SETTINGS = ("FULL", "NORMAL", "OFF", "EXTRA")  # a process crash must lose nothing at any of them


@dataclass
class Acks:
    """What a killed child reported as done before it died."""

    sessions: set[str] = field(default_factory=set)
    events: dict[str, int] = field(default_factory=dict)  # hex -> count of acknowledged appends
    histories: dict[str, int] = field(default_factory=dict)  # hex -> length of the last acknowledged rewrite


def parse(lines: list[str]) -> Acks:
    acks = Acks()
    for line in lines:
        if not line.endswith("\n"):
            continue  # cut off by the kill: never acknowledged
        kind, hex_id, *rest = line.split()
        acks.sessions.add(hex_id)
        if kind == "E":
            acks.events[hex_id] = int(rest[0]) + 1
        elif kind == "H":
            acks.histories[hex_id] = int(rest[0])
    return acks


class Zygote:
    """One ``_writer.py`` zygote: forks a writer per round, reports its pid and how it ended."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            child("_writer.py"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        self.proc.wait(CHILD_TIMEOUT)
        return self.proc.stderr.read()

    def run_and_kill(self, db: Path, synchronous: str, tag: str, rng: random.Random, early: bool) -> Acks:
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(f"{db} {synchronous} {tag}\n")
        proc.stdin.flush()
        first = proc.stdout.readline()
        assert first.startswith("pid "), f"zygote said {first!r}"
        pid = int(first.split()[1])
        lines: list[str] = []
        writing = threading.Event()
        ended: list[int] = []

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("exit "):
                    ended.append(int(line.split()[1]))
                    break
                lines.append(line)
                if line.startswith("E "):
                    writing.set()
            writing.set()

        reader = threading.Thread(target=read)
        reader.start()
        if early:
            time.sleep(rng.uniform(0.0, 0.12))  # while it opens, creates or recovers the file
        else:
            assert writing.wait(CHILD_TIMEOUT), "the writer never acknowledged an event"
            time.sleep(rng.uniform(0.05, 0.4))
        os.kill(pid, signal.SIGKILL)
        reader.join(CHILD_TIMEOUT)
        assert ended == [-signal.SIGKILL], f"{tag}: the writer ended on its own ({ended}) before the kill"
        return parse(lines)


def check_file(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()


def snapshot(db: Path) -> dict[str, tuple[object, ...]]:
    """Each stored session's context and events, as raw rows (bookkeeping columns left out)."""
    if not db.exists():
        return {}
    with sqlite3.connect(db) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sessions'").fetchone():
            return {}  # killed before the schema was committed
        sessions = conn.execute(
            "SELECT id, session_id, cwd, additional_directories, mcp_servers, meta, title FROM sessions"
        ).fetchall()
        out = {}
        for row_id, session_id, *columns in sessions:
            events = conn.execute(
                "SELECT position, type, payload FROM events WHERE session = ? ORDER BY position", (row_id,)
            ).fetchall()
            out[session_id] = (*columns, tuple(events))
    conn.close()
    return out


async def verify(db: Path, acked: dict[str, Acks], tag: str) -> None:
    """Check the file as a fresh process finds it after a crash, then resume the round's sessions.

    Sessions of earlier rounds were verified the same way after their own crash;
    that they are still byte for byte what they were then is checked by the caller.
    """
    if db.exists():  # killed before it made the file at all is fine too: the open below creates it
        check_file(db)
    storage = SQLiteStorage(db)
    store = SessionStore(storage=storage, retain_history=True)
    listed = []
    cursor = None
    while True:
        page = await store.list_sessions(cursor=cursor, limit=7)
        listed.extend(page.sessions)
        cursor = page.next_cursor
        if cursor is None:
            break
    listed_ids = {record.session_id for record in listed}
    for tag, acks in acked.items():
        missing = acks.sessions - listed_ids
        assert not missing, f"round {tag}: acknowledged sessions not listed after the crash: {missing}"
    # Every stored session is checked, acknowledged or not: a write that
    # committed just before the kill must be just as whole.
    for record in listed:
        if record.meta["tag"] != tag:
            continue
        index = record.meta["index"]
        acks = acked[tag]
        session, adopted = await store.get_or_adopt(record.stream_id)  # no context: all of it from the file
        assert adopted
        expected = context(tag, index)
        got = {key: getattr(session, key) for key in expected}
        assert got == expected, f"round {tag}: session {session.session_id} came back with other context"
        events = await store.stream(session).history.get_events()
        where = f"round {tag}, session {session.session_id}"
        assert events == [event(seq) for seq in range(len(events))], f"{where}: lost, duplicated or reordered"
        if index == 99:  # the rewritten session: the last acknowledged history or a later one, never a mix
            assert len(events) % 7 == 0, f"{where}: a set_history landed in part"
            assert len(events) >= acks.histories.get(session.session_id, 0), f"{where}: acknowledged rewrite lost"
        else:
            assert len(events) >= acks.events.get(session.session_id, 0), f"{where}: acknowledged events lost"
    await store.aclose()  # retained: marks them released, which also proves the file takes writes again
    await storage.aclose()
    check_file(db)
    with sqlite3.connect(db) as conn:
        # WAL is what lets readers and the writer of other processes work at once;
        # a crash while the file was being created must not leave it without.
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


def lane(directory: Path, number: int) -> int:
    zygote = Zygote()
    try:
        return run_lane(zygote, directory, number)
    finally:
        errors = zygote.close()
        assert not errors, errors


def run_lane(zygote: Zygote, directory: Path, number: int) -> int:
    rng = random.Random(number)  # reproducible schedule per lane
    db = directory / f"lane{number}.db"
    acked: dict[str, Acks] = {}
    verified: dict[str, tuple[object, ...]] = {}
    for round_ in range(ROUNDS_PER_LANE):
        tag = f"L{number}R{round_}"
        synchronous = SETTINGS[(number + round_) % len(SETTINGS)]
        acked[tag] = zygote.run_and_kill(db, synchronous, tag, rng, early=round_ % 6 == 0)
        after_crash = snapshot(db)
        for session_id, rows in verified.items():
            assert after_crash.get(session_id) == rows, f"{tag}: a crash changed session {session_id} of a past round"
        asyncio.run(verify(db, acked, tag))
        verified = snapshot(db)
    return sum(sum(a.events.values()) for a in acked.values())


def test_sigkill_at_random_moments_loses_no_acknowledged_write(tmp_path: Path) -> None:
    with ThreadPoolExecutor(LANES) as pool:
        totals = list(pool.map(lambda n: lane(tmp_path, n), range(LANES)))
    # The schedule must really have killed writers mid-stream, not idle children.
    assert all(total > 0 for total in totals)
