"""Deleted means gone: after ``delete``, ``prune`` or ``close()`` without retention, no byte of a deleted
event's text is left in the database file, its write-ahead log or its full-text index.

Each test plants words found nowhere else, deletes the session holding them,
and searches the raw bytes of every file the database consists of.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path
from uuid import UUID, uuid4

import pytest

from sessionstore import EventContext, ModelMessage, SessionRecord, SessionStore, SQLiteStorage, ToolCall, UserMessage


def planted() -> list[str]:
    return [f"zq{secrets.token_hex(6)}" for _ in range(4)]


def leftovers(db: Path, words: list[str]) -> list[str]:
    data = b"".join(Path(f"{db}{suffix}").read_bytes() for suffix in ("", "-wal") if Path(f"{db}{suffix}").exists())
    return [word for word in words if word.encode() in data]


async def fill(storage: SQLiteStorage, words: list[str], others: int = 30) -> str:
    """Sessions of ordinary text, and one holding the planted words (returned)."""
    for n in range(others):
        sid = uuid4()
        await storage.set_history(sid, [UserMessage(f"ordinary words {n} " * 20), ModelMessage("nothing to see " * 10)])
    secret = uuid4()
    await storage.save_session(SessionRecord(session_id=secret.hex, title=f"about {words[3]}"))
    context = EventContext.for_stream(secret)
    await storage.save_event(UserMessage(f"please remember {words[0]} for me"), context)
    await storage.save_event(ToolCall(call_id="c", name="note", arguments={"text": words[1]}), context)
    await storage.save_event(ModelMessage(f"noted {words[2]}"), context)
    return secret.hex


@pytest.mark.parametrize("how", ["delete", "prune"])
async def test_the_commands_leave_no_byte_of_a_deleted_conversation(tmp_path: Path, how: str) -> None:
    db = tmp_path / "agent.db"
    words = planted()
    async with SQLiteStorage(db) as storage:
        secret = await fill(storage, words)
        await storage.touch_session(UUID(hex=secret), released=True)
    assert leftovers(db, words) == words  # they are there to begin with
    script = Path(sys.executable).parent / "sessionstore"
    command = ["delete", secret] if how == "delete" else ["prune", "--older-than", "0s", "--yes"]
    done = subprocess.run([script, "--db", db, *command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert leftovers(db, words) == []


async def test_close_without_retention_leaves_no_byte(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    words = planted()
    async with SQLiteStorage(db) as storage:
        await fill(storage, [planted()[0], *planted()[1:]])  # other sessions, other words
        store = SessionStore(storage=storage, retain_history=False)
        session = await store.create(cwd="/w", title=f"about {words[3]}")
        stream = store.stream(session)
        async with session.turn():
            await stream.send(UserMessage(f"please remember {words[0]} for me"))
            await stream.send(ToolCall(call_id="c", name="note", arguments={"text": words[1]}))
            await stream.send(ModelMessage(f"noted {words[2]}"))
        assert leftovers(db, words) != []
        await store.close(session.session_id)
        assert leftovers(db, words) == []  # gone as soon as close() returns, the storage still open
        assert (await storage.list_sessions()).sessions  # and the other conversations are all there
