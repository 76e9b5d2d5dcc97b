"""A prompt that fails: the client is told why (no secret in it), and the prompt stays in the session.

In this process over real SDK connections (``served``), with real provider
clients failing: OpenAI's SDK with no key, OpenAI's and Anthropic's answering
HTTP 401/500 through a mock transport (``_provider_mock``), the SQLite file
locked by another connection, a tool asking for a human nobody can reach. The
same over stdio, with the example agent as a subprocess, is in
``test_acp_example.py``.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any
from uuid import UUID

import acp
import pytest
from _acp_client import Files, served, within
from _acp_model import ScriptedConfig
from _provider_mock import KEY, REPLY, SECRETS, anthropic_model, openai_model, sent, set_status
from ag2 import Agent, Context
from ag2.config import OpenAIConfig
from ag2.events import HumanInputRequest, ModelRequest, ModelResponse
from ag2.history import unanswered_tool_calls
from google.genai import errors as genai_errors

from sessionstore import SQLiteStorage
from sessionstore.ag2 import AG2Codec, DurableACPAgent
from sessionstore.ag2.failures import describe_failure, known_secrets, redact

PROJECT = "/home/me/orchard"
FIRST = "What is a kumquat?"
SECOND = "Are you there?"
THIRD = "One more try."
INTERNAL = -32603


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


@pytest.fixture
def provider(tmp_path: Path) -> Path:
    folder = tmp_path / "provider"
    set_status(folder, 200)
    return folder


def fruit(config: Any, **options: Any) -> Agent:
    return Agent("helper", "You answer questions about fruit.", config=config, **options)


def scripted(files: Files) -> ScriptedConfig:
    return ScriptedConfig(files.script, files.recording)


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} leaked in {text!r}"


def warnings_logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


async def stored(db: Path, session_id: str) -> list[tuple[str, str | None]]:
    """The session's prompts and replies as the file holds them (read by a new storage, as a later process)."""
    out: list[tuple[str, str | None]] = []
    async with SQLiteStorage(db, codec=AG2Codec()) as storage:
        for event in await storage.get_history(UUID(hex=session_id)):
            if isinstance(event, ModelRequest):
                out.append(("user", "".join(getattr(p, "content", "") for p in event.parts)))
            elif isinstance(event, ModelResponse):
                out.append(("assistant", event.message.content if event.message is not None else None))
    return out


def said(message: dict[str, Any]) -> tuple[str, str]:
    """One message of a provider request: role and text (content as a string or as text parts)."""
    content = message["content"]
    text = content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
    return message["role"], text


@pytest.mark.parametrize("status", [401, 500])
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_provider_error_is_told_to_the_client_without_secrets_and_a_retry_works(
    files: Files, provider: Path, caplog: pytest.LogCaptureFixture, kind: str, status: int
) -> None:
    make = openai_model if kind == "openai" else anthropic_model
    server = DurableACPAgent(fruit(make(provider, api_key=KEY)), files.db)
    set_status(provider, status)
    async with served(server) as client:
        sid = await client.new(PROJECT)
        with pytest.raises(acp.RequestError) as failed:
            await client.say(sid, FIRST)
        message, data = str(failed.value), failed.value.data
        assert failed.value.code == INTERNAL
        assert message.startswith(f"Prompt failed: the model provider answered HTTP {status} (")
        assert "Incorrect API key provided: *** (also tried ***); manage keys at" in message
        assert "https://admin:***@console.example.com/keys?key=***&page=2" in message
        assert "\n" not in message
        assert data["status"] == status and data["promptKept"] is True and data["reason"] in message
        assert_no_secret(message, json.dumps(data), warnings_logged(caplog))

        # The provider is back: the retry's model call gets the failed prompt, then the new one.
        set_status(provider, 200)
        assert (await client.say(sid, SECOND)).stop_reason == "end_turn"
        assert [u.content.text for u in client.recorder.of(sid, "agent_message_chunk")] == [REPLY]
    retry = [said(m) for m in sent(provider)[-1]["messages"] if m["role"] != "system"]
    assert retry == [("user", FIRST), ("user", SECOND)]
    assert await stored(files.db, sid) == [("user", FIRST), ("user", SECOND), ("assistant", REPLY)]


async def test_no_api_key_is_told_to_the_client_and_the_prompts_are_kept_for_a_later_process(
    files: Files, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)
    server = DurableACPAgent(fruit(OpenAIConfig(model="gpt-4o-mini")), files.db)
    async with served(server) as client:
        sid = await client.new(PROJECT)
        for prompt in (FIRST, SECOND):
            with pytest.raises(acp.RequestError) as failed:
                await client.say(sid, prompt)
            assert failed.value.code == INTERNAL
            assert str(failed.value).startswith("Prompt failed: OpenAIError: Missing credentials.")
            assert "OPENAI_API_KEY" in str(failed.value)
            assert failed.value.data["promptKept"] is True
    # The model could not even be set up, so AG2 never stored the prompts; they are stored all the same.
    assert await stored(files.db, sid) == [("user", FIRST), ("user", SECOND)]

    # Later, with a model that works: load shows them, and the next model call gets them before the new prompt.
    files.script_steps([{"say": "A small citrus fruit. And yes, I am here."}])
    async with served(DurableACPAgent(fruit(scripted(files)), files.db)) as client:
        await within(client.conn.load_session(cwd=PROJECT, session_id=sid))
        assert [u.content.text for u in client.recorder.of(sid, "user_message_chunk")] == [FIRST, SECOND]
        assert (await client.say(sid, THIRD)).stop_reason == "end_turn"
    users = [m["text"] for m in files.recording_lines()[0]["messages"] if m.get("role") == "user"]
    assert users == [FIRST, SECOND, THIRD]


