"""One title rule and one policy for damaged JSON columns, whoever reads the file.

The registry, the storage, the command line and a person's ``sqlite3`` (the
``session_overview`` view) must say the same of every session: the same title
(set, or derived from the first user message by one rule), and the same
reading of a JSON column edited by hand into something else.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from uuid import UUID

from _clitools import Run, Spec, sqlite3_shell, write_db_async

from sessionstore import MemoryStorage, ModelMessage, SessionStore, SQLiteStorage, SystemMessage, UserMessage
from sessionstore.storage import EventContext, derive_title

PROMPTS = [
    "short",
    "  leading and trailing spaces  ",
    "two\nlines\r\nand a\ttab",
    "x" * 79,
    "y" * 80,
    "z" * 81,
    "word " * 30,
    "ünïcödé 漢字 🎉 " * 10,
    "   \n\t  ",  # only white space: no title
]


async def test_registry_storage_cli_and_view_agree_on_every_title(sessionstore: Run, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    specs = [Spec([SystemMessage("rules"), ModelMessage("hello"), UserMessage(text)]) for text in PROMPTS]
    specs += [Spec([UserMessage("a title is set")], title="Set by hand"), Spec([ModelMessage("no user message")])]
    ids = await write_db_async(db, specs)

    with sqlite3.connect(db) as conn:  # a JSON column damaged by hand, on the first session
        conn.execute("UPDATE sessions SET meta = '{broken', mcp_servers = '7' WHERE session_id = ?", (ids[0],))

    async with SQLiteStorage(db) as storage:
        from_storage = {r.session_id: r for r in (await storage.list_sessions()).sessions}
        from_registry = {r.session_id: r for r in (await SessionStore(storage=storage).list_sessions()).sessions}
        loaded = await storage.load_session(UUID(hex=ids[0]))
    from_cli = {r["session_id"]: r for r in json.loads(sessionstore("--db", db, "list", "--json").stdout)}
    from_view = dict(
        line.split("|", 1) for line in sqlite3_shell(db, "SELECT session_id, title FROM session_overview;").splitlines()
    )

    memory = MemoryStorage()
    for sid, spec in zip(ids, specs, strict=True):
        for event in spec.events:
            await memory.save_event(event, EventContext.for_stream(UUID(hex=sid)))
        if spec.title is not None:
            await memory.set_title(UUID(hex=sid), spec.title)
    from_memory = {r.session_id: r for r in (await memory.list_sessions()).sessions}

    expected = {sid: derive_title(text) for sid, text in zip(ids, PROMPTS, strict=False)}
    expected[ids[-2]] = "Set by hand"
    expected[ids[-1]] = None
    assert expected[ids[2]] == "two lines  and a tab" and expected[ids[5]] == "z" * 79 + "…"
    for sid, title in expected.items():
        assert from_storage[sid].title == title, sid
        assert from_registry[sid].title == title
        assert from_memory[sid].title == title
        assert from_cli[sid]["title"] == title
        assert from_view[sid] == (title or "")  # the shell prints NULL as nothing
        assert from_cli[sid]["stored_title"] == (title if sid == ids[-2] else None)

    # The damaged columns: still listed, read as empty, their raw text kept under the same key everywhere.
    unreadable = {"meta": "{broken", "mcp_servers": "7"}
    for record in (from_storage[ids[0]], from_registry[ids[0]], loaded):
        assert record is not None
        assert record.meta == {"sessionstore.unreadable": unreadable} and record.mcp_servers == []
    assert from_cli[ids[0]]["meta"] == {"sessionstore.unreadable": unreadable}
    assert from_cli[ids[0]]["mcp_servers"] == []
