"""Usage per session and per turn, and retention that runs itself, on SQLite and PostgreSQL alike.

Usage: the tokens a usage event reports are stored beside it (revision 0010) and summed in SQL: ``list``, ``show``,
``stats``, the ``usage`` view and their ``--json`` say the same. Retention: a policy set from the command line is
applied by a storage that is open on the database, with no one running ``prune``; a session a live process (another
process) holds survives it, and ``stats`` said beforehand what would go.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from _support import CHILD_TIMEOUT
from databases import Database
from test_held_sessions import cli, holder_process

from sessionstore import (
    EventContext,
    ModelMessage,
    Tokens,
    TokenUsage,
    UserMessage,
    admin,
    in_session,
    reads,
    records,
)
from sessionstore.backend import Backend, open_backend
from sessionstore.errors import UsageError
from sessionstore.schema.statements import USAGE_PAGE

OLD = "'2025-01-01 00:00:00'"  # a literal either database reads as a time


async def _converse(database: Database) -> str:
    """A session of two turns with a usage event in each, and one before the first user message."""
    stream = uuid4()
    context = EventContext.for_stream(stream)
    async with database.storage() as storage:
        for event in (
            TokenUsage(input_tokens=1, output_tokens=1),  # turn 0: before any user message
            UserMessage("hello"),
            TokenUsage(input_tokens=100, output_tokens=20, cache_read_tokens=80, model="m"),
            ModelMessage("hi"),
            TokenUsage(input_tokens=130, output_tokens=5, reasoning_tokens=3),
            UserMessage("again"),
            TokenUsage(input_tokens=200, output_tokens=40, cache_write_tokens=7),
        ):
            await storage.save_event(event, context)
    return stream.hex


async def test_usage_is_summed_in_sql_per_session_and_turn(database: Database) -> None:
    sid = await _converse(database)
    total = Tokens(input=431, output=66, cache_read=80, cache_write=7, reasoning=3)

    (listed,) = await asyncio.to_thread(lambda: list(records.list_sessions(database.where)))
    assert listed.usage == total
    shown = await asyncio.to_thread(records.read_session, database.where, sid)
    assert shown.usage.tokens == total and shown.usage.events == 4
    assert [(turn, events) for turn, events, _ in shown.usage.turns] == [(0, 1), (1, 2), (2, 1)]
    assert shown.usage.turns[1][2] == Tokens(230, 25, 80, 0, 3)
    assert [e.tokens for e in shown.events if e.type == "user_message"] == [None, None]
    stats = await asyncio.to_thread(records.stats, database.where)
    assert stats.usage.tokens == total

    # The view, as sqlite3 and Datasette users read it.
    rows = await database.rows("SELECT turn, usage_events, input_tokens, total_tokens FROM usage ORDER BY turn")
    assert [tuple(int(v) for v in row) for row in rows] == [(0, 1, 1, 2), (1, 2, 230, 255), (2, 1, 200, 240)]
    # A plain event pays only NULLs.
    nulls = await database.rows("SELECT count(*) FROM events WHERE input_tokens IS NULL AND type <> 'token_usage'")
    assert int(nulls[0][0]) == 3

    listing = json.loads(cli(database, "list", "--json").stdout)
    assert listing[0]["usage"]["total"] == total.total == 497
    showing = json.loads(cli(database, "show", sid, "--json").stdout)
    assert showing["usage"]["turns"][2]["input"] == 200
    assert "tokens   497" in cli(database, "show", sid).stdout
    assert json.loads(cli(database, "stats", "--json").stdout)["usage"]["cache_write"] == 7


async def test_the_total_counts_a_subagents_tokens_once(database: Database) -> None:
    """AG2 records a subagent's spend in the subagent's session and again in its parent's (a ``subtask`` rollup):
    ``stats`` counts the sessions of their own alone, so its total is what ``list`` shows, each token once."""
    parent, child = uuid4(), uuid4()
    async with database.storage() as storage:
        with in_session(parent):
            await storage.save_event(UserMessage("delegate it"), EventContext.for_stream(parent))
            await storage.save_event(TokenUsage(input_tokens=90, output_tokens=10), EventContext.for_stream(child))
            rollup = TokenUsage(input_tokens=90, output_tokens=10, model="subtask")  # the subagent's, again
            await storage.save_event(rollup, EventContext.for_stream(parent))
            await storage.save_event(TokenUsage(input_tokens=1000, output_tokens=35), EventContext.for_stream(parent))
    (listed,) = await asyncio.to_thread(lambda: list(records.list_sessions(database.where)))
    assert listed.session_id == parent.hex and listed.usage == Tokens(input=1090, output=45)
    stats = await asyncio.to_thread(records.stats, database.where)
    assert stats.usage.tokens == Tokens(input=1090, output=45) and stats.usage.events == 2
    assert json.loads(cli(database, "stats", "--json").stdout)["usage"]["total"] == 1135


class Counting:
    """A real connection (a file's, or a server's) that counts the statements it is handed: what a listing costs in
    round trips."""

    def __init__(self, conn: reads.Connection) -> None:
        self.conn, self.statements = conn, 0

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        self.statements += 1
        return self.conn.execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        raise AssertionError("a listing writes nothing")

    @property
    def in_transaction(self) -> bool:
        return self.conn.in_transaction


async def test_a_listing_reads_its_sessions_usage_a_page_at_a_time(database: Database) -> None:
    """Was: each listed session's usage was one more statement (10,000 sessions, 10,001 statements, each a round
    trip on PostgreSQL). Now a page's usage is one statement (``queries.PAGE_USAGE``), for a listing's page
    (``session/list``: the storage's and ACP's) and for the command line's whole listing (one per
    ``USAGE_PAGE`` sessions), each session's tokens its own."""
    async with database.storage():
        pass  # the schema
    count = USAGE_PAGE + 44  # a whole page of ids and a part of the next
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [(f"{n:032x}", database.time(start + timedelta(seconds=n))) for n in range(1, count + 1)]
    columns = "session_id, cwd, additional_directories, mcp_servers, meta, created_at, updated_at, released, revision"
    values = ", ".join(["(?, '/w', '[]', '[]', '{}', ?, ?, ?, 0)"] * count)
    await database.rows(
        f"INSERT INTO sessions ({columns}) VALUES {values}", *(v for sid, at in rows for v in (sid, at, at, False))
    )
    # Every session spends its row id in input tokens; the even ones one more, in a second usage event.
    usage = "INSERT INTO events (session, position, type, payload, created_at, input_tokens, output_tokens) SELECT"
    await database.rows(f"{usage} id, 0, 'token_usage', '{{}}', created_at, id, 1 FROM sessions")
    await database.rows(f"{usage} id, 1, 'token_usage', '{{}}', created_at, 1, 0 FROM sessions WHERE id % 2 = 0")
    ids = {str(sid): int(i) for sid, i in await database.rows("SELECT session_id, id FROM sessions")}
    spent = {sid: Tokens(input=i + (i % 2 == 0), output=1) for sid, i in ids.items()}

    def listings(backend: Backend) -> list[tuple[int, dict[str, Tokens]]]:
        found = []
        with backend.reading() as conn:
            for listing in (
                lambda c: list(reads.iter_sessions(c, where=backend.top_level)),  # list --json: every session
                lambda c: list(reads.iter_sessions(c, where=backend.top_level, limit=5)),  # list -n 5
                lambda c: reads.session_page(c, limit=50, top_level=backend.top_level).sessions,  # session/list
            ):
                counting = Counting(conn)
                listed = listing(counting)
                found.append((counting.statements, {r.session_id: r.usage for r in listed}))
        return found

    backend = open_backend(database.where)
    (whole, every), (short, five), (paged, page) = await asyncio.to_thread(backend.run, listings, backend)
    assert every == spent
    assert len(five) == 5 and len(page) == 50
    assert five.items() <= spent.items() and page.items() <= spent.items()
    assert (whole, short, paged) == (3, 2, 2)  # the sessions, then their usage: USAGE_PAGE at a time


