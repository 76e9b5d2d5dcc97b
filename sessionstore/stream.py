"""A session's stream: its history, its inbox and the background work it carries.

One stream object lives as long as its session (see
:meth:`SessionStore.stream`): a message or a background task that outlives the
turn that started it must still be reachable from the next turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from contextlib import suppress
from typing import Any

from .events import BaseEvent
from .storage import EventContext, History, Storage, StreamId

__all__ = ["SessionStream"]


class SessionStream:
    def __init__(self, storage: Storage, stream_id: StreamId) -> None:
        self.id = stream_id
        self.history = History(storage, stream_id)
        self._storage = storage
        self._context = EventContext.for_stream(stream_id)
        self._inbox: list[Any] = []
        self._background: set[asyncio.Task[Any]] = set()

    async def send(self, event: BaseEvent) -> None:
        """Append one event to this stream's history (``Storage.save_event``)."""
        await self._storage.save_event(event, self._context)

    def enqueue(self, message: Any) -> None:
        """Leave a message for the next turn to pick up."""
        self._inbox.append(message)

    @property
    def pending_messages(self) -> list[Any]:
        """Messages enqueued and not yet taken (a copy)."""
        return list(self._inbox)

    def take_pending(self) -> list[Any]:
        """Take every pending message, leaving the inbox empty."""
        taken, self._inbox = self._inbox, []
        return taken

    def spawn_background(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run work that may outlive the current turn; stopped when the session goes."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def stop_background(self) -> None:
        """Cancel background work and wait for it to unwind.

        Once a session is torn down the client that asked for the work is gone;
        anything it still did would reach the world unattributed.
        """
        tasks = [t for t in self._background if not t.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with suppress(asyncio.CancelledError, Exception):
                await task
