"""Sessions over ACP: DurableACPAgent served to the SDK's real client connection, checked in the SQLite file.

Both ends are the real SDK connection classes over a socket pair in this
process (real JSON-RPC framing, routers, the _meta guard), the agent is a real
AG2 agent with the scripted model, and every claim about what was stored is
read back from the file by a separate sqlite3 connection. The crash and
restart paths, with real processes, are in ``test_acp_e2e.py``.
"""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import acp
import pytest
from _acp_agent import lookup
from _acp_client import Files, rows, served, within
from _acp_model import ScriptedConfig
from acp import schema
from ag2 import Agent

from sessionstore.ag2 import DurableACPAgent
from sessionstore.ag2.agent import SET_TITLE_METHOD

PROJECT = "/home/me/orchard"
OTHER = "/home/me/elsewhere"
RESOURCE_NOT_FOUND, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL = -32002, -32600, -32601, -32602, -32603


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


def durable(files: Files, **options: Any) -> DurableACPAgent:
    agent = Agent("helper", "You answer questions about fruit.", config=ScriptedConfig(files.script, files.recording))
    agent_with_tool = Agent(
        "helper",
        "You answer questions about fruit.",
        config=ScriptedConfig(files.script, files.recording),
        tools=[lookup],
    )
    return DurableACPAgent(agent_with_tool if options.pop("tools", True) else agent, files.db, **options)


def stored_time(text: str) -> datetime:
    """A time as the sessions table stores it (UTC text) as an aware datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def session_row(db: Path, session_id: str) -> dict[str, Any] | None:
    found = rows(
        db,
        "SELECT cwd, additional_directories, mcp_servers, meta, title, created_at, updated_at, released,"
        " (SELECT COUNT(*) FROM events e WHERE e.session = s.id) FROM sessions s WHERE session_id = ?",
        session_id,
    )
    if not found:
        return None
    keys = ("cwd", "dirs", "mcp", "meta", "title", "created_at", "updated_at", "released", "events")
    return dict(zip(keys, found[0], strict=True))


async def raw(served_conn: Any, method: str, params: dict[str, Any]) -> Any:
    """A request exactly as given, bypassing the client's typed methods (to send what they would not)."""
    return await within(served_conn.conn._conn.send_request(method, params))


async def test_initialize_advertises_load_and_the_session_methods_served(files: Files) -> None:
    async with served(durable(files)) as client:
        capabilities = client.init.agent_capabilities
        assert capabilities is not None
        assert capabilities.load_session is True
        sessions = capabilities.session_capabilities
        assert sessions is not None
        assert sessions.list is not None
        assert sessions.resume is not None
        assert sessions.close is not None
        assert sessions.additional_directories is not None
        assert sessions.fork is not None
        # Not served: session/delete has no route in the SDK.
        assert sessions.delete is None


async def test_new_session_stores_its_context_in_the_row(files: Files) -> None:
    server = schema.McpServerStdio(
        name="files",
        command="/usr/bin/mcp-files",
        args=["--root", PROJECT],
        env=[schema.EnvVariable(name="K", value="v")],
    )
    async with served(durable(files)) as client:
        sid = await client.new(
            PROJECT, additional_directories=["/home/me/lib"], mcp_servers=[server], client="zed", trace="t-1"
        )
        row = session_row(files.db, sid)
    assert row is not None
    assert row["cwd"] == PROJECT
    assert json.loads(row["dirs"]) == ["/home/me/lib"]
    assert json.loads(row["mcp"]) == [server.model_dump(mode="json", by_alias=True)]
    assert json.loads(row["mcp"])[0]["args"] == ["--root", PROJECT]
    assert json.loads(row["meta"]) == {"client": "zed", "trace": "t-1"}
    assert row["title"] is None


