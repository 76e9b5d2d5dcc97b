"""The client side of the ACP tests: agent processes driven over stdio by the SDK's real client connection.

Every wait has a timeout (a hang fails the test instead of blocking CI), and
every process started here is killed and reaped on the way out, whatever
happened in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import acp
from acp import schema
from acp.client.connection import ClientSideConnection
from acp.transports import spawn_stdio_transport

HERE = Path(__file__).resolve().parent
AGENT = HERE / "_acp_agent.py"
README = HERE.parents[1] / "docs" / "ag2.md"  # the AG2 guide, whose blocks are run as written
TIMEOUT = 30.0  # only stops a hang; nothing here measures time
T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float = TIMEOUT) -> T:
    return await asyncio.wait_for(awaitable, seconds)


class Recorder:
    """An ACP client that records every ``session/update`` it is sent (and implements nothing else)."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []

    def kinds(self, session_id: str) -> list[str]:
        return [u.session_update for sid, u in self.updates if sid == session_id]

    def of(self, session_id: str, kind: str | None = None) -> list[Any]:
        return [u for sid, u in self.updates if sid == session_id and (kind is None or u.session_update == kind)]

    def clear(self) -> None:
        self.updates.clear()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(self, **kwargs: Any) -> Any:
        raise acp.RequestError.method_not_found("session/request_permission")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise acp.RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


