"""What the storage asks of its codec: each row's role and text, and how it treats mutable events.

AG2's events are mutable objects, and an agent may change one after it was
saved. The storage must store the event as it was when it was saved, never
mistake a changed event for the stored one, and never let a change made in
memory show up as what the database holds. On both databases.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from uuid import uuid4

import pytest
from databases import Database

from sessionstore import (
    EventContext,
    JsonCodec,
    ModelMessage,
    SystemMessage,
    ToolCall,
    ToolResult,
    UnknownEvent,
    UserMessage,
    records,
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


async def stored(database: Database) -> list[tuple[Any, ...]]:
    """Each row's position, payload, role, text and text path, and the text a person reads (the transcript's)."""
    # The live sessions' rows: a rewrite keeps what it replaced in an earlier branch (revision 0012), not here.
    live = "(SELECT id FROM sessions WHERE branch_of IS NULL)"
    rows = await database.rows(
        f"SELECT position, payload, role, text, text_path FROM events WHERE session IN {live} ORDER BY position"
    )
    shown = dict(
        await database.rows(
            "SELECT position, text FROM transcript WHERE session_id IN"
            " (SELECT session_id FROM sessions WHERE branch_of IS NULL)"
        )
    )
    return [(*row, shown.get(row[0])) for row in rows]


async def test_a_mutable_event_is_stored_as_it_was_when_saved(database: Database) -> None:
    sid = uuid4()
    async with database.storage(codec=NoteCodec()) as storage:
        note = Note("first draft")
        await storage.save_event(note, EventContext.for_stream(sid))
        note.content = "changed after saving"
        (read,) = await storage.get_history(sid)
        # What this process reads is what the database holds, not the object it saved.
        assert read == Note("first draft") and read is not note
        assert [row[1] for row in await stored(database)] == ['{"content": "first draft"}']


async def test_a_read_history_changed_in_place_is_written_back_changed(database: Database) -> None:
    sid = uuid4()
    codec = NoteCodec()
    async with database.storage(codec=codec) as storage:
        await storage.set_history(sid, [Note("a"), Note("b"), Note("c")])
        history = list(await storage.get_history(sid))
        history[1].content = "B"  # changed in place, as AG2's History.replace callers do
        await storage.set_history(sid, history)
        assert [row[1] for row in await stored(database)] == [
            '{"content": "a"}',
            '{"content": "B"}',
            '{"content": "c"}',
        ]
        # Each read hands out new objects: changing one never changes the next read.
        again = list(await storage.get_history(sid))
        again[0].content = "scribbled"
        assert await storage.get_history(sid) == [Note("a"), Note("B"), Note("c")]

        # Unchanged events are recognised by their stored text: appending one writes one row.
        ids_before = [row[0] for row in await database.event_rows(sid)]
        await storage.set_history(sid, [*await storage.get_history(sid), Note("d")])
        ids_after = [row[0] for row in await database.event_rows(sid)]
        assert ids_after[:3] == ids_before and len(ids_after) == 4


async def test_an_event_changed_between_the_call_and_the_commit_is_stored_as_it_was_at_the_call(
    database: Database,
) -> None:
    sid = uuid4()
    async with database.storage(codec=NoteCodec()) as storage:
        notes = [Note("kept"), Note("as called")]
        pending = storage.set_history(sid, notes)
        task = asyncio.ensure_future(pending)
        await asyncio.sleep(0)  # the call has been made; its commit is still to come
        notes[1].content = "changed while committing"
        await task
        assert [row[1] for row in await stored(database)] == ['{"content": "kept"}', '{"content": "as called"}']


async def test_every_row_keeps_its_role_and_text_where_the_codec_says(database: Database) -> None:
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
    async with database.storage() as storage:
        for event in events:
            await storage.save_event(event, EventContext.for_stream(sid))
    rows = [(role, text, text_path, shown) for _, _, role, text, text_path, shown in await stored(database)]
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


async def test_bookkeeping_rows_are_neither_in_the_transcript_nor_indexed(database: Database) -> None:
    sid = uuid4()
    async with database.storage() as storage:
        await storage.set_history(
            sid, [UserMessage("hello tokens"), UnknownEvent(stored_type="usage", payload='{"content": "tokens"}')]
        )
    assert await database.rows("SELECT position, text FROM transcript") == [(0, "hello tokens")]
    assert [(hit.session_id, hit.position) for hit in records.search(str(database), "tokens")] == [(sid.hex, 0)]
    if database.kind == "sqlite":  # FTS5's own table (closing the storage brought it up to date)
        hits = await database.rows("SELECT rowid FROM events_fts WHERE events_fts MATCH 'tokens'")
        assert hits == await database.rows("SELECT id FROM events WHERE position = 0")


async def test_a_codec_giving_a_bad_text_path_is_refused_before_anything_is_written(database: Database) -> None:
    """A text path the database cannot read would fail every later query on the row (the transcript, indexing,
    search): the write is refused whole, with the codec and the path named."""
    from sessionstore import EventEncodeError
    from sessionstore.codec import Description

    class Careless(JsonCodec):
        def describe(self, event: object) -> Description:
            return Description("user", None, "$,content")

    stream = uuid4()
    async with database.storage(codec=Careless()) as storage:
        with pytest.raises(EventEncodeError, match=r"Careless\.describe gave the text path '\$,content'"):
            await storage.save_event(UserMessage("lost?"), EventContext.for_stream(stream))
        with pytest.raises(EventEncodeError):
            await storage.set_history(stream, [UserMessage("lost?")])
        assert await storage.get_history(stream) == []
    assert records.search(str(database), "lost") == []
