"""PostgreSQL's search words off the append's path (revision 0015): appends queue their events, storages index the
queue in batches in the background, and search is exact however far the words trail: right after an append,
after indexing, after an edit by hand, after a process killed before it indexed, with two storages indexing at
once, and for each role only its own rows."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID, uuid4

import asyncpg  # type: ignore[import-untyped]
import pytest
from _pgcli import run
from _pgteam import Team, team
from pg_server import PostgresServer

from sessionstore import EventContext, ModelMessage, UserMessage, records
from sessionstore.postgres import PostgresStorage
from sessionstore.postgres import migrate as pgmigrate
from sessionstore.postgres import search as pgsearch
from sessionstore.postgres import storage as pgstorage
from sessionstore.postgres.connect import PgConnection, run_sync


async def fetch(url: str, sql: str, *args: object) -> list[tuple[object, ...]]:
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        return [tuple(row) for row in await conn.fetch(sql, *args)]
    finally:
        await conn.close()


RAW_SESSION = (
    "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, created_at, updated_at,"
    " released, revision) VALUES ($1, '/w', '[]', '[]', '{}', now(), now(), false, 0)"
    " ON CONFLICT (session_id) DO NOTHING"
)
RAW_EVENT = (
    "INSERT INTO events (session, position, type, payload, role, text_path, created_at) SELECT id,"
    " (SELECT count(*) FROM events WHERE session = sessions.id), 'user_message',"
    " json_build_object('content', $2::text), 'user', '$.content', now() FROM sessions WHERE session_id = $1"
)


def raw_append(url: str, texts: list[str]) -> UUID:
    """A session of ``texts`` written in plain SQL as the URL's role, as a person (or another program) would: the
    trigger queues each event, and no storage indexes them."""
    sid = uuid4()

    async def write() -> None:
        conn = await asyncpg.connect(url.replace("+asyncpg", ""))
        try:
            await conn.execute(RAW_SESSION, sid.hex)
            for text in texts:
                await conn.execute(RAW_EVENT, sid.hex, text)
        finally:
            await conn.close()

    asyncio.run(write())
    return sid


async def aqueued(url: str) -> int:
    return len(await fetch(url, "SELECT event FROM events_unindexed"))


async def aworded(url: str) -> set[int]:
    return {int(row[0]) for row in await fetch(url, "SELECT event FROM events_words")}  # type: ignore[call-overload]


def queued(url: str) -> int:
    return asyncio.run(aqueued(url))


def worded(url: str) -> set[int]:
    return asyncio.run(aworded(url))


def found(url: str, query: str) -> set[tuple[str, int]]:
    return {(hit.session_id, hit.position) for hit in records.search(url, query, limit=1000)}


@pytest.fixture
def slow_indexing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Storages index only when they close (or are told to): the words trail the appends for the whole test."""
    monkeypatch.setattr(pgstorage, "INDEX_EVERY", 10**9)
    monkeypatch.setattr(pgstorage, "INDEX_DELAY", 3600.0)


def test_an_append_is_found_at_once_and_after_indexing(pg_url: str, slow_indexing: None) -> None:
    sid = uuid4()

    async def main() -> None:
        async with PostgresStorage(pg_url) as storage:
            ctx = EventContext.for_stream(sid)
            await storage.save_event(UserMessage("the zeppelin landed"), ctx)
            await storage.save_event(ModelMessage("a quiet answer"), ctx)
            # Queued, not indexed: the append wrote no words, and search finds it all the same.
            assert await aqueued(pg_url) == 2 and await aworded(pg_url) == set()
            assert await asyncio.to_thread(found, pg_url, "zeppelin") == {(sid.hex, 0)}
            assert await asyncio.to_thread(found, pg_url, "zepp") == set()  # whole words only, as FTS5
        # Closing indexes what it wrote.
        assert await aqueued(pg_url) == 0 and len(await aworded(pg_url)) == 2

    asyncio.run(main())
    assert found(pg_url, "zeppelin") == {(sid.hex, 0)}
    assert found(pg_url, "quiet answer") == {(sid.hex, 1)}


