"""The example agent (``python -m sessionstore.ag2.example``) as an editor runs it: a subprocess on stdio."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import acp
import pytest
from _acp_client import TIMEOUT, Files, agent_process, readme_block, rows, sessionstore_cli, within
from _provider_mock import FOLDER_ENV, KEY, REPLY, SECRETS, sent, set_status

from sessionstore.ag2.example import PROVIDERS, main, model_from_factory, model_from_spec


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


def example(*args: str) -> list[str]:
    return [sys.executable, "-m", "sessionstore.ag2.example", *args]


async def test_the_example_serves_a_durable_session_over_stdio(files: Files) -> None:
    files.script_steps([{"say": "Hello from the example."}])
    db = files.root / "data" / "sessions.db"
    command = example("--db", str(db), "--model-factory", "_acp_model:scripted_model", "--name", "orchard")
    async with agent_process(files, command=command) as agent:
        info = agent.init.agent_info
        assert info is not None and info.name == "orchard"
        assert agent.init.agent_capabilities is not None and agent.init.agent_capabilities.load_session
        sid = await agent.new("/home/me/orchard")
        response = await agent.say(sid, "Hi there")
        assert response.stop_reason == "end_turn"
        assert [u.content.text for u in agent.recorder.of(sid, "agent_message_chunk")] == ["Hello from the example."]
        assert [s.session_id for s in (await within(agent.conn.list_sessions())).sessions] == [sid]
    assert agent.process.returncode == 0
    stored = rows(db, "SELECT cwd, released, (SELECT COUNT(*) FROM events) FROM sessions WHERE session_id = ?", sid)
    assert stored[0][:2] == ("/home/me/orchard", 1)
    assert stored[0][2] > 0
    assert files.recording_lines()[0]["messages"][-1] == {"event": "ModelRequest", "role": "user", "text": "Hi there"}


async def test_the_example_tells_the_client_why_the_provider_failed_and_keeps_the_prompts(files: Files) -> None:
    """OpenAI's real client, its key in $OPENAI_API_KEY, its HTTP answered by a mock (401, then 500, then a reply)."""
    provider = files.root / "provider"
    set_status(provider, 401)
    command = example("--db", str(files.db), "--model-factory", "_provider_mock:openai_model")
    env = {FOLDER_ENV: str(provider), "OPENAI_API_KEY": KEY}
    async with agent_process(files, command=command, env=env) as agent:
        sid = await agent.new("/home/me/orchard")
        told = []
        for status, prompt in [(401, "What is a kumquat?"), (500, "Hello?")]:
            set_status(provider, status)
            with pytest.raises(acp.RequestError) as failed:
                await agent.say(sid, prompt)
            told.append(str(failed.value))
            assert str(failed.value).startswith(f"Prompt failed: the model provider answered HTTP {status} (")
            assert "Incorrect API key provided: ***" in str(failed.value)
        set_status(provider, 200)
        assert (await agent.say(sid, "Third time lucky?")).stop_reason == "end_turn"
        await agent.kill()
    # The provider's third request had the two failed prompts before the new one.
    asked = [m["content"] for m in sent(provider)[-1]["messages"] if m["role"] == "user"]
    assert asked == ["What is a kumquat?", "Hello?", "Third time lucky?"]

    async with agent_process(files, command=command, env=env) as agent:
        await within(agent.conn.load_session(cwd="/home/me/orchard", session_id=sid))
        replayed = [(u.session_update, u.content.text) for u in agent.recorder.of(sid) if hasattr(u, "content")]
        assert replayed == [
            ("user_message_chunk", "What is a kumquat?"),
            ("user_message_chunk", "Hello?"),
            ("user_message_chunk", "Third time lucky?"),
            ("agent_message_chunk", REPLY),
        ]
    log = files.stderr()
    assert "HTTP 401" in log and "HTTP 500" in log  # the agent's own log says it too
    for text in (*told, log):
        for secret in SECRETS:
            assert secret not in text
    assert "Task was destroyed" not in log


def echoed(prompt: str, number: int = 1, first: str = "") -> str:
    reply = f'Echo (the test model, no provider): "{prompt}"'
    return reply + (f' (prompt {number} in this session; the first was "{first}")' if number > 1 else "")


