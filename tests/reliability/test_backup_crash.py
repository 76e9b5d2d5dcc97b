"""A backup is a database or is absent: a process killed while it backs up a file before upgrading it
leaves nothing that looks like a backup, and the next upgrade takes a whole one."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from sessionstore import migrate
from sessionstore.sqlite import migrate as sqlite_migrate

UPGRADE = "import sys; from sessionstore import migrate; migrate.upgrade(sys.argv[1])"


def old_file(path: Path) -> None:
    """A file at the previous revision, large enough (~40 MB) that backing it up takes a while."""
    sqlite_migrate.prepare_database(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(
            "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, created_at,"
            " updated_at, released, revision) VALUES (?, '/w', '[]', '[]', '{}', '2026-01-01', '2026-01-01', 1, 0)",
            ("a" * 32,),
        )
        payload = '{"content":"' + "x" * 40_000 + '"}'
        conn.executemany(
            "INSERT INTO events (session, position, type, payload, created_at) VALUES (1, ?, 'other', ?, '2026-01-01')",
            [(n, payload) for n in range(1000)],
        )
        conn.commit()
    for backup in path.parent.glob(f"{path.name}.bak-*"):
        backup.unlink()
    migrate.downgrade(path, "0002")
    for backup in path.parent.glob(f"{path.name}.bak-*"):
        backup.unlink()


def test_a_backup_killed_half_way_leaves_no_backup_and_the_next_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    old_file(path)
    child = subprocess.Popen([sys.executable, "-c", UPGRADE, str(path)])
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".agent.db.backing-up-*")):
            assert child.poll() is None and time.monotonic() < deadline, "the backup never started"
            time.sleep(0.001)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        child.kill()
    assert list(tmp_path.glob("agent.db.bak-*")) == []  # nothing that looks like a backup
    assert migrate.current(path) == "0002"  # and the file was not touched

    backup = migrate.upgrade(path)
    assert backup is not None and migrate.current(path) == migrate.HEAD
    assert [p.name for p in tmp_path.glob("*.bak-*")] == [Path(backup).name]
    assert not list(tmp_path.glob(".agent.db.backing-up-*"))  # the killed one's leftover is gone
    with contextlib.closing(sqlite3.connect(backup)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (1000,)
