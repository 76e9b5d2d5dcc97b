"""Recorded provider HTTP for the replay tests: AG2's real provider clients and SDKs, answered from a cassette.

Each AG2 provider config takes an HTTP client (``httpx2.AsyncClient`` for the OpenAI and Anthropic SDKs,
``httpx.AsyncClient`` for Google's), so the SDK runs whole (request building, retries, response parsing)
and only the socket is replaced by a ``MockTransport``. Its handler:

* appends every request it is sent (method, URL, headers, body bytes as base64) as one JSON line to the file
  named by ``SESSIONSTORE_TEST_REQUESTS``, flushed and fsynced before it answers, so the test process reads
  every request an agent process made even if that process is SIGKILLed right after;
* answers with the cassette's next response: the one after the last recorded request, so a conversation runs
  on across agent processes killed and restarted on the same files;
* answers a request the cassette does not expect (another method or path, or none left) with a 400 the SDK
  does not retry, whose message says what happened, so a wrong turn fails the prompt instead of hanging.

The factories build each provider's AG2 config with the settings the cassettes were written for. Called with
no arguments (as ``--model-factory MODULE:FUNCTION`` would), they record to the file the environment names;
the in-process reference run passes its request file instead.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2

REQUESTS_ENV = "SESSIONSTORE_TEST_REQUESTS"

HERE = Path(__file__).resolve().parent
CASSETTES = HERE / "cassettes"


def read_requests(path: Path) -> list[dict[str, Any]]:
    """Every request recorded so far, in order (an empty list before the first)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def body_bytes(recorded: dict[str, Any]) -> bytes:
    """A recorded request's body, byte for byte as the SDK sent it."""
    return base64.b64decode(recorded["body"])


def load_cassette(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


class Replay:
    """The handler behind one provider's ``MockTransport``: record the request, answer from the cassette."""

    def __init__(self, cassette: Path, requests: Path, http: Any) -> None:
        self.cassette = cassette
        self.requests = requests
        self.http = http  # the httpx or httpx2 module, whose Request and Response types the client uses

    def _record(self, request: Any) -> int:
        position = len(read_requests(self.requests))
        line = {
            "n": position,
            "method": request.method,
            "url": str(request.url),
            "path": request.url.path,
            "headers": [[name, value] for name, value in request.headers.multi_items()],
            "body": base64.b64encode(request.content).decode("ascii"),
        }
        with self.requests.open("a") as out:
            out.write(json.dumps(line) + "\n")
            out.flush()
            os.fsync(out.fileno())
        return position

    def _refuse(self, message: str) -> Any:
        # 400 is not retried by any of the SDKs, and its message reaches the prompt's error.
        error = {"error": {"type": "invalid_request_error", "message": f"cassette {self.cassette.name}: {message}"}}
        return self.http.Response(400, json=error)

    def __call__(self, request: Any) -> Any:
        position = self._record(request)
        interactions = load_cassette(self.cassette)["interactions"]
        if position >= len(interactions):
            return self._refuse(f"request {position + 1} has no recorded response ({len(interactions)} recorded)")
        expected = interactions[position]["request"]
        if (request.method, request.url.path) != (expected["method"], expected["path"]):
            return self._refuse(
                f"request {position + 1} is {request.method} {request.url.path}, "
                f"recorded {expected['method']} {expected['path']}"
            )
        response = interactions[position]["response"]
        headers = {"content-type": "application/json", **response.get("headers", {})}
        return self.http.Response(
            response.get("status", 200), headers=headers, content=json.dumps(response["body"]).encode()
        )


def replay(http: Any, cassette_name: str, requests: Path | None) -> Replay:
    """The handler for a cassette: recording to the file given, else to the one the environment names."""
    return Replay(CASSETTES / cassette_name, requests or Path(os.environ[REQUESTS_ENV]), http)


def _httpx2_client(cassette_name: str, requests: Path | None) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.MockTransport(replay(httpx2, cassette_name, requests)))


def _httpx_client(cassette_name: str, requests: Path | None) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(replay(httpx, cassette_name, requests)))


def openai_chat(requests: Path | None = None) -> Any:
    from ag2.config import OpenAIConfig

    return OpenAIConfig(
        model="gpt-4.1-2025-04-14", api_key="sk-test", http_client=_httpx2_client("openai_chat.json", requests)
    )


def openai_responses(requests: Path | None = None) -> Any:
    from ag2.config import OpenAIResponsesConfig

    # store=False: the stateless mode, in which AG2 asks for reasoning.encrypted_content and replays every
    # reasoning item whole on the next request (nothing is kept server-side to refer to by id).
    return OpenAIResponsesConfig(
        model="gpt-5-2025-08-07",
        api_key="sk-test",
        store=False,
        reasoning={"effort": "low", "summary": "auto"},
        http_client=_httpx2_client("openai_responses.json", requests),
    )


def anthropic(requests: Path | None = None) -> Any:
    from ag2.config import AnthropicConfig

    # Extended thinking is switched on through the request body (AG2's config has no field for it).
    return AnthropicConfig(
        model="claude-3-7-sonnet-20250219",
        api_key="sk-ant-test",
        max_tokens=8192,
        extra_body={"thinking": {"type": "enabled", "budget_tokens": 2048}},
        http_client=_httpx2_client("anthropic.json", requests),
    )


def gemini(requests: Path | None = None) -> Any:
    from ag2.config import GeminiConfig

    return GeminiConfig(
        model="gemini-3-flash-preview",
        api_key="test-key",
        thinking_level="low",
        http_client=_httpx_client("gemini.json", requests),
    )


def gemini_minted_ids(requests: Path | None = None) -> Any:
    from ag2.config import GeminiConfig

    return GeminiConfig(
        model="gemini-2.5-flash",
        api_key="test-key",
        http_client=_httpx_client("gemini_minted_ids.json", requests),
    )


FACTORIES: dict[str, Callable[..., Any]] = {
    "openai": openai_chat,
    "openai-responses": openai_responses,
    "anthropic": anthropic,
    "gemini": gemini,
    "gemini-minted-ids": gemini_minted_ids,
}
"""Conversation name -> the factory of its model config."""