async def test_a_policy_set_by_the_command_line_is_applied_by_a_running_storage(
    database: Database, tmp_path: Path
) -> None:
    """Three old sessions and a recent one; a live process holds one of the old. ``stats`` forecasts two; an open
    storage removes exactly those two, in the background, with no one running prune."""
    old = [await _converse(database) for _ in range(3)]
    recent = await _converse(database)
    await database.rows(f"UPDATE sessions SET updated_at = {OLD} WHERE session_id <> ?", recent)
    held = old[0]

    with holder_process(tmp_path, database, UUID(held)):
        await database.rows(f"UPDATE sessions SET updated_at = {OLD} WHERE session_id = ?", held)  # as old
        # Set once the holder is open: its own storage's next pass is RETENTION_EVERY away.
        assert "retention 30d" in cli(database, "retention", "set", "30d").stdout
        coming = json.loads(cli(database, "stats", "--json").stdout)["retention"]
        assert coming["max_age_seconds"] == 30 * 86400 and coming["due"] == 2
        assert coming["oldest_due"].startswith("2025-01-01")
        assert json.loads(cli(database, "retention", "show", "--json").stdout)["due"] == 2
        assert coming["held"] == 1
        shown = cli(database, "retention").stdout  # no action: show
        assert "  1 session as old is kept: a live process holds it\n" in shown
        assert re.search(r"the next comes due \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\n", shown), shown

        storage = database.storage()
        storage.retention_every = 0.1
        async with storage:
            assert await storage.retention() == timedelta(days=30)
            deadline = time.monotonic() + CHILD_TIMEOUT
            while len(await database.rows("SELECT 1 FROM sessions")) > 2:
                assert time.monotonic() < deadline, "the policy was never applied"
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # passes go on: the held session still stays
        left = {str(row[0]) for row in await database.rows("SELECT session_id FROM sessions")}
        assert left == {held, recent}
        assert json.loads(cli(database, "stats", "--json").stdout)["retention"]["due"] == 0

    assert cli(database, "retention", "off").stdout.strip() == "retention off"
    assert json.loads(cli(database, "stats", "--json").stdout)["retention"] is None


