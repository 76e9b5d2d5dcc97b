"""Any line a client sends: the agent answers what it can, logs the rest, and every live turn goes on.

Spoken as raw JSON lines to a real agent process (the SDK's client would never send these). Was: a JSON array (a
batch) or ``null`` ended the agent process, and with it every live turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from _acp_client import AGENT, TIMEOUT, Files

pytestmark = pytest.mark.asyncio

HOSTILE: list[tuple[bytes, int | None]] = [
    (b'[{"jsonrpc": "2.0", "id": 90, "method": "session/list", "params": {}}]', -32600),  # a batch
    (b"null", -32600),
    (b"42", -32600),
    (b'"a string"', -32600),
    (b"true", -32600),
    (b"\xff\xfe not utf-8 {", -32700),
    (b"{not json", -32700),
    (b'{"jsonrpc": "2.0", "id": [1], "method": "session/list", "params": {}}', -32600),  # an id of the wrong type
    (b'{"jsonrpc": "2.0", "id": 91, "method": 5}', -32600),
    (b'{"jsonrpc": "2.0", "id": 92, "error": 5}', None),  # a malformed response: nothing to answer
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "result": {}}', None),
    (b"[" * 100_000 + b"]" * 100_000, -32700),  # nesting deeper than the parser goes
]


class Wire:
    """An agent process and its stdin/stdout as JSON lines."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.next_id = 1
        self.replies: dict[Any, dict[str, Any]] = {}
        self.orphans: list[dict[str, Any]] = []  # answers with id null

    async def write(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        await self.process.stdin.drain()

    async def send(self, method: str, params: dict[str, Any]) -> int:
        request_id = self.next_id
        self.next_id += 1
        await self.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode())
        return request_id

    async def pump(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            message = json.loads(line)
            if "method" in message:
                continue  # session/update notifications
            if message.get("id") is None:
                self.orphans.append(message)
            else:
                self.replies[message["id"]] = message

    async def reply(self, request_id: int) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT):
            while request_id not in self.replies:
                await asyncio.sleep(0.02)
        return self.replies[request_id]


async def test_no_line_ends_the_agent_or_its_live_turns(files: Files, tmp_path: Path) -> None:
    files.script_steps(
        [
            {"tool": "wait_for_gate", "arguments": {"label": "held"}, "id": "call_1"},
            {"say": "The gate opened."},
            {"say": "Still here."},
        ]
    )
    with files.log.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(AGENT),
            str(files.db),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env={**os.environ, **files.env()},
            limit=1 << 20,
        )
    wire = Wire(process)
    pump = asyncio.create_task(wire.pump())
    try:
        await wire.reply(await wire.send("initialize", {"protocolVersion": 1}))
        new = await wire.reply(await wire.send("session/new", {"cwd": "/tmp", "mcpServers": []}))
        session = new["result"]["sessionId"]
        prompt = await wire.send("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]})
        async with asyncio.timeout(TIMEOUT):  # the turn is live, inside its tool call
            while not (files.gate / "started").exists():
                await asyncio.sleep(0.05)

        for line, _ in HOSTILE:
            await wire.write(line)
        await wire.write(b'{"jsonrpc": "2.0", "method": "_x", "params": {"pad": "' + b"A" * 100_000_000 + b'"}}')

        listed = await wire.reply(await wire.send("session/list", {}))  # the agent still serves
        assert [s["sessionId"] for s in listed["result"]["sessions"]] == [session]
        codes = [answer["error"]["code"] for answer in wire.orphans]
        assert codes == [code for _, code in HOSTILE if code is not None]
        assert all(answer["error"]["data"]["reason"] for answer in wire.orphans)

        (files.gate / "open").touch()  # the live turn goes on to its end
        done = await wire.reply(prompt)
        assert done["result"]["stopReason"] == "end_turn"
        again = await wire.send("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]})
        assert (await wire.reply(again))["result"]["stopReason"] == "end_turn"
        assert process.returncode is None
    finally:
        if process.returncode is None:
            process.kill()
        await asyncio.wait_for(process.wait(), TIMEOUT)
        pump.cancel()
    stderr = files.stderr()
    assert stderr.count("ignored a line from the client") == len([c for _, c in HOSTILE if c is not None])
    assert "Traceback" not in stderr


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)
