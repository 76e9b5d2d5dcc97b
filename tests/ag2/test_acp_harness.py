"""DurableACPAgent served through AG2's own in-process harness, ``ag2.acp.testing.connect``.

That harness serves through ``ag2.acp.guard.serve``, whose SDK connection has
the unstable protocol off, and the SDK routes session/resume and session/close
only with it on: these tests hold the agent to serving every method its
``initialize`` advertises there, as it does over stdio. ``connect`` never
closes its client connection, so the tests close it before leaving, and check
that nothing is left running (and, for the README's snippet run as a process,
that nothing is written to stderr).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import warnings
from pathlib import Path

import acp
import pytest
from _acp_client import TIMEOUT, Files, readme_block, rows, within
from _acp_model import ScriptedConfig
from ag2 import Agent
from ag2.acp.testing import connect

from sessionstore.ag2 import DurableACPAgent
from sessionstore.ag2.agent import FORK_META, SET_TITLE_METHOD, USAGE_META

PROJECT = "/home/me/orchard"
INVALID_PARAMS = -32602


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


def durable(files: Files) -> DurableACPAgent:
    agent = Agent("helper", "You answer questions about fruit.", config=ScriptedConfig(files.script, files.recording))
    return DurableACPAgent(agent, files.db)


def released(db: Path, session_id: str) -> int:
    return rows(db, "SELECT released FROM sessions WHERE session_id = ?", session_id)[0][0]


async def test_every_method_initialize_advertises_is_served_through_ag2s_harness(files: Files) -> None:
    files.script_steps([{"say": "Figs ripen in late summer."}, {"say": "Still here."}])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with durable(files) as server, connect(server, initialize=False) as (conn, client):
            try:
                init = await within(conn.initialize(protocol_version=acp.PROTOCOL_VERSION))
                capabilities = init.agent_capabilities
                assert capabilities is not None and capabilities.load_session
                advertised = capabilities.session_capabilities
                assert advertised is not None
                assert advertised.list and advertised.resume and advertised.close and advertised.fork

                sid = (await within(conn.new_session(cwd=PROJECT))).session_id
                await within(conn.prompt(session_id=sid, prompt=[acp.text_block("When do figs ripen?")]))
                listed = await within(conn.list_sessions(cwd=PROJECT))
                assert [(s.session_id, s.title) for s in listed.sessions] == [(sid, "When do figs ripen?")]
                await within(conn.resume_session(session_id=sid, cwd=PROJECT))
                await within(conn.ext_method(SET_TITLE_METHOD[1:], {"sessionId": sid, "title": "Figs"}))
                await within(conn.close_session(session_id=sid))
                assert released(files.db, sid) == 1

                # Let go, it is still in the file: load replays it, resume took it back, the next prompt runs.
                client.updates.clear()
                await within(conn.load_session(session_id=sid, cwd=PROJECT))
                replayed = [u.content.text for u in client.updates_for(sid) if hasattr(u, "content")]
                assert replayed == ["When do figs ripen?", "Figs ripen in late summer."]
                assert released(files.db, sid) == 0
                await within(conn.prompt(session_id=sid, prompt=[acp.text_block("Thanks.")]))
                forked = (await within(conn.fork_session(session_id=sid, cwd=PROJECT))).session_id
                listed = await within(conn.list_sessions(cwd=PROJECT))
                assert {s.session_id for s in listed.sessions} == {sid, forked}

                # Both _meta guards hold on this connection: AG2's (prompt) and the one for the methods it adds.
                for method, params in [
                    ("session/close", {"sessionId": sid, "_meta": {"sessionId": "0" * 32}}),
                    ("session/prompt", {"sessionId": sid, "prompt": [], "_meta": {"sessionId": "0" * 32}}),
                ]:
                    with pytest.raises(acp.RequestError) as refused:
                        await within(conn._conn.send_request(method, params))
                    assert refused.value.code == INVALID_PARAMS, method
            finally:
                await within(conn.close())  # connect() leaves it open
    assert [str(w.message) for w in caught if "unstable" in str(w.message)] == []
    # Nothing left running (one loop iteration lets the tasks cancelled on the way out finish): without the close
    # above, the client connection's 'acp.Sender.loop' task would still be pending.
    await asyncio.sleep(0)
    assert [t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    assert rows(files.db, "SELECT session_id, title, released, forked_from IS NOT NULL FROM sessions ORDER BY id") == [
        (sid, "Figs", 1, 0),
        (forked, "Figs", 1, 1),
    ]


async def test_session_list_says_where_a_fork_came_from_as_list_json_does(files: Files) -> None:
    """ACP's session info has no field for a fork's origin: each fork's entry says it in its ``_meta`` (the fork's
    parent and position, as ``sessionstore list --json`` names them); a session that is no fork says nothing."""
    files.script_steps([{"say": "Quinces are golden."}])
    async with durable(files) as server, connect(server) as (conn, _):
        try:
            sid = (await within(conn.new_session(cwd=PROJECT))).session_id
            await within(conn.prompt(session_id=sid, prompt=[acp.text_block("What colour is a quince?")]))
            fork = (await within(conn.fork_session(session_id=sid, cwd=PROJECT))).session_id
            listed = {s.session_id: s.field_meta or {} for s in (await within(conn.list_sessions())).sessions}
        finally:
            await within(conn.close())
    assert set(listed) == {sid, fork}
    assert FORK_META not in listed[sid]
    assert USAGE_META not in listed[sid]  # the scripted model reports no usage: no entry of zeros
    assert listed[fork][FORK_META] == {"forked_from": sid, "forked_at": 2}  # the prompt and the answer, shared
    done = subprocess.run(
        [sys.executable, "-m", "sessionstore.cli", "list", "--json", "--db", str(files.db)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    by_cli = {entry["session_id"]: entry for entry in json.loads(done.stdout)}
    assert {key: by_cli[fork][key] for key in ("forked_from", "forked_at")} == listed[fork][FORK_META]


async def test_a_connection_whose_router_cannot_be_found_advertises_only_what_it_routes(files: Files) -> None:
    """Should an SDK keep its router elsewhere, resume and close are not advertised rather than answered 'not found'."""
    async with durable(files) as server:
        scope = server.bind(None)
        scope.on_connect(object())  # a connection with no router where the SDK 0.12 keeps it
        response = await scope.initialize(protocol_version=acp.PROTOCOL_VERSION)
        advertised = response.agent_capabilities.session_capabilities if response.agent_capabilities else None
        assert advertised is not None
        assert advertised.list is not None
        assert (advertised.resume, advertised.close) == (None, None)
        await scope.aclose()


def test_the_readme_snippet_testing_with_ag2s_harness_runs_as_written(tmp_path: Path) -> None:
    (tmp_path / "snippet.py").write_text(readme_block("from ag2.acp.testing import connect")[0])
    done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    # Nothing on stderr: no 'Task was destroyed but it is pending', no unstable-protocol warning, no traceback.
    assert done.stderr == ""
    assert done.stdout.splitlines() == ["['Hello! I am a scripted model.']", "Hello there", "True"]
    # Closed and still in the file, with its conversation (listed under its first prompt: no title was set).
    assert rows(tmp_path / "test.db", "SELECT released, title, (SELECT COUNT(*) > 0 FROM events) FROM sessions") == [
        (1, None, 1)
    ]