async def test_a_locked_file_is_told_to_the_client_and_the_next_prompt_works(files: Files) -> None:
    files.script_steps([{"say": "A small citrus fruit."}, {"say": "Yes, still here."}])
    async with SQLiteStorage(files.db, codec=AG2Codec(), busy_timeout=0.2) as storage:
        async with served(DurableACPAgent(fruit(scripted(files)), storage)) as client:
            sid = await client.new(PROJECT)
            await client.say(sid, FIRST)
            other = sqlite3.connect(files.db, isolation_level=None)  # another process's writer, holding the lock
            try:
                other.execute("BEGIN IMMEDIATE")
                with pytest.raises(acp.RequestError) as failed:
                    await client.say(sid, SECOND)
            finally:
                other.execute("ROLLBACK")
                other.close()
            message = str(failed.value)
            assert failed.value.code == INTERNAL
            assert message.startswith("Prompt failed: the session could not be stored (DatabaseBusyError): ")
            assert message.endswith("(the prompt could not be stored in the session either)")
            assert failed.value.data["promptKept"] is False
            assert (await client.say(sid, THIRD)).stop_reason == "end_turn"
    # The locked-out prompt never reached the model or the file; the conversation goes on from what was stored.
    calls = files.recording_lines()
    assert [[m.get("text") for m in c["messages"] if m.get("role") == "user"] for c in calls] == [
        [FIRST],
        [FIRST, THIRD],
    ]
    assert await stored(files.db, sid) == [
        ("user", FIRST),
        ("assistant", "A small citrus fruit."),
        ("user", THIRD),
        ("assistant", "Yes, still here."),
    ]


async def ask_the_user(context: Context) -> str:
    """Ask the person at the editor which fruit they mean."""
    return await context.input("Which fruit?")


async def test_a_turn_needing_a_human_keeps_ag2s_category_and_leaves_a_valid_history(files: Files) -> None:
    files.script_steps([{"tool": "ask_the_user", "arguments": {}, "id": "call_h"}, {"say": "Then I will guess."}])
    async with served(DurableACPAgent(fruit(scripted(files), tools=[ask_the_user]), files.db)) as client:
        sid = await client.new(PROJECT)
        with pytest.raises(acp.RequestError) as failed:
            await client.say(sid, FIRST)
        assert failed.value.data["category"] == "human_input"  # what a client branches on, as with AG2's own
        assert str(failed.value).startswith("Prompt failed: HumanInputUnsupportedError: ")
        async with SQLiteStorage(files.db, codec=AG2Codec()) as storage:
            assert not unanswered_tool_calls(list(await storage.get_history(UUID(hex=sid))))
        assert (await client.say(sid, SECOND)).stop_reason == "end_turn"
    roles = [m.get("role") for m in files.recording_lines()[-1]["messages"] if m.get("role")]
    assert roles == ["user", "assistant", "tool", "user"]


async def test_a_hitl_hook_still_answers_the_turn(files: Files) -> None:
    """The agent runs its turns with an executor of its own: built with the hitl_hook it was given, as AG2's."""

    async def hook(event: HumanInputRequest) -> str:
        return f"the user says kumquat to {event.content!r}"

    files.script_steps([{"tool": "ask_the_user", "arguments": {}, "id": "call_h"}, {"say": "Kumquat it is."}])
    server = DurableACPAgent(fruit(scripted(files), tools=[ask_the_user]), files.db, hitl_hook=hook)
    async with served(server) as client:
        sid = await client.new(PROJECT)
        assert (await client.say(sid, FIRST)).stop_reason == "end_turn"
    results = [m for m in files.recording_lines()[-1]["messages"] if m.get("role") == "tool"]
    assert results[0]["results"][0]["text"] == "the user says kumquat to 'Which fruit?'"


def test_redaction_hides_known_values_and_credential_shapes() -> None:
    config = OpenAIConfig(
        model="gpt-4o-mini", api_key=KEY, default_headers={"X-Proxy-Authorization": "Bearer tok-123456"}
    )
    secrets = known_secrets(config, environ={"MY_SERVICE_TOKEN": "svc-token-9876", "HOME": "/home/me"})
    assert {KEY, "Bearer tok-123456", "tok-123456", "svc-token-9876"} <= secrets
    assert "/home/me" not in secrets and "gpt-4o-mini" not in secrets
    text = (
        f"key {KEY}, header Bearer tok-123456, env svc-token-9876, postgresql://me:pw-Secret1@db/x,"
        " https://h/v1?api_key=abc123def&x=1, sk-ant-api03-AbCdEf0123456789, AIzaSyA1234567890abcdefghij"
    )
    assert redact(text, secrets) == (
        "key ***, header ***, env ***, postgresql://me:***@db/x, https://h/v1?api_key=***&x=1, ***, ***"
    )
    # Google's SDK keeps the status as ``code`` and the body as ``details``.
    google = genai_errors.ClientError(401, {"error": {"code": 401, "message": f"API key {KEY} is not valid."}})
    assert describe_failure(google, secrets={KEY})[0] == (
        "Prompt failed: the model provider answered HTTP 401 (ClientError): API key *** is not valid."
    )
    message, data = describe_failure(RuntimeError("boom\n  at line 2"), prompt_kept=True)
    assert (message, data) == (
        "Prompt failed: RuntimeError: boom at line 2",
        {"reason": "RuntimeError: boom at line 2", "type": "RuntimeError", "promptKept": True},
    )
