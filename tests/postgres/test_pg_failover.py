"""High availability through PostgreSQL's own replication: a primary and a synchronous streaming standby
(``pg_basebackup -R``, ``synchronous_standby_names``, ``synchronous_commit=on``), one multi-host URL.

The primary is killed with SIGKILL in the middle of a stream of appends and reads by a real process, and the
standby promoted: nothing acknowledged is lost or stored twice, each session's order is kept, an append in flight
at the kill is stored once (or raised a typed error), and the process carries on by itself within the bound the
guide states. Reads may go to the standby: what it may miss right after a commit, measured with
``synchronous_commit`` ``on`` and ``remote_apply``. The command line takes multi-host URLs and standby URLs, and
never shows their password.
"""

from __future__ import annotations

import asyncio
import logging
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import uuid4

import asyncpg  # type: ignore[import-untyped]
import pytest
from _pgcli import run
from pg_server import PostgresServer, multi_host_url

from sessionstore import EventContext, UserMessage
from sessionstore.errors import DatabaseUnavailableError, SessionHeldError
from sessionstore.postgres import PostgresStorage
from sessionstore.postgres.connect import PG_LOCK_CLASS, pg_lock_key, redacted

APPENDER = Path(__file__).with_name("_pg_ha_appender.py")

RECONNECT_BOUND = 2.0
"""Seconds from the standby's promotion to every appender's and the reader's next success: the storage tries a
new connection every 0.5 s at most (connect.RETRY_DELAYS), plus the time an append or read takes on a busy
two-core machine."""


