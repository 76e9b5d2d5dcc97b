"""AG2's own subagents stored under the session that started them (issue 19), with real AG2 agents and tools.

AG2 1.2.1 runs each tool call in a task of its own (``ToolExecutor.execute_tools``: ``asyncio.ensure_future``);
``run_task`` runs the subagent's ``ask`` inline there, so the subagent's ``save_event`` runs in that tool task;
``background_agent_tool`` runs ``run_task`` in a task ``spawn_background`` creates (``asyncio.create_task``), so
there. Each is started from the turn's task, and ``run_task`` hands the subagent a copy of its parent's
dependencies. The first tests check exactly that against the installed AG2; the last two run DurableACPAgent,
driven by the SDK's client, with AG2's ``subagent_tool`` nested two deep: in a real process on a file, read back
with the ``sessionstore`` command and the ``sqlite3`` shell, and in this process on a PostgreSQL server, read
back with the ``sessionstore`` command.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from _acp_agent import consult_advisor, researcher_tool
from _acp_client import Files, agent_process, rows, served, sessionstore_cli, sqlite3_shell, within
from _acp_model import ScriptedConfig, write_script
from ag2 import Agent, Context
from ag2.stream import MemoryStream
from ag2.tools.subagents import background_agent_tool, subagent_tool

from sessionstore import SQLiteStorage, in_session, records
from sessionstore.ag2 import AG2Codec, DurableACPAgent
from sessionstore.postgres import PostgresStorage

PROJECT = "/home/me/orchard"


def scripted(root: Path, name: str, steps: list[dict[str, Any]]) -> ScriptedConfig:
    return ScriptedConfig(write_script(root / f"{name}.script.json", steps), root / f"{name}.recording.jsonl")


class WhereWritten(SQLiteStorage):
    """The storage AG2 writes to, noting the task each stream's first event was saved in."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, codec=AG2Codec())
        self.first_write: dict[UUID, asyncio.Task[Any] | None] = {}

    async def save_event(self, event: Any, context: Any) -> None:
        self.first_write.setdefault(context.stream.id, asyncio.current_task())
        await super().save_event(event, context)


def titled(records: list[Any]) -> dict[str, Any]:
    return {record.title: record for record in records}


async def test_nested_and_background_subagents_are_stored_under_their_parents(tmp_path: Path) -> None:
    checker = Agent("checker", "You check.", config=scripted(tmp_path, "checker", [{"say": "Census confirmed"}]))
    researcher = Agent(
        "researcher",
        "You research.",
        config=scripted(
            tmp_path,
            "researcher",
            [
                {"tool": "task_checker", "arguments": {"objective": "Double-check the quokka census"}, "id": "r1"},
                {"say": "There are 12 kumquat trees"},
            ],
        ),
        tools=[subagent_tool(checker, description="Checks a fact.")],
    )
    scout = Agent("scout", "You scout.", config=scripted(tmp_path, "scout", [{"say": "The oldest tree is 80"}]))
    planner = Agent(
        "planner",
        "You plan.",
        config=scripted(
            tmp_path,
            "planner",
            [
                {"tool": "background_task_scout", "arguments": {"objective": "Find the oldest tree"}, "id": "p1"},
                {"tool": "task_researcher", "arguments": {"objective": "Count the kumquat trees"}, "id": "p2"},
                *[{"say": "Survey planned"}] * 3,  # however the scout's result is delivered (merged or a turn)
            ],
        ),
        tools=[
            subagent_tool(researcher, description="Researches."),
            background_agent_tool(scout, description="Scouts in the background."),
        ],
    )
    async with WhereWritten(tmp_path / "agent.db") as storage:
        stream = MemoryStream(storage=storage)
        reply = await planner.ask("Plan the orchard survey", stream=stream)  # no session set: AG2's own wiring
        assert reply.body == "Survey planned"
        assert not stream._background_tasks  # the scout has finished

        sessions = await storage.list_sessions()
        assert [r.session_id for r in sessions.sessions] == [stream.id.hex]
        # Each as the command line reads it (titled by its first prompt: the objective it was given).
        by_title = titled([records.read_session(storage.path, s.hex).record for s in storage.first_write])
        assert set(by_title) == {
            "Plan the orchard survey",
            "Find the oldest tree",
            "Count the kumquat trees",
            "Double-check the quokka census",
        }
        assert by_title["Find the oldest tree"].parent_id == stream.id.hex
        assert by_title["Count the kumquat trees"].parent_id == stream.id.hex
        assert by_title["Double-check the quokka census"].parent_id == by_title["Count the kumquat trees"].session_id

        # Where each was written: every subagent in a task of its own, none in the task that asked.
        tasks = {record.title: storage.first_write[record.stream_id] for record in by_title.values()}
        here = asyncio.current_task()
        subagents = ("Find the oldest tree", "Count the kumquat trees", "Double-check the quokka census")
        assert all(tasks[title] not in (here, tasks["Plan the orchard survey"]) for title in subagents)
        assert len({tasks[title] for title in subagents}) == 3

        await storage.drop_history(stream.id)  # the conversation is over: every subagent goes with it
        assert all([await storage.load_session(stream_id) is None for stream_id in storage.first_write])


