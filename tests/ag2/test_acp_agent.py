"""DurableACPAgent itself: the AG2 versions it trusts, the AG2 internals it needs, its arguments."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

import pytest
from _acp_client import Files, rows, served, within
from _acp_model import ScriptedConfig
from ag2 import Agent
from ag2.acp import SessionConfig
from ag2.history import MemoryStorage as AG2MemoryStorage

from sessionstore import SQLiteStorage
from sessionstore.ag2 import DurableACPAgent
from sessionstore.ag2.agent import AG2_INTERNAL_SLOTS, AG2_INTERNALS, TESTED_AG2_VERSIONS
from sessionstore.ag2.codec import AG2Codec
from sessionstore.postgres import PostgresStorage


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


def fruit_agent(files: Files) -> Agent:
    return Agent("helper", "You answer questions about fruit.", config=ScriptedConfig(files.script, files.recording))


def test_installed_ag2_is_a_version_this_adapter_was_tested_with() -> None:
    installed = importlib.metadata.version("ag2")
    assert installed in TESTED_AG2_VERSIONS, (
        f"AG2 {installed} is installed, but DurableACPAgent was checked against AG2 {', '.join(TESTED_AG2_VERSIONS)}"
        " only. It subclasses AG2 internals (see the 'AG2 internals' block in sessionstore/ag2/agent.py): read"
        " them against the new release, run tests/ag2, then add the version to TESTED_AG2_VERSIONS."
    )


def test_the_ag2_internals_it_relies_on_are_there(files: Files) -> None:
    for cls, names in AG2_INTERNALS.items():
        missing = [name for name in names if not hasattr(cls, name)]
        assert not missing, f"{cls.__qualname__} no longer has {missing}"
    for cls, names in AG2_INTERNAL_SLOTS.items():
        slots = {slot for klass in cls.__mro__ for slot in getattr(klass, "__slots__", ())}
        missing = [name for name in names if name not in slots]
        assert not missing, f"{cls.__qualname__} no longer declares {missing}"
    # Read off the served agent when a session is adopted, as AG2's own load does.
    assert isinstance(fruit_agent(files)._agent_variables, dict)


def test_arguments_that_cannot_work_are_refused(files: Files) -> None:
    agent = fruit_agent(files)
    with pytest.raises(ValueError, match="a SQLiteStorage for AG2 events needs codec=AG2Codec"):
        DurableACPAgent(agent, SQLiteStorage(files.db))
    # Was: a PostgresStorage with the plain codec was taken, and failed at the first prompt (its constructor
    # touches no server).
    with pytest.raises(ValueError, match="a PostgresStorage for AG2 events needs codec=AG2Codec"):
        DurableACPAgent(agent, PostgresStorage("postgresql://nobody@127.0.0.1:1/none"))
    with pytest.raises(ValueError, match="second argument"):
        DurableACPAgent(agent, files.db, sessions=SessionConfig(storage=AG2MemoryStorage()))
    with pytest.raises(ValueError, match="contradicts"):
        DurableACPAgent(agent, files.db, retain_history=False, sessions=SessionConfig(retain_history=True))
    with pytest.raises(ValueError, match="list_page_size"):
        DurableACPAgent(agent, files.db, list_page_size=0)
    with pytest.raises(TypeError, match="session records"):
        DurableACPAgent(agent, AG2MemoryStorage())  # type: ignore[arg-type]
    assert not files.db.exists()  # nothing was opened, let alone created


def test_retain_history_is_on_unless_turned_off(files: Files) -> None:
    agent = fruit_agent(files)
    assert DurableACPAgent(agent, files.db).sessions.retains_history is True
    # A SessionConfig given to tune the bounds does not turn retention off with its default.
    assert DurableACPAgent(agent, files.db, sessions=SessionConfig(max_sessions=3)).sessions.retains_history is True
    assert DurableACPAgent(agent, files.db, retain_history=False).sessions.retains_history is False


async def test_a_ready_storage_is_used_and_left_open(files: Files) -> None:
    files.script_steps([{"say": "Yes."}])
    async with SQLiteStorage(files.db, codec=AG2Codec()) as storage:
        server = DurableACPAgent(fruit_agent(files), storage)
        assert server.storage is storage
        async with served(server) as client:
            sid = await client.new("/work")
            await client.say(sid, "Is this stored?")
        await server.aclose()  # not its storage to close
        page = await storage.list_sessions()
        assert [r.session_id for r in page.sessions] == [sid]
        assert page.sessions[0].released
        assert len(await storage.get_history(page.sessions[0].stream_id)) > 0


async def test_acp_agent_options_are_passed_on(files: Files) -> None:
    files.script_steps([{"say": "One."}, {"say": "Two."}])
    seen: list[tuple[str, str]] = []

    def observe(session: Any, origin: str) -> None:
        seen.append((session.session_id, origin))

    server = DurableACPAgent(
        fruit_agent(files),
        files.db,
        name="orchard",
        title="Orchard helper",
        version="9.9",
        on_session=observe,
        sessions=SessionConfig(max_sessions=1),
    )
    async with served(server) as client:
        info = client.init.agent_info
        assert info is not None and (info.name, info.title, info.version) == ("orchard", "Orchard helper", "9.9")
        first = await client.new("/work")
        await client.say(first, "Hello")
        # max_sessions=1: the second session evicts the first (idle); retained, its row is marked released.
        second = await client.new("/work")
        evicted = rows(files.db, "SELECT released FROM sessions WHERE session_id = ?", first)
        assert evicted == [(1,)]
        assert rows(files.db, "SELECT released FROM sessions WHERE session_id = ?", second) == [(0,)]
        await within(client.conn.load_session(cwd="/work", session_id=first))
        assert seen == [(first, "created"), (second, "created"), (first, "loaded")]
        assert rows(files.db, "SELECT released FROM sessions WHERE session_id = ?", first) == [(0,)]
