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

from sessionstore import EventContext, SQLiteStorage, UnsafeFileError, UserMessage, admin, migrate
from sessionstore.sqlite import migrate as sqlite_migrate


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


NOBODY = 65534  # another user: root (CI) can hand a file to it


def _planted(folder: Path, *, owner: int | None = None, mode_bits: int = 0o600) -> Path:
    """An empty database (and companions) someone else left in a shared folder."""
    db = folder / "agent.db"
    sqlite_migrate.prepare_database(db)
    for file in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        file.touch()
        os.chmod(file, mode_bits)
        if owner is not None:
            os.chown(file, owner, owner)
    return db


@pytest.mark.parametrize(
    ("owner", "mode_bits", "says"),
    [(NOBODY, 0o600, "belongs to another user"), (None, 0o666, r"can be written by other users \(mode 0666\)")],
)
async def test_a_file_that_is_not_the_users_own_is_refused(
    tmp_path: Path, owner: int | None, mode_bits: int, says: str
) -> None:
    db = _planted(tmp_path, owner=owner, mode_bits=mode_bits)
    before = {p.name: (p.read_bytes(), p.stat().st_mode) for p in tmp_path.iterdir()}
    with pytest.raises(UnsafeFileError, match=says):
        async with SQLiteStorage(db) as storage:
            await storage.save_event(UserMessage("secret"), EventContext.for_stream(uuid4()))
    # Nothing was written, nothing changed.
    assert {p.name: (p.read_bytes(), p.stat().st_mode) for p in tmp_path.iterdir()} == before
    with pytest.raises(UnsafeFileError):  # the commands that write refuse it too
        admin.set_title(db, "0" * 32, "x")

    # Unless the caller says the file is meant to be shared.
    async with SQLiteStorage(db, allow_shared_file=True) as storage:
        await storage.save_event(UserMessage("shared on purpose"), EventContext.for_stream(uuid4()))


async def test_a_companion_that_is_a_link_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    sqlite_migrate.prepare_database(db)
    elsewhere = tmp_path / "collected.txt"
    Path(f"{db}-wal").symlink_to(elsewhere)
    with pytest.raises(UnsafeFileError, match="is a symbolic link"):
        async with SQLiteStorage(db) as storage:
            await storage.save_event(UserMessage("secret"), EventContext.for_stream(uuid4()))
    assert not elsewhere.exists()