async def test_list_pages_newest_first_and_filters_by_cwd(files: Files) -> None:
    files.script_steps([{"say": "Noted."}])
    async with served(durable(files, list_page_size=2)) as client:
        ids = [
            await client.new(PROJECT if i % 2 == 0 else OTHER, additional_directories=[f"/lib/{i}"]) for i in range(5)
        ]
        # The oldest session gets a turn: it does not move. Pages go by creation, which never changes, so a
        # client paging while sessions are used sees each exactly once; updatedAt tells the last activity.
        await client.say(ids[0], "Remember the fig tree.")
        newest_first = [ids[4], ids[3], ids[2], ids[1], ids[0]]

        seen: list[schema.SessionInfo] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = await within(client.conn.list_sessions(cursor=cursor))
            pages += 1
            assert len(page.sessions) <= 2
            seen.extend(page.sessions)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages == 3
        assert [s.session_id for s in seen] == newest_first
        assert [s.additional_directories for s in seen] == [[f"/lib/{ids.index(s.session_id)}"] for s in seen]
        stamps = [datetime.fromisoformat(s.updated_at or "") for s in seen]
        assert max(stamps) == stamps[-1]  # the one used last
        assert all(stamp.tzinfo is not None for stamp in stamps)

        first = await within(client.conn.list_sessions(cwd=PROJECT))
        assert [s.session_id for s in first.sessions] == [ids[4], ids[2]]
        assert {s.cwd for s in first.sessions} == {PROJECT}
        rest = await within(client.conn.list_sessions(cwd=PROJECT, cursor=first.next_cursor))
        assert [s.session_id for s in rest.sessions] == [ids[0]]
        assert rest.next_cursor is None
        assert (await within(client.conn.list_sessions(cwd="/nowhere"))).sessions == []

        # Was -32603 "Internal error" for some: a cursor whose time zone puts it before year 1 in UTC, a
        # cursor of the wrong fields. Every cursor the agent never issued is invalid params, with a reason.
        for cursor in BAD_CURSORS:
            with pytest.raises(acp.RequestError) as bad:
                await within(client.conn.list_sessions(cursor=cursor))
            assert bad.value.code == INVALID_PARAMS, cursor
            assert "invalid session list cursor" in str(bad.value.data), cursor
        assert len((await within(client.conn.list_sessions())).sessions) == 2  # a page: the agent goes on serving


