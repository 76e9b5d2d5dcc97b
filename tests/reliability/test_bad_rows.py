"""Rows edited by hand in ``sqlite3``: read back as UnknownEvent with the raw data; nothing dropped, nothing run.

Stored data must never decide what Python imports or executes: type names and
payloads naming classes or modules are data, not instructions.
"""

from __future__ import annotations

import sys
from pathlib import Path
from uuid import UUID

import pytest
from _support import sqlite3_shell

from sessionstore import EventContext, SQLiteStorage, ToolResult, UnknownEvent, UserMessage

STREAM = UUID(int=42)

# (type, payload) rows a person or another program could leave in the table.
BAD_ROWS = [
    ("user_message", "this is not JSON {"),
    ("user_message", '["a", "JSON", "array"]'),
    ("user_message", '"just a string"'),
    ("no_such_type", '{"content": "from a newer version"}'),
    # Type names that look like Python paths.
    ("canary_victim.Boom", '{"content": "x"}'),
    ("canary_victim:Boom", '{"content": "x"}'),
    ("os.system", '{"command": "touch PWNED"}'),
    ("builtins.eval", '{"source": "__import__(\'canary_victim\')"}'),
    # Payloads that name classes or modules in the ways serialisers do.
    ("user_message", '{"content": "x", "__class__": "canary_victim.Boom"}'),
    ("user_message", '{"py/object": "canary_victim.Boom", "content": "x"}'),
    ("user_message", '{"__reduce__": ["os.system", ["touch PWNED"]], "content": "x"}'),
    ("tool_result", '{"call_id": "c", "content": {"$class": "canary_victim.Boom"}}'),
    ("tool_result", '{"call_id": "c", "content": {"$module": "canary_victim"}}'),
    ("tool_result", '{"call_id": "c", "content": {"$bytes": "not base64!"}}'),
    ("tool_call", '{"call_id": "c", "name": "n", "arguments": {"$items": [[["unhashable"], 1]]}}'),
]


def sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@pytest.fixture
def canary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable module that leaves a mark if anything ever imports it."""
    marker = tmp_path / "IMPORTED"
    (tmp_path / "canary_victim.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nclass Boom:\n    def __init__(self, *a, **k):\n        raise SystemExit\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return marker


async def test_hand_edited_rows_come_back_as_unknown_events(tmp_path: Path, canary: Path) -> None:
    db = tmp_path / "edited.db"
    good = [UserMessage("before"), ToolResult(call_id="t", content={"py/object": "canary_victim.Boom"})]
    async with SQLiteStorage(db) as storage:
        await storage.set_history(STREAM, good)
    inserts = "".join(
        f"INSERT INTO events (session, position, type, payload, created_at) SELECT id, {2 + i}, {sql_text(t)},"
        f" {sql_text(p)}, '2024-01-01 00:00:00.000000' FROM sessions WHERE session_id = '{STREAM.hex}';\n"
        for i, (t, p) in enumerate(BAD_ROWS)
    )
    sqlite3_shell(db, inserts)
    before = sqlite3_shell(db, "SELECT position, type, payload FROM events ORDER BY position;")
    cwd = Path.cwd()

    async with SQLiteStorage(db) as storage:
        history = await storage.get_history(STREAM)
        # Nothing dropped, in order; the good rows decode as before (a dict that
        # merely mentions a class is plain data).
        assert len(history) == len(good) + len(BAD_ROWS)
        assert history[: len(good)] == good
        for event, (stored_type, payload) in zip(history[len(good) :], BAD_ROWS, strict=True):
            assert isinstance(event, UnknownEvent), event
            assert (event.stored_type, event.payload) == (stored_type, payload)  # the raw data, as stored
            assert event.reason  # and why it could not be decoded
        # Writing the history back stores the same bytes: the rows survive a
        # process that does not understand them.
        await storage.set_history(STREAM, [*history, UserMessage("after")])
        await storage.save_event(UserMessage("appended"), EventContext.for_stream(STREAM))
    after = sqlite3_shell(db, "SELECT position, type, payload FROM events ORDER BY position;")
    assert after.startswith(before)
    assert not canary.exists() and "canary_victim" not in sys.modules, "stored data made Python import a module"
    assert not (cwd / "PWNED").exists() and not (tmp_path / "PWNED").exists()
    assert sqlite3_shell(db, "PRAGMA integrity_check;") == "ok"


async def test_a_hand_deleted_row_leaves_a_gap_that_appends_respect(tmp_path: Path) -> None:
    """Positions edited by hand: the history reads in position order and appends go after the last one."""
    db = tmp_path / "gap.db"
    async with SQLiteStorage(db) as storage:
        await storage.set_history(STREAM, [UserMessage(str(i)) for i in range(5)])
    sqlite3_shell(db, "DELETE FROM events WHERE position = 2; UPDATE events SET position = 10 WHERE position = 0;")
    async with SQLiteStorage(db) as storage:
        assert [e.content for e in await storage.get_history(STREAM)] == ["1", "3", "4", "0"]  # type: ignore[attr-defined]
        await storage.save_event(UserMessage("new"), EventContext.for_stream(STREAM))
    assert sqlite3_shell(db, "SELECT max(position) FROM events;") == "11"


async def test_payload_that_is_not_utf8_does_not_hide_the_rest(tmp_path: Path) -> None:
    db = tmp_path / "bytes.db"
    async with SQLiteStorage(db) as storage:
        await storage.set_history(STREAM, [UserMessage("one"), UserMessage("two")])
    sqlite3_shell(db, "UPDATE events SET payload = CAST(X'7bff7d' AS TEXT) WHERE position = 0;")
    async with SQLiteStorage(db) as storage:
        history = await storage.get_history(STREAM)
    assert isinstance(history[0], UnknownEvent) and history[1] == UserMessage("two")


async def test_session_row_with_bad_json_does_not_hide_the_others(tmp_path: Path) -> None:
    db = tmp_path / "meta.db"
    async with SQLiteStorage(db) as storage:
        await storage.save_event(UserMessage("a"), EventContext.for_stream(STREAM))
        await storage.save_event(UserMessage("b"), EventContext.for_stream(UUID(int=43)))
    sqlite3_shell(db, f"UPDATE sessions SET meta = 'not json' WHERE session_id = '{STREAM.hex}';")
    async with SQLiteStorage(db) as storage:
        assert len((await storage.list_sessions()).sessions) == 2
