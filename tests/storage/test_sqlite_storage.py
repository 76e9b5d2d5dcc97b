"""What only a SQLite file has: the file as the sqlite3 shell and the file system see it, SQLite's settings. What
both storages do is in ``test_storage.py``, on both databases."""

from __future__ import annotations

import re
import sqlite3
import stat
import subprocess
from pathlib import Path
from uuid import uuid4

import pytest

from sessionstore import (
    EventContext,
    ModelMessage,
    SessionStore,
    SQLiteStorage,
    UserMessage,
)

SQLITE3 = "sqlite3"


def rows(path: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql, params).fetchall()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "agent.db"


async def test_timestamps_and_payloads_read_well_in_the_sqlite3_shell(db: Path) -> None:
    async with SQLiteStorage(db) as storage:
        store = SessionStore(storage=storage, retain_history=True)
        session = await store.create(cwd="/proj")
        await store.stream(session).send(UserMessage("find me"))
        await store.aclose()
    out = subprocess.run(
        [
            SQLITE3,
            str(db),
            "SELECT created_at, updated_at FROM sessions; "
            "SELECT json_extract(payload, '$.content') FROM events WHERE type = 'user_message';",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", out[0])
    assert out[1] == "find me"
    pragmas = subprocess.run(
        [SQLITE3, str(db), "PRAGMA journal_mode; PRAGMA integrity_check;"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert pragmas == ["wal", "ok"]


async def test_files_are_readable_by_their_owner_only(db: Path) -> None:
    async with SQLiteStorage(db) as storage:
        await storage.save_event(ModelMessage("private"), EventContext.for_stream(uuid4()))
        files = [p for p in db.parent.iterdir() if p.name.startswith(db.name)]
        assert {p.name for p in files} >= {db.name, db.name + "-wal", db.name + "-shm"}
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


async def test_synchronous_is_validated() -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteStorage("x.db", synchronous="SOMETIMES")  # type: ignore[arg-type]


async def test_a_page_cap_fails_the_write_whole_and_the_storage_carries_on(db: Path) -> None:
    from sessionstore import DatabaseFullError

    stream_id = uuid4()
    async with SQLiteStorage(db) as storage:
        await storage.save_event(ModelMessage("small"), EventContext.for_stream(stream_id))
    pages = int(rows(db, "PRAGMA page_count")[0][0])  # type: ignore[call-overload]
    async with SQLiteStorage(db, max_pages=pages + 2) as capped:
        with pytest.raises(DatabaseFullError, match="out of space"):
            await capped.set_history(stream_id, [ModelMessage("x" * 100_000)])
        assert await capped.get_history(stream_id) == [ModelMessage("small")]
        await capped.save_event(ModelMessage("fits"), EventContext.for_stream(stream_id))
        assert len(await capped.get_history(stream_id)) == 2
    with pytest.raises(ValueError, match="max_pages"):
        SQLiteStorage(db, max_pages=0)
