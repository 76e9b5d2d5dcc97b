"""Running a recorded provider conversation two ways, and comparing what the provider was sent.

* ``memory``: the reference. AG2's own ``ACPAgent`` with its in-memory storage, served in the test process
  (over a socket pair, to the same SDK client), every turn by the process that made the events: the
  provider's mapper reads back the very objects its client built. What AG2 sends when nothing is stored
  anywhere and nothing restarts.
* ``restart``: ``DurableACPAgent`` on a SQLite file in agent subprocesses spoken to over stdio, a new process
  for every turn. Each process is SIGKILLed as soon as its turn has ended, and the next takes the session back
  with ``session/load`` (which replays it to the client) or ``session/resume``, alternately, before it
  prompts. (Within a turn, the request after a tool call is built by the same process from the same file:
  ``DurableACPAgent`` reads the history back from SQLite before every model call.)

Each run has its own folder, database and request recording (``_provider_http``). Agent processes are CPU-bound
while they import AG2 and the provider SDKs (seconds each), so the restart runs share a semaphore bounding how
many are alive at once.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
from _acp_client import Files, agent_process, served, within
from _provider_agent import build_agent
from _provider_http import CASSETTES, REQUESTS_ENV, body_bytes, read_requests
from acp import schema

HERE = Path(__file__).resolve().parent
AGENT = HERE / "_provider_agent.py"
PROJECT = "/home/me/orchard"
MODES = ("memory", "restart")

PNG = (CASSETTES / "kumquat.png").read_bytes()
PDF = (CASSETTES / "price-list.pdf").read_bytes()


def text(value: str) -> Any:
    return acp.text_block(value)


def image() -> Any:
    """An ACP image block (AG2 makes it an image ``BinaryInput``)."""
    return acp.image_block(base64.b64encode(PNG).decode("ascii"), "image/png")


def pdf() -> Any:
    """An ACP embedded resource holding a PDF (AG2 makes it a document ``BinaryInput``)."""
    blob = schema.BlobResourceContents(
        blob=base64.b64encode(PDF).decode("ascii"), mime_type="application/pdf", uri=f"file://{PROJECT}/price-list.pdf"
    )
    return acp.resource_block(blob)


@dataclass
class Conversation:
    name: str  # the agent's conversation argument (``_provider_http.FACTORIES``)
    cassette: str
    turns: Sequence[Sequence[Any]]  # each turn: the ACP content blocks of one prompt


@dataclass
class RunFiles(Files):
    """``Files`` plus this run's request recording, named to the agent processes by the environment."""

    requests: Path = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.requests = self.root / "requests.jsonl"

    def env(self) -> dict[str, str]:
        return {**super().env(), REQUESTS_ENV: str(self.requests)}


class InProcessACPAgent:
    """AG2's ``ACPAgent`` with the ``serve``/``aclose`` that ``_acp_client.served`` drives.

    ``ACPAgent`` only serves stdio itself; this serves it on the given streams the way its ``run_stdio`` does
    (``ag2.acp.guard.serve`` with a fresh connection scope from ``bind``).
    """

    def __init__(self, agent: Any) -> None:
        from ag2.acp import ACPAgent

        self.server = ACPAgent(agent)

    async def serve(self, reader: Any, writer: Any) -> None:
        from ag2.acp.guard import serve

        await serve(self.server.bind, reader, writer)

    async def aclose(self) -> None:
        return None


@dataclass
class Run:
    """What one run of a conversation left: the requests the provider got, what the client saw, the files."""

    mode: str
    files: RunFiles
    session_id: str
    requests: list[dict[str, Any]]
    stop_reasons: list[str]
    answers: list[list[str]]  # per turn, the agent's message chunks as the client got them
    replays: list[list[str]]  # per session/load, the kinds of update the client was replayed
    first_request_of_turn: list[int]  # per turn, the index of its first request

    def bodies(self) -> list[bytes]:
        return [body_bytes(r) for r in self.requests]

    def json_bodies(self) -> list[Any]:
        return [json.loads(b) for b in self.bodies()]


def _agent_text(updates: list[Any]) -> list[str]:
    return [u.content.text for u in updates if u.session_update == "agent_message_chunk"]


