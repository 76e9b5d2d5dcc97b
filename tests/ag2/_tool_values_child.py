"""Child process: an AG2 agent whose tools return every kind of value AG2 accepts, on OpenAI's real client.

``python _tool_values_child.py DB STREAM RECORDING first|again``

``first`` runs a turn in which the model calls every tool at once and then answers; ``again`` (a new process,
as after a restart) runs one more turn on the same stream. Every request body the OpenAI SDK sends is appended
to RECORDING (one JSON line each), from an ``httpx2.MockTransport`` that answers with recorded responses.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx2
from ag2 import Agent
from ag2.config import OpenAIConfig
from ag2.stream import MemoryStream
from pydantic import BaseModel

from sessionstore import SQLiteStorage
from sessionstore.ag2 import AG2Codec


class Forecast(BaseModel):  # the application's own model, never registered with the codec
    city: str
    celsius: float
    sunny: bool


@dataclass
class Reading:  # the application's own dataclass
    station: str
    values: list[int]


def as_model() -> Forecast:
    return Forecast(city="Paris", celsius=21.5, sunny=True)


def as_dataclass() -> Reading:
    return Reading(station="ORY", values=[3, 1, 4])


def as_dict() -> dict[str, Any]:
    return {"city": "Zürich", "nested": {"ok": True, "n": None}}


def as_list() -> list[Any]:
    return [1, "two", 3.0, None]


def as_str() -> str:
    return "plain text"


def as_int() -> int:
    return 42


def as_float() -> float:
    return 0.1


def as_none() -> None:
    return None


def as_bytes() -> bytes:
    return b"raw bytes"


def as_bytearray() -> bytearray:
    return bytearray(b"raw bytearray")  # AG2 sends it as pydantic's JSON of it, a quoted string (bytes go bare)


def as_huge_int() -> int:
    return 10**5000  # more digits than Python writes in decimal by default (sys.get_int_max_str_digits())


class Factorial(BaseModel):  # the application's own model, holding such an int
    n: int
    value: int


def as_model_with_huge_int() -> Factorial:
    return Factorial(n=5000, value=-(10**5000))


TOOLS = [
    *(as_model, as_dataclass, as_dict, as_list, as_str, as_int, as_float, as_none, as_bytes),
    *(as_bytearray, as_huge_int, as_model_with_huge_int),
]


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1764633600,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


CALLS = _completion(
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": tool.__name__, "arguments": "{}"}}
            for i, tool in enumerate(TOOLS)
        ],
    },
    "tool_calls",
)


def answer(text: str) -> dict[str, Any]:
    return _completion({"role": "assistant", "content": text}, "stop")


def main() -> None:
    db, stream, recording, mode = sys.argv[1:]
    replies = [CALLS, answer("Done.")] if mode == "first" else [answer("Again.")]

    def respond(request: httpx2.Request) -> httpx2.Response:
        with Path(recording).open("a") as out:
            out.write(json.dumps(json.loads(request.content)) + "\n")
        return httpx2.Response(200, json=replies.pop(0))

    config = OpenAIConfig(
        model="gpt-4o-mini",
        api_key="sk-test",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(respond)),
    )

    async def run() -> str:
        async with SQLiteStorage(db, codec=AG2Codec()) as storage:
            agent = Agent("a", config=config, tools=TOOLS)
            reply = await agent.ask("Call every tool.", stream=MemoryStream(storage, id=UUID(stream)))
            return str(reply.body)

    print(json.dumps({"answer": asyncio.run(run())}))


if __name__ == "__main__":
    main()
