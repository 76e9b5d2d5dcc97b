"""Real provider clients (OpenAI's and Anthropic's SDKs, through AG2's configs) against a mock HTTP transport.

Nothing of AG2 or of the SDKs is replaced: the config builds its real client,
which sends real HTTP requests; only the transport under the SDK's
``httpx2.AsyncClient`` answers them, from a folder (``SESSIONSTORE_TEST_PROVIDER``
in a subprocess, which takes these as ``--model-factory _provider_mock:openai_model``):

* ``status``: the HTTP status each request is answered with, read per request (a
  test lets the provider fail, then recover); 200 answers with a reply;
* ``requests.jsonl``: every request body, one JSON line each (what the provider was sent).

The error bodies quote credentials, as providers' do: the key the request was
sent with, a URL with a password and one with ``?key=``, and a key-shaped token.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx2
from ag2.config import AnthropicConfig, OpenAIConfig

FOLDER_ENV = "SESSIONSTORE_TEST_PROVIDER"
KEY = "orchard-Key-7Qm2Zp9Lx4Wv"  # not shaped like any provider's key: only knowing it can hide it
PASSWORD = "hunter2-proxy-Pa55"
QUERY_KEY = "qk-31415926535897"
OTHER_KEY = "sk-proj-AbCdEfGh0123456789xyz"
SECRETS = (KEY, PASSWORD, QUERY_KEY, OTHER_KEY)
PROXY = f"https://proxy-user:{PASSWORD}@llm-proxy.example.com/v1"
REPLY = "Kumquats are small citrus fruits, eaten whole."


def error_text() -> str:
    return (
        f"Incorrect API key provided: {KEY} (also tried {OTHER_KEY}); manage keys at"
        f" https://admin:{PASSWORD}@console.example.com/keys?key={QUERY_KEY}&page=2"
    )


def _answer(folder: Path, kind: str, request: httpx2.Request) -> httpx2.Response:
    with (folder / "requests.jsonl").open("a") as out:
        out.write(json.dumps(json.loads(request.content)) + "\n")
    status = int((folder / "status").read_text())
    if status != 200:
        return httpx2.Response(status, json={"error": {"message": error_text(), "type": "api_error"}})
    if kind == "openai":
        body: dict[str, Any] = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": REPLY}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18},
        }
    else:
        body = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-orchard-test",
            "content": [{"type": "text", "text": REPLY}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 8},
        }
    return httpx2.Response(200, json=body)


def _http(folder: Path, kind: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.MockTransport(lambda request: _answer(folder, kind, request)))


def _folder(folder: Path | None) -> Path:
    return folder if folder is not None else Path(os.environ[FOLDER_ENV])


def openai_model(folder: Path | None = None, *, api_key: str | None = None) -> OpenAIConfig:
    """OpenAI's chat client through a proxy URL with a password; the key from ``api_key`` or $OPENAI_API_KEY."""
    return OpenAIConfig(
        model="gpt-4o-mini",
        api_key=api_key,
        base_url=PROXY,
        max_retries=0,
        http_client=_http(_folder(folder), "openai"),
    )


def anthropic_model(folder: Path | None = None, *, api_key: str | None = None) -> AnthropicConfig:
    return AnthropicConfig(
        model="claude-orchard-test", api_key=api_key, max_retries=0, http_client=_http(_folder(folder), "anthropic")
    )


def sent(folder: Path) -> list[dict[str, Any]]:
    """Every request body the provider was sent, in order."""
    path = folder / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def set_status(folder: Path, status: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "status").write_text(str(status))