def _cursor(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


BAD_CURSORS = [
    "not-a-cursor",
    _cursor(5),
    _cursor(["0001-01-01T00:00:00+14:00", "0" * 32]),
    _cursor(["2026-01-01T00:00:00+00:00", 5]),
    _cursor([[[[[[[[["deep"]]]]]]]], "x"]),
    "W" * 100_000,
]


async def test_updated_at_is_stamped_when_a_turn_ends(files: Files) -> None:
    files.script_steps([{"say": "A fig."}, {"say": "Two figs."}])
    async with served(durable(files)) as client:
        sid = await client.new(PROJECT)
        created = session_row(files.db, sid)
        assert created is not None
        for turn in ("One fruit?", "Two?"):
            await client.say(sid, turn)
            infos = client.recorder.of(sid, "session_info_update")
            assert infos, "every turn ends with a session_info_update carrying updatedAt"
            sent = infos[-1].updated_at
            listed = (await within(client.conn.list_sessions())).sessions[0].updated_at
            row = session_row(files.db, sid)
            assert row is not None
            assert sent == listed == stored_time(row["updated_at"]).isoformat()
            # The update is the last thing the turn sends: after the answer.
            assert client.recorder.kinds(sid)[-2:] == ["agent_message_chunk", "session_info_update"]
        assert len(client.recorder.of(sid, "session_info_update")) == 2
        assert stored_time(row["updated_at"]) > stored_time(created["updated_at"])

        # A turn that fails (the script has no third answer: the model raises) was activity too.
        with pytest.raises(acp.RequestError) as failed:
            await client.say(sid, "Three?")
        assert failed.value.code == INTERNAL
        failed_row = session_row(files.db, sid)
        assert failed_row is not None
        assert stored_time(failed_row["updated_at"]) > stored_time(row["updated_at"])
        assert (
            client.recorder.of(sid, "session_info_update")[-1].updated_at
            == stored_time(failed_row["updated_at"]).isoformat()
        )


async def test_a_client_sets_and_clears_a_title(files: Files) -> None:
    files.script_steps([{"say": "A kumquat is a small citrus."}])
    assert SET_TITLE_METHOD == "_sessionstore/set_title"
    async with served(durable(files)) as client:
        sid = await client.new(PROJECT)
        await client.say(sid, "What is a kumquat?")

        answer = await within(client.conn.ext_method("sessionstore/set_title", {"sessionId": sid, "title": " Citrus "}))
        assert answer == {"sessionId": sid, "title": "Citrus"}
        listed = (await within(client.conn.list_sessions())).sessions[0]
        assert listed.title == "Citrus"
        row = session_row(files.db, sid)
        assert row is not None and row["title"] == "Citrus"
        titles = [u.title for u in client.recorder.of(sid, "session_info_update") if u.title is not None]
        assert titles == ["Citrus"]

        cleared = await within(client.conn.ext_method("sessionstore/set_title", {"sessionId": sid, "title": None}))
        assert cleared == {"sessionId": sid, "title": None}
        row = session_row(files.db, sid)
        assert row is not None and row["title"] is None
        # Untitled again: listed under its first prompt, as the storage derives it.
        assert (await within(client.conn.list_sessions())).sessions[0].title == "What is a kumquat?"

        blank = await within(client.conn.ext_method("sessionstore/set_title", {"sessionId": sid, "title": "   "}))
        assert blank["title"] is None

        for params, code in [
            ({"sessionId": "0" * 32, "title": "x"}, RESOURCE_NOT_FOUND),
            ({"sessionId": "not-an-id", "title": "x"}, RESOURCE_NOT_FOUND),
            ({"sessionId": sid, "title": 5}, INVALID_PARAMS),
            ({"title": "x"}, INVALID_PARAMS),
            ({"sessionId": sid, "title": "bad \ud800 text"}, INVALID_PARAMS),
        ]:
            with pytest.raises(acp.RequestError) as refused:
                await within(client.conn.ext_method("sessionstore/set_title", params))
            assert refused.value.code == code, params
        with pytest.raises(acp.RequestError) as unknown:
            await within(client.conn.ext_method("sessionstore/other", {}))
        assert unknown.value.code == METHOD_NOT_FOUND
        row = session_row(files.db, sid)
        assert row is not None and row["title"] is None

    # A stored session that is not live on the connection can be named too (from the client's history list).
    async with served(durable(files)) as client:
        await within(client.conn.ext_method("sessionstore/set_title", {"sessionId": sid, "title": "Later"}))
        assert (await within(client.conn.list_sessions())).sessions[0].title == "Later"
        assert client.recorder.updates == []  # not live here: no session/update for it


async def test_close_with_retention_keeps_the_rows_released(files: Files) -> None:
    files.script_steps([{"say": "Fine."}])
    async with served(durable(files, retain_history=True)) as client:
        sid = await client.new(PROJECT)
        await client.say(sid, "Hello")
        before = session_row(files.db, sid)
        assert before is not None and before["released"] == 0 and before["events"] > 0

        assert await within(client.conn.close_session(session_id=sid)) is not None
        after = session_row(files.db, sid)
        assert after is not None
        assert after["released"] == 1
        assert after["events"] == before["events"]
        assert after["updated_at"] == before["updated_at"]  # letting go is not activity

        with pytest.raises(acp.RequestError) as gone:
            await client.say(sid, "Still there?")
        assert gone.value.code == RESOURCE_NOT_FOUND
        with pytest.raises(acp.RequestError) as again:
            await within(client.conn.close_session(session_id=sid))
        assert again.value.code == RESOURCE_NOT_FOUND
        assert [s.session_id for s in (await within(client.conn.list_sessions())).sessions] == [sid]


async def test_close_without_retention_deletes_the_rows(files: Files) -> None:
    files.script_steps([{"say": "Fine."}])
    async with served(durable(files, retain_history=False)) as client:
        sid = await client.new(PROJECT)
        keep = await client.new(PROJECT)
        await client.say(sid, "Hello")
        assert rows(files.db, "SELECT COUNT(*) FROM events")[0][0] > 0

        await within(client.conn.close_session(session_id=sid))
        assert session_row(files.db, sid) is None
        assert rows(files.db, "SELECT COUNT(*) FROM events")[0][0] == 0
        assert [s.session_id for s in (await within(client.conn.list_sessions())).sessions] == [keep]


async def test_connection_end_marks_live_sessions_released(files: Files) -> None:
    files.script_steps([{"say": "Fine."}])
    async with served(durable(files, retain_history=True)) as client:
        talked = await client.new(PROJECT)
        quiet = await client.new(OTHER)
        await client.say(talked, "Hello")
        before = session_row(files.db, talked)
        assert before is not None and before["released"] == 0
    assert client.closed.is_set()
    after = session_row(files.db, talked)
    assert after is not None
    assert after["released"] == 1
    assert after["events"] == before["events"]
    assert after["updated_at"] == before["updated_at"]
    untouched = session_row(files.db, quiet)
    assert untouched is not None and untouched["released"] == 1


async def test_connection_end_without_retention_deletes_the_sessions(files: Files) -> None:
    files.script_steps([{"say": "Fine."}])
    async with served(durable(files, retain_history=False)) as client:
        sid = await client.new(PROJECT)
        await client.new(OTHER)
        await client.say(sid, "Hello")
        assert rows(files.db, "SELECT COUNT(*) FROM sessions")[0][0] == 2
    assert rows(files.db, "SELECT COUNT(*) FROM sessions")[0][0] == 0
    assert rows(files.db, "SELECT COUNT(*) FROM events")[0][0] == 0


async def test_resume_restores_without_replay_and_the_next_prompt_sees_everything(files: Files) -> None:
    files.script_steps(
        [
            {"tool": "lookup", "arguments": {"word": "loquat"}, "id": "call_q"},
            {"say": "A loquat is a yellow fruit."},
            {"say": "Yes, the same loquat."},
        ]
    )
    async with served(durable(files)) as client:
        sid = await client.new(PROJECT, client="zed")
        await client.say(sid, "What is a loquat?")
    before = session_row(files.db, sid)
    assert before is not None and before["released"] == 1

    async with served(durable(files)) as client:
        with pytest.raises(acp.RequestError) as unknown:
            await within(client.conn.resume_session(session_id="0" * 32, cwd=PROJECT))
        assert unknown.value.code == RESOURCE_NOT_FOUND

        await within(client.conn.resume_session(session_id=sid, cwd=OTHER))
        await asyncio.sleep(0.05)
        assert client.recorder.updates == []  # no replay
        row = session_row(files.db, sid)
        assert row is not None
        assert row["released"] == 0
        assert row["cwd"] == OTHER  # the request's context
        assert json.loads(row["meta"]) == {"client": "zed"}  # kept: the request carried no _meta
        assert (row["created_at"], row["updated_at"]) == (before["created_at"], before["updated_at"])  # no activity

        await client.say(sid, "The same one?")
        seen = files.recording_lines()[-1]["messages"]
        roles = [(m.get("role"), m.get("text")) for m in seen if m.get("role") in ("user", "assistant")]
        assert roles == [
            ("user", "What is a loquat?"),
            ("assistant", None),
            ("assistant", "A loquat is a yellow fruit."),
            ("user", "The same one?"),
        ]
        results = [r for m in seen if m.get("role") == "tool" for r in m["results"]]
        assert results == [{"id": "call_q", "name": "lookup", "text": lookup("loquat")}]

        # Resuming a session live on this connection refreshes its context, still without replay.
        client.recorder.clear()
        await within(client.conn.resume_session(session_id=sid, cwd=PROJECT))
        assert client.recorder.updates == []
        row = session_row(files.db, sid)
        assert row is not None and row["cwd"] == PROJECT


async def test_fork_makes_a_session_that_shares_the_history_and_goes_its_own_way(files: Files) -> None:
    files.script_steps(
        [
            {"say": "A loquat is a yellow fruit."},
            {"say": "In the fork: also a medlar."},
            {"say": "In the original: plum-sized."},
        ]
    )
    async with served(durable(files)) as client:
        sid = await client.new(PROJECT, client="zed")
        await client.say(sid, "What is a loquat?")
        with pytest.raises(acp.RequestError) as unknown:
            await within(client.conn.fork_session(session_id="0" * 32, cwd=PROJECT))
        assert unknown.value.code == RESOURCE_NOT_FOUND
        forked = await within(client.conn.fork_session(session_id=sid, cwd=OTHER))
        fork = forked.session_id
        assert fork != sid
        await client.say(fork, "What else is it called?")
        seen = files.recording_lines()[-1]["messages"]
        said = [(m.get("role"), m.get("text")) for m in seen if m.get("role") in ("user", "assistant")]
        assert said == [
            ("user", "What is a loquat?"),
            ("assistant", "A loquat is a yellow fruit."),
            ("user", "What else is it called?"),
        ]
        await client.say(sid, "How big is it?")
        seen = files.recording_lines()[-1]["messages"]
        assert "What else is it called?" not in json.dumps(seen)  # the original went on without the fork's turn
    row = session_row(files.db, fork)
    assert row is not None and row["cwd"] == OTHER
    origin = rows(
        files.db,
        "SELECT f.session_id FROM sessions AS s JOIN sessions AS f ON f.id = s.forked_from WHERE s.session_id = ?",
        fork,
    )
    assert origin == [(sid,)]
    # The fork's own rows are its new turn alone: the history it shares is stored once.
    shared = rows(
        files.db,
        "SELECT min(position) FROM events WHERE session = (SELECT id FROM sessions WHERE session_id = ?)",
        fork,
    )
    assert shared[0][0] > 0


async def test_a_session_stored_before_its_first_prompt_loads_and_resumes(files: Files) -> None:
    files.script_steps([{"say": "First words."}])
    async with served(durable(files)) as client:
        sid = await client.new(PROJECT)
    async with served(durable(files)) as client:
        listed = (await within(client.conn.list_sessions())).sessions
        assert [s.session_id for s in listed] == [sid]
        await within(client.conn.load_session(cwd=PROJECT, session_id=sid))
        await asyncio.sleep(0.05)
        assert client.recorder.updates == []  # nothing to replay
        response = await client.say(sid, "Hello")
        assert response.stop_reason == "end_turn"
    async with served(durable(files)) as client:
        await within(client.conn.resume_session(session_id=sid, cwd=PROJECT))
        row = session_row(files.db, sid)
        assert row is not None and row["released"] == 0 and row["events"] > 0
        with pytest.raises(acp.RequestError) as unknown:
            await within(client.conn.load_session(cwd=PROJECT, session_id="0" * 32))
        assert unknown.value.code == RESOURCE_NOT_FOUND


async def test_a_refused_new_session_leaves_no_row(files: Files) -> None:
    def refuse(session: Any, origin: str) -> None:
        raise PermissionError(f"not this one ({origin})")

    async with served(durable(files, on_session=refuse)) as client:
        with pytest.raises(acp.RequestError):
            await client.new(PROJECT)
        assert rows(files.db, "SELECT COUNT(*) FROM sessions")[0][0] == 0
        assert (await within(client.conn.list_sessions())).sessions == []

    # A write that fails leaves nothing half-made either: text SQLite cannot store is refused before any row.
    async with served(durable(files)) as client:
        with pytest.raises(acp.RequestError):
            await client.new(PROJECT, note="lone \ud800 surrogate")
        assert rows(files.db, "SELECT COUNT(*) FROM sessions")[0][0] == 0
        sid = await client.new(PROJECT)  # and the connection goes on working
        assert [s.session_id for s in (await within(client.conn.list_sessions())).sessions] == [sid]


async def test_a_refused_load_leaves_the_stored_row_as_it_was(files: Files) -> None:
    files.script_steps([{"say": "Fine."}])
    async with served(durable(files)) as client:
        sid = await client.new(PROJECT, client="zed")
        await client.say(sid, "Hello")
    before = session_row(files.db, sid)
    assert before is not None and before["released"] == 1

    def refuse_loads(session: Any, origin: str) -> None:
        if origin == "loaded":
            raise PermissionError("no loading today")

    async with served(durable(files, on_session=refuse_loads)) as client:
        for attempt in (
            client.conn.load_session(cwd=OTHER, session_id=sid, other="meta"),
            client.conn.resume_session(session_id=sid, cwd=OTHER, other="meta"),
        ):
            with pytest.raises(acp.RequestError):
                await within(attempt)
            assert session_row(files.db, sid) == before
        with pytest.raises(acp.RequestError) as not_live:
            await client.say(sid, "Am I in?")
        assert not_live.value.code == RESOURCE_NOT_FOUND
    assert session_row(files.db, sid) == before


async def test_meta_may_not_overwrite_the_fields_of_the_session_requests(files: Files) -> None:
    files.script_steps([{"say": "Still here."}])
    async with served(durable(files)) as client:
        sid = await client.new(PROJECT)
        other = await client.new(OTHER)
        for method, params in [
            ("session/close", {"sessionId": sid, "_meta": {"sessionId": other}}),
            ("session/close", {"sessionId": sid, "_meta": {"session_id": other}}),
            ("session/resume", {"sessionId": sid, "cwd": PROJECT, "_meta": {"cwd": "/etc"}}),
            ("session/list", {"_meta": {"cwd": OTHER}}),
        ]:
            with pytest.raises(acp.RequestError) as refused:
                await raw(client, method, params)
            assert refused.value.code == INVALID_PARAMS, (method, params)
        assert (await client.say(other, "Both alive?")).stop_reason == "end_turn"
        assert {s.session_id for s in (await within(client.conn.list_sessions())).sessions} == {sid, other}
        row = session_row(files.db, sid)
        assert row is not None and row["cwd"] == PROJECT and row["released"] == 0


async def test_session_delete_is_not_routed_by_the_sdk(files: Files) -> None:
    """ACP defines session/delete, but the SDK (0.12) has no route for it: the README points to sessionstore delete."""
    assert acp.AGENT_METHODS["session_delete"] == "session/delete"
    async with served(durable(files)) as client:
        sid = await client.new(PROJECT)
        with pytest.raises(acp.RequestError) as missing:
            await raw(client, "session/delete", {"sessionId": sid})
        assert missing.value.code == METHOD_NOT_FOUND
        assert session_row(files.db, sid) is not None


async def test_session_methods_need_initialize_first(files: Files) -> None:
    async with served(durable(files), initialize=False) as client:
        for request in (
            client.conn.list_sessions(),
            client.conn.resume_session(session_id="0" * 32, cwd=PROJECT),
            client.conn.close_session(session_id="0" * 32),
            client.conn.ext_method("sessionstore/set_title", {"sessionId": "0" * 32, "title": "x"}),
        ):
            with pytest.raises(acp.RequestError) as refused:
                await within(request)
            assert refused.value.code == INVALID_REQUEST
