"""Both storages, on a real SQLite file and a real PostgreSQL database: what is written, what is read back, what
another writer, another storage or a restart finds. What only a SQLite file has is in ``test_sqlite_storage.py``;
what only PostgreSQL has, in ``tests/postgres/``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from databases import Database

from sessionstore import (
    EventContext,
    EventEncodeError,
    InvalidSessionIdError,
    ModelMessage,
    SessionStore,
    SystemMessage,
    ToolCall,
    ToolResult,
    UnknownEvent,
    UserMessage,
)


async def test_the_constructor_touches_nothing(database: Database) -> None:
    storage = database.storage()
    assert not await database.touched()
    async with storage:
        await storage.save_event(ModelMessage("x"), EventContext.for_stream(uuid4()))
        assert await database.touched()  # what the check sees once a storage has been used


async def test_events_come_back_in_order_with_their_types(database: Database) -> None:
    stream_id = uuid4()
    events = [
        SystemMessage("be brief"),
        UserMessage("hi", metadata={"at": datetime(2026, 1, 1, tzinfo=UTC)}),
        ToolCall(call_id="c", name="ls", arguments={"path": "/"}),
        ToolResult(call_id="c", content=b"\x00bin"),
        ModelMessage("done"),
    ]
    async with database.storage() as storage:
        for event in events:
            await storage.save_event(event, EventContext.for_stream(stream_id))
        assert await storage.get_history(stream_id) == events
    async with database.storage() as fresh:  # nothing served from a cache
        assert await fresh.get_history(stream_id) == events
        assert await fresh.get_history(uuid4()) == []
    assert [r[1] for r in await database.event_rows(stream_id)] == [0, 1, 2, 3, 4]


async def test_a_stream_used_without_the_registry_gets_a_session_row(database: Database) -> None:
    stream_id = uuid4()
    async with database.storage() as storage:
        await storage.save_event(ModelMessage("x"), EventContext.for_stream(stream_id))
        record = await storage.load_session(stream_id)
    assert record is not None and record.session_id == stream_id.hex and record.cwd == "."


@pytest.mark.parametrize("warm", [True, False], ids=["same-storage", "fresh-storage"])
async def test_appending_one_event_to_a_long_history_writes_one_row(database: Database, warm: bool) -> None:
    stream_id = uuid4()
    history = [ModelMessage(f"m{i}") for i in range(10_000)]
    async with database.storage() as storage:
        await storage.set_history(stream_id, history)
    before = await database.event_rows(stream_id)
    rev = await database.revision(stream_id)
    assert rev == 0  # rows added at the end are not counted (revision 0014: the session's length tells them apart)
    async with database.storage() as storage:
        if warm:
            history = list(await storage.get_history(stream_id))  # the agent's pattern: read, append, write
        await storage.set_history(stream_id, [*history, ModelMessage("one more")])
    after = await database.event_rows(stream_id)
    assert after[:-1] == before  # same row ids: not rewritten
    assert after[-1][1:] == (10_000, "model_message", '{"content":"one more"}')
    assert await database.revision(stream_id) == rev  # no row changed or deleted


async def test_a_change_in_the_middle_rewrites_from_there_only(database: Database) -> None:
    stream_id = uuid4()
    async with database.storage() as storage:
        history = [ModelMessage(f"m{i}") for i in range(10)]
        await storage.set_history(stream_id, history)
        before = await database.event_rows(stream_id)
        edited = [*history[:4], ModelMessage("changed"), *history[5:8]]
        await storage.set_history(stream_id, edited)
        assert await storage.get_history(stream_id) == edited
    after = await database.event_rows(stream_id)
    assert after[:4] == before[:4]
    assert [r[3] for r in after[4:]] == [
        '{"content":"changed"}',
        '{"content":"m5"}',
        '{"content":"m6"}',
        '{"content":"m7"}',
    ]


async def test_another_writer_is_never_missed(database: Database) -> None:
    stream_id = uuid4()
    async with database.storage() as mine, database.storage() as theirs:
        base = [ModelMessage("a"), ModelMessage("b")]
        await mine.set_history(stream_id, base)
        await theirs.set_history(stream_id, [ModelMessage("a"), ModelMessage("X")])
        # `mine` last wrote `base` (and a SQLite storage keeps it in its cache): its write must start from what
        # is stored.
        await mine.set_history(stream_id, [*base, ModelMessage("c")])
        assert [e.content for e in await theirs.get_history(stream_id)] == ["a", "b", "c"]
        # An edit by hand (sqlite3, psql) is seen too (the triggers bump the revision).
        await database.rows('UPDATE events SET payload = \'{"content":"hand"}\' WHERE position = 0')
        assert [e.content for e in await mine.get_history(stream_id)] == ["hand", "b", "c"]
        await mine.set_history(stream_id, [ModelMessage("a"), ModelMessage("b"), ModelMessage("c")])
        assert [e.content for e in await theirs.get_history(stream_id)] == ["a", "b", "c"]


async def test_appends_elsewhere_are_never_missed(database: Database) -> None:
    """Appends leave the revision alone (revision 0014): a history this storage has cached must still never hide
    events another storage, or a hand in sqlite3, appended after it, whether it reads, appends or rewrites next."""
    stream_id = uuid4()
    context = EventContext.for_stream(stream_id)
    async with database.storage() as mine, database.storage() as theirs:
        await mine.set_history(stream_id, [ModelMessage("a"), ModelMessage("b")])
        assert len(await mine.get_history(stream_id)) == 2  # cached here
        await theirs.save_event(ModelMessage("c"), context)
        assert [e.content for e in await mine.get_history(stream_id)] == ["a", "b", "c"]
        await theirs.save_event(ModelMessage("d"), context)
        assert [e.content for e in await mine.get_history(stream_id, last=2)] == ["c", "d"]
        await theirs.save_event(ModelMessage("e"), context)
        await mine.save_event(ModelMessage("f"), context)  # its cache holds a..d: it must not grow it by f
        assert [e.content for e in await mine.get_history(stream_id)] == ["a", "b", "c", "d", "e", "f"]
        await theirs.save_event(ModelMessage("g"), context)
        # A rewrite compares against what is stored, not the cache: g is there, so h is all it adds.
        await mine.set_history(stream_id, [ModelMessage(x) for x in "abcdefgh"])
        assert [e.content for e in await theirs.get_history(stream_id)] == list("abcdefgh")
        await database.rows(
            "INSERT INTO events (session, position, type, payload, created_at) SELECT session, max(position) + 1,"
            " 'model_message', '{\"content\":\"hand\"}', max(created_at) FROM events WHERE session ="
            f" (SELECT id FROM sessions WHERE session_id = '{stream_id.hex}') GROUP BY session"
        )
        assert [e.content for e in await mine.get_history(stream_id)] == [*"abcdefgh", "hand"]


async def test_a_session_dropped_and_recreated_elsewhere_is_not_served_stale(database: Database) -> None:
    stream_id = uuid4()
    async with database.storage() as mine, database.storage() as theirs:
        await mine.set_history(stream_id, [ModelMessage("old")])
        assert len(await mine.get_history(stream_id)) == 1
        await theirs.drop_history(stream_id)
        await theirs.set_history(stream_id, [ModelMessage("new")])  # same revision count, new row
        assert [e.content for e in await mine.get_history(stream_id)] == ["new"]


async def test_a_session_without_events_reads_empty_and_its_first_events_read_whole(database: Database) -> None:
    """A session whose row exists with no events reads as an empty history (not as an unknown session), and its
    first events, once written, read whole: the cache of the empty read must not outlive them."""
    stream_id = uuid4()
    async with database.storage() as storage:
        await storage.set_history(stream_id, [])
        assert await storage.load_session(stream_id) is not None
        assert await storage.get_history(stream_id) == []
        await storage.set_history(stream_id, [ModelMessage("a"), ModelMessage("b")])
        assert [e.content for e in await storage.get_history(stream_id)] == ["a", "b"]


async def test_drop_history_deletes_the_session_and_its_events(database: Database) -> None:
    stream_id = uuid4()
    async with database.storage() as storage:
        await storage.set_history(stream_id, [ModelMessage("x")] * 3)
        await storage.drop_history(stream_id)
        assert await storage.get_history(stream_id) == []
        assert await storage.load_session(stream_id) is None
    assert await database.rows("SELECT count(*) FROM events") == [(0,)]
    assert await database.rows("SELECT count(*) FROM sessions") == [(0,)]


async def test_a_bad_event_raises_before_anything_is_written(database: Database) -> None:
    stream_id = uuid4()
    async with database.storage() as storage:
        await storage.set_history(stream_id, [ModelMessage("kept")])
        with pytest.raises(EventEncodeError):
            await storage.save_event(ModelMessage("x", metadata={"d": Decimal(1)}), EventContext.for_stream(stream_id))
        with pytest.raises(EventEncodeError):
            await storage.set_history(stream_id, [ModelMessage("new"), ModelMessage("x", metadata={"d": Decimal(1)})])
        with pytest.raises(EventEncodeError):
            await storage.set_history(stream_id, ["not an event"])
        assert [e.content for e in await storage.get_history(stream_id)] == ["kept"]
        await storage.save_event(ModelMessage("still usable"), EventContext.for_stream(stream_id))
    assert len(await database.event_rows(stream_id)) == 2


async def test_ids_that_are_not_uuids_are_refused(database: Database) -> None:
    async with database.storage() as storage:
        for bad in ["x'; DROP TABLE events; --", "0" * 32, 42]:
            with pytest.raises(InvalidSessionIdError):
                await storage.get_history(bad)
            with pytest.raises(InvalidSessionIdError):
                await storage.save_event(ModelMessage("x"), EventContext.for_stream(bad))  # type: ignore[arg-type]
    assert await database.rows("SELECT count(*) FROM events") == [(0,)]


async def test_unknown_types_survive_a_rewrite_byte_for_byte(database: Database) -> None:
    stream_id = uuid4()
    async with database.storage() as storage:
        await storage.set_history(stream_id, [ModelMessage("a")])
    await database.rows("UPDATE events SET type = 'from_the_future', payload = '{\"v\": [1,2]}'")
    async with database.storage() as storage:
        history = list(await storage.get_history(stream_id))
        assert isinstance(history[0], UnknownEvent)
        await storage.set_history(stream_id, [*history, ModelMessage("b")])
    assert [r[2:] for r in await database.event_rows(stream_id)] == [
        ("from_the_future", '{"v": [1,2]}'),
        ("model_message", '{"content":"b"}'),
    ]


async def test_listing_pages_newest_first_filters_and_validates(database: Database) -> None:
    async with database.storage() as storage:
        store = SessionStore(storage=storage, retain_history=True)
        made = [await store.create(cwd="/a" if i % 2 else "/b", meta={"i": i}) for i in range(7)]
        await store.aclose()  # released, still listed
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


async def test_titles_are_stored_or_derived_from_the_first_user_message(database: Database) -> None:
    async with database.storage() as storage:
        store = SessionStore(storage=storage)
        named = await store.create()
        await store.set_title(named.session_id, "Named")
        unnamed = await store.create()
        await store.stream(unnamed).send(ModelMessage("not a user message"))
        await store.stream(unnamed).send(UserMessage("  please   fix\nthe build\t" + "x" * 100))
        titles = {r.session_id: r.title for r in (await storage.list_sessions()).sessions}
        assert titles[named.session_id] == "Named"
        # The one title rule (storage.derive_title, and the session_overview view): line breaks and tabs as
        # spaces, trimmed, cut to 79 characters and an ellipsis.
        assert titles[unnamed.session_id] == ("please   fix the build " + "x" * 100)[:79] + "…"
        assert (await storage.load_session(unnamed.stream_id)).title is None


async def test_registry_lifecycle_writes_and_deletes_rows(database: Database) -> None:
    async with database.storage() as storage:
        store = SessionStore(storage=storage, max_sessions=1)
        first = await store.create(cwd="/w")
        await store.stream(first).send(UserMessage("hi"))
        before = (await storage.load_session(first.stream_id)).updated_at
        async with first.turn():
            await asyncio.sleep(0.002)
        after = (await storage.load_session(first.stream_id)).updated_at
        assert after > before  # a finished turn stamps the session
        await store.create()  # evicts first; not retained: its rows go
        assert await storage.load_session(first.stream_id) is None
        assert await database.rows("SELECT count(*) FROM events") == [(0,)]


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from sessionstore import SessionStore, SQLiteStorage, UserMessage, ModelMessage

    async def main(kind, where):
        if kind == "sqlite":
            storage = SQLiteStorage(where)
        else:
            from sessionstore.postgres import PostgresStorage
            storage = PostgresStorage(where)
        # No aclose(), no context manager: the process just ends.
        store = SessionStore(storage=storage, retain_history=True)
        for i in range(3):
            session = await store.create(
                cwd=f"/proj/{i}", additional_directories=[f"/lib/{i}"],
                mcp_servers=[{"name": "fs", "command": "mcp-fs", "args": [str(i)]}], meta={"n": i},
            )
            async with session.turn():
                await store.stream(session).send(UserMessage(f"question {i}"))
                await store.stream(session).send(ModelMessage(f"answer {i}"))
            print(session.session_id, flush=True)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


async def test_a_new_process_lists_and_resumes_what_an_exited_one_wrote(database: Database, tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    done = subprocess.run(
        [sys.executable, str(script), database.kind, str(database)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    ids = done.stdout.split()
    assert len(ids) == 3
    async with database.storage() as storage:
        listed = (await storage.list_sessions()).sessions
        assert [r.session_id for r in listed] == ids[::-1]  # newest first
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
        explicit, _ = await SessionStore(storage=storage).get_or_adopt(UUID(hex=ids[0]), cwd="/given")
        assert explicit.cwd == "/given" and explicit.meta == {"n": 0}  # context given explicitly wins


def test_one_storage_object_serves_consecutive_event_loops(database: Database) -> None:
    """A CLI or a test calls asyncio.run more than once with the same storage object."""
    storage = database.storage()
    stream_id = uuid4()

    async def write(text: str) -> None:
        await storage.save_event(ModelMessage(text), EventContext.for_stream(stream_id))  # no aclose

    asyncio.run(write("first loop"))
    asyncio.run(write("second loop"))

    async def read() -> list[object]:
        async with storage:
            return list(await storage.get_history(stream_id))

    assert asyncio.run(read()) == [ModelMessage("first loop"), ModelMessage("second loop")]
