"""End to end with real processes: an ACP client drives agent processes over stdio, kills them, starts new ones.

The agent is ``_acp_agent.py``: ``DurableACPAgent(...).run_stdio()`` with the
scripted model and two tools. The client is the SDK's own client connection.
What the model was given is read from the scripted model's recording; what was
stored is read back with the installed ``sessionstore`` command and the real
``sqlite3`` shell.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from _acp_agent import lookup
from _acp_client import Files, agent_process, rows, sessionstore_cli, sqlite3_shell, within
from ag2.acp.executor import CANCELLED_TOOL_RESULT
from ag2.events import ToolResultsEvent
from ag2.history import unanswered_tool_calls

from sessionstore import SQLiteStorage
from sessionstore.ag2 import AG2Codec

PROJECT = "/home/me/orchard"
FIRST = "What is a kumquat?"
SECOND = "And a loquat?"
THIRD = "Which one is sweeter?"
FOURTH = "Thanks, that is all."
ANSWER_1 = "Kumquats make a fine marmalade."
ANSWER_2 = "A loquat is sweet and comes from the rose family."
ANSWER_3 = "The loquat is the sweeter one."
ANSWER_4 = "Glad to help with the orchard."


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


def texts(updates: list[Any]) -> list[str]:
    return [u.content.text for u in updates]


def conversation(recorded: dict[str, Any]) -> list[tuple[str, Any]]:
    """What one model call was given, as (role, text or tool results), in order."""
    out: list[tuple[str, Any]] = []
    for message in recorded["messages"]:
        role = message.get("role")
        if role in ("user", "assistant"):
            out.append((role, message["text"] if message["text"] is not None else message["tool_calls"]))
        elif role == "tool":
            out.append((role, message["results"]))
    return out


async def stored_history(db: Path, session_id: str) -> list[Any]:
    """The session's AG2 events as any later process reads them from the file."""
    async with SQLiteStorage(db, codec=AG2Codec()) as storage:
        return list(await storage.get_history(UUID(hex=session_id)))


def hygiene(files: Files) -> None:
    log = files.stderr()
    assert "Task was destroyed" not in log, log
    assert "was never awaited" not in log, log


