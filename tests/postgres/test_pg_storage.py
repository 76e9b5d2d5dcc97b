"""PostgresStorage on a real server: what is written, what is read back, what another writer or process finds.

The storage tests of ``tests/storage`` that are not about a SQLite file as such, on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import asyncpg  # type: ignore[import-untyped]
import pytest
from pg_server import PostgresServer

from sessionstore import (
    EventContext,
    EventEncodeError,
    InvalidSessionIdError,
    ModelMessage,
    SchemaOutOfDateError,
    SchemaTooNewError,
    SessionStore,
    StorageError,
    SystemMessage,
    ToolCall,
    ToolResult,
    UnknownEvent,
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


async def revision(url: str, stream_id: UUID) -> int:
    return int((await rows(url, "SELECT revision FROM sessions WHERE session_id = $1", stream_id.hex))[0][0])


async def test_the_constructor_touches_nothing() -> None:
    PostgresStorage("postgresql://nobody:secret@127.0.0.1:1/none")  # nothing listens there; nothing is tried


async def test_events_come_back_in_order_with_their_types(pg_url: str) -> None:
    stream_id = uuid4()
    events = [
        SystemMessage("be brief"),
        UserMessage("hi", metadata={"at": datetime(2026, 1, 1, tzinfo=UTC)}),
        ToolCall(call_id="c", name="ls", arguments={"path": "/"}),
        ToolResult(call_id="c", content=b"\x00bin"),
        ModelMessage("done"),
    ]
    async with PostgresStorage(pg_url) as storage:
        for event in events:
            await storage.save_event(event, EventContext.for_stream(stream_id))
        assert await storage.get_history(stream_id) == events
    async with PostgresStorage(pg_url) as fresh:
        assert await fresh.get_history(stream_id) == events
        assert await fresh.get_history(uuid4()) == []
    assert [r[1] for r in await event_rows(pg_url, stream_id)] == [0, 1, 2, 3, 4]


async def test_a_stream_used_without_the_registry_gets_a_session_row(pg_url: str) -> None:
    stream_id = uuid4()
    async with PostgresStorage(pg_url) as storage:
        await storage.save_event(ModelMessage("x"), EventContext.for_stream(stream_id))
        record = await storage.load_session(stream_id)
    assert record is not None and record.session_id == stream_id.hex and record.cwd == "."


async def test_appending_one_event_to_a_long_history_writes_one_row(pg_url: str) -> None:
    stream_id = uuid4()
    history = [ModelMessage(f"m{i}") for i in range(10_000)]
    async with PostgresStorage(pg_url) as storage:
        await storage.set_history(stream_id, history)
        before = await event_rows(pg_url, stream_id)
        rev = await revision(pg_url, stream_id)
        assert rev == 10_000  # one statement, one update of the session, counting every row
        history = list(await storage.get_history(stream_id))
        await storage.set_history(stream_id, [*history, ModelMessage("one more")])
    after = await event_rows(pg_url, stream_id)
    assert after[:-1] == before  # same row ids: not rewritten
    assert after[-1][1:] == (10_000, "model_message", '{"content":"one more"}')
    assert await revision(pg_url, stream_id) == rev + 1


async def test_a_change_in_the_middle_rewrites_from_there_only(pg_url: str) -> None:
    stream_id = uuid4()
    async with PostgresStorage(pg_url) as storage:
        history = [ModelMessage(f"m{i}") for i in range(10)]
        await storage.set_history(stream_id, history)
        before = await event_rows(pg_url, stream_id)
        edited = [*history[:4], ModelMessage("changed"), *history[5:8]]
        await storage.set_history(stream_id, edited)
        assert await storage.get_history(stream_id) == edited
    after = await event_rows(pg_url, stream_id)
    assert after[:4] == before[:4]
    assert [r[3] for r in after[4:]] == [
        '{"content":"changed"}',
        '{"content":"m5"}',
        '{"content":"m6"}',
        '{"content":"m7"}',
    ]


async def test_another_writer_is_never_missed(pg_url: str) -> None:
    stream_id = uuid4()
    async with PostgresStorage(pg_url) as mine, PostgresStorage(pg_url) as theirs:
        base = [ModelMessage("a"), ModelMessage("b")]
        await mine.set_history(stream_id, base)
        await theirs.set_history(stream_id, [ModelMessage("a"), ModelMessage("X")])
        await mine.set_history(stream_id, [*base, ModelMessage("c")])
        assert [e.content for e in await theirs.get_history(stream_id)] == ["a", "b", "c"]  # type: ignore[attr-defined]
        await rows(pg_url, 'UPDATE events SET payload = \'{"content":"hand"}\' WHERE position = 0')
        assert [e.content for e in await mine.get_history(stream_id)] == ["hand", "b", "c"]  # type: ignore[attr-defined]


async def test_drop_history_deletes_the_session_and_its_events(pg_url: str) -> None:
    stream_id = uuid4()
    async with PostgresStorage(pg_url) as storage:
        await storage.set_history(stream_id, [ModelMessage("x")] * 3)
        await storage.drop_history(stream_id)
        assert await storage.get_history(stream_id) == []
        assert await storage.load_session(stream_id) is None
    assert await rows(pg_url, "SELECT count(*) FROM events") == [(0,)]
    assert await rows(pg_url, "SELECT count(*) FROM sessions") == [(0,)]


async def test_a_bad_event_raises_before_anything_is_written(pg_url: str) -> None:
    stream_id = uuid4()
    async with PostgresStorage(pg_url) as storage:
        await storage.set_history(stream_id, [ModelMessage("kept")])
        with pytest.raises(EventEncodeError):
            await storage.save_event(ModelMessage("x", metadata={"d": Decimal(1)}), EventContext.for_stream(stream_id))
        with pytest.raises(EventEncodeError):
            await storage.set_history(stream_id, [ModelMessage("new"), ModelMessage("x", metadata={"d": Decimal(1)})])
        assert [e.content for e in await storage.get_history(stream_id)] == ["kept"]  # type: ignore[attr-defined]
        await storage.save_event(ModelMessage("still usable"), EventContext.for_stream(stream_id))
    assert len(await event_rows(pg_url, stream_id)) == 2


async def test_ids_that_are_not_uuids_are_refused(pg_url: str) -> None:
    async with PostgresStorage(pg_url) as storage:
        for bad in ["x'; DROP TABLE events; --", "0" * 32, 42]:
            with pytest.raises(InvalidSessionIdError):
                await storage.get_history(bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidSessionIdError):
                await storage.save_event(ModelMessage("x"), EventContext.for_stream(bad))  # type: ignore[arg-type]
    assert await rows(pg_url, "SELECT count(*) FROM events") == [(0,)]


async def test_unknown_types_survive_a_rewrite_byte_for_byte(pg_url: str) -> None:
    stream_id = uuid4()
    async with PostgresStorage(pg_url) as storage:
        await storage.set_history(stream_id, [ModelMessage("a")])
    await rows(pg_url, "UPDATE events SET type = 'from_the_future', payload = '{\"v\": [1,2]}'")
    async with PostgresStorage(pg_url) as storage:
        history = list(await storage.get_history(stream_id))
        assert isinstance(history[0], UnknownEvent)
        await storage.set_history(stream_id, [*history, ModelMessage("b")])
    assert [r[2:] for r in await event_rows(pg_url, stream_id)] == [
        ("from_the_future", '{"v": [1,2]}'),
        ("model_message", '{"content":"b"}'),
    ]


async def test_listing_pages_newest_first_filters_and_validates(pg_url: str) -> None:
    async with PostgresStorage(pg_url) as storage:
        store = SessionStore(storage=storage, retain_history=True)
        made = [await store.create(cwd="/a" if i % 2 else "/b", meta={"i": i}) for i in range(7)]
        await store.aclose()
        seen = []
        cursor = None
        while True:
            page = await storage.list_sessions(cursor=cursor, limit=3)
            seen += page.sessions
            if (cursor := page.next_cursor) is None:
                break
        assert {r.session_id for r in seen} == {s.session_id for s in made} and len(seen) == 7
        assert [r.created_at for r in seen] == sorted((r.created_at for r in seen), reverse=True)
        assert all(r.updated_at.tzinfo is UTC and r.released for r in seen)
        only_a = await storage.list_sessions(cwd="/a")
        assert {r.cwd for r in only_a.sessions} == {"/a"} and len(only_a.sessions) == 3
        with pytest.raises(ValueError, match="cursor"):
            await storage.list_sessions(cursor="not-a-cursor")


async def test_titles_are_stored_or_derived_from_the_first_user_message(pg_url: str) -> None:
    async with PostgresStorage(pg_url) as storage:
        store = SessionStore(storage=storage)
        named = await store.create()
        await store.set_title(named.session_id, "Named")
        unnamed = await store.create()
        await store.stream(unnamed).send(ModelMessage("not a user message"))
        await store.stream(unnamed).send(UserMessage("  please   fix\nthe build\t" + "x" * 100))
        titles = {r.session_id: r.title for r in (await storage.list_sessions()).sessions}
        assert titles[named.session_id] == "Named"
        assert titles[unnamed.session_id] == ("please   fix the build " + "x" * 100)[:79] + "…"
        assert (await storage.load_session(unnamed.stream_id)).title is None  # type: ignore[union-attr]


async def test_registry_lifecycle_writes_and_deletes_rows(pg_url: str) -> None:
    async with PostgresStorage(pg_url) as storage:
        store = SessionStore(storage=storage, max_sessions=1)
        first = await store.create(cwd="/w")
        await store.stream(first).send(UserMessage("hi"))
        before = (await storage.load_session(first.stream_id)).updated_at  # type: ignore[union-attr]
        async with first.turn():
            await asyncio.sleep(0.002)
        after = (await storage.load_session(first.stream_id)).updated_at  # type: ignore[union-attr]
        assert after > before
        await store.create()
        assert await storage.load_session(first.stream_id) is None
    assert await rows(pg_url, "SELECT count(*) FROM events") == [(0,)]


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from sessionstore import SessionStore, UserMessage, ModelMessage
    from sessionstore.postgres import PostgresStorage

    async def main(url):
        store = SessionStore(storage=PostgresStorage(url), retain_history=True)  # never closed: the process ends
        for i in range(3):
            session = await store.create(
                cwd=f"/proj/{i}", additional_directories=[f"/lib/{i}"],
                mcp_servers=[{"name": "fs", "command": "mcp-fs", "args": [str(i)]}], meta={"n": i},
            )
            async with session.turn():
                await store.stream(session).send(UserMessage(f"question {i}"))
                await store.stream(session).send(ModelMessage(f"answer {i}"))
            print(session.session_id, flush=True)

    asyncio.run(main(sys.argv[1]))
    """
)


