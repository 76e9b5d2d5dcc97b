"""Revision 0012 (forks share their parent's events, rewrites keep earlier branches) on a SQLite file and a
PostgreSQL database: forked and rewritten through a storage at head, down to 0011 (each fork and earlier branch
whole as a session of its own, nothing deleted), and up again. (Up from 0011 with sessions in place: the upgrade
tests, with ``migration_data.fill_forked``.)"""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID, uuid4

from databases import Database

from sessionstore import UserMessage, migrate
from sessionstore.schema.revisions import HEAD


def test_0012_goes_down_with_every_fork_and_branch_whole_and_up_again(database: Database) -> None:
    assert HEAD >= "0012"  # down through every later revision too
    parent = uuid4()

    async def fork_and_compact() -> tuple[UUID, UUID]:
        async with database.storage() as storage:
            await storage.set_history(parent, [UserMessage(f"m{i}") for i in range(4)])
            fork = await storage.fork(parent, at=3)
            await storage.set_history(parent, [UserMessage("summary")])  # an earlier branch holds m0..m3
        found = await database.rows("SELECT session_id FROM sessions WHERE branch_of IS NOT NULL")
        return fork, UUID(hex=found[0][0])

    fork, branch = asyncio.run(fork_and_compact())
    unguarded = (
        "SELECT relname FROM pg_class WHERE relname = 'session_overview'"
        " AND NOT coalesce('security_invoker=true' = ANY(reloptions), false)"
    )
    if database.kind == "postgres":  # made anew by 0012, the view still runs as its reader (row-level security)
        assert asyncio.run(database.rows(unguarded)) == []
    migrate.downgrade(database.where, "0011")
    assert migrate.current(database.where) == "0011"
    if database.kind == "postgres":  # and so does 0011's, made again by the downgrade
        assert asyncio.run(database.rows(unguarded)) == []

    async def positions(sid: UUID) -> list[Any]:
        sql = "SELECT position FROM events WHERE session = (SELECT id FROM sessions WHERE session_id = ?)"
        return sorted(row[0] for row in await database.rows(sql, sid.hex))

    assert asyncio.run(positions(fork)) == [0, 1, 2]
    assert asyncio.run(positions(branch)) == [0, 1, 2, 3]
    assert asyncio.run(positions(parent)) == [0]
    migrate.upgrade(database.where)

    async def read() -> None:
        async with database.storage() as storage:
            assert [e.content for e in await storage.get_history(fork)] == ["m0", "m1", "m2"]
            assert [e.content for e in await storage.get_history(parent)] == ["summary"]
            record = await storage.load_session(fork)
            assert record is not None and record.forked_from is None and record.events == 3

    asyncio.run(read())