async def test_sessions_survive_sigkill_and_are_listed_loaded_resumed_and_closed(files: Files) -> None:
    files.script_steps(
        [
            {"tool": "lookup", "arguments": {"word": "kumquat"}, "id": "call_k"},
            {"say": ANSWER_1},
            {"say": ANSWER_2},
            {"say": ANSWER_3},
            {"say": ANSWER_4},
        ]
    )
    glossary = lookup("kumquat")

    # -- process 1: a new session, two prompts (the first calls a tool), then SIGKILL.
    async with agent_process(files) as agent:
        sid = await agent.new(PROJECT, additional_directories=["/home/me/lib"], client="e2e")
        assert (await agent.say(sid, FIRST)).stop_reason == "end_turn"
        assert (await agent.say(sid, SECOND)).stop_reason == "end_turn"
        live = agent.recorder.kinds(sid)
        assert live == [
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
            "session_info_update",
            "agent_message_chunk",
            "session_info_update",
        ]
        turn_end = agent.recorder.of(sid, "session_info_update")[-1].updated_at
        await agent.kill()
    assert agent.process.returncode == -9
    assert rows(files.db, "SELECT released FROM sessions WHERE session_id = ?", sid) == [(0,)]  # nobody let go

    # -- process 2: list, load (replay), a prompt that sees the whole stored conversation.
    async with agent_process(files) as agent:
        listed = await within(agent.conn.list_sessions())
        assert [s.session_id for s in listed.sessions] == [sid]
        info = listed.sessions[0]
        assert info.cwd == PROJECT
        assert info.additional_directories == ["/home/me/lib"]
        assert info.title == FIRST
        assert info.updated_at == turn_end  # exact: stamped when the second prompt ended
        assert datetime.fromisoformat(info.updated_at or "").tzinfo == UTC
        assert (await within(agent.conn.list_sessions(cwd="/elsewhere"))).sessions == []

        await within(agent.conn.load_session(cwd=PROJECT, session_id=sid))
        await agent.settle(sid, 6)
        replay = agent.recorder.kinds(sid)
        assert replay == [
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
            "user_message_chunk",
            "agent_message_chunk",
        ]
        assert texts(agent.recorder.of(sid, "user_message_chunk")) == [FIRST, SECOND]
        assert texts(agent.recorder.of(sid, "agent_message_chunk")) == [ANSWER_1, ANSWER_2]
        (call,) = agent.recorder.of(sid, "tool_call")
        assert (call.tool_call_id, call.title, call.raw_input) == ("call_k", "lookup", {"word": "kumquat"})
        (result,) = agent.recorder.of(sid, "tool_call_update")
        assert result.tool_call_id == "call_k" and result.status == "completed"
        assert [c.content.text for c in result.content] == [glossary]
        # Loading is not activity: the listed time is still the end of the last turn.
        assert (await within(agent.conn.list_sessions())).sessions[0].updated_at == turn_end

        agent.recorder.clear()
        assert (await agent.say(sid, THIRD)).stop_reason == "end_turn"
        assert texts(agent.recorder.of(sid, "agent_message_chunk")) == [ANSWER_3]
        seen = files.recording_lines()[3]
        assert conversation(seen) == [
            ("user", FIRST),
            ("assistant", [{"id": "call_k", "name": "lookup", "arguments": {"word": "kumquat"}}]),
            ("tool", [{"id": "call_k", "name": "lookup", "text": glossary}]),
            ("assistant", ANSWER_1),
            ("user", SECOND),
            ("assistant", ANSWER_2),
            ("user", THIRD),
        ]
        assert seen["tools"] == ["lookup", "wait_for_gate"]

    # -- process 3: resume (no replay), a prompt, close.
    async with agent_process(files) as agent:
        await within(agent.conn.resume_session(session_id=sid, cwd=PROJECT))
        await asyncio.sleep(0.1)
        assert agent.recorder.updates == []
        assert rows(files.db, "SELECT released FROM sessions WHERE session_id = ?", sid) == [(0,)]
        assert (await agent.say(sid, FOURTH)).stop_reason == "end_turn"
        assert [role for role, _ in conversation(files.recording_lines()[4])] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
        ]
        await within(agent.conn.close_session(session_id=sid))
        assert rows(files.db, "SELECT released FROM sessions WHERE session_id = ?", sid) == [(1,)]
    hygiene(files)

    # -- the file, read by the installed command and by the sqlite3 shell.
    db = str(files.db)
    listing = sessionstore_cli("list", "--db", db).stdout
    assert sid[:12] in listing and FIRST in listing and PROJECT in listing

    shown = sessionstore_cli("show", sid[:8], "--db", db).stdout
    for text in (FIRST, SECOND, THIRD, FOURTH, ANSWER_1, ANSWER_2, ANSWER_3, ANSWER_4):
        assert shown.count(text) == 1 + (text == FIRST), (text, shown)  # the first prompt is the title too
    assert shown.count("lookup(") == 1, shown  # the tool call once, though AG2 stores it three times
    assert shown.count("glossary entry 7") == 1, shown  # its result once, though stored twice
    transcript_lines = [line for line in shown.splitlines() if any(t in line for t in (ANSWER_1, FIRST, "lookup("))]
    assert any("user" in line and FIRST in line for line in transcript_lines), shown
    assert any("assistant" in line and ANSWER_1 in line for line in transcript_lines), shown

    for word, where in (("loquat", SECOND), ("marmalade", ANSWER_1), ("glossary", glossary)):
        found = sessionstore_cli("search", word, "--db", db).stdout
        assert sid[:12] in found, (word, found)
        assert word in found.lower(), (word, where, found)

    roles = sqlite3_shell(
        files.db,
        f"SELECT role || '|' || text FROM transcript WHERE session_id = '{sid}' AND role IS NOT NULL ORDER BY position",
    ).splitlines()
    assert [line.split("|", 1)[0] for line in roles] == [
        "user",
        "tool_call",
        "tool",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert roles[0] == f"user|{FIRST}"
    assert "lookup" in roles[1] and "kumquat" in roles[1]
    assert roles[2] == f"tool|{glossary}"
    assert roles[3] == f"assistant|{ANSWER_1}"
    overview = sqlite3_shell(
        files.db, f"SELECT title, cwd, released, events > 0 FROM session_overview WHERE session_id = '{sid}'"
    )
    assert overview == f"{FIRST}|{PROJECT}|1|1"
    matches = sqlite3_shell(
        files.db,
        "SELECT DISTINCT s.session_id FROM events_fts JOIN events e ON e.id = events_fts.rowid"
        " JOIN sessions s ON s.id = e.session WHERE events_fts MATCH 'glossary'",
    )
    assert matches == sid


async def test_a_process_killed_inside_a_tool_call_comes_back_repaired(files: Files) -> None:
    files.script_steps(
        [
            {"tool": "wait_for_gate", "arguments": {"label": "harvest"}, "id": "call_g"},
            {"say": "The harvest check did not finish; shall I run it again?"},
        ]
    )
    async with agent_process(files) as agent:
        sid = await agent.new(PROJECT)
        prompt = asyncio.ensure_future(agent.say(sid, "Run the harvest check."))
        started = files.gate / "started"
        for _ in range(300):
            if started.exists() or prompt.done():
                break
            await asyncio.sleep(0.05)
        assert started.read_text() == "harvest", files.stderr()
        await agent.kill()  # the tool is still waiting on its gate
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            await within(prompt)
        assert prompt.done()
        assert agent.recorder.kinds(sid) == ["tool_call"]
    assert not (files.gate / "open").exists()
    assert unanswered_tool_calls(await stored_history(files.db, sid)) == {"call_g"}  # as the kill left it

    async with agent_process(files) as agent:
        assert [s.session_id for s in (await within(agent.conn.list_sessions())).sessions] == [sid]
        await within(agent.conn.load_session(cwd=PROJECT, session_id=sid))
        await agent.settle(sid, 3)
        assert agent.recorder.kinds(sid) == ["user_message_chunk", "tool_call", "tool_call_update"]
        (result,) = agent.recorder.of(sid, "tool_call_update")
        assert result.tool_call_id == "call_g"
        assert [c.content.text for c in result.content] == [CANCELLED_TOOL_RESULT]

        # The stored history was repaired (AG2 heals on load), as a later process reads it.
        repaired = await stored_history(files.db, sid)
        assert unanswered_tool_calls(repaired) == set()
        assert isinstance(repaired[-1], ToolResultsEvent)
        assert [(r.parent_id, r.result.parts[0].content) for r in repaired[-1].results] == [
            ("call_g", CANCELLED_TOOL_RESULT)
        ]

        agent.recorder.clear()
        assert (await agent.say(sid, "What happened?")).stop_reason == "end_turn"
        assert texts(agent.recorder.of(sid, "agent_message_chunk")) == [
            "The harvest check did not finish; shall I run it again?"
        ]
        assert conversation(files.recording_lines()[1]) == [
            ("user", "Run the harvest check."),
            ("assistant", [{"id": "call_g", "name": "wait_for_gate", "arguments": {"label": "harvest"}}]),
            ("tool", [{"id": "call_g", "name": "wait_for_gate", "text": CANCELLED_TOOL_RESULT}]),
            ("user", "What happened?"),
        ]
    shown = sessionstore_cli("show", sid, "--db", str(files.db)).stdout
    assert shown.count("wait_for_gate(") == 1, shown
    # The stand-in result lives only inside AG2's ToolResultsEvent (AG2's repair writes no loose result): the
    # codec tells it there, so the repaired transcript reads whole, call and result once each.
    assert shown.count(CANCELLED_TOOL_RESULT) == 1, shown
    transcript = rows(files.db, "SELECT role, text FROM transcript WHERE session_id = ? ORDER BY position", sid)
    assert [role for role, _ in transcript][-4:] == ["tool_call", "tool", "user", "assistant"]
    assert transcript[-3][1] == CANCELLED_TOOL_RESULT
    hygiene(files)


async def test_sigterm_lets_the_sessions_go_before_the_process_exits(files: Files) -> None:
    files.script_steps([{"say": "Noted."}])
    async with agent_process(files) as agent:
        sid = await agent.new(PROJECT)
        await agent.say(sid, "Remember the fig tree.")
        before = rows(files.db, "SELECT released, updated_at FROM sessions WHERE session_id = ?", sid)
        assert before[0][0] == 0
        assert await agent.terminate() == 0
    assert rows(files.db, "SELECT released, updated_at FROM sessions WHERE session_id = ?", sid) == [(1, before[0][1])]
    hygiene(files)


async def test_without_retention_a_kill_keeps_and_a_disconnect_deletes(files: Files) -> None:
    files.script_steps([{"say": "Noted."}])
    async with agent_process(files, "--no-retain") as agent:
        sid = await agent.new(PROJECT)
        await agent.say(sid, "Remember the plum tree.")
        await agent.kill()
    # Killed: nothing got to delete anything, and a later process can load it.
    assert rows(files.db, "SELECT session_id, released FROM sessions") == [(sid, 0)]
    async with agent_process(files, "--no-retain") as agent:
        await within(agent.conn.load_session(cwd=PROJECT, session_id=sid))
        await agent.settle(sid, 2)
        assert texts(agent.recorder.of(sid, "user_message_chunk")) == ["Remember the plum tree."]
    # The client closed the connection (stdin EOF) and the process ended: without retention, the session is gone.
    assert agent.process.returncode == 0
    assert rows(files.db, "SELECT COUNT(*) FROM sessions") == [(0,)]
    assert rows(files.db, "SELECT COUNT(*) FROM events") == [(0,)]
    hygiene(files)