def wait_for(condition: Callable[[], bool], timeout: float = 60, log: Log | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "no progress" + (f": {log.summary()}" if log else "")
        time.sleep(0.02)


class Log:
    """The appender's log (see _pg_ha_appender.py), read again at each call."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[list[str]]:
        return [line.split(" ") for line in self.path.read_text().splitlines()] if self.path.exists() else []

    def of(self, kind: str) -> list[list[str]]:
        return [line[1:] for line in self.lines() if line[0] == kind]

    def summary(self) -> str:
        """What a failure shows: the lines other than successes, and the last few."""
        lines = [" ".join(line) for line in self.lines()]
        return "\n".join([line for line in lines if not line.startswith(("ack", "read "))][:40] + lines[-10:])


def stored(server: PostgresServer, database: str) -> dict[str, list[tuple[int, int]]]:
    """Every session's (position, number sent) rows, in position order, as ``server`` has them."""
    rows = server.psql(
        "SELECT s.session_id, e.position, e.payload::json ->> 'content' FROM events AS e"
        " JOIN sessions AS s ON s.id = e.session ORDER BY s.session_id, e.position",
        database=database,
    )
    found: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for line in rows.splitlines():
        sid, position, content = line.split("|")
        found[sid].append((int(position), int(content)))
    return found


def test_a_killed_primary_and_a_promoted_standby_lose_nothing_acknowledged(
    pg_pair: tuple[PostgresServer, PostgresServer, str], tmp_path: Path
) -> None:
    primary, standby, database = pg_pair
    url = multi_host_url([primary, standby], database)  # the primary first; read-write finds whichever is one
    log = Log(tmp_path / "log")
    process = subprocess.Popen(
        [sys.executable, str(APPENDER), url, str(log.path), "6"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        wait_for(lambda: len(log.of("ack")) >= 600, log=log)
        killed = time.time()
        primary.kill()  # mid-stream: six appenders and a reader are each in a call nearly all the time
        standby.promote()
        promoted = time.time()
        sessions = log.of("ready")[0]

        def carried_on() -> bool:
            after = {sid for t, sid, _ in log.of("ack") if float(t) > promoted}
            return after == set(sessions) and any(float(t) > promoted for t, *_ in log.of("read"))

        wait_for(carried_on, timeout=45, log=log)
        time.sleep(0.3)
        Path(f"{log.path}.stop").touch()
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0, err.decode()

    acked: dict[str, list[int]] = defaultdict(list)
    for _, sid, n in log.of("ack"):
        acked[sid].append(int(n))
    failed = {(line[1], int(line[2])) for line in log.of("err")}
    rows = stored(standby, database)
    for sid in sessions:
        positions = [position for position, _ in rows[sid]]
        numbers = [n for _, n in rows[sid]]
        assert positions == list(range(len(positions))), "a gap, or two events at one position"
        assert numbers == sorted(set(numbers)), "an event stored twice, or out of order"
        assert set(acked[sid]) <= set(numbers), f"acknowledged but lost: {sorted(set(acked[sid]) - set(numbers))}"
        # Whatever else is stored was sent and raised (it may or may not have committed): nothing from nowhere.
        assert {(sid, n) for n in set(numbers) - set(acked[sid])} <= failed

    # Appends in flight at the kill were settled: found stored, or appended once; else the kill proved nothing.
    settled = [" ".join(line) for line in log.of("warn")]
    assert settled and all("connection was lost during an append" in line for line in settled), settled
    assert not failed and not log.of("readerr"), (failed, log.of("readerr"))

    # The bound: every appender's next acknowledgement, and the reader's next read, after the promotion; and
    # each appender's outage, from its last acknowledgement before the kill to its first after the promotion.
    acks = [(float(t), sid) for t, sid, _ in log.of("ack")]
    resumed = {sid: min(t for t, s in acks if s == sid and t > promoted) for sid in sessions}
    outage = {sid: resumed[sid] - max(t for t, s in acks if s == sid and t < killed) for sid in sessions}
    read_again = min(float(t) for t, *_ in log.of("read") if float(t) > promoted)
    slowest = max([*resumed.values(), read_again]) - promoted
    print(
        f"\nfailover: {len(acks)} appends acknowledged, {len(settled)} in flight at the kill settled"
        f" ({sum('had committed' in s for s in settled)} found committed, the others appended once), 0 errors;"
        f" kill to promoted {promoted - killed:.2f} s; promoted to each appender's next acknowledgement at most"
        f" {max(resumed.values()) - promoted:.3f} s, to the next read {read_again - promoted:.3f} s; each appender's"
        f" outage {min(outage.values()):.2f}-{max(outage.values()):.2f} s"
    )
    assert slowest < RECONNECT_BOUND, slowest


def test_reads_on_the_standby_miss_at_most_what_it_has_not_applied(
    pg_pair: tuple[PostgresServer, PostgresServer, str],
) -> None:
    """With ``synchronous_commit = on`` a commit returns once the standby has it on disk, not yet applied: a read
    there right after may miss it. With ``remote_apply`` it returns once the standby has applied it: never."""
    primary, standby, database = pg_pair
    write_url, read_url = primary.url(database), standby.url(database)
    modes, rounds, each = ("on", "remote_apply"), 6, 40
    missed: dict[str, int] = dict.fromkeys(modes, 0)
    spent: dict[str, list[float]] = {mode: [] for mode in modes}

    async def round_of(mode: str) -> None:
        async with PostgresStorage(write_url, read_url=read_url) as storage:
            sid = uuid4()
            context = EventContext.for_stream(sid)
            await storage.save_event(UserMessage("0"), context)
            started = time.perf_counter()
            for n in range(1, each + 1):
                await storage.save_event(UserMessage(str(n)), context)
                if len(await storage.get_history(sid)) != n + 1:  # read at once, from the standby
                    missed[mode] += 1
            spent[mode].append(time.perf_counter() - started)

    for _ in range(rounds):  # the modes in alternation: the machine's pace drifts
        for mode in modes:
            primary.psql(f'ALTER DATABASE "{database}" SET synchronous_commit = {mode}')  # new connections
            asyncio.run(round_of(mode))
    ratios = sorted(b / a for a, b in zip(spent["on"], spent["remote_apply"], strict=True))
    print(
        f"\nreads on the standby right after each append ({rounds * each} per mode): missed {missed['on']} with"
        f" synchronous_commit=on, {missed['remote_apply']} with remote_apply; an append and a read take"
        f" {statistics.median(ratios):.2f}x as long with remote_apply (paired rounds: {ratios[0]:.2f}-{ratios[-1]:.2f})"
    )
    assert missed["remote_apply"] == 0


def test_the_command_line_reads_a_standby_and_finds_the_primary_in_a_multi_host_url(
    pg_pair: tuple[PostgresServer, PostgresServer, str],
) -> None:
    primary, standby, database = pg_pair
    sid = uuid4()

    async def write() -> None:
        async with PostgresStorage(primary.url(database)) as storage:
            await storage.save_event(UserMessage("replicated"), EventContext.for_stream(sid))

    asyncio.run(write())
    either = multi_host_url([standby, primary], database)  # the standby first: read-write skips it
    assert run("--db", either, "title", sid.hex, "named").returncode == 0
    for url in (standby.url(database), multi_host_url([primary, standby], database, attrs="prefer-standby")):
        shown = run("--db", url, "show", sid.hex)
        assert shown.returncode == 0 and "replicated" in shown.stdout and "named" in shown.stdout, shown
    refused = run("--db", standby.url(database), "title", sid.hex, "again")
    assert refused.returncode != 0 and "read-only" in refused.stderr, refused
    assert standby.password not in refused.stderr + refused.stdout


def test_a_multi_host_url_reaches_the_host_that_answers_and_never_shows_its_password(
    pg_server: PostgresServer, pg_url: str
) -> None:
    password = pg_server.password
    database = pg_url.rsplit("/", 1)[1]
    dead = f"postgresql://postgres:{password}@127.0.0.1:1,127.0.0.1:{pg_server.port}/{database}"
    assert redacted(dead) == f"postgresql://postgres:***@127.0.0.1:1,127.0.0.1:{pg_server.port}/{database}"
    sid = uuid4()

    async def through(url: str) -> list[Any]:
        async with PostgresStorage(url, reconnect_timeout=0.5) as storage:
            await storage.save_event(UserMessage("through the second host"), EventContext.for_stream(sid))
            return await storage.get_history(sid)

    assert [e.content for e in asyncio.run(through(dead + "?target_session_attrs=read-write"))] == [
        "through the second host"
    ]
    listed = run("--db", dead, "list")
    assert listed.returncode == 0 and sid.hex[:8] in listed.stdout, listed

    nowhere = f"postgresql://postgres:{password}@127.0.0.1:1,127.0.0.1:2/{database}?target_session_attrs=read-write"
    with pytest.raises(DatabaseUnavailableError) as caught:
        asyncio.run(through(nowhere))
    shown = f"{caught.value} {caught.value!r} {caught.value.__cause__}"
    assert password not in shown and "postgres:***@127.0.0.1:1,127.0.0.1:2/" in shown, shown
    failed = run("--db", nowhere, "list")
    assert failed.returncode != 0 and password not in failed.stderr + failed.stdout
    assert "postgres:***@127.0.0.1:1,127.0.0.1:2/" in failed.stderr, failed


def test_a_storage_waits_for_a_server_at_most_reconnect_timeout_and_carries_on_when_one_answers(
    pg_own_server: PostgresServer,
) -> None:
    """Its server killed and not back (a failover that does not come): a call raises DatabaseUnavailableError after
    about ``reconnect_timeout``, having kept trying, neither at once nor never. Started again (crash recovery on the
    same port), the same storage's next calls succeed: its dead connections poisoned nothing."""
    database = pg_own_server.create_database()
    url = pg_own_server.url(database)
    sid = uuid4()
    context = EventContext.for_stream(sid)

    async def main() -> None:
        async with PostgresStorage(url, reconnect_timeout=1.5) as storage:
            await storage.save_event(UserMessage("before"), context)
            pg_own_server.kill()
            for call in (storage.save_event(UserMessage("lost"), context), storage.get_history(sid)):
                started = time.monotonic()
                with pytest.raises(DatabaseUnavailableError):
                    await call
                assert 1.0 < time.monotonic() - started < 5
            pg_own_server.start()
            await storage.save_event(UserMessage("after"), context)
            assert [e.content for e in await storage.get_history(sid)] == ["before", "after"]

    asyncio.run(main())


def test_an_append_whose_connection_is_lost_is_stored_once_whether_or_not_it_had_committed(
    pg_own_server: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The two outcomes of an append in flight, each made to happen: its connection ended (the server terminates
    its backend) after it committed, while its commit waited for a synchronous standby that never answers; and
    before it committed, while it waited for the session's row. Either way the call returns, and the event is
    stored once."""
    server = pg_own_server
    database = server.create_database()
    url = server.url(database)
    sid = uuid4()
    context = EventContext.for_stream(sid)

    def backend_waiting(condition: str) -> str:
        """The pid of the storage's backend that waits as ``condition`` says, once there is one."""
        query = f"SELECT pid FROM pg_stat_activity WHERE application_name = 'sessionstore' AND {condition}"
        deadline = time.monotonic() + 30
        while not (pid := server.psql(query, database=database).strip()):
            assert time.monotonic() < deadline, f"no append waits: {condition}"
            time.sleep(0.02)
        return pid

    def synchronous(names: str) -> None:
        server.psql(f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
        server.psql("SELECT pg_reload_conf()")

    async def main() -> list[str]:
        blocker = await asyncpg.connect(url.replace("+asyncpg", ""))
        async with PostgresStorage(url) as storage:
            try:
                await storage.save_event(UserMessage("0"), context)
                # Committed, but its answer never comes: the commit waits for a standby that does not exist.
                synchronous("nobody")
                append = asyncio.ensure_future(storage.save_event(UserMessage("1"), context))
                pid = await asyncio.to_thread(backend_waiting, "wait_event = 'SyncRep'")
                server.psql(f"SELECT pg_terminate_backend({pid})")
                synchronous("")
                await append
                # Not committed: it waits for the session's row, which another transaction holds, when it ends.
                await blocker.execute("BEGIN")
                await blocker.execute("SELECT 1 FROM sessions WHERE session_id = $1 FOR UPDATE", sid.hex)
                append = asyncio.ensure_future(storage.save_event(UserMessage("2"), context))
                pid = await asyncio.to_thread(backend_waiting, "wait_event_type = 'Lock'")
                server.psql(f"SELECT pg_terminate_backend({pid})")
                await asyncio.sleep(0.2)  # the append settles meanwhile: it waits for the row in turn
                await blocker.execute("COMMIT")
                await append
                return [event.content for event in await storage.get_history(sid)]
            finally:  # whatever failed, nothing is left waiting: the storage's close waits for its writes
                synchronous("")
                await blocker.close()

    with caplog.at_level(logging.WARNING, logger="sessionstore"):
        assert asyncio.run(main()) == ["0", "1", "2"]
    messages = [record.getMessage() for record in caplog.records]
    settled = [message.rsplit(", which ", 1)[1] for message in messages if "connection was lost" in message]
    assert settled == ["had committed", "had not committed and is appended now"]


def test_holds_are_taken_again_after_a_failover_and_one_taken_meanwhile_is_refused(
    pg_pair: tuple[PostgresServer, PostgresServer, str], caplog: pytest.LogCaptureFixture
) -> None:
    """A storage holds two sessions when the primary is killed and the standby promoted: the promoted server has
    none of its advisory locks (they live in a server's memory). The storage takes them again by itself, without
    waiting for a write, within the bound the guide states; one that another process took meanwhile (its lock
    taken on the standby before the promotion, its mark written after) is let go, and the storage's next write to
    it raises SessionHeldError naming the new holder, while the other session goes on."""
    primary, standby, database = pg_pair
    url = multi_host_url([primary, standby], database)
    kept, taken = uuid4(), uuid4()
    other_holder = "pid 1 on elsewhere (other.py, storage 1) since 2026-12-05 00:00:00 UTC"
    locked = (
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::oid AND objid = $2::oid"
        " AND objsubid = 2"
    )

    async def main() -> float:
        async with PostgresStorage(url) as storage:
            for sid in (kept, taken):
                await storage.save_event(UserMessage("before"), EventContext.for_stream(sid))
                await storage.hold(sid)
            other = await asyncpg.connect(standby.url(database).replace("+asyncpg", ""))
            try:
                ids = {r[0]: r[1] for r in await other.fetch("SELECT session_id, id FROM sessions")}
                keys = {sid: pg_lock_key(ids[sid.hex]) for sid in (kept, taken)}
                # Another process takes `taken` on the standby (nothing there says the primary's storage has it).
                assert await other.fetchval("SELECT pg_try_advisory_lock($1, $2)", PG_LOCK_CLASS, keys[taken])
                await asyncio.to_thread(primary.kill)
                await asyncio.to_thread(standby.promote)
                promoted = time.monotonic()
                await other.execute("UPDATE sessions SET held_by = $1 WHERE session_id = $2", other_holder, taken.hex)
                # Taken again by itself: the lock of `kept` shows on the promoted server, held by another backend.
                while not await other.fetch(locked, PG_LOCK_CLASS, keys[kept]):
                    assert time.monotonic() - promoted < RECONNECT_BOUND, "the hold was not taken again"
                    await asyncio.sleep(0.01)
                retaken = time.monotonic() - promoted
                async with PostgresStorage(url) as third:
                    with pytest.raises(SessionHeldError, match=f"session {kept.hex} is held by pid "):
                        await third.hold(kept)
                await storage.save_event(UserMessage("after"), EventContext.for_stream(kept))
                with pytest.raises(SessionHeldError, match=f"session {taken.hex} is held by {re.escape(other_holder)}"):
                    await storage.save_event(UserMessage("after"), EventContext.for_stream(taken))
                assert [e.content for e in await storage.get_history(kept)] == ["before", "after"]
                assert [e.content for e in await storage.get_history(taken)] == ["before"]
                return retaken
            finally:
                await other.close()

    with caplog.at_level(logging.WARNING, logger="sessionstore"):
        retaken = asyncio.run(main())
    print(f"holds taken again {retaken:.2f} s after the promotion")
    assert [m for m in (r.getMessage() for r in caplog.records) if "taken by another holder" in m] == [
        f"{redacted(url)}: session {taken.hex} was taken by another holder while the connection was lost"
    ]
