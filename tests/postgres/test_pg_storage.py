"""What only PostgresStorage has, on a real server: its schema revisions under the migration lock, a password in
its URL never shown, and appends that wait for another writer's lock or for a connection. What both storages do is
in ``tests/storage/test_storage.py``, on both databases."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID, uuid4

import asyncpg
import pytest
from pg_server import PostgresServer

from sessionstore import (
    EventContext,
    SchemaOutOfDateError,
    SchemaTooNewError,
    StorageError,
    UserMessage,
)
from sessionstore.errors import DatabaseNotFoundError, DatabaseUnavailableError
from sessionstore.postgres import PostgresStorage
from sessionstore.schema.revisions import HEAD


async def rows(url: str, sql: str, *args: object) -> list[tuple[Any, ...]]:
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        return [tuple(r) for r in await conn.fetch(sql, *args)]
    finally:
        await conn.close()


async def event_rows(url: str, stream_id: UUID) -> list[tuple[Any, ...]]:
    return await rows(
        url,
        "SELECT e.id, e.position, e.type, e.payload FROM events e JOIN sessions s ON s.id = e.session"
        " WHERE s.session_id = $1 ORDER BY e.position",
        stream_id.hex,
    )


# -- schema revisions, as on SQLite ---------------------------------------------------------------


async def test_a_database_from_a_newer_version_is_refused_untouched(pg_url: str) -> None:
    await rows(pg_url, "UPDATE alembic_version SET version_num = '9999'")
    before = await rows(pg_url, "SELECT * FROM pg_catalog.pg_tables WHERE schemaname = 'public' ORDER BY tablename")
    with pytest.raises(SchemaTooNewError, match="9999"):
        async with PostgresStorage(pg_url):
            pass
    assert await rows(pg_url, "SELECT version_num FROM alembic_version") == [("9999",)]
    assert (
        await rows(pg_url, "SELECT * FROM pg_catalog.pg_tables WHERE schemaname = 'public' ORDER BY tablename")
        == before
    )


async def test_an_older_database_is_upgraded_on_open_unless_auto_upgrade_is_off(pg_empty_url: str) -> None:
    from sessionstore.postgres import migrate as pgmigrate

    await asyncio.to_thread(pgmigrate.migrate, pg_empty_url, "0002")
    with pytest.raises(SchemaOutOfDateError, match="sessionstore db upgrade --db postgresql"):
        async with PostgresStorage(pg_empty_url, auto_upgrade=False):
            pass
    assert await rows(pg_empty_url, "SELECT version_num FROM alembic_version") == [("0002",)]
    async with PostgresStorage(pg_empty_url) as storage:
        await storage.save_event(UserMessage("after the upgrade"), EventContext.for_stream(uuid4()))
    assert await rows(pg_empty_url, "SELECT version_num FROM alembic_version") == [(HEAD,)]
    assert await rows(pg_empty_url, "SELECT role, text FROM transcript") == [("user", "after the upgrade")]


# -- the password is never shown -------------------------------------------------------------------


async def test_a_password_in_the_url_is_never_shown(pg_server: PostgresServer, pg_url: str) -> None:
    password = pg_server.password
    storage = PostgresStorage(pg_url)
    assert password not in repr(storage) and "***" in repr(storage)
    wrong = pg_url.replace(password, "not-the-" + password)
    for url, error in [
        (wrong, StorageError),  # refused login
        (pg_url.rsplit("/", 1)[0] + "/no_such_database", DatabaseNotFoundError),
        (pg_url.replace(f":{pg_server.port}/", ":1/"), DatabaseUnavailableError),  # nothing listens
    ]:
        with pytest.raises(error) as caught:
            async with PostgresStorage(url) as storage:
                pass
        shown = f"{caught.value} {caught.value!r} {caught.value.__cause__}"
        assert password not in shown and "***" in str(caught.value), shown


async def test_a_password_given_as_a_query_parameter_is_never_shown(pg_server: PostgresServer, pg_url: str) -> None:
    """libpq's and asyncpg's other place for it: ``?password=``. The right one connects; neither is ever shown."""
    password = pg_server.password
    as_parameter = pg_url.replace(f":{password}@", "@") + f"?password={password}"
    async with PostgresStorage(as_parameter) as storage:
        assert password not in repr(storage) and "password=***" in repr(storage)
        await storage.save_event(UserMessage("in"), EventContext.for_stream(uuid4()))
    wrong = as_parameter.replace(f"password={password}", f"password=not-the-{password}")
    with pytest.raises(StorageError) as caught:
        async with PostgresStorage(wrong):
            pass
    shown = f"{caught.value} {caught.value!r} {caught.value.__cause__}"
    assert password not in shown and "password=***" in str(caught.value), shown


async def waiting_for_a_lock(url: str) -> None:
    """Until a sessionstore connection waits for a row lock (the append under test has taken its snapshot)."""
    for _ in range(500):
        found = await rows(
            url,
            "SELECT 1 FROM pg_stat_activity WHERE application_name = 'sessionstore' AND wait_event_type = 'Lock'",
        )
        if found:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the append never waited for the session's lock")


@pytest.mark.parametrize("meanwhile", ["append", "shrink"])
async def test_an_append_that_waited_for_another_writer_lands_right_after_it(pg_url: str, meanwhile: str) -> None:
    """The one-statement append's snapshot predates the lock it waits for: after another writer of the session
    commits (an event appended, or the history cut short as set_history does), it must not land on a taken
    position nor leave a gap. It appends the long way instead (lock, then position): the storage's pool is used."""
    stream_id = uuid4()
    async with PostgresStorage(pg_url) as storage:
        assert storage._opened is not None
        while storage._opened.handed_out < 2:  # the schema's check, then the retention pass at open reads the policy
            await asyncio.sleep(0.01)
        before = storage._opened.handed_out
        for text in ("e0", "e1", "e2"):
            await storage.save_event(UserMessage(text), EventContext.for_stream(stream_id))
        assert storage._opened.handed_out == before  # one statement each, on the appenders' own connections
        other = await asyncpg.connect(pg_url.replace("+asyncpg", ""))
        try:
            async with other.transaction():
                await other.execute("SELECT 1 FROM sessions WHERE session_id = $1 FOR UPDATE", stream_id.hex)
                waiting = asyncio.ensure_future(
                    storage.save_event(UserMessage("mine"), EventContext.for_stream(stream_id))
                )
                await waiting_for_a_lock(pg_url)
                if meanwhile == "append":
                    await other.execute(
                        "INSERT INTO events (session, position, type, payload, created_at)"
                        ' SELECT e.session, 3, e.type, \'{"content": "theirs"}\', now() FROM events e'
                        " JOIN sessions s ON s.id = e.session WHERE s.session_id = $1 AND e.position = 0",
                        stream_id.hex,
                    )
                else:
                    await other.execute(
                        "DELETE FROM events WHERE position >= 1"
                        " AND session = (SELECT id FROM sessions WHERE session_id = $1)",
                        stream_id.hex,
                    )
            await waiting
        finally:
            await other.close()
        expected = ["e0", "e1", "e2", "theirs", "mine"] if meanwhile == "append" else ["e0", "mine"]
        assert [e.content for e in await storage.get_history(stream_id)] == expected  # type: ignore[attr-defined]
        assert [r[1] for r in await event_rows(pg_url, stream_id)] == list(range(len(expected)))
        assert storage._opened.handed_out > before  # the long way ran