@dataclass
class Files:
    """One test's files: the database, the model's script and recording, the tool's gate, the agents' stderr."""

    root: Path
    db: Path = field(init=False)
    script: Path = field(init=False)
    recording: Path = field(init=False)
    gate: Path = field(init=False)
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.db = self.root / "agent.db"
        self.script = self.root / "script.json"
        self.recording = self.root / "recording.jsonl"
        self.gate = self.root / "gate"
        self.gate.mkdir(exist_ok=True)
        self.log = self.root / "agent-stderr.log"
        self.script.write_text("[]")

    def env(self) -> dict[str, str]:
        return {
            "SESSIONSTORE_TEST_SCRIPT": str(self.script),
            "SESSIONSTORE_TEST_RECORDING": str(self.recording),
            "SESSIONSTORE_TEST_GATE": str(self.gate),
            "PYTHONPATH": str(HERE),
            "PYTHONDONTWRITEBYTECODE": "1",
        }

    def script_steps(self, steps: Sequence[dict[str, Any]]) -> None:
        self.script.write_text(json.dumps(list(steps)))

    def recording_lines(self) -> list[dict[str, Any]]:
        if not self.recording.exists():
            return []
        return [json.loads(line) for line in self.recording.read_text().splitlines() if line.strip()]

    def stderr(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


@dataclass
class Running:
    """A connected agent process: ``conn`` speaks ACP to it, ``recorder`` holds what it sent back."""

    conn: ClientSideConnection
    recorder: Recorder
    process: asyncio.subprocess.Process
    init: schema.InitializeResponse

    async def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean anything up."""
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGKILL)
        await within(self.process.wait())

    async def terminate(self) -> int:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        return await within(self.process.wait())

    async def new(self, cwd: str, **kwargs: Any) -> str:
        response = await within(self.conn.new_session(cwd=cwd, **kwargs))
        return response.session_id

    async def say(self, session_id: str, text: str) -> schema.PromptResponse:
        return await within(self.conn.prompt(session_id=session_id, prompt=[acp.text_block(text)]))

    async def settle(self, session_id: str, count: int) -> None:
        """Wait (bounded) until ``count`` updates for the session have been handled by the recorder."""
        for _ in range(200):
            if len(self.recorder.of(session_id)) >= count:
                return
            await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def agent_process(
    files: Files, *args: str, command: Sequence[str] | None = None, env: Mapping[str, str] | None = None
) -> AsyncIterator[Running]:
    """Start an agent and connect a real ACP client to it.

    By default the test agent (``_acp_agent.py DB *args``); ``command`` runs something else (the example).
    ``env`` adds to the test's variables (the SDK passes on only a trimmed environment: no API keys).
    """
    recorder = Recorder()
    argv = list(command) if command is not None else [sys.executable, str(AGENT), str(files.db), *args]
    with files.log.open("a") as log:
        async with spawn_stdio_transport(
            argv[0],
            *argv[1:],
            env={**files.env(), **(env or {})},
            cwd=str(files.root),
            stderr=log,
            shutdown_timeout=5.0,
        ) as (reader, writer, process):
            conn = ClientSideConnection(recorder, writer, reader, use_unstable_protocol=True)
            try:
                init = await within(conn.initialize(protocol_version=acp.PROTOCOL_VERSION))
                yield Running(conn, recorder, process, init)
            finally:
                # Then spawn_stdio_transport closes stdin, waits, and terminates or kills the process.
                await within(conn.close())


def sessionstore_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``sessionstore`` console script (beside this interpreter)."""
    script = Path(sys.executable).with_name("sessionstore")
    command = str(script) if script.exists() else shutil.which("sessionstore")
    assert command, "the sessionstore console script is not installed"
    done = subprocess.run([command, *args], capture_output=True, text=True, timeout=TIMEOUT, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    return done


def readme_block(marker: str) -> tuple[str, str | None]:
    """The AG2 guide's one Python block containing ``marker``, word for word, and the text block right after it (the
    output it shows), if there is one."""
    found = re.findall(r"```python\n(.*?)```\n(?:\n```text\n(.*?)```)?", README.read_text(), flags=re.DOTALL)
    blocks = [(code, shown or None) for code, shown in found if marker in code]
    assert len(blocks) == 1, f"{len(blocks)} blocks of the AG2 guide contain {marker!r}"
    return blocks[0]


def sqlite3_shell(db: Path, sql: str) -> str:
    """``sql`` run by the real ``sqlite3`` command-line shell."""
    shell = shutil.which("sqlite3")
    assert shell is not None, "the sqlite3 command-line shell is needed (apt-get install sqlite3)"
    done = subprocess.run(
        [shell, "-batch", "-bail", str(db)], input=sql, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@dataclass
class Served:
    """A DurableACPAgent served in this process over a socket pair, and the real SDK client connected to it."""

    conn: ClientSideConnection
    recorder: Recorder
    init: schema.InitializeResponse
    closed: asyncio.Event

    async def new(self, cwd: str, **kwargs: Any) -> str:
        response = await within(self.conn.new_session(cwd=cwd, **kwargs))
        return response.session_id

    async def say(self, session_id: str, text: str) -> schema.PromptResponse:
        return await within(self.conn.prompt(session_id=session_id, prompt=[acp.text_block(text)]))


@contextlib.asynccontextmanager
async def served(server: Any, *, initialize: bool = True) -> AsyncIterator[Served]:
    """Serve ``server`` (a DurableACPAgent) to one client connection; leaving disconnects the client.

    The disconnect is the client going away (EOF on the agent's side), so leaving also runs the agent's
    connection-end path, and this waits for it to finish, then closes the agent's file: nothing is left
    running or open afterwards.
    """
    left, right = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=left)
    client_reader, client_writer = await asyncio.open_connection(sock=right)
    closed = asyncio.Event()

    async def serve() -> None:
        try:
            await server.serve(agent_reader, agent_writer)
        finally:
            closed.set()

    serving = asyncio.create_task(serve())
    recorder = Recorder()
    conn = ClientSideConnection(recorder, client_writer, client_reader, use_unstable_protocol=True)
    try:
        init = (
            await within(conn.initialize(protocol_version=acp.PROTOCOL_VERSION))
            if initialize
            else schema.InitializeResponse(protocol_version=acp.PROTOCOL_VERSION)
        )
        yield Served(conn, recorder, init, closed)
    finally:
        try:
            await within(conn.close())
            client_writer.close()
            with contextlib.suppress(ConnectionError):
                await within(client_writer.wait_closed())
            await within(serving)
        finally:
            if not serving.done():
                serving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
            agent_writer.close()
            with contextlib.suppress(ConnectionError):
                await within(agent_writer.wait_closed())
            await within(server.aclose())  # the file it opened from a path (a storage passed in stays open)


def rows(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows read straight from the file with Python's sqlite3 module (a separate connection, no sessionstore)."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()