async def test_retention_removes_one_session_per_transaction_and_appends_keep_their_pace(
    database: Database,
) -> None:
    """Many stale sessions go while an agent appends on the same storage: each removal is a short transaction of
    its own, so no append waits for the whole pass."""
    async with database.storage() as storage:
        for _ in range(120):
            await storage.save_event(UserMessage("old words " * 50), EventContext.for_stream(uuid4()))
    await database.rows(f"UPDATE sessions SET updated_at = {OLD}")
    storage = database.storage()
    storage.retention_every = 3600  # the pass below is the only one after the first
    context = EventContext.for_stream(uuid4())
    async with storage:
        await storage.save_event(UserMessage("live"), context)
        await storage.set_retention(timedelta(days=1))
        slowest, started = 0.0, time.monotonic()
        while len(await database.rows("SELECT 1 FROM sessions")) > 1:
            assert time.monotonic() - started < CHILD_TIMEOUT
            began = time.monotonic()
            await storage.save_event(UserMessage("step"), context)
            slowest = max(slowest, time.monotonic() - began)
        assert slowest < 0.25, slowest
        assert len(await storage.get_history(context.stream.id)) > 1


async def test_retention_gives_forks_their_rows_and_leaves_earlier_branches_to_their_session(
    database: Database,
) -> None:
    """Retention deletes as ``delete`` does (revision 0012): a fork of a stale session is given the rows it shared,
    token counts and all, and stays whole; an earlier branch, stale as it may be, goes only with its session. A
    fork's usage is its own events' until then; ``stats`` counts no branch as a session."""
    parent = await _converse(database)  # 7 events, 497 tokens
    live = uuid4()
    async with database.storage() as storage:
        fork = await storage.fork(UUID(parent))
        await storage.save_event(UserMessage("mine"), EventContext.for_stream(fork))
        await storage.set_history(live, [UserMessage(f"m{i}") for i in range(4)])
        await storage.set_history(live, [UserMessage("summary")])  # m0..m3 kept in an earlier branch
    (fork_listed,) = [
        r
        for r in await asyncio.to_thread(lambda: list(records.list_sessions(database.where)))
        if r.session_id == fork.hex
    ]
    assert fork_listed.usage == Tokens()  # the prefix was spent by its parent
    assert (await asyncio.to_thread(records.stats, database.where)).sessions == 3  # the branch is not one
    await database.rows(f"UPDATE sessions SET updated_at = {OLD} WHERE session_id NOT IN (?, ?)", fork.hex, live.hex)

    storage = database.storage()
    storage.retention_every = 0.1
    async with storage:
        await storage.set_retention(timedelta(days=1))
        deadline = time.monotonic() + CHILD_TIMEOUT
        while await database.rows("SELECT 1 FROM sessions WHERE session_id = ?", parent):
            assert time.monotonic() < deadline, "the policy was never applied"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # passes go on: the stale earlier branch stays with its live session
        history = await storage.get_history(fork)
        assert [type(e).__name__ for e in history][-2:] == ["TokenUsage", "UserMessage"] and len(history) == 8
        assert [e.content for e in await storage.get_history(live)] == ["summary"]
    branches = await database.rows("SELECT count(*) FROM sessions WHERE branch_of IS NOT NULL")
    assert int(branches[0][0]) == 1
    (fork_listed,) = await asyncio.to_thread(
        lambda: [r for r in records.list_sessions(database.where) if r.session_id == fork.hex]
    )
    assert fork_listed.usage == Tokens(input=431, output=66, cache_read=80, cache_write=7, reasoning=3)
    assert (await asyncio.to_thread(records.stats, database.where)).sessions == 2