async def test_appends_waiting_for_a_connection_share_one_statement_and_lose_nothing(pg_url: str) -> None:
    """More writers than connections: the appends that would wait go in batches, one statement and one commit for
    many sessions. Two storages write the same sessions at once (a batch skips a session whose row the other holds
    and that append goes the long way): every event lands once, each writer's in its order, positions dense."""
    sessions = [uuid4() for _ in range(30)]
    count = 10

    async def writer(storage: PostgresStorage, name: str, stream_id: UUID) -> None:
        for i in range(count):
            await storage.save_event(UserMessage(f"{name}:{i}"), EventContext.for_stream(stream_id))

    async with PostgresStorage(pg_url, pool_size=2) as a, PostgresStorage(pg_url, pool_size=2) as b:
        await asyncio.gather(*(writer(s, name, sid) for sid in sessions for s, name in ((a, "a"), (b, "b"))))
        for stream_id in sessions:
            got = [e.content for e in await a.get_history(stream_id)]  # type: ignore[attr-defined]
            for name in ("a", "b"):
                assert [c for c in got if c.startswith(f"{name}:")] == [f"{name}:{i}" for i in range(count)]
            assert [r[1] for r in await event_rows(pg_url, stream_id)] == list(range(2 * count))
    # Rows committed by one transaction share its xmin: fewer transactions than events.
    [(events, transactions)] = await rows(pg_url, "SELECT count(*), count(DISTINCT xmin::text) FROM events")
    assert events == len(sessions) * 2 * count
    assert transactions < events / 2, (events, transactions)


_WITHOUT_SQLALCHEMY = """
import asyncio, sys, uuid
from sessionstore import EventContext, SessionStore, UserMessage
from sessionstore.postgres import PostgresStorage

async def main() -> None:
    async with PostgresStorage(sys.argv[1]) as storage:
        store = SessionStore(storage=storage, retain_history=True)
        session = await store.create(cwd="/work")
        async with session.turn():
            await store.stream(session).send(UserMessage("hello"))
        stream_id = uuid.uuid4()
        for text in ("a", "b", "c"):
            await storage.save_event(UserMessage(text), EventContext.for_stream(stream_id))
        assert [e.content for e in await storage.get_history(stream_id)] == ["a", "b", "c"]
        assert [e.content for e in await storage.get_history(stream_id, last=1)] == ["c"]
        await storage.set_history(stream_id, [UserMessage("a"), UserMessage("z")])
        assert [e.content for e in await storage.get_history(stream_id)] == ["a", "z"]
        assert (await storage.load_session(session.stream_id)) is not None
        assert session.stream_id.hex in [r.session_id for r in (await storage.list_sessions()).sessions]
        await storage.drop_history(stream_id)
        await store.aclose()
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("sqlalchemy", "alembic"))
    print(loaded)

asyncio.run(main())
"""


def test_a_storage_at_head_reads_and_writes_without_loading_sqlalchemy(pg_url: str) -> None:
    """Reads, appends, rewrites, holds, the catalogue: all on bare asyncpg; SQLAlchemy and Alembic are loaded only
    to migrate a database, which one at head never needs."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_SQLALCHEMY, pg_url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
