"""Conversations are private: the database and its companion files are readable by their owner only.

Checked under the most permissive umask (0), so the modes come from the
storage and not from the test environment.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest

from sessionstore import EventContext, SQLiteStorage, UserMessage, migrate


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("open_umask")
async def test_database_wal_and_shm_are_owner_only(tmp_path: Path) -> None:
    db = tmp_path / "private" / "nested" / "agent.db"  # folders that do not exist yet
    async with SQLiteStorage(db) as storage:
        await storage.save_event(UserMessage("secret"), EventContext.for_stream(uuid4()))
        await storage.list_sessions()  # a reader connection too
        companions = [Path(f"{db}{suffix}") for suffix in ("-wal", "-shm")]
        assert all(p.exists() for p in companions)  # checked while they exist: they go at close
        for path in (db, *companions):
            assert mode(path) == 0o600, f"{path.name} is {oct(mode(path))}"
    assert mode(db) == 0o600
    # Folders the storage had to create are the owner's only too.
    assert mode(db.parent) == 0o700 and mode(db.parent.parent) == 0o700
    # Reopening (and the migrations check it runs) leaves the mode alone.
    async with SQLiteStorage(db) as storage:
        await storage.save_event(UserMessage("again"), EventContext.for_stream(uuid4()))
        assert mode(db) == 0o600 and mode(Path(f"{db}-wal")) == 0o600


@pytest.mark.usefixtures("open_umask")
async def test_an_existing_folder_is_not_changed(tmp_path: Path) -> None:
    """The storage creates its own file 0600 but does not chmod a folder the user already has."""
    tmp_path.chmod(0o755)
    async with SQLiteStorage(tmp_path / "agent.db") as storage:
        await storage.save_event(UserMessage("x"), EventContext.for_stream(uuid4()))
    assert mode(tmp_path) == 0o755 and mode(tmp_path / "agent.db") == 0o600


@pytest.mark.usefixtures("open_umask")
async def test_backups_taken_before_an_upgrade_are_owner_only(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    async with SQLiteStorage(db) as storage:
        await storage.save_event(UserMessage("secret"), EventContext.for_stream(uuid4()))
    first = migrate.history()[-1][0]  # the oldest revision: the file must be upgraded from it
    migrate.downgrade(db, first)
    async with SQLiteStorage(db) as storage:  # auto-upgrade: backs the file up first
        await storage.list_sessions()
    backups = sorted(tmp_path.glob("agent.db.bak-*"))
    assert any(f".bak-{first}-" in p.name for p in backups), backups
    for path in backups:
        assert mode(path) == 0o600, f"{path.name} is {oct(mode(path))}"
