"""What the storage asks of its codec: each row's role and text, and how it treats mutable events.

AG2's events are mutable objects, and an agent may change one after it was
saved. The storage must store the event as it was when it was saved, never
mistake a changed event for the stored one, and never let a change made in
memory show up as what the file holds.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any
from uuid import uuid4

from sessionstore import (
    EventContext,
    JsonCodec,
    ModelMessage,
    SQLiteStorage,
    SystemMessage,
    ToolCall,
    ToolResult,
    UnknownEvent,
    UserMessage,
)


class Note:
    """A mutable event, as AG2's are: plain attributes, equality by value."""

    def __init__(self, content: str) -> None:
        self.content = content

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Note) and other.content == self.content

    __hash__ = None  # type: ignore[assignment]


class NoteCodec:
    """A codec of mutable events that describes them with a plain (role, text) tuple."""

    frozen_events = False

    def __init__(self) -> None:
        self.encoded = 0

    def encode(self, event: Any) -> tuple[str, str]:
        self.encoded += 1
        return "note", json.dumps({"content": event.content})

    def decode(self, type_name: str, payload: str) -> Any:
        return Note(json.loads(payload)["content"])

    def describe(self, event: Any) -> tuple[str | None, str | None]:
        return "user", event.content


def stored(path: Path) -> list[tuple[Any, ...]]:
    """Each row's position, payload, role, text and text path, and the text a person reads (the transcript's)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT position, payload, role, text, text_path FROM events ORDER BY position").fetchall()
        shown = dict(conn.execute("SELECT position, text FROM transcript").fetchall())
    return [(*row, shown.get(row[0])) for row in rows]


async def test_a_mutable_event_is_stored_as_it_was_when_saved(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    sid = uuid4()
    async with SQLiteStorage(path, codec=NoteCodec()) as storage:
        note = Note("first draft")
        await storage.save_event(note, EventContext.for_stream(sid))
        note.content = "changed after saving"
        (read,) = await storage.get_history(sid)
        # What this process reads is what the file holds, not the object it saved.
        assert read == Note("first draft") and read is not note
        assert [row[1] for row in stored(path)] == ['{"content": "first draft"}']


async def test_a_read_history_changed_in_place_is_written_back_changed(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    sid = uuid4()
    codec = NoteCodec()
    async with SQLiteStorage(path, codec=codec) as storage:
        await storage.set_history(sid, [Note("a"), Note("b"), Note("c")])
        history = list(await storage.get_history(sid))
        history[1].content = "B"  # changed in place, as AG2's History.replace callers do
        await storage.set_history(sid, history)
        assert [row[1] for row in stored(path)] == [
            '{"content": "a"}',
            '{"content": "B"}',
            '{"content": "c"}',
        ]
        # Each read hands out new objects: changing one never changes the next read.
        again = list(await storage.get_history(sid))
        again[0].content = "scribbled"
        assert await storage.get_history(sid) == [Note("a"), Note("B"), Note("c")]

        # Unchanged events are recognised by their stored text: appending one writes one row.
        with sqlite3.connect(path) as conn:
            ids_before = [row[0] for row in conn.execute("SELECT id FROM events ORDER BY position")]
        await storage.set_history(sid, [*await storage.get_history(sid), Note("d")])
        with sqlite3.connect(path) as conn:
            ids_after = [row[0] for row in conn.execute("SELECT id FROM events ORDER BY position")]
        assert ids_after[:3] == ids_before and len(ids_after) == 4


async def test_an_event_changed_between_the_call_and_the_commit_is_stored_as_it_was_at_the_call(
    tmp_path: Path,
) -> None:
    path = tmp_path / "notes.db"
    sid = uuid4()
    async with SQLiteStorage(path, codec=NoteCodec()) as storage:
        notes = [Note("kept"), Note("as called")]
        pending = storage.set_history(sid, notes)
        task = asyncio.ensure_future(pending)
        await asyncio.sleep(0)  # the call has been made; its commit is still to come
        notes[1].content = "changed while committing"
        await task
        assert [row[1] for row in stored(path)] == ['{"content": "kept"}', '{"content": "as called"}']


async def test_every_row_keeps_its_role_and_text_where_the_codec_says(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    sid = uuid4()
    events = [
        SystemMessage("be brief"),
        UserMessage("why is the build red?"),
        ToolCall(call_id="c1", name="run", arguments={"cmd": "pytest -x", "timeout": 30}),
        ToolResult(call_id="c1", content={"failed": ["test_dates"]}),
        ToolResult(call_id="c2", content=True),
        ModelMessage("the fixture expects UTC"),
        UnknownEvent(stored_type="myapp.handoff", payload='{"to": "reviewer"}'),
        UserMessage("lone \ud800 surrogate"),
    ]
    async with SQLiteStorage(path) as storage:
        for event in events:
            await storage.save_event(event, EventContext.for_stream(sid))
    rows = [(role, text, text_path, shown) for _, _, role, text, text_path, shown in stored(path)]
    assert rows == [
        ("system", None, "$.content", "be brief"),  # the text is in the payload: kept once
        ("user", None, "$.content", "why is the build red?"),
        ("tool_call", 'run(cmd="pytest -x", timeout=30)', None, 'run(cmd="pytest -x", timeout=30)'),
        ("tool", None, "$.content", '{"failed":["test_dates"]}'),
        ("tool", "true", None, "true"),
        ("assistant", None, "$.content", "the fixture expects UTC"),
        (None, None, None, None),  # not described: not part of the transcript
        ("user", "lone ? surrogate", None, "lone ? surrogate"),  # readable text; the payload keeps it exactly
    ]
    # The text the view shows is the codec's own description of each event.
    assert [row[3] for row in rows[:6]] == [JsonCodec().describe(event).text for event in events[:6]]


async def test_bookkeeping_rows_are_neither_in_the_transcript_nor_indexed(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    sid = uuid4()
    async with SQLiteStorage(path) as storage:
        await storage.set_history(
            sid, [UserMessage("hello tokens"), UnknownEvent(stored_type="usage", payload='{"content": "tokens"}')]
        )
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT position, text FROM transcript").fetchall() == [(0, "hello tokens")]
        hits = conn.execute("SELECT rowid FROM events_fts WHERE events_fts MATCH 'tokens'").fetchall()
        assert hits == conn.execute("SELECT id FROM events WHERE position = 0").fetchall()