async def run_conversation(conversation: Conversation, mode: str, root: Path, slots: asyncio.Semaphore) -> Run:
    """Play the conversation's turns as ``mode`` says; at most ``slots`` agent processes at once."""
    assert mode in MODES, mode
    root.mkdir(parents=True, exist_ok=True)
    files = RunFiles(root)
    command = [sys.executable, str(AGENT), conversation.name, str(files.db)]
    stop_reasons: list[str] = []
    answers: list[list[str]] = []
    replays: list[list[str]] = []
    firsts: list[int] = []
    session_id = ""

    async def prompt(agent: Any, blocks: Sequence[Any]) -> None:
        agent.recorder.clear()
        firsts.append(len(read_requests(files.requests)))
        response = await within(agent.conn.prompt(session_id=session_id, prompt=list(blocks)))
        stop_reasons.append(response.stop_reason)
        answers.append(_agent_text(agent.recorder.of(session_id)))

    step = "starting"
    try:
        if mode == "memory":
            step = "serving in this process"
            async with served(InProcessACPAgent(build_agent(conversation.name, files.requests))) as agent:
                step = "session/new"
                session_id = await agent.new(PROJECT)
                for number, blocks in enumerate(conversation.turns):
                    step = f"turn {number + 1}: session/prompt"
                    await prompt(agent, blocks)
                step = "disconnecting"
        else:
            for number, blocks in enumerate(conversation.turns):
                step = f"turn {number + 1}: starting a process"
                async with slots, agent_process(files, command=command) as agent:
                    if number == 0:
                        step = "session/new"
                        session_id = await agent.new(PROJECT)
                    elif number % 2:
                        step = f"turn {number + 1}: session/load"
                        await within(agent.conn.load_session(cwd=PROJECT, session_id=session_id))
                        await agent.settle(session_id, 1)  # the replay's notifications may trail the response
                        replays.append(agent.recorder.kinds(session_id))
                    else:
                        step = f"turn {number + 1}: session/resume"
                        await within(agent.conn.resume_session(cwd=PROJECT, session_id=session_id))
                    step = f"turn {number + 1}: session/prompt"
                    await prompt(agent, blocks)
                    step = f"turn {number + 1}: SIGKILL"
                    await agent.kill()
                    step = f"turn {number + 1}: after SIGKILL"
                assert agent.process.returncode == -9, agent.process.returncode
    except Exception as exc:
        raise RuntimeError(f"{mode} run of {conversation.name}, at {step}: {exc!r}") from exc
    return Run(mode, files, session_id, read_requests(files.requests), stop_reasons, answers, replays, firsts)


async def play_all(
    conversations: Sequence[Conversation], root: Path, *, at_once: int = 2
) -> dict[tuple[str, str], Run | BaseException]:
    """Both runs of every conversation, concurrently (at most ``at_once`` agent processes alive).

    A run that fails is kept as its exception, so one provider's failure fails that provider's tests only.
    """
    slots = asyncio.Semaphore(at_once)
    jobs = [(c, mode) for mode in ("restart", "memory") for c in conversations]

    async def one(conversation: Conversation, mode: str) -> Run | BaseException:
        folder = root / conversation.name / mode
        try:
            return await run_conversation(conversation, mode, folder, slots)
        except Exception as exc:
            log = folder / "agent-stderr.log"
            tail = log.read_text().strip().splitlines()[-3:] if log.exists() else []
            failure = RuntimeError(" / ".join([repr(exc), "the agent's stderr ends:", *tail]))
            failure.__cause__ = exc
            return failure

    results = await asyncio.gather(*(one(c, mode) for c, mode in jobs))
    return {(c.name, mode): result for (c, mode), result in zip(jobs, results, strict=True)}


def _json_path_of_difference(a: Any, b: Any, path: str = "$") -> str | None:
    if type(a) is not type(b):
        return path
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path} (keys {list(a)} vs {list(b)})"
        for key in a:
            if (found := _json_path_of_difference(a[key], b[key], f"{path}.{key}")) is not None:
                return found
        return None
    if isinstance(a, list):
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            if (found := _json_path_of_difference(x, y, f"{path}[{index}]")) is not None:
                return found
        return None if len(a) == len(b) else f"{path} (lengths {len(a)} vs {len(b)})"
    return None if a == b else path


def describe_difference(reference: bytes, other: bytes, *, context: int = 120) -> str:
    """Where two request bodies first differ: byte offset, the bytes around it, and the JSON path."""
    size = min(len(reference), len(other))
    offset = next((i for i in range(size) if reference[i] != other[i]), size)
    start = max(0, offset - context)
    lines = [
        f"first differing byte at offset {offset} (lengths {len(reference)} and {len(other)})",
        f"  reference: ...{reference[start : offset + context]!r}",
        f"  this run:  ...{other[start : offset + context]!r}",
    ]
    try:
        lines.append(f"  JSON path: {_json_path_of_difference(json.loads(reference), json.loads(other))}")
    except ValueError:
        pass
    return "\n".join(lines)
