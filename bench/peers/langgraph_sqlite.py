"""LangGraph ``AsyncSqliteSaver``: every step writes a checkpoint holding the whole state.

An agent graph's ``messages`` channel is the full history, so appending one
event writes a new checkpoint with all of them, as a LangGraph agent does: the
cost grows with the history. Messages are plain dicts (cheaper to serialize
than LangChain message objects, so this favours LangGraph).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from . import Adapter, aiosqlite_pragmas
from ._formats import plain_messages


class Store(Adapter):
    key = "langgraph"
    bulk_equals_appends = False  # one checkpoint, not one per event
    durability = "one commit per checkpoint (aput)"

    def convert(self, events: list[Any]) -> list[Any]:
        return plain_messages(events)

    async def open(self, path: Path) -> None:
        self.conn = await aiosqlite.connect(path)
        self.saver = AsyncSqliteSaver(self.conn)
        await self.saver.setup()
        self.state: dict[str, tuple[dict[str, Any], list[Any]]] = {}

    async def close(self) -> None:
        await self.conn.close()

    async def create(self, key: str) -> None:
        config: dict[str, Any] = {"configurable": {"thread_id": key, "checkpoint_ns": ""}}
        found = await self.saver.aget_tuple(config)  # type: ignore[arg-type]
        messages = list(found.checkpoint["channel_values"].get("messages", [])) if found else []
        self.state[key] = (found.config if found else config, messages)

    async def _put(self, key: str, messages: list[Any]) -> None:
        config, _ = self.state[key]
        step = len(messages)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": messages}
        checkpoint["channel_versions"] = {"messages": step}
        checkpoint["updated_channels"] = ["messages"]
        metadata = {"source": "loop", "step": step, "parents": {}}
        new_config = await self.saver.aput(config, checkpoint, metadata, {"messages": step})  # type: ignore[arg-type]
        self.state[key] = (new_config, messages)

    async def append(self, key: str, event: Any) -> None:
        _, messages = self.state[key]
        await self._put(key, [*messages, event])

    async def load(self, key: str, events: list[Any]) -> None:
        _, messages = self.state[key]
        await self._put(key, [*messages, *events])

    async def read(self, key: str) -> list[Any]:
        found = await self.saver.aget_tuple({"configurable": {"thread_id": key, "checkpoint_ns": ""}})  # type: ignore[arg-type]
        return list(found.checkpoint["channel_values"]["messages"]) if found else []

    async def replace(self, key: str, events: list[Any]) -> None:
        await self._put(key, list(events))

    pragma_source = "the aiosqlite connection handed to AsyncSqliteSaver"

    async def pragmas(self, key: str) -> dict[str, str]:
        return await aiosqlite_pragmas(self.conn)

    def cold_start_code(self, path: Path, key: str) -> str:
        return f"""
import asyncio
import aiosqlite
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
async def main():
    async with AsyncSqliteSaver.from_conn_string({str(path)!r}) as saver:
        found = await saver.aget_tuple({{"configurable": {{"thread_id": {key!r}, "checkpoint_ns": ""}}}})
    assert found.checkpoint["channel_values"]["messages"]
asyncio.run(main())
"""