def test_the_storage_indexes_every_index_every_events_and_after_index_delay(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pgstorage, "INDEX_EVERY", 5)
    monkeypatch.setattr(pgstorage, "INDEX_DELAY", 0.2)

    async def main() -> None:
        async with PostgresStorage(pg_url) as storage:
            ctx = EventContext.for_stream(uuid4())
            for n in range(5):
                await storage.save_event(UserMessage(f"word{n}"), ctx)
            for _ in range(100):  # the fifth started a batch, in the background
                if not await aqueued(pg_url):
                    break
                await asyncio.sleep(0.05)
            assert await aqueued(pg_url) == 0 and len(await aworded(pg_url)) == 5
            await storage.save_event(UserMessage("straggler"), ctx)
            assert await aqueued(pg_url) == 1
            await asyncio.sleep(1.0)  # INDEX_DELAY after the first unindexed write
            assert await aqueued(pg_url) == 0 and len(await aworded(pg_url)) == 6

    asyncio.run(main())


def test_an_event_edited_by_hand_is_found_by_its_new_words_never_its_old(pg_url: str) -> None:
    sid = uuid4()

    async def write() -> None:
        async with PostgresStorage(pg_url) as storage:
            await storage.save_event(UserMessage("walrus on the beach"), EventContext.for_stream(sid))

    asyncio.run(write())
    assert queued(pg_url) == 0 and found(pg_url, "walrus") == {(sid.hex, 0)}  # indexed at close
    asyncio.run(fetch(pg_url, """UPDATE events SET payload = '{"content": "penguin on the ice"}' WHERE position = 0"""))
    assert queued(pg_url) == 1  # the edit queued it again, in its own transaction
    assert found(pg_url, "penguin") == {(sid.hex, 0)} and found(pg_url, "walrus") == set()

    async def index() -> None:
        async with PostgresStorage(pg_url):
            pass  # a storage opening on a queue indexes it

    asyncio.run(index())
    assert queued(pg_url) == 0
    words = asyncio.run(fetch(pg_url, "SELECT tsvector_to_array(words) FROM events_words"))
    assert sorted(str(word) for word in words[0][0]) == ["ice", "on", "penguin", "the"]  # type: ignore[attr-defined]
    assert found(pg_url, "penguin") == {(sid.hex, 0)} and found(pg_url, "walrus") == set()
    # An edit that takes the event out of the transcript takes its words too.
    asyncio.run(fetch(pg_url, "UPDATE events SET role = NULL"))
    asyncio.run(index())
    assert worded(pg_url) == set() and found(pg_url, "penguin") == set()


WRITER = """
import asyncio, os, sys, uuid
from sessionstore import EventContext, UserMessage
from sessionstore.postgres import PostgresStorage
from sessionstore.postgres import storage as pgstorage
pgstorage.INDEX_EVERY, pgstorage.INDEX_DELAY = 10**9, 3600.0
async def main():
    async with PostgresStorage(sys.argv[1]) as storage:
        ctx = EventContext.for_stream(uuid.UUID(sys.argv[2]))
        for n in range(20):
            await storage.save_event(UserMessage(f"narwhal number{n}"), ctx)
        print("written", flush=True)
        await asyncio.sleep(3600)
asyncio.run(main())
"""


def test_a_killed_writer_leaves_its_events_searchable_and_the_next_storage_indexes_them(pg_url: str) -> None:
    sid = uuid4()
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, pg_url, sid.hex], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "written", proc.stderr
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert queued(pg_url) == 20 and worded(pg_url) == set()  # killed before it indexed anything
    assert found(pg_url, "narwhal") == {(sid.hex, n) for n in range(20)}
    assert found(pg_url, "number7") == {(sid.hex, 7)}

    async def reopen() -> None:
        async with PostgresStorage(pg_url):
            for _ in range(100):  # it indexes the queue it found, in the background
                if not await aqueued(pg_url):
                    break
                await asyncio.sleep(0.05)
            assert await aqueued(pg_url) == 0

    asyncio.run(reopen())
    assert len(worded(pg_url)) == 20 and found(pg_url, "narwhal") == {(sid.hex, n) for n in range(20)}


