"""Recent-window reads, ``get_history(stream_id, last=N)``, on a real SQLite file and a real PostgreSQL database:
the newest N events in order, whatever else happens to the session (a rewrite, another writer, a cancelled call),
read as one range of the index on (session, position) however long the history."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from typing import Any
from uuid import UUID, uuid4

import pytest
from databases import Database

from sessionstore import (
    EventContext,
    History,
    InvalidWindowError,
    MemoryStorage,
    ModelMessage,
    SessionStore,
    SQLiteStorage,
    StorageError,
    UserMessage,
)
from sessionstore.schema import queries


def messages(count: int, prefix: str = "m") -> list[Any]:
    return [ModelMessage(f"{prefix}{i}") for i in range(count)]


async def test_last_reads_the_newest_events_oldest_first(database: Database) -> None:
    stream_id = uuid4()
    events = [UserMessage(f"u{i}") if i % 3 == 0 else ModelMessage(f"m{i}") for i in range(30)]
    async with database.storage() as storage:
        for event in events:
            await storage.save_event(event, EventContext.for_stream(stream_id))
    async with database.storage() as storage:  # a fresh storage: nothing from a cache
        assert await storage.get_history(stream_id, last=5) == events[-5:]
        assert await storage.get_history(stream_id, last=1) == events[-1:]
        assert await storage.get_history(stream_id, last=30) == events
        assert await storage.get_history(stream_id, last=1000) == events  # more than there are: all of them
        assert await storage.get_history(stream_id, last=2**70) == events  # more than a database binds
        assert await storage.get_history(stream_id, last=0) == []
        assert await storage.get_history(stream_id, last=None) == events
        assert await storage.get_history(uuid4(), last=5) == []
        # Through the registry: a live session's stream.
        store = SessionStore(storage=storage, retain_history=True)
        session, adopted = await store.get_or_adopt(stream_id)
        assert adopted
        assert await store.stream(session).history.get_events(last=4) == events[-4:]
        assert await store.stream(session).history.get_events() == events
        await store.aclose()


@pytest.mark.parametrize("last", [-1, -(2**70), 1.5, "3", True])
async def test_a_bad_last_is_a_typed_error_and_reads_nothing(database: Database, last: Any) -> None:
    storage = database.storage()
    with pytest.raises(InvalidWindowError, match="whole number of zero or more") as raised:
        await storage.get_history(uuid4(), last=last)
    assert isinstance(raised.value, StorageError) and isinstance(raised.value, ValueError)
    assert not await database.touched()  # refused before the database was reached
    with pytest.raises(InvalidWindowError):
        await MemoryStorage().get_history(uuid4(), last=last)
    with pytest.raises(InvalidWindowError):
        await History(MemoryStorage(), uuid4()).get_events(last=last)


async def test_memory_storage_and_a_storage_without_last_give_the_same_windows() -> None:
    """MemoryStorage takes ``last`` as the durable storages do; a storage with only AG2's four methods is read
    whole by History and cut there, with the same answers."""

    class Plain:  # AG2's Storage protocol: get_history(stream_id), nothing more
        def __init__(self) -> None:
            self.inner = MemoryStorage()

        async def save_event(self, event: Any, context: Any) -> None:
            await self.inner.save_event(event, context)

        async def get_history(self, stream_id: UUID) -> list[Any]:
            return list(await self.inner.get_history(stream_id))

        async def set_history(self, stream_id: UUID, events: Any) -> None:
            await self.inner.set_history(stream_id, events)

        async def drop_history(self, stream_id: UUID) -> None:
            await self.inner.drop_history(stream_id)

    stream_id = uuid4()
    events = messages(12)
    for storage in (MemoryStorage(), Plain()):
        await storage.set_history(stream_id, events)
        history = History(storage, stream_id)
        for last, expected in ((0, []), (1, events[-1:]), (5, events[-5:]), (12, events), (99, events)):
            assert await history.get_events(last=last) == expected
        assert await history.get_events() == events
    assert await MemoryStorage().get_history(stream_id, last=3) == []


async def test_a_window_follows_set_history(database: Database) -> None:
    stream_id = uuid4()
    async with database.storage() as storage:
        await storage.set_history(stream_id, messages(100))
        assert await storage.get_history(stream_id, last=10) == messages(100)[-10:]
        full = list(await storage.get_history(stream_id))  # the cache (SQLite) now holds the whole history
        # Cut at 60, and three new events after it: the window spans the kept and the new rows.
        rewritten = [*full[:60], *messages(3, "new")]
        await storage.set_history(stream_id, rewritten)
        assert await storage.get_history(stream_id, last=5) == rewritten[-5:]
        await storage.set_history(stream_id, messages(2, "short"))  # shorter than the window
        assert await storage.get_history(stream_id, last=5) == messages(2, "short")
        await storage.set_history(stream_id, [])
        assert await storage.get_history(stream_id, last=5) == []
        await storage.save_event(ModelMessage("after"), EventContext.for_stream(stream_id))
        assert await storage.get_history(stream_id, last=5) == [ModelMessage("after")]
    async with database.storage() as fresh:
        assert await fresh.get_history(stream_id, last=5) == [ModelMessage("after")]


async def test_a_window_never_comes_from_a_stale_cache(database: Database) -> None:
    """Another storage's writes, and an edit by hand, show in the next window of a storage that had read (and, on
    SQLite, cached) the whole history: the revision read with the window decides."""
    stream_id = uuid4()
    events = messages(50)
    async with database.storage() as storage, database.storage() as other:
        await storage.set_history(stream_id, events)
        assert await storage.get_history(stream_id) == events  # cached whole
        assert await storage.get_history(stream_id, last=3) == events[-3:]

        await other.save_event(ModelMessage("from the other"), EventContext.for_stream(stream_id))
        assert await storage.get_history(stream_id, last=3) == [*events[-2:], ModelMessage("from the other")]

        rewritten = [*events[:10], ModelMessage("rewritten")]
        await other.set_history(stream_id, rewritten)
        assert await storage.get_history(stream_id, last=3) == rewritten[-3:]
        assert await storage.get_history(stream_id) == rewritten  # cached whole again, at the new revision

        # By hand, as a person with sqlite3 or psql: the newest event's payload becomes the first one's.
        rows = await database.event_rows(stream_id)
        await database.rows("UPDATE events SET payload = ? WHERE id = ?", rows[0][3], rows[-1][0])
        assert await storage.get_history(stream_id, last=2) == [rewritten[-2], events[0]]


async def test_cancelled_calls_leave_windows_whole(database: Database) -> None:
    """A window read cancelled mid-way leaves nothing behind (the next reads are right, on every reader); a
    set_history cancelled mid-way ends whole or not at all, and the window shows one history or the other."""
    stream_id = uuid4()
    old = messages(2_000, "old")
    new = messages(3_000, "new")
    async with database.storage() as storage:
        await storage.set_history(stream_id, old)
        for spins in range(6):  # cancelled after 0..5 turns of the loop: before, during and after the read
            read = asyncio.ensure_future(storage.get_history(stream_id, last=7))
            for _ in range(spins):
                await asyncio.sleep(0)
            read.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await read
        windows = await asyncio.gather(*(storage.get_history(stream_id, last=7) for _ in range(8)))
        assert all(window == old[-7:] for window in windows)

        write = asyncio.ensure_future(storage.set_history(stream_id, new))
        await asyncio.sleep(0.001)
        write.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await write
        assert await storage.get_history(stream_id, last=7) in (old[-7:], new[-7:])  # maybe still under way
        await storage.set_title(stream_id, "after")  # a write: after the cancelled one's end, whole or nothing
        window = await storage.get_history(stream_id, last=7)
        assert window in (old[-7:], new[-7:])
        assert window == list(await storage.get_history(stream_id))[-7:]
    async with database.storage() as fresh:
        assert await fresh.get_history(stream_id, last=7) == window


PG_INDEX = "uq_events_session_position"  # UNIQUE (session, position), as the models name it on PostgreSQL


def _numbered(sql: str) -> str:
    """RECENT_EVENTS with ``?`` for its two parameters, as Database.rows takes them (sid first, then last)."""
    assert sql.index(":sid") < sql.index(":last")
    return sql.replace(":sid", "?").replace(":last", "?")


async def _filled(database: Database, sizes: dict[str, int]) -> dict[str, UUID]:
    streams = {name: uuid4() for name in sizes}
    async with database.storage() as storage:
        for name, size in sizes.items():
            await storage.set_history(streams[name], messages(size, name))
    if database.kind == "postgres":
        # What autovacuum does after so many writes: the session row's old versions (each statement of the fill
        # bumped its revision) are gone from the lookup of its id, which would otherwise visit each of them.
        await database.rows("VACUUM ANALYZE")
    return streams


async def test_a_window_is_an_index_range_not_a_scan_of_the_session(database: Database) -> None:
    streams = await _filled(database, {"long": 20_000, "other": 3_000})
    sid = streams["long"].hex
    if database.kind == "sqlite":
        plan = [
            row[3] for row in await database.rows("EXPLAIN QUERY PLAN " + _numbered(queries.RECENT_EVENTS), sid, 50)
        ]
        # The events searched through the unique index, in its order: the only sort is the outer one, of the window.
        assert "SEARCH events USING INDEX sqlite_autoindex_events_1 (session=?)" in plan
        assert not any(step.startswith("SCAN events") for step in plan)
        assert plan.count("USE TEMP B-TREE FOR ORDER BY") == 1 and plan[-1] == "USE TEMP B-TREE FOR ORDER BY"
        assert plan[plan.index("USE TEMP B-TREE FOR ORDER BY") - 1] == "SCAN w"  # the window's 50 rows
    else:
        rows = await database.rows("EXPLAIN (FORMAT JSON) " + _numbered(queries.RECENT_EVENTS), sid, 50)
        nodes = list(_nodes(json.loads(rows[0][0])[0]["Plan"]))
        limit = next(node for node in nodes if node["Node Type"] == "Limit")
        (under,) = [node for node in limit["Plans"] if node["Parent Relationship"] == "Outer"]
        assert (under["Node Type"], under["Scan Direction"]) == ("Index Scan", "Backward")
        assert under["Index Name"] == PG_INDEX
        assert not any(node["Node Type"] == "Seq Scan" and node.get("Relation Name") == "events" for node in nodes)


def _nodes(node: dict[str, Any]) -> Any:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


async def test_a_windows_work_does_not_grow_with_the_history(database: Database) -> None:
    """Counted, not timed: SQLite's virtual machine runs as many steps for the newest 50 of 20,000 events as for
    the newest 50 of 100; PostgreSQL's index scan hands on exactly 50 rows, reading as many pages either way."""
    sizes = {"short": 100, "long": 20_000}
    streams = await _filled(database, sizes)
    work = {}
    for name, stream_id in streams.items():
        if database.kind == "sqlite":
            with contextlib.closing(sqlite3.connect(database.where)) as conn:
                steps = 0

                def count() -> int:
                    nonlocal steps
                    steps += 1
                    return 0

                conn.set_progress_handler(count, 1)
                rows = conn.execute(queries.RECENT_EVENTS, {"sid": stream_id.hex, "last": 50}).fetchall()
                conn.set_progress_handler(None, 1)
            size = sizes[name]
            assert [json.loads(payload)["content"] for _, payload in rows] == [
                f"{name}{i}" for i in range(size - 50, size)
            ]
            work[name] = steps
        else:
            sql = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + _numbered(queries.RECENT_EVENTS)
            plan = json.loads((await database.rows(sql, stream_id.hex, 50))[0][0])[0]["Plan"]
            scan = next(node for node in _nodes(plan) if node.get("Index Name") == PG_INDEX)
            assert scan["Actual Rows"] == 50 and scan["Actual Loops"] == 1
            work[name] = scan["Shared Hit Blocks"] + scan["Shared Read Blocks"]
    # A deeper index (one more level for 200x the rows) costs a page or a few steps more; a scan would cost 200x.
    assert work["long"] <= work["short"] * 1.2 + 2, work


