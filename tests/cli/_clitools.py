"""Helpers for the command-line tests: databases written by the library, the installed script, the sqlite3 shell."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from sessionstore import (
    BaseEvent,
    EventContext,
    ModelMessage,
    SessionStore,
    SQLiteStorage,
    SystemMessage,
    ToolCall,
    ToolResult,
    UnknownEvent,
    UserMessage,
    in_session,
)

TIMEOUT = 120.0  # only stops a hung child from hanging CI; nothing measures time


@dataclass
class Spec:
    """One session to write: its events, context, and optionally a fixed id, title or age."""

    events: Sequence[BaseEvent]
    cwd: str = "/work"
    title: str | None = None
    session_id: str | None = None
    updated_at: datetime | None = None
    released: bool = True
    meta: dict[str, Any] = field(default_factory=dict)


def conversation() -> list[BaseEvent]:
    """Every kind of event the CLI renders, plus one type this version does not know."""
    return [
        SystemMessage("You are careful."),
        UserMessage("Why is the build red?\nIt was green yesterday."),
        ToolCall(call_id="c1", name="run", arguments={"cmd": "pytest -x"}),
        ToolResult(call_id="c1", content="1 failed: test_parse_dates"),
        ModelMessage("test_parse_dates fails: the fixture expects UTC."),
        UnknownEvent(stored_type="myapp.handoff", payload='{"to_agent":"reviewer"}'),
    ]


async def write_db_async(path: Path, specs: Sequence[Spec]) -> list[str]:
    ids: list[str] = []
    async with SQLiteStorage(path) as storage:
        store = SessionStore(storage=storage, retain_history=True)
        for spec in specs:
            stream_id = UUID(hex=spec.session_id) if spec.session_id else uuid4()
            session, _ = await store.get_or_adopt(stream_id, cwd=spec.cwd, meta=spec.meta)
            stream = store.stream(session)
            async with session.turn():
                for event in spec.events:
                    await stream.send(event)
            if spec.title is not None:
                await store.set_title(session.session_id, spec.title)
            ids.append(session.session_id)
        await store.aclose()  # retained: every row stays, marked released
        for spec, sid in zip(specs, ids, strict=True):
            record = await storage.load_session(UUID(hex=sid))
            assert record is not None
            # Ageing a session, or marking it still held, goes through the storage's own API.
            if spec.updated_at is not None or not spec.released:
                stamp = spec.updated_at or record.updated_at
                await storage.save_session(replace(record, updated_at=stamp, released=spec.released))
    return ids


def write_db(path: Path, specs: Sequence[Spec]) -> list[str]:
    """Write ``specs`` with SQLiteStorage + SessionStore (the way an agent would); returns the session ids."""
    return asyncio.run(write_db_async(path, specs))


@dataclass(frozen=True)
class Family:
    """A session with a subagent that has one of its own, and another session (the ids, 32 hex digits)."""

    session: str
    subagent: str
    nested: str
    other: str


async def write_family_async(path: Path) -> Family:
    """A session whose turn opens a subagent (the way AG2's run_task writes one: a new stream on the session's
    storage), whose own turn opens another; then a second session. Written by SQLiteStorage + SessionStore."""
    subagent, nested = uuid4(), uuid4()
    async with SQLiteStorage(path) as storage:
        store = SessionStore(storage=storage, retain_history=True)
        session = await store.create(cwd="/orchard")
        stream = store.stream(session)

        async def say(stream_id: UUID, event: BaseEvent) -> None:
            await storage.save_event(event, EventContext.for_stream(stream_id))

        async with session.turn():
            await stream.send(UserMessage("Plan the orchard survey"))
            await stream.send(ToolCall(call_id="t1", name="task_counter", arguments={"objective": "count"}))
            await say(subagent, UserMessage("Count the kumquat trees"))
            with in_session(subagent):  # the subagent's own turn
                await say(nested, UserMessage("Double-check the quokka census"))
                await say(nested, ModelMessage("The quokka census is confirmed"))
            await say(subagent, ModelMessage("There are 12 kumquat trees"))
            await stream.send(ToolResult(call_id="t1", content="There are 12 kumquat trees"))
            await stream.send(ModelMessage("Survey planned"))
        other = await store.create(cwd="/orchard")
        async with other.turn():
            await store.stream(other).send(UserMessage("Water the loquats"))
        await store.aclose()  # retained, released
    return Family(session.session_id, subagent.hex, nested.hex, other.session_id)


def write_family(path: Path) -> Family:
    return asyncio.run(write_family_async(path))


def fingerprint(db: Path) -> dict[str, str | None]:
    """The bytes of a database file and its companions (None where absent)."""
    out: dict[str, str | None] = {}
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = Path(f"{db}{suffix}")
        out[suffix or "db"] = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
    return out


def script_path() -> str:
    """The installed console script: on PATH, or beside this interpreter in its venv."""
    beside = Path(sys.executable).parent / ("sessionstore.exe" if os.name == "nt" else "sessionstore")
    found = str(beside) if beside.exists() else shutil.which("sessionstore")
    assert found, "the sessionstore console script is not installed (pip install -e .)"
    return found


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SESSIONSTORE_DB", "XDG_DATA_HOME")}
    env.update({"TZ": "UTC", "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "200"})
    env.update(extra)
    return env


Run = Callable[..., subprocess.CompletedProcess[str]]


@dataclass
class Result:
    code: int
    out: str
    err: str


Call = Callable[..., Result]


def sqlite3_shell(db: Path, sql: str) -> str:
    """Run ``sql`` in the real ``sqlite3`` shell, as a person would."""
    shell = shutil.which("sqlite3")
    assert shell is not None, "the sqlite3 command-line shell is needed (apt-get install sqlite3)"
    done = subprocess.run(
        [shell, "-batch", "-bail", str(db)], input=sql, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def now() -> datetime:
    return datetime.now(UTC)


def synthetic_export(path: Path, sessions: int, events: int, text: int = 200) -> Path:
    """An export file of ``sessions`` x ``events`` user messages of ``text`` characters, written directly (a
    large one in a fraction of a second, where writing it through a storage takes many)."""
    import json
    from uuid import uuid4

    stamp = "2026-01-01T00:00:00+00:00"
    with path.open("w", encoding="utf-8") as out:
        out.write('{"format":"sessionstore-export","version":2}\n')
        for _ in range(sessions):
            sid = uuid4().hex
            session = {"kind": "session", "session_id": sid, "created_at": stamp, "updated_at": stamp, "title": None}
            out.write(json.dumps(session) + "\n")
            for position in range(events):
                content = f"message {position} ".ljust(text, "x")
                payload = json.dumps({"content": content}, separators=(",", ":"))
                event = {
                    "kind": "event",
                    "session_id": sid,
                    "position": position,
                    "type": "user_message",
                    "payload": payload,
                    "role": "user",
                    "text": None,
                    "text_path": "$.content",
                    "created_at": stamp,
                }
                out.write(json.dumps(event) + "\n")
    return path