def test_two_indexers_at_once_never_take_the_same_event_nor_wait(pg_url: str) -> None:
    """Two connections each take a batch while the other's is open: disjoint events, neither waits (SKIP LOCKED),
    and what each wrote is every queued event once."""

    raw_append(pg_url, [f"otter {n}" for n in range(30)])
    assert queued(pg_url) == 30

    async def main() -> None:
        url = pg_url.replace("+asyncpg", "")
        first, second = await asyncpg.connect(url), await asyncpg.connect(url)
        try:
            await first.execute("SET lock_timeout = '2s'")
            await second.execute("SET lock_timeout = '2s'")
            one, two = first.transaction(), second.transaction()
            await one.start()
            await two.start()
            started = time.monotonic()
            taken_one = await run_sync(take, PgConnection(first, url), 20)
            taken_two = await run_sync(take, PgConnection(second, url), 20)
            assert time.monotonic() - started < 1.0  # the second never waited for the first's open transaction
            assert len(taken_one) == 20 and len(taken_two) == 10 and not set(taken_one) & set(taken_two)
            await one.commit()
            await two.commit()
        finally:
            await first.close()
            await second.close()

    def take(conn: PgConnection, batch: int) -> list[int]:
        before = {int(r[0]) for r in conn.execute("SELECT event FROM events_words").fetchall()}
        more = pgsearch.index_new_events(conn, batch)
        taken = sorted({int(r[0]) for r in conn.execute("SELECT event FROM events_words").fetchall()} - before)
        assert more == (len(taken) == batch)  # a full batch: more may be left
        return taken

    asyncio.run(main())
    assert queued(pg_url) == 0 and len(worded(pg_url)) == 30
    assert asyncio.run(fetch(pg_url, "SELECT count(*) FROM events_words"))[0][0] == 30


def test_import_on_the_command_line_indexes_what_it_wrote(pg_url: str) -> None:
    sid = uuid4()

    async def write() -> None:
        async with PostgresStorage(pg_url) as storage:
            await storage.save_event(UserMessage("an albatross overhead"), EventContext.for_stream(sid))

    asyncio.run(write())
    exported = run("export", sid.hex, "--db", pg_url)
    assert exported.returncode == 0, exported.stderr
    asyncio.run(fetch(pg_url, "DELETE FROM sessions"))
    assert worded(pg_url) == set()  # the words went with their events
    imported = run("import", "-", "--db", pg_url, input=exported.stdout)
    assert imported.returncode == 0, imported.stderr
    assert queued(pg_url) == 0 and len(worded(pg_url)) == 1
    assert found(pg_url, "albatross") == {(sid.hex, 0)}


# -- row-level security ------------------------------------------------------------------------------------------


@pytest.fixture
def crew(pg_server: PostgresServer) -> Iterator[Team]:
    made = team(pg_server)
    try:
        yield made
    finally:
        made.remove()