async def test_every_age_refused_gets_one_line_and_changes_nothing(database: Database) -> None:
    """One rule and one message for an age, from the command line (``-3d`` included, which argparse would take for
    an option) and from the library, naming the age as it was written; nothing is changed. ``None`` is off."""
    async with database.storage() as storage:
        await storage.save_event(UserMessage("kept"), EventContext.for_stream(uuid4()))
    assert cli(database, "retention", "set", "1.5D").stdout.startswith("retention 36h:")
    policy = [("retention", str(36 * 3600))]
    for *command, age in (
        ("retention", "set", "-3d"),
        ("retention", "set", "0"),
        ("retention", "set", "0d"),
        ("retention", "set", "0.5s"),
        ("prune", "--older-than", "-3d"),
        ("prune", "--older-than", "soon"),
    ):
        done = cli(database, *command, age)
        shortest = "0s" if command[0] == "prune" else "1s"
        assert (done.returncode, done.stdout) == (1, ""), done
        assert done.stderr == (
            f"sessionstore: error: not an age: {age!r} (a number and a unit, s, m, h, d or w, such as 30d or 1.5h,"
            f" from {shortest} to 999,999,999d)\n"
        )
        assert [tuple(row) for row in await database.rows("SELECT name, value FROM settings")] == policy
        assert len(await database.rows("SELECT 1 FROM sessions")) == 1
    async with database.storage() as storage:
        with pytest.raises(UsageError, match=r"^not an age: -5s \(a number and a unit, .* from 1s to "):
            await storage.set_retention(timedelta(seconds=-5))
        assert await storage.retention() == timedelta(hours=36)
        await storage.set_retention(None)
        assert await storage.retention() is None
    with pytest.raises(UsageError, match=r"^not an age: -3d \("):
        await asyncio.to_thread(admin.prune, database.where, timedelta(days=-3))


async def test_a_setting_edited_by_hand_is_named_in_one_line_and_the_storage_carries_on(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """``UPDATE settings SET value = 'abc'``: ``stats`` and ``retention show`` end in one line naming the setting
    and how to set it again (no traceback), ``check`` says not ok, and an open storage logs one line per value and
    goes on working; ``retention off`` mends it."""
    async with database.storage() as storage:
        await storage.save_event(UserMessage("old"), EventContext.for_stream(uuid4()))
    await database.rows(f"UPDATE sessions SET updated_at = {OLD}")
    assert cli(database, "retention", "set", "30d").returncode == 0
    await database.rows("UPDATE settings SET value = 'abc' WHERE name = 'retention'")
    said = (
        "sessionstore: error: the setting 'retention' (the retention policy) holds 'abc', not a number of seconds"
        " from 1: set it again with `sessionstore retention set 30d` (any age), or remove it with"
        " `sessionstore retention off`\n"
    )
    for command in (["stats"], ["stats", "--json"], ["retention", "show"], ["retention"]):
        done = cli(database, *command)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", said), done
    checked = cli(database, "check")
    assert checked.returncode == 1 and f"setting       {said.removeprefix('sessionstore: error: ')}" in checked.stdout
    report = json.loads(cli(database, "check", "--json").stdout)
    assert report["ok"] is False and report["settings"] == [said.removeprefix("sessionstore: error: ").strip()]

    storage = database.storage()
    storage.retention_every = 0.05
    with caplog.at_level("INFO", logger="sessionstore.durable"):
        async with storage:
            await asyncio.sleep(0.5)  # several passes
            await storage.save_event(UserMessage("still writes"), EventContext.for_stream(uuid4()))
    told = [r for r in caplog.records if "no retention pass" in r.getMessage()]
    assert len(told) == 1 and told[0].exc_info is None and told[0].levelname == "WARNING"
    assert "'abc'" in told[0].getMessage() and not [r for r in caplog.records if r.exc_info]
    assert len(await database.rows("SELECT 1 FROM sessions")) == 2  # nothing removed by a policy it cannot read

    assert cli(database, "retention", "off").stdout == "retention off\n"
    assert cli(database, "stats").returncode == 0 and cli(database, "check").returncode == 0
