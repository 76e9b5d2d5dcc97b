"""Files that are not what they should be: one typed error, a message a person can act on, the file untouched.

Every error here is a :class:`sessionstore.StorageError`. "Untouched" is
checked on the bytes of the database and of its ``-wal``/``-shm``/``-journal``
companions, before and after.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from _support import CHILD_TIMEOUT, child, child_env, fingerprint, namespace_argv, sqlite3_shell

from sessionstore import (
    DatabaseCorruptError,
    DatabaseFullError,
    DatabaseReadOnlyError,
    EventContext,
    NotADatabaseError,
    SchemaTooNewError,
    SQLiteStorage,
    StorageError,
    UserMessage,
)

BIG = UUID(int=7)

Call = Callable[[SQLiteStorage], Awaitable[Any]]
CALLS: dict[str, Call] = {
    "open": lambda s: s.open(),
    "save_event": lambda s: s.save_event(UserMessage("new"), EventContext.for_stream(uuid4())),
    "get_history": lambda s: s.get_history(BIG),
    "set_history": lambda s: s.set_history(BIG, [UserMessage("replaced")]),
    "list_sessions": lambda s: s.list_sessions(),
}


async def refused(db: Path, call: Call, kind: type[StorageError]) -> StorageError:
    """Run ``call`` on a fresh storage; it must raise ``kind`` naming the file, and change nothing."""
    before = fingerprint(db)
    storage = SQLiteStorage(db)
    with pytest.raises(kind) as caught:
        await call(storage)
    await storage.aclose()
    assert fingerprint(db) == before, "a refused call changed the file"
    assert str(db) in str(caught.value)  # which file, so a person knows what to look at
    return caught.value


async def make_database(db: Path, events: int = 300) -> None:
    """A database with one big session whose events fill many pages."""
    async with SQLiteStorage(db) as storage:
        await storage.set_history(BIG, [UserMessage(f"{i}:" + "z" * 3000) for i in range(events)])
        await storage.save_event(UserMessage("small"), EventContext.for_stream(uuid4()))


@pytest.mark.parametrize("call", list(CALLS))
async def test_not_a_database(tmp_path: Path, call: str) -> None:
    db = tmp_path / "notes.txt"
    db.write_text("These are my notes, not a database.\n" * 200)
    error = await refused(db, CALLS[call], NotADatabaseError)
    assert "not a SQLite database" in str(error)


async def test_damaged_in_the_middle(tmp_path: Path) -> None:
    db = tmp_path / "damaged.db"
    await make_database(db)
    page_size = int(sqlite3_shell(db, "PRAGMA page_size;"))
    pages = db.stat().st_size // page_size
    with db.open("r+b") as f:  # one whole page of the events table, mid-file, overwritten with junk
        f.seek(pages // 2 * page_size)
        f.write(b"\xab" * page_size)
    for call in ("get_history", "set_history"):
        error = await refused(db, CALLS[call], DatabaseCorruptError)
        assert "backup" in str(error)  # what to do about it
    # Damage is found where it is read; parts of the file it does not touch keep working.
    async with SQLiteStorage(db) as storage:
        assert len((await storage.list_sessions()).sessions) == 2


async def test_damaged_first_page(tmp_path: Path) -> None:
    db = tmp_path / "header.db"
    await make_database(db, events=5)
    with db.open("r+b") as f:
        f.seek(100)  # just past the 100-byte header: the schema's own b-tree page
        f.write(b"\xab" * 300)
    for call in CALLS.values():
        await refused(db, call, DatabaseCorruptError)


async def test_truncated_file(tmp_path: Path) -> None:
    db = tmp_path / "truncated.db"
    await make_database(db)
    with db.open("r+b") as f:  # a copy that stopped half way
        f.truncate(db.stat().st_size // 2)
    for call in ("get_history", "set_history"):
        await refused(db, CALLS[call], DatabaseCorruptError)


async def test_schema_newer_than_the_code(tmp_path: Path) -> None:
    db = tmp_path / "future.db"
    await make_database(db, events=5)
    sqlite3_shell(db, "UPDATE alembic_version SET version_num = 'ffff_from_the_future';")
    for call in CALLS.values():
        error = await refused(db, call, SchemaTooNewError)
        assert "ffff_from_the_future" in str(error)


async def test_a_folder_where_the_file_should_be(tmp_path: Path) -> None:
    folder = tmp_path / "agent.db"
    folder.mkdir()
    storage = SQLiteStorage(folder)
    with pytest.raises(StorageError, match="is a folder"):
        await storage.save_event(UserMessage("x"), EventContext.for_stream(uuid4()))
    assert list(folder.iterdir()) == []


async def test_a_crash_while_creating_leaves_no_file_without_wal(tmp_path: Path) -> None:
    """A file at the current schema but not yet in WAL mode (killed between the two) gets WAL on open.

    Without WAL, readers block the writer and other processes can fail with
    "database is locked": the concurrency guarantees depend on it.
    """
    db = tmp_path / "half-made.db"
    await make_database(db, events=2)
    assert sqlite3_shell(db, "PRAGMA journal_mode = DELETE;") == "delete"
    async with SQLiteStorage(db) as storage:
        assert len(await storage.get_history(BIG)) == 2
    assert sqlite3_shell(db, "PRAGMA journal_mode;") == "wal"


def run_in_namespace(setup: str, *argv: str, after: str = ":") -> list[dict[str, Any]]:
    done = subprocess.run(
        namespace_argv(setup, *argv, after=after),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_read_only_folder(tmp_path: Path) -> None:
    """A folder mounted read-only (which even root cannot write): existing file and new file."""
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "existing.db"
    asyncio_run(make_database(db, events=3))
    before = fingerprint(db)
    setup = f"mount --bind '{folder}' '{folder}' && mount -o remount,bind,ro '{folder}'"
    for target in (db, folder / "new.db", folder / "sub" / "new.db"):
        reports = run_in_namespace(setup, *child("_attempt.py", target, "open", "write"))
        for report in reports:
            assert report["error"] == DatabaseReadOnlyError.__name__, report
            assert report["storage_error"] and str(target) in report["message"]
            assert "permissions" in report["message"] or "read-only" in report["message"]
    assert fingerprint(db) == before
    assert sorted(p.name for p in folder.iterdir()) == ["existing.db"]


def test_read_only_file_in_a_writable_folder(tmp_path: Path) -> None:
    """Only the database file is read-only: it can still be read; writing says why not."""
    db = tmp_path / "locked.db"
    asyncio_run(make_database(db, events=3))
    before = fingerprint(db)
    setup = f"mount --bind '{db}' '{db}' && mount -o remount,bind,ro '{db}'"
    reports = run_in_namespace(setup, *child("_attempt.py", db, "read", "write", "read"))
    first_read, write, second_read = reports
    assert first_read["ok"] and first_read["detail"][BIG.hex] == 3
    assert write["error"] == DatabaseReadOnlyError.__name__ and write["storage_error"], write
    assert str(db) in write["message"]
    assert second_read == first_read  # a refused write leaves the storage usable for reads
    assert fingerprint(db)["db"] == before["db"]


def test_full_disk(tmp_path: Path) -> None:
    """A real full filesystem (a 1 MB tmpfs): the failing write rolls back whole, and nothing else is lost."""
    mount = tmp_path / "small"
    mount.mkdir()
    saved = tmp_path / "saved"
    saved.mkdir()
    db = mount / "full.db"
    ballast = mount / "ballast"
    setup = f"mount -t tmpfs -o size=1m tmpfs '{mount}'; head -c 262144 /dev/zero > '{ballast}'"
    # The tmpfs vanishes with the namespace: copy the files out to check them here.
    (report,) = run_in_namespace(setup, *child("_fill.py", db, ballast), after=f"cp '{mount}'/full.db* '{saved}'/")
    assert report["acknowledged"] > 0
    for step in ("append", "set_history"):
        assert report[step]["error"] == DatabaseFullError.__name__ and report[step]["storage_error"], report
        assert str(db) in report[step]["message"] and "space" in report[step]["message"]
    assert report["intact"], "the history changed although the writes failed"
    assert report["after"], "writing did not work again once space was freed"
    copy = saved / "full.db"
    assert sqlite3_shell(copy, "PRAGMA integrity_check;") == "ok"
    count = sqlite3_shell(copy, "SELECT count(*) FROM events;")
    assert int(count) == report["acknowledged"] + 1


def asyncio_run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coro)