async def test_a_stream_a_tool_opens_without_the_turns_dependencies_belongs_to_the_session_whose_turn_runs(
    tmp_path: Path,
) -> None:
    """A tool that runs another agent on a stream of its own, handing it nothing: only the session of the turn
    (inherited by the tool's task) tells where it belongs; without one it is a session of its own."""
    advisor = Agent("advisor", "You advise.", config=scripted(tmp_path, "advisor", [{"say": "Plant more loquats"}] * 2))

    async def consult(ctx: Context, question: str) -> str:
        """Ask the advisor."""
        reply = await advisor.ask(question, stream=MemoryStream(storage=ctx.stream.history.storage))
        return reply.body or ""

    steps = [{"tool": "consult", "arguments": {"question": "What should we plant?"}, "id": "c1"}, {"say": "Done"}]
    async with SQLiteStorage(tmp_path / "agent.db", codec=AG2Codec()) as storage:
        in_turn = MemoryStream(storage=storage)
        planner = Agent("planner", "You plan.", config=scripted(tmp_path, "planner", steps), tools=[consult])
        with in_session(in_turn.id):  # what DurableACPAgent and AgentSession.turn do around a turn
            await planner.ask("Plan the planting", stream=in_turn)
        assert [r.session_id for r in (await storage.list_sessions()).sessions] == [in_turn.id.hex]

        without = MemoryStream(storage=storage)
        planner = Agent("planner", "You plan.", config=scripted(tmp_path, "planner-2", steps), tools=[consult])
        await planner.ask("Plan the planting again", stream=without)
        listed = (await storage.list_sessions()).sessions
        assert len(listed) == 3 and {"What should we plant?"} == {r.title for r in listed} - {
            "Plan the planting",
            "Plan the planting again",
        }


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


def subagent_scripts(files: Files, **scripts: list[dict[str, Any]]) -> None:
    """The scripts of ``_acp_agent.py --subagents``' researcher, checker and advisor, beside the main one."""
    for name, steps in scripts.items():
        write_script(files.script.with_name(f"{name}.script.json"), steps)


def delegation(objective: str, question: str, n: int) -> list[dict[str, Any]]:
    """The main agent's calls: AG2's subagent tool, then the tool that opens a stream with nothing of the turn's."""
    return [
        {"tool": "task_researcher", "arguments": {"objective": objective}, "id": f"research_{n}"},
        {"tool": "consult_advisor", "arguments": {"question": question}, "id": f"advice_{n}"},
    ]


