"""The README's first command: a conversation written by one process, resumed by another.

python -m sessionstore.demo write demo.db    # an agent talks, then exits
python -m sessionstore.demo resume demo.db   # a new process lists and resumes it
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from uuid import UUID

from . import (
    ModelMessage,
    SessionStore,
    SQLiteStorage,
    ToolCall,
    ToolResult,
    UserMessage,
)
from .events import BaseEvent
from .storage import shown_time


async def write(path: str) -> None:
    async with SQLiteStorage(path) as storage:
        store = SessionStore(storage=storage, retain_history=True)
        session = await store.create(cwd="/home/me/project", meta={"client": "demo"})
        await store.set_title(session.session_id, "Why is the build red?")
        stream = store.stream(session)
        async with session.turn():
            await stream.send(UserMessage("Why is the build red?"))
            await stream.send(ToolCall(call_id="c1", name="run", arguments={"cmd": "pytest -x"}))
            await stream.send(ToolResult(call_id="c1", content="1 failed: test_parse_dates"))
            await stream.send(ModelMessage("test_parse_dates fails: the fixture expects UTC."))
        await store.aclose()  # the agent exits; retain_history keeps the conversation
        print(f"wrote session {session.session_id} to {path}")


def render(event: BaseEvent) -> str:
    if isinstance(event, UserMessage):
        return f"user:  {event.content}"
    if isinstance(event, ModelMessage):
        return f"agent: {event.content}"
    if isinstance(event, ToolCall):
        return f"tool call {event.name}({event.arguments})"
    if isinstance(event, ToolResult):
        return f"tool result: {event.content}"
    return f"{type(event).__name__}: {event}"


async def resume(path: str) -> None:
    async with SQLiteStorage(path) as storage:
        store = SessionStore(storage=storage, retain_history=True)
        page = await store.list_sessions()
        for record in page.sessions:
            print(f"{record.session_id}  {shown_time(record.updated_at)}  {record.cwd}  {record.title}")
        if not page.sessions:
            print("no sessions stored", file=sys.stderr)
            raise SystemExit(1)
        newest = page.sessions[0]
        session, _ = await store.get_or_adopt(UUID(hex=newest.session_id))
        print(f"\nresumed {session.session_id} in {session.cwd}:")
        for event in await store.stream(session).history.get_events():
            print("  " + render(event))
        await store.aclose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sessionstore.demo")
    parser.add_argument("step", choices=["write", "resume"])
    parser.add_argument("db")
    args = parser.parse_args(argv)
    asyncio.run(write(args.db) if args.step == "write" else resume(args.db))


if __name__ == "__main__":
    main()