def test_a_role_never_reads_another_roles_words_or_queue_rows(crew: Team) -> None:
    ann, bob, carol = crew.url("ann"), crew.url("bob"), crew.url("carol")
    ann_queued = raw_append(ann, ["ann's queued zeppelin"])  # the trigger's insert passes ann's policy
    bob_queued = raw_append(bob, ["bob's queued submarine"])
    counts = "SELECT (SELECT count(*) FROM events_words), (SELECT count(*) FROM events_unindexed)"
    assert asyncio.run(fetch(carol, counts)) == [(0, 2)]
    assert asyncio.run(fetch(ann, counts)) == [(0, 1)] and asyncio.run(fetch(bob, counts)) == [(0, 1)]
    # Each role's own storage indexes only what it sees: ann's words, then bob's.
    for url, words in ((ann, "ann's indexed zeppelin"), (bob, "bob's indexed submarine")):

        async def indexed(url: str = url, words: str = words) -> None:
            async with PostgresStorage(url) as storage:
                await storage.save_event(UserMessage(words), EventContext.for_stream(uuid4()))

        asyncio.run(indexed())
    # ann's close indexed her queue too (she sees it), bob's his: each role's words, and no queue left.
    assert asyncio.run(fetch(carol, counts)) == [(4, 0)]
    assert asyncio.run(fetch(ann, counts)) == [(2, 0)] and asyncio.run(fetch(bob, counts)) == [(2, 0)]
    # A queued row, as a role sees it: its own alone.
    asyncio.run(fetch(carol, "UPDATE events SET text_path = text_path"))  # queues every event again, as the owner
    assert asyncio.run(fetch(carol, counts)) == [(4, 4)]
    assert asyncio.run(fetch(ann, counts)) == [(2, 2)] and asyncio.run(fetch(bob, counts)) == [(2, 2)]
    mine = "SELECT e.session FROM events_words AS w JOIN events AS e ON e.id = w.event"
    ann_sessions = {row[0] for row in asyncio.run(fetch(ann, "SELECT id FROM sessions"))}
    assert {row[0] for row in asyncio.run(fetch(ann, mine))} <= ann_sessions
    # Search: each role finds its own, queued or indexed, and never the other's.
    assert {s for s, _ in found(ann, "zeppelin")} >= {ann_queued.hex} and found(ann, "submarine") == set()
    assert {s for s, _ in found(bob, "submarine")} >= {bob_queued.hex} and found(bob, "zeppelin") == set()
    # A role cannot write words for, nor queue, another's event.
    bob_event = asyncio.run(fetch(carol, "SELECT e.id FROM events AS e JOIN sessions AS s ON s.id = e.session"
                                        f" WHERE s.session_id = '{bob_queued.hex}'"))[0][0]  # fmt: skip
    for sql in (
        f"INSERT INTO events_words (event, words) VALUES ({bob_event}, 'x')",
        f"INSERT INTO events_unindexed (event) VALUES ({bob_event})",
    ):
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            asyncio.run(fetch(ann, sql))

    # ann's indexing takes only her own queued rows: bob's stay for him.
    async def ann_indexes() -> None:
        async with PostgresStorage(ann):
            pass

    asyncio.run(ann_indexes())
    assert asyncio.run(fetch(carol, counts))[0][1] == 2  # bob's two left queued
    assert asyncio.run(fetch(bob, counts)) == [(2, 2)]


def test_an_upgrade_to_0015_keeps_every_role_appending_and_searching(crew: Team) -> None:
    """A team set up at 0014 (its grants name no words table nor queue, which did not exist) and upgraded by its
    owner: each person's appends, which now queue their events as that person, go on, and their search finds them;
    nobody had to run the GRANT lines again."""
    pgmigrate.migrate(crew.url("owner"), "0014", "downgrade")
    pgmigrate.migrate(crew.url("owner"))
    sid = uuid4()

    async def ann_writes() -> None:
        async with PostgresStorage(crew.url("ann")) as storage:
            await storage.save_event(UserMessage("a shearwater offshore"), EventContext.for_stream(sid))

    asyncio.run(ann_writes())
    assert found(crew.url("ann"), "shearwater") == {(sid.hex, 0)}
    assert found(crew.url("bob"), "shearwater") == set()


def test_check_is_clean_at_head_and_names_the_words_objects_missing(pg_server: PostgresServer, pg_url: str) -> None:
    raw_append(pg_url, ["a puffin"])  # left queued: a queue is no fault
    checked = run("check", "--json", "--db", pg_url)
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"] is True, checked.stdout
    pg_server.psql(
        "DROP TRIGGER events_words_update ON events; ALTER TABLE events_unindexed DISABLE ROW LEVEL SECURITY;"
        " DROP POLICY events_words_owner ON events_words",
        database=pg_url.rsplit("/", 1)[1],
    )
    broken = run("check", "--json", "--db", pg_url)
    report = json.loads(broken.stdout)
    assert broken.returncode == 1 and report["ok"] is False
    assert sorted(report["schema_objects"]) == [
        "events_words_owner is missing",
        "events_words_update is missing",
        "row-level security is off on events_unindexed: every role sees every session",
    ]
    pg_server.psql("DROP TABLE events_words", database=pg_url.rsplit("/", 1)[1])
    report = json.loads(run("check", "--json", "--db", pg_url).stdout)
    assert "events_words is missing" in report["schema_objects"] and "events_fts is missing" in report["schema_objects"]


