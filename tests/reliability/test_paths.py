"""A path is a path: any file name opens exactly that file, in the storage, the migrations and the command line.

SQLite reads ``?``, ``%`` and ``#`` specially in URIs, and SQLAlchemy in URLs: a
name formatted into either would open one file and build the schema in another.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from uuid import uuid4

import pytest

from sessionstore import EventContext, SQLiteStorage, UserMessage, migrate, records

REPO = Path(__file__).resolve().parents[2]
NAMES = ["a?b=1.db", "100%41.db", "x#frag.db", "with space.db", "new\nline.db", "ünï 漢字.db", "?.db", "%.db"]


@pytest.mark.parametrize("name", NAMES, ids=repr)
async def test_every_name_opens_exactly_that_file(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "f?o%41 #"
    folder.mkdir()
    path = folder / name
    sid = uuid4()
    async with SQLiteStorage(path) as storage:
        await storage.save_event(UserMessage("hello"), EventContext.for_stream(sid))
    # Only that file was made (and, at most, its companions), and it is complete.
    assert {p.name for p in folder.iterdir()} <= {name, f"{name}-wal", f"{name}-shm"}
    assert migrate.current(path) == migrate.HEAD
    (record,) = records.list_sessions(path)
    assert record.session_id == sid.hex and record.events == 1

    # The command line and the migrations reach the same file.
    script = Path(sys.executable).parent / "sessionstore"
    shown = subprocess.run([script, "--db", path, "show", sid.hex[:8]], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "hello" in shown.stdout, shown.stderr
    assert migrate.downgrade(path, "0002") is not None and migrate.current(path) == "0002"
    assert migrate.upgrade(path) is not None and migrate.current(path) == migrate.HEAD
    assert {p.name for p in folder.iterdir() if ".bak-" not in p.name} <= {name, f"{name}-wal", f"{name}-shm"}


def test_the_alembic_command_line_takes_any_name(tmp_path: Path) -> None:
    path = tmp_path / "a?b%41#c.db"
    done = subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"db={path}", "upgrade", "head"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    assert migrate.current(path) == migrate.HEAD
