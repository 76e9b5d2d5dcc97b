"""A program that never calls ``aclose()`` still exits promptly, with every acknowledged write on disk."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest
from _support import CHILD_TIMEOUT, child, child_env


def stored(db: Path, hex_id: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT json_extract(e.payload, '$.content') FROM events e JOIN sessions s ON s.id = e.session"
            " WHERE s.session_id = ? ORDER BY e.position",
            (hex_id,),
        ).fetchall()
    conn.close()
    return [content for (content,) in rows]


@pytest.mark.parametrize("mode", ["run", "loop", "pending"])
def test_exit_without_aclose(tmp_path: Path, mode: str) -> None:
    db = tmp_path / "open.db"
    # The timeout only turns a hang (a non-daemon thread keeping the interpreter
    # alive) into a failure instead of a stuck CI job.
    done = subprocess.run(
        child("_noclose.py", db, mode), capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=child_env()
    )
    assert done.returncode == 0, done.stderr
    if mode != "loop":  # an abandoned, unclosed loop gets Python's own "Task was destroyed" warnings
        assert done.stderr == "", done.stderr
    hex_id, acknowledged = done.stdout.split()
    events = stored(db, hex_id)
    assert events[: int(acknowledged)] == [str(seq) for seq in range(int(acknowledged))]
    if mode == "pending":
        # Writes still queued at exit: each whole or absent, in order, never a gap.
        assert events == [str(seq) for seq in range(len(events))]
        assert len(events) <= 100
    else:
        assert len(events) == int(acknowledged)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
