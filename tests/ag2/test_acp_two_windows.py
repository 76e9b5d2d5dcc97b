"""Two agent processes on one file (two editor windows on the default database).

Was: window B's ``session/load`` of a session whose turn was running in window A "repaired" it, writing "The turn
was cancelled before this tool finished." as the tool's result; then A wrote the real one. The transcript held two
results for one call, and a real provider refused every later turn. Now A holds the session while it has it live:
B is told where it is open and writes nothing; once A lets it go, or dies, B loads it (and repairs what A left).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import acp
import pytest
from _acp_client import Files, agent_process, sessionstore_cli, within
from ag2.acp.executor import CANCELLED_TOOL_RESULT
from ag2.events import ToolResultEvent, ToolResultsEvent
from ag2.history import unanswered_tool_calls

from sessionstore import SQLiteStorage
from sessionstore.ag2 import AG2Codec

PROJECT = "/home/me/orchard"
INVALID_PARAMS = -32602


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


async def history(db: Path, session_id: str) -> list[object]:
    from uuid import UUID

    async with SQLiteStorage(db, codec=AG2Codec()) as storage:
        return list(await storage.get_history(UUID(session_id)))


def rows(db: Path) -> list[tuple[object, ...]]:
    """Every session row as ``sqlite3`` shows it."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT * FROM sessions ORDER BY id").fetchall()


def results_of(events: list[object], call_id: str) -> list[str]:
    """Every result stored for ``call_id``: the loose ones and those inside a batch."""
    loose = [e for e in events if isinstance(e, ToolResultEvent) and e.parent_id == call_id]
    batched = [r for e in events if isinstance(e, ToolResultsEvent) for r in e.results if r.parent_id == call_id]
    return [r.result.parts[0].content for r in (*loose, *batched)]


async def wait_for(path: Path) -> None:
    for _ in range(600):
        if path.exists():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


async def test_a_second_window_is_told_where_the_session_is_open_and_writes_nothing(files: Files) -> None:
    files.script_steps(
        [
            {"tool": "wait_for_gate", "arguments": {"label": "harvest"}, "id": "call_g"},
            {"say": "The harvest check is done."},
        ]
    )
    async with agent_process(files) as window_a, agent_process(files) as window_b:
        sid = await window_a.new(PROJECT)
        prompt = asyncio.ensure_future(window_a.say(sid, "Run the harvest check."))
        await wait_for(files.gate / "started")  # A's turn is inside the tool call

        for attempt in (
            window_b.conn.load_session(cwd=PROJECT, session_id=sid),
            window_b.conn.resume_session(cwd=PROJECT, session_id=sid),
        ):
            with pytest.raises(acp.RequestError) as refused:
                await within(attempt)
            reason = str(refused.value.data)
            assert f"held by pid {window_a.process.pid} on " in reason, reason
        with pytest.raises(acp.RequestError):
            await within(window_b.conn.close_session(session_id=sid))  # not B's to close
        assert unanswered_tool_calls(await history(files.db, sid)) == {"call_g"}  # B repaired nothing

        (files.gate / "open").touch()
        assert (await within(prompt)).stop_reason == "end_turn"
        assert results_of(await history(files.db, sid), "call_g") == ["gate opened for harvest"] * 2  # loose + batch

        # A lets it go (session/close, retained): B loads it, and nothing is repaired twice.
        await within(window_a.conn.close_session(session_id=sid))
        await within(window_b.conn.load_session(cwd=PROJECT, session_id=sid))
    events = await history(files.db, sid)
    assert unanswered_tool_calls(events) == set()
    assert CANCELLED_TOOL_RESULT not in results_of(events, "call_g")


async def test_a_window_killed_mid_turn_is_taken_over_at_once(files: Files) -> None:
    files.script_steps([{"tool": "wait_for_gate", "arguments": {"label": "harvest"}, "id": "call_g"}])
    async with agent_process(files) as window_b:
        async with agent_process(files) as window_a:
            sid = await window_a.new(PROJECT)
            prompt = asyncio.ensure_future(window_a.say(sid, "Run the harvest check."))
            await wait_for(files.gate / "started")
            await window_a.kill()  # no letting go: the lock dies with the process
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await within(prompt)
        shown = sessionstore_cli("show", sid, "--db", str(files.db)).stdout
        assert "not held" in shown, shown
        await within(window_b.conn.load_session(cwd=PROJECT, session_id=sid))  # repaired by its new holder
    assert results_of(await history(files.db, sid), "call_g") == [CANCELLED_TOOL_RESULT]


async def test_a_load_refused_for_its_arguments_holds_nothing(files: Files) -> None:
    """Was: window B's load with a cwd no file can store (a lone surrogate, as ``os.fsdecode`` makes of bytes
    that are not UTF-8) was answered "Internal error", and B kept holding the session it had not loaded: window A
    was refused it until B exited."""
    files.script_steps([{"say": "Fine."}])
    async with agent_process(files) as window_a, agent_process(files) as window_b:
        sid = await window_a.new(PROJECT)
        await window_a.say(sid, "Hello")
        await within(window_a.conn.close_session(session_id=sid))  # let go: anyone may load it now
        before = rows(files.db)
        for attempt in (
            window_b.conn.load_session(cwd="/home/me/\udc80rchard", session_id=sid),
            window_b.conn.resume_session(cwd="/home/me/\udc80rchard", session_id=sid),
            window_b.conn.fork_session(cwd="/home/me/\udc80rchard", session_id=sid),  # was: a fork left behind
            window_b.conn.list_sessions(cwd="/home/me/\udc80rchard"),
        ):
            with pytest.raises(acp.RequestError) as refused:
                await within(attempt)
            assert refused.value.code == INVALID_PARAMS, refused.value
            assert "cwd" in str(refused.value.data), refused.value.data
        assert rows(files.db) == before  # nothing written
        shown = sessionstore_cli("show", sid, "--db", str(files.db)).stdout
        assert "held by" not in shown, shown
        await within(window_a.conn.load_session(cwd=PROJECT, session_id=sid))  # was: held by pid ... (window B)