async def test_durable_agent_keeps_real_subagents_under_their_session_end_to_end(files: Files) -> None:
    files.script_steps(
        [
            *delegation("Count the kumquat trees", "Which tree needs pruning?", 1),
            {"say": "The orchard has 12 kumquat trees."},
            *delegation("Count the loquat trees", "Which tree needs water?", 2),
            {"say": "The orchard has 7 loquat trees."},
        ]
    )
    check = [{"tool": "task_checker", "arguments": {"objective": "Double-check the quokka census"}, "id": "chk"}]
    subagent_scripts(
        files,
        researcher=[*check, {"say": "There are 12 kumquat trees"}, *check, {"say": "There are 7 loquat trees"}],
        checker=[{"say": "The quokka census is confirmed"}] * 2,
        advisor=[{"say": "The oldest one"}, {"say": "The youngest one"}],
    )

    # -- retained: session/list, the command line and the file see the session, its subagents under it.
    async with agent_process(files, "--subagents") as agent:
        sid = await agent.new(PROJECT)
        assert (await agent.say(sid, "Plan the orchard survey")).stop_reason == "end_turn"
        listed = await within(agent.conn.list_sessions())
        assert [s.session_id for s in listed.sessions] == [sid]

        assert [
            s["session_id"] for s in json.loads(sessionstore_cli("--db", str(files.db), "list", "--json").stdout)
        ] == [sid]
        tree = json.loads(sessionstore_cli("--db", str(files.db), "show", sid, "--json").stdout)
        research, advice = tree["subagents"]  # oldest first
        assert (research["session"]["title"], research["session"]["parent_id"]) == ("Count the kumquat trees", sid)
        # Opened with nothing of the turn's: under the session all the same, which the prompt ran in.
        assert (advice["session"]["title"], advice["session"]["parent_id"]) == ("Which tree needs pruning?", sid)
        (check_one,) = research["subagents"]
        assert check_one["session"]["title"] == "Double-check the quokka census"
        assert check_one["session"]["parent_id"] == research["session"]["session_id"]
        assert [e["text"] for e in check_one["events"] if e["role"] == "assistant"] == [
            "The quokka census is confirmed"
        ]
        shown = sessionstore_cli("--db", str(files.db), "show", sid).stdout
        assert f"    subagent {research['session']['session_id'][:12]}  Count the kumquat trees" in shown
        hits = json.loads(sessionstore_cli("--db", str(files.db), "search", "quokka", "census", "--json").stdout)
        assert {(h["session_id"], h["parent_id"]) for h in hits} == {
            (check_one["session"]["session_id"], research["session"]["session_id"]),  # its objective and answer
            (research["session"]["session_id"], sid),  # the researcher's call that delegated it
        }
        assert "(subagent of" in sessionstore_cli("--db", str(files.db), "search", "quokka").stdout
        linked = "SELECT count(*) FROM session_overview WHERE parent_id IS NOT NULL;"
        assert sqlite3_shell(files.db, linked) == "3"

        await within(agent.conn.close_session(session_id=sid))  # retained: kept, released, subagents with it
        assert rows(files.db, "SELECT released FROM sessions WHERE session_id = ?", sid) == [(1,)]
        assert sqlite3_shell(files.db, linked) == "3"

    deleted = sessionstore_cli("--db", str(files.db), "delete", sid)
    assert deleted.stdout == f"deleted {sid} and its 3 subagents\n"
    assert sqlite3_shell(files.db, "SELECT count(*) FROM sessions; SELECT count(*) FROM events;") == "0\n0"

    # -- without retention, session/close deletes the session, and its subagents with it.
    async with agent_process(files, "--subagents", "--no-retain") as agent:
        sid = await agent.new(PROJECT)
        assert (await agent.say(sid, "And the loquats?")).stop_reason == "end_turn"
        assert sqlite3_shell(files.db, "SELECT count(*) FROM sessions;") == "4"
        assert [s.session_id for s in (await within(agent.conn.list_sessions())).sessions] == [sid]
        await within(agent.conn.close_session(session_id=sid))
        assert sqlite3_shell(files.db, "SELECT count(*) FROM sessions; SELECT count(*) FROM events;") == "0\n0"
    assert "Traceback" not in files.stderr()