async def test_the_sqlite_cache_serves_windows_only_at_the_revision_read(tmp_path: Any) -> None:
    """SQLite's read cache: a window is cut from the cached history while that is the history on disk (the same
    objects a full read hands out), decoded from the rows once another writer changed it, and a window that is
    the whole history fills the cache as a full read does."""
    db = tmp_path / "agent.db"
    stream_id = uuid4()
    async with SQLiteStorage(db) as storage, SQLiteStorage(db) as other:
        await storage.set_history(stream_id, messages(40))
        full = list(await storage.get_history(stream_id))
        window = await storage.get_history(stream_id, last=4)
        assert window == full[-4:] and all(a is b for a, b in zip(window, full[-4:], strict=True))

        await other.save_event(ModelMessage("m40"), EventContext.for_stream(stream_id))
        window = await storage.get_history(stream_id, last=4)
        assert window == messages(41)[-4:]
        assert window[0] is not full[-3]  # decoded from the rows: the cached history was not the one on disk

        # A window larger than the history is all of it: cached, and the next full read hands out its objects.
        whole = await storage.get_history(stream_id, last=100)
        assert whole == messages(41)
        again = list(await storage.get_history(stream_id))
        assert all(a is b for a, b in zip(again, whole, strict=True))

        # A window smaller than the history is not cached in place of it: set_history still compares the whole.
        await other.set_history(stream_id, messages(41))  # unchanged: no write, same revision
        await storage.get_history(stream_id, last=3)
        await storage.set_history(stream_id, [*again, ModelMessage("m41")])
        assert await storage.get_history(stream_id) == messages(42)