async def test_a_new_process_lists_and_resumes_what_an_exited_one_wrote(pg_url: str, tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    done = subprocess.run([sys.executable, str(script), pg_url], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    ids = done.stdout.split()
    async with PostgresStorage(pg_url) as storage:
        assert [r.session_id for r in (await storage.list_sessions()).sessions] == ids[::-1]
        store = SessionStore(storage=storage, retain_history=True)
        for i, sid in enumerate(ids):
            session, adopted = await store.get_or_adopt(UUID(hex=sid))
            assert adopted
            assert (session.cwd, session.additional_directories, session.meta) == (
                f"/proj/{i}",
                [f"/lib/{i}"],
                {"n": i},
            )
            assert session.mcp_servers == [{"name": "fs", "command": "mcp-fs", "args": [str(i)]}]
            history = await store.stream(session).history.get_events()
            assert history == [UserMessage(f"question {i}"), ModelMessage(f"answer {i}")]


def test_one_storage_object_serves_consecutive_event_loops(pg_url: str) -> None:
    storage = PostgresStorage(pg_url)
    stream_id = uuid4()

    async def write(text: str) -> None:
        await storage.save_event(ModelMessage(text), EventContext.for_stream(stream_id))

    asyncio.run(write("first loop"))
    asyncio.run(write("second loop"))

    async def read() -> list[object]:
        async with storage:
            return list(await storage.get_history(stream_id))

    assert asyncio.run(read()) == [ModelMessage("first loop"), ModelMessage("second loop")]


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
    position nor leave a gap. It appends the long way instead (lock, then position): the engine's pool is used."""
    stream_id = uuid4()
    async with PostgresStorage(pg_url) as storage:
        for text in ("e0", "e1", "e2"):
            await storage.save_event(UserMessage(text), EventContext.for_stream(stream_id))
        assert storage._opened is not None and storage._opened.sync_engine.pool.checkedin() == 0  # one statement
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
        assert storage._opened.sync_engine.pool.checkedin() >= 1  # the long way ran


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