async def test_durable_agent_on_postgresql_keeps_real_subagents_under_their_session(
    files: Files, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on PostgreSQL: DurableACPAgent over a ``PostgresStorage`` (served in this process to the SDK's real
    client), AG2's own subagent tools, and the installed ``sessionstore`` script reading the server back: listed
    with their session only, shown under it, found naming it, pruned and closed away with it."""
    files.script_steps(
        [
            *delegation("Count the kumquat trees", "Which tree needs pruning?", 1),
            {"say": "The orchard has 12 kumquat trees."},
            *delegation("Count the loquat trees", "Which tree needs water?", 2),
            {"say": "The orchard has 7 loquat trees."},
        ]
    )
    check = [{"tool": "task_checker", "arguments": {"objective": "Double-check the quokka census"}, "id": "chk"}]
    subagent_scripts(
        files,
        researcher=[*check, {"say": "There are 12 kumquat trees"}, *check, {"say": "There are 7 loquat trees"}],
        checker=[{"say": "The quokka census is confirmed"}] * 2,
        advisor=[{"say": "The oldest one"}, {"say": "The youngest one"}],
    )
    for name, value in files.env().items():
        monkeypatch.setenv(name, value)

    def orchard() -> Agent:
        return Agent(
            "helper",
            "You answer questions about fruit.",
            config=ScriptedConfig(files.script, files.recording),
            tools=[researcher_tool(), consult_advisor],
        )

    def cli(*args: str) -> str:
        return sessionstore_cli("--db", pg_url, *args).stdout

    async with PostgresStorage(pg_url, codec=AG2Codec()) as storage:
        # -- retained: session/list, the command line and the server see the session, its subagents under it.
        async with served(DurableACPAgent(orchard(), storage)) as client:
            sid = await client.new(PROJECT)
            assert (await client.say(sid, "Plan the orchard survey")).stop_reason == "end_turn"
            assert [s.session_id for s in (await within(client.conn.list_sessions())).sessions] == [sid]
            assert [s["session_id"] for s in json.loads(cli("list", "--json"))] == [sid]
            tree = json.loads(cli("show", sid, "--json"))
            research, advice = tree["subagents"]
            assert (research["session"]["title"], research["session"]["parent_id"]) == ("Count the kumquat trees", sid)
            assert (advice["session"]["title"], advice["session"]["parent_id"]) == ("Which tree needs pruning?", sid)
            (check_one,) = research["subagents"]
            assert check_one["session"]["parent_id"] == research["session"]["session_id"]
            assert f"    subagent {research['session']['session_id'][:12]}  Count the kumquat trees" in cli("show", sid)
            hits = json.loads(cli("search", "quokka", "census", "--json"))
            assert {(h["session_id"], h["parent_id"]) for h in hits} == {
                (check_one["session"]["session_id"], research["session"]["session_id"]),
                (research["session"]["session_id"], sid),
            }
            await within(client.conn.close_session(session_id=sid))  # retained: kept, released, with its subagents
        subagents = [UUID(hex=s["session"]["session_id"]) for s in (research, advice, check_one)]
        assert [r.session_id for r in (await storage.list_sessions()).sessions] == [sid]
        assert all([await storage.load_session(s) is not None for s in subagents])
        # -- pruning the released session takes its subagents with it (nothing else is left on the server).
        assert cli("prune", "--older-than", "0s", "--yes").splitlines()[0].startswith("deleted 1 session")
        assert (await storage.list_sessions()).sessions == []
        assert [await storage.load_session(s) for s in subagents] == [None, None, None]

        # -- without retention, session/close deletes the session, and its subagents with it.
        async with served(DurableACPAgent(orchard(), storage, retain_history=False)) as client:
            sid = await client.new(PROJECT)
            assert (await client.say(sid, "And the loquats?")).stop_reason == "end_turn"
            tree = json.loads(cli("show", sid, "--json"))
            assert len(tree["subagents"]) == 2 and len(tree["subagents"][0]["subagents"]) == 1
            await within(client.conn.close_session(session_id=sid))
        assert json.loads(cli("export", "--all").splitlines()[0])["format"] == "sessionstore-export"
        assert len(cli("export", "--all").splitlines()) == 1  # nothing but the header: every subagent went too