async def test_the_test_model_answers_every_turn_and_its_session_survives_a_kill(files: Files) -> None:
    command = example("--db", str(files.db), "--model", "test")
    async with agent_process(files, command=command) as agent:
        sid = await agent.new("/home/me/orchard")
        for prompt in ("What is a kumquat?", "And a loquat?"):
            assert (await agent.say(sid, prompt)).stop_reason == "end_turn"
        assert [u.content.text for u in agent.recorder.of(sid, "agent_message_chunk")] == [
            echoed("What is a kumquat?"),
            echoed("And a loquat?", 2, "What is a kumquat?"),
        ]
        await agent.kill()
    async with agent_process(files, command=command) as agent:
        await within(agent.conn.load_session(cwd="/home/me/orchard", session_id=sid))
        agent.recorder.clear()
        await agent.say(sid, "Which is sweeter?")  # the third prompt: the history came back from the file
        assert [u.content.text for u in agent.recorder.of(sid, "agent_message_chunk")] == [
            echoed("Which is sweeter?", 3, "What is a kumquat?")
        ]
    shown = sessionstore_cli("show", sid, "--db", str(files.db)).stdout
    assert "user       Which is sweeter?" in shown and echoed("And a loquat?", 2, "What is a kumquat?") in shown


async def test_without_a_key_the_example_says_why_and_keeps_the_prompt_for_the_test_model(files: Files) -> None:
    """No OPENAI_API_KEY (the SDK passes a trimmed environment): the failure is told, the prompt stays."""
    async with agent_process(files, command=example("--db", str(files.db), "--model", "openai:gpt-4o-mini")) as agent:
        sid = await agent.new("/home/me/orchard")
        with pytest.raises(acp.RequestError) as failed:
            await agent.say(sid, "What is a kumquat?")
        assert failed.value.code == -32603
        assert str(failed.value).startswith("Prompt failed: OpenAIError: Missing credentials.")
        assert failed.value.data["promptKept"] is True
    async with agent_process(files, command=example("--db", str(files.db), "--model", "test")) as agent:
        await within(agent.conn.load_session(cwd="/home/me/orchard", session_id=sid))
        assert [u.content.text for u in agent.recorder.of(sid, "user_message_chunk")] == ["What is a kumquat?"]
        agent.recorder.clear()
        await agent.say(sid, "Are you there now?")
        assert [u.content.text for u in agent.recorder.of(sid, "agent_message_chunk")] == [
            echoed("Are you there now?", 2, "What is a kumquat?")
        ]
    assert "Task was destroyed" not in files.stderr()


def test_the_readmes_first_ag2_snippet_runs_as_written(tmp_path: Path) -> None:
    """Prompt, SIGKILL, a new process, load, prompt, with the test model; the output is the README's."""
    code, shown = readme_block("spawn_agent_process")
    assert shown is not None
    (tmp_path / "try_ag2.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "try_ag2.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=3 * TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    last = done.stdout.splitlines()[-1].split()
    assert last[:2] == ["sessionstore", "show"] and last[3:] == ["--db", "try.db"]
    sid = last[2]
    assert done.stdout == shown.replace("9c1d4e6f2a3b4c5d8e7f6a5b4c3d2e1f", sid)
    transcript = sessionstore_cli("show", sid, "--db", str(tmp_path / "try.db")).stdout
    assert "user       Remember the kumquat." in transcript
    assert 'assistant  Echo (the test model, no provider): "What did I say first?" (prompt 2' in transcript


def test_the_example_refuses_a_model_it_cannot_build(files: Files, capsys: pytest.CaptureFixture[str]) -> None:
    # One as a real process: a usage error, exit code 2, nothing created.
    done = subprocess.run(
        example("--db", str(files.db), "--model", "gpt-4o"),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert "PROVIDER:MODEL" in done.stderr
    for args, expected in [
        (["--model", "acme:fast"], "unknown provider 'acme'"),
        (["--model", "openai:"], "PROVIDER:MODEL"),
        (["--model-factory", "no_such_module:make"], "cannot load the model factory"),
        ([], "one of the arguments --model --model-factory is required"),
    ]:
        with pytest.raises(SystemExit) as stopped:
            main(["--db", str(files.db), *args])
        assert stopped.value.code == 2, args
        assert expected in capsys.readouterr().err, args
    assert not files.db.exists()


def test_model_specs_name_ag2_config_classes() -> None:
    import ag2.config

    assert set(PROVIDERS) >= {"openai", "anthropic", "gemini", "ollama", "mistral", "bedrock"}
    for provider, (class_name, extra) in PROVIDERS.items():
        assert hasattr(ag2.config, class_name), provider
        try:
            config = model_from_spec(f"{provider}:some-model")
        except ValueError as exc:  # the provider's extra is not installed: the message says how to get it
            assert f"pip install 'ag2[{extra}]'" in str(exc), provider
        else:
            assert type(config).__name__ == class_name and config.model == "some-model", provider


def test_a_model_factory_must_return_a_model_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "factories.py").write_text(
        "def good():\n    from _acp_model import ScriptedConfig\n"
        "    return ScriptedConfig('s', 'r')\n\ndef bad():\n    return 42\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert model_from_factory("factories:good").model == "scripted"
    with pytest.raises(ValueError, match="not an AG2 model config"):
        model_from_factory("factories:bad")
    with pytest.raises(ValueError, match="MODULE:FUNCTION"):
        model_from_factory("factories")