def test_an_indexing_that_fails_fails_no_append(
    crew: Team, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A role that may queue but not write words (its grant taken back): every append still succeeds and is found,
    the storage says why it could not index, now and then rather than at every append, and the queue keeps the
    events for a role that can."""
    monkeypatch.setattr(pgstorage, "INDEX_EVERY", 4)
    monkeypatch.setattr(pgstorage, "INDEX_DELAY", 0.1)
    crew.server.psql(f"REVOKE INSERT, UPDATE ON events_words FROM {crew.role('group')}", database=crew.database)
    sid = uuid4()

    async def main() -> None:
        async with PostgresStorage(crew.url("ann")) as storage:
            ctx = EventContext.for_stream(sid)
            for n in range(20):
                await storage.save_event(UserMessage(f"kittiwake {n}"), ctx)
            await asyncio.sleep(0.3)

    with caplog.at_level("WARNING", logger="sessionstore.postgres.storage"):
        asyncio.run(main())
    failures = [r for r in caplog.records if "could not be brought up to date" in r.getMessage()]
    assert 1 <= len(failures) <= 10, len(failures)  # once per INDEX_EVERY - 1 appends or INDEX_DELAY, and at close
    counts = "SELECT (SELECT count(*) FROM events_words), (SELECT count(*) FROM events_unindexed)"
    assert asyncio.run(fetch(crew.url("carol"), counts)) == [(0, 20)]
    assert found(crew.url("ann"), "kittiwake") == {(sid.hex, n) for n in range(20)}

    async def carol_indexes() -> None:
        async with PostgresStorage(crew.url("carol")):
            pass

    asyncio.run(carol_indexes())  # the administrator's storage, opening on the queue, indexes ann's events
    assert asyncio.run(fetch(crew.url("carol"), counts)) == [(20, 0)]


def test_0015_fills_the_words_of_a_populated_database_and_goes_back(pg_empty_url: str) -> None:
    """A 0014 database's events get their words in the upgrade (nothing queued, found through the index); the
    downgrade puts 0009's index over the events back and drops the words, the queue and their trigger; up again,
    ``alembic check`` finds no drift and ``sessionstore check`` is clean."""
    pgmigrate.migrate(pg_empty_url, "0014")
    sid = raw_append(pg_empty_url, ["a gannet diving", "the cormorant dried its wings"])
    assert pgmigrate.migrate(pg_empty_url) == "0014"
    assert queued(pg_empty_url) == 0 and len(worded(pg_empty_url)) == 2
    plan = asyncio.run(fetch(pg_empty_url, "SELECT indexdef FROM pg_indexes WHERE indexname = 'events_fts'"))
    assert plan == [("CREATE INDEX events_fts ON public.events_words USING gin (words)",)]
    assert found(pg_empty_url, "cormorant") == {(sid.hex, 1)} and found(pg_empty_url, "gannet") == {(sid.hex, 0)}
    pgmigrate.migrate(pg_empty_url, "0014", "downgrade")
    plan = asyncio.run(fetch(pg_empty_url, "SELECT indexdef FROM pg_indexes WHERE indexname = 'events_fts'"))
    assert "ON public.events USING gin (sessionstore_search_words" in str(plan[0][0])
    tables = "SELECT count(*) FROM pg_class WHERE relname IN ('events_words', 'events_unindexed')"
    assert asyncio.run(fetch(pg_empty_url, tables)) == [(0,)]
    functions = "SELECT count(*) FROM pg_proc WHERE proname = 'sessionstore_words_stale'"
    assert asyncio.run(fetch(pg_empty_url, functions)) == [(0,)]
    raw_append(pg_empty_url, ["a petrel at 0014"])  # no trigger left to fire
    pgmigrate.migrate(pg_empty_url)
    assert found(pg_empty_url, "petrel") != set() and queued(pg_empty_url) == 0
    checked = run("check", "--json", "--db", pg_empty_url)
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"] is True, checked.stdout
    done = subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"db={pg_empty_url}", "check"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
