"""What both Google ADK session services share: events and the session bookkeeping."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from google.adk.events import Event
from google.genai import types

from . import Adapter

APP, USER = "bench", "user"


def adk_events(events: list[Any]) -> list[Any]:
    out: list[Any] = []
    for e in events:
        if e.kind == "user":
            part = types.Part(text=e.data["content"])
            role, author = "user", "user"
        elif e.kind == "model":
            part = types.Part(text=e.data["content"])
            role, author = "model", "agent"
        elif e.kind == "tool_call":
            call = types.FunctionCall(id=e.data["call_id"], name=e.data["name"], args=e.data["arguments"])
            part, role, author = types.Part(function_call=call), "model", "agent"
        else:
            response = types.FunctionResponse(
                id=e.data["call_id"], name="search_files", response={"result": e.data["content"]}
            )
            part, role, author = types.Part(function_response=response), "user", "agent"
        out.append(Event(author=author, invocation_id="inv", content=types.Content(role=role, parts=[part])))
    return out


def wal(path: Path) -> None:
    """Put the (new) file in WAL mode first: ADK leaves the journal mode alone, and WAL persists."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()


class AdkStore(Adapter):
    """An ADK service: ``append_event`` needs the Session object it created or loaded."""

    can_replace = False
    bulk_load = False
    bench_wal = True
    durability = "WAL set on the file by the bench (ADK leaves the journal mode alone); one commit per append_event"
    service: Any

    def convert(self, events: list[Any]) -> list[Any]:
        return adk_events(events)

    async def open(self, path: Path) -> None:
        if self.bench_wal:
            wal(path)  # a no-op on a file already in WAL mode
        self.service = self.make(path)
        self.sessions: dict[str, Any] = {}

    def make(self, path: Path) -> Any:
        raise NotImplementedError

    async def close(self) -> None:
        await self.service.close()

    async def create(self, key: str) -> None:
        session = await self.service.get_session(app_name=APP, user_id=USER, session_id=key)
        if session is None:
            session = await self.service.create_session(app_name=APP, user_id=USER, session_id=key)
        self.sessions[key] = session

    async def append(self, key: str, event: Any) -> None:
        # ADK events carry an id and timestamp: a copy per append, as a runner makes a new Event per step.
        await self.service.append_event(self.sessions[key], event.model_copy())

    async def read(self, key: str) -> list[Any]:
        session = await self.service.get_session(app_name=APP, user_id=USER, session_id=key)
        return list(session.events)
