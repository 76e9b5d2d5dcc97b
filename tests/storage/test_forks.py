"""Forks and earlier branches (revision 0012) on a real SQLite file and a real PostgreSQL database: a fork shares
its parent's events below its position, appends continue at its length, a rewrite keeps what it replaced as an
earlier branch (unless the store opts out), and deleting a session leaves its forks whole."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import pytest
from databases import Database

from sessionstore import (
    EventContext,
    InvalidForkPositionError,
    SessionStore,
    UserMessage,
)
from sessionstore.errors import NoSuchSessionError


def texts(events: list[Any]) -> list[str]:
    return [event.content for event in events]


async def started(storage: Any, count: int = 5) -> UUID:
    sid = uuid4()
    await storage.set_history(sid, [UserMessage(f"m{i}") for i in range(count)])
    return sid


@pytest.mark.parametrize("at", [0, 2, 5, None])
async def test_a_fork_reads_the_parent_below_its_position_and_appends_after_it(database: Database, at: Any) -> None:
    async with database.storage() as storage:
        parent = await started(storage)
        fork = await storage.fork(parent, at=at)
        upto = 5 if at is None else at
        assert texts(await storage.get_history(fork)) == [f"m{i}" for i in range(upto)]
        await storage.save_event(UserMessage("own"), EventContext.for_stream(fork))
        assert texts(await storage.get_history(fork)) == [*(f"m{i}" for i in range(upto)), "own"]
        assert texts(await storage.get_history(fork, last=2)) == [*(f"m{i}" for i in range(upto)), "own"][-2:]
        assert texts(await storage.get_history(parent)) == [f"m{i}" for i in range(5)]
        # The fork's own rows start at its position: nothing of the parent was copied.
        own = await database.rows(
            "SELECT position FROM events WHERE session = (SELECT id FROM sessions WHERE session_id = ?)", fork.hex
        )
        assert [row[0] for row in own] == [upto]


async def test_a_forks_window_reads_its_newest_events_across_its_segments(database: Database) -> None:
    async with database.storage() as storage:
        parent = await started(storage, 6)
        first = await storage.fork(parent, at=4)
        for text in ("f4", "f5"):
            await storage.save_event(UserMessage(text), EventContext.for_stream(first))
        second = await storage.fork(first, at=5)
        await storage.save_event(UserMessage("s5"), EventContext.for_stream(second))
    whole = ["m0", "m1", "m2", "m3", "f4", "s5"]
    options = {"cache_bytes": 0} if database.kind == "sqlite" else {}
    async with database.storage(**options) as storage:  # no cached history to cut the window from
        for last in range(1, 9):
            assert texts(await storage.get_history(second, last=last)) == whole[-last:], last


async def test_a_fork_of_a_fork_and_a_fork_below_its_parents_position(database: Database) -> None:
    async with database.storage() as storage:
        parent = await started(storage)
        first = await storage.fork(parent, at=3)
        await storage.set_history(first, [*(await storage.get_history(first)), UserMessage("f3"), UserMessage("f4")])
        second = await storage.fork(first, at=4)
        low = await storage.fork(first, at=2)  # below first's position: shares the parent's rows directly
        assert texts(await storage.get_history(second)) == ["m0", "m1", "m2", "f3"]
        assert texts(await storage.get_history(second, last=3)) == ["m1", "m2", "f3"]
        assert texts(await storage.get_history(low)) == ["m0", "m1"]
        record = await storage.load_session(low)
        assert record is not None and record.forked_from == parent.hex and record.forked_at == 2
        record = await storage.load_session(second)
        assert record is not None and record.forked_from == first.hex and record.events == 4


async def test_a_bad_position_or_session_is_refused_and_nothing_is_written(database: Database) -> None:
    async with database.storage() as storage:
        parent = await started(storage, 3)
        for at in (-1, 4, True, "1"):
            with pytest.raises(InvalidForkPositionError):
                await storage.fork(parent, at=at)
        with pytest.raises(NoSuchSessionError):
            await storage.fork(uuid4())
        page = await storage.list_sessions()
        assert [record.session_id for record in page.sessions] == [parent.hex]


async def test_compaction_keeps_the_replaced_events_as_an_earlier_branch(database: Database) -> None:
    async with database.storage() as storage:
        parent = await started(storage)
        fork = await storage.fork(parent, at=4)
        await storage.set_history(parent, [UserMessage("summary")])  # a compaction: the whole prefix replaced
        assert texts(await storage.get_history(parent)) == ["summary"]
        assert texts(await storage.get_history(fork)) == ["m0", "m1", "m2", "m3"]  # its shared rows moved, whole
        branches = await database.rows(
            "SELECT b.session_id, b.forked_at FROM sessions AS b JOIN sessions AS l ON l.id = b.branch_of"
            " WHERE l.session_id = ?",
            parent.hex,
        )
        assert len(branches) == 1 and branches[0][1] == 0
        branch = UUID(hex=branches[0][0])
        assert texts(await storage.get_history(branch)) == [f"m{i}" for i in range(5)]
        # Hidden from listings: the parent and the fork are listed, not the branch.
        page = await storage.list_sessions()
        assert {record.session_id for record in page.sessions} == {parent.hex, fork.hex}
        # Deleting the session deletes its earlier branch; the fork stays whole.
        await storage.drop_history(parent)
        assert await storage.get_history(branch) == []
        assert texts(await storage.get_history(fork)) == ["m0", "m1", "m2", "m3"]
        assert (await storage.load_session(fork)).forked_from is None  # type: ignore[union-attr]


async def test_a_rewrite_into_a_forks_shared_prefix_keeps_the_fork_whole(database: Database) -> None:
    async with database.storage() as storage:
        parent = await started(storage)
        fork = await storage.fork(parent, at=3)
        await storage.save_event(UserMessage("f3"), EventContext.for_stream(fork))
        grandchild = await storage.fork(fork)
        await storage.set_history(fork, [UserMessage("m0"), UserMessage("new")])
        assert texts(await storage.get_history(fork)) == ["m0", "new"]
        assert texts(await storage.get_history(grandchild)) == ["m0", "m1", "m2", "f3"]
        assert texts(await storage.get_history(parent)) == [f"m{i}" for i in range(5)]
        await storage.save_event(UserMessage("more"), EventContext.for_stream(fork))
        assert texts(await storage.get_history(fork)) == ["m0", "new", "more"]


async def test_without_keep_past_replaced_events_are_deleted_unless_a_fork_reads_them(database: Database) -> None:
    async with database.storage(keep_past=False) as storage:
        lone = await started(storage)
        await storage.set_history(lone, [UserMessage("summary")])
        parent = await started(storage)
        fork = await storage.fork(parent, at=2)
        await storage.set_history(parent, [UserMessage("summary")])
        assert texts(await storage.get_history(fork)) == ["m0", "m1"]
    count = await database.rows("SELECT count(*) FROM sessions WHERE branch_of IS NOT NULL")
    assert count[0][0] == 1  # the fork's rows, kept for it; the lone session's past is gone
    events = await database.rows("SELECT count(*) FROM events")
    assert events[0][0] == 1 + 1 + 5  # two summaries and the parent's five rows the fork reads


async def test_the_registry_forks_a_live_session(database: Database) -> None:
    async with database.storage() as storage:
        store = SessionStore(storage=storage, retain_history=True)
        session = await store.create(cwd="/work")
        async with session.turn():
            await store.stream(session).send(UserMessage("hello"))
            await store.stream(session).send(UserMessage("again"))
        fork = await store.fork(session, at=1)
        assert fork.stream_id != session.stream_id
        assert texts(list(await storage.get_history(fork.stream_id))) == ["hello"]
        record = await storage.load_session(fork.stream_id)
        assert record is not None and record.forked_from == session.session_id and record.cwd == "/work"
        await store.aclose()


def test_the_fork_command_prints_the_new_id_and_list_shows_where_it_came_from(tmp_path: Any) -> None:
    import asyncio
    import json
    import shutil
    import subprocess

    from sessionstore import SQLiteStorage

    db = tmp_path / "agent.db"

    async def write() -> UUID:
        async with SQLiteStorage(db) as storage:
            return await started(storage, 4)

    parent = asyncio.run(write())
    script = shutil.which("sessionstore")
    assert script is not None
    run = [script, "fork", parent.hex[:8], "--db", str(db)]
    new = subprocess.run([*run, "--at", "2"], capture_output=True, text=True, check=True).stdout.strip()
    assert len(new) == 32 and new != parent.hex
    shown = json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True, check=True).stdout)
    assert shown["forked_from"] == parent.hex and shown["forked_at"] == 4 and shown["events"] == 4
    listed = json.loads(
        subprocess.run([script, "list", "--json", "--db", str(db)], capture_output=True, text=True, check=True).stdout
    )
    by_id = {entry["session_id"]: entry for entry in listed}
    assert by_id[new]["forked_from"] == parent.hex and by_id[new]["forked_at"] == 2 and by_id[new]["events"] == 2
    table = subprocess.run([script, "list", "--db", str(db)], capture_output=True, text=True, check=True).stdout
    assert f"(fork of {parent.hex[:12]} at 2)" in table
    shown = subprocess.run([script, "show", new, "--db", str(db)], capture_output=True, text=True, check=True).stdout
    assert f"forked   from {parent.hex} at event 2" in shown and "m1" in shown
    refused = subprocess.run([*run, "--at", "9"], capture_output=True, text=True)
    assert refused.returncode != 0 and "forked at 0 to 4" in refused.stderr


async def test_a_held_session_can_be_forked_elsewhere_and_deleting_a_fork_leaves_its_parent(database: Database) -> None:
    from sessionstore import SessionHeldError

    async with database.storage() as holder, database.storage() as other:
        parent = await started(holder, 4)
        await holder.hold(parent)
        fork = await other.fork(parent, at=2)  # the parent is read, not written: allowed while held elsewhere
        assert texts(await other.get_history(fork)) == ["m0", "m1"]
        with pytest.raises(SessionHeldError):
            await other.set_history(parent, [UserMessage("not yours")])
        await other.drop_history(fork)
        assert await other.get_history(fork) == []
        assert texts(await holder.get_history(parent)) == [f"m{i}" for i in range(4)]
        await holder.let_go(parent)


async def test_a_storage_that_cannot_fork_says_so() -> None:
    from sessionstore import MemoryStorage, StorageError

    store = SessionStore(storage=MemoryStorage())
    session = await store.create()
    with pytest.raises(StorageError, match="cannot fork"):
        await store.fork(session)
    await store.aclose()
