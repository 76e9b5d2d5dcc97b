"""Paging is complete: every session that exists for the whole of a paging walk appears exactly once,
however sessions are written, renamed, released or created while the walk goes on."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from databases import DATABASES, Database

from sessionstore import EventContext, MemoryStorage, SessionRecord, UserMessage


@pytest.mark.parametrize("kind", ["memory", *DATABASES])
async def test_a_walk_lists_each_session_once_while_agents_write(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    storage: Any = MemoryStorage() if kind == "memory" else Database.of(kind, request, tmp_path).storage()
    rng = random.Random(5)
    existing = []
    for n in range(300):
        sid = uuid4()
        await storage.save_session(SessionRecord(session_id=sid.hex, cwd="/w"))
        await storage.save_event(UserMessage(f"first {n}"), EventContext.for_stream(sid))
        existing.append(sid)

    seen: list[str] = []
    cursor = None
    while True:
        page = await storage.list_sessions(cursor=cursor, limit=7)
        seen += [record.session_id for record in page.sessions]
        # Between two pages, agents carry on: old and listed sessions get new events (and so a new
        # updated_at), titles change, sessions are released, new ones are made.
        for sid in rng.sample(existing, 10):
            await storage.save_event(UserMessage("more"), EventContext.for_stream(sid))
            await storage.touch_session(sid, released=rng.random() < 0.5)
        await storage.set_title(rng.choice(existing), f"renamed {rng.random()}")
        await storage.save_session(SessionRecord(session_id=uuid4().hex, cwd="/w"))
        if (cursor := page.next_cursor) is None:
            break
    assert sorted(set(seen) & {sid.hex for sid in existing}) == sorted(sid.hex for sid in existing)
    assert len(seen) == len(set(seen))  # nothing twice (new sessions may or may not show)
    if not isinstance(storage, MemoryStorage):
        await storage.aclose()
