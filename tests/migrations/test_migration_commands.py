"""The migration commands: ``alembic`` from a checkout, and the wheel's own (no alembic.ini) from an install."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from migration_data import fill

from sessionstore import migrate

REPO = Path(__file__).resolve().parents[2]
HEAD, PREVIOUS = [revision for revision, _, _ in migrate.history()][:2]


def run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def test_alembic_command_line_from_the_repository_root(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    alembic = [sys.executable, "-m", "alembic"]
    assert f"-> {HEAD}" in run([*alembic, "-x", f"db={db}", "upgrade", "head"], cwd=REPO)
    assert "No new upgrade operations detected" in run([*alembic, "-x", f"db={db}", "check"], cwd=REPO)
    assert f"{HEAD} (head)" in run([*alembic, "-x", f"db={db}", "current"], cwd=REPO)
    assert f"{PREVIOUS} -> {HEAD} (head)" in run([*alembic, "history"], cwd=REPO)
    assert os.stat(db).st_mode & 0o777 == 0o600

    env = {**os.environ, "SESSIONSTORE_DB": str(db)}  # the file, when -x db is not given
    assert f"{HEAD} -> {PREVIOUS}" in run([*alembic, "downgrade", "-1"], cwd=REPO, env=env)
    assert "0001 -> , baseline" in run([*alembic, "downgrade", "base"], cwd=REPO, env=env)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT name FROM sqlite_master WHERE name IN ('sessions', 'events')").fetchall() == []


def test_alembic_downgrade_keeps_the_backup_sessionstore_db_keeps(built: Callable[[str], Path]) -> None:
    """`alembic downgrade base` drops every session: through our env.py it first takes the backup that
    `sessionstore db downgrade` takes (the same function), and says where; commands that go nowhere take none."""
    db = built(HEAD)
    folder = db.parent
    with contextlib.closing(sqlite3.connect(db)) as conn:
        stored = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    assert stored > 0
    alembic = [sys.executable, "-m", "alembic", "-x", f"db={db}"]
    run([*alembic, "current"], cwd=REPO)
    run([*alembic, "check"], cwd=REPO)
    run([*alembic, "upgrade", "head"], cwd=REPO)  # already there
    assert list(folder.glob("*.bak-*")) == []

    out = run([*alembic, "downgrade", "base"], cwd=REPO)
    (backup,) = folder.glob(f"agent.db.bak-{HEAD}-*")
    assert f"Backed up {db} to {backup}" in out
    assert os.stat(backup).st_mode & 0o777 == 0o600
    with contextlib.closing(sqlite3.connect(backup)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (stored,)  # every session, kept
    assert migrate.current(db) is None
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []  # no half-made backup

    run([*alembic, "upgrade", "head"], cwd=REPO)  # from an empty schema: nothing to back up
    assert list(folder.glob("*.bak-*")) == [backup]


_USE = """
import asyncio, sys
import sessionstore
from sessionstore import SQLiteStorage, migrate
from sessionstore.schema import revisions as schema_revisions

async def main() -> None:
    for name in sys.argv[1:]:
        async with SQLiteStorage(name) as storage:
            print(name, len((await storage.list_sessions()).sessions))

asyncio.run(main())
print("from", sessionstore.__file__)
print("scripts", schema_revisions.script_location())
"""


def test_the_wheel_carries_the_migrations(tmp_path: Path) -> None:
    # Built from a copy of what the sdist would hold, installed in a fresh
    # virtual environment, used from a folder outside the repository.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("sessionstore", "migrations"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
        cwd=tmp_path,
    )
    (wheel,) = (tmp_path / "dist").glob("sessionstore-*.whl")

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    python = str(venv / "bin" / "python")
    run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)], cwd=tmp_path)

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "SESSIONSTORE_DB")}
    run([python, "-c", "from sessionstore import migrate; migrate.upgrade('old.db', '0001')"], cwd=work, env=env)
    with contextlib.closing(sqlite3.connect(work / "old.db")) as conn:
        fill(conn)
        conn.commit()

    out = run([python, "-c", textwrap.dedent(_USE), "new.db", "old.db"], cwd=work, env=env)
    assert "new.db 0" in out and "old.db 4" in out
    assert f"from {venv}" in out and "site-packages/sessionstore/migrations" in out
    assert len(list(work.glob("old.db.bak-0001-*"))) == 1

    # The commands for an install without alembic.ini: the console script's ``db`` group.
    sessionstore = str(venv / "bin" / "sessionstore")
    assert run([sessionstore, "db", "current", "--db", "old.db"], cwd=work, env=env).startswith(f"{HEAD} (head)")
    assert f"{PREVIOUS} -> {HEAD} (head): " in run([sessionstore, "db", "history"], cwd=work, env=env)
    assert "to base" in run([sessionstore, "db", "downgrade", "base", "--db", "new.db"], cwd=work, env=env)
    assert f"to {HEAD}" in run([sessionstore, "db", "upgrade", "--db", "new.db"], cwd=work, env=env)

    # Without the ag2 extra, the AG2 adapter says which extra to install (and the rest never needed it).
    missing = subprocess.run(
        [python, "-c", "import sessionstore.ag2"], cwd=work, env=env, capture_output=True, text=True
    )
    assert missing.returncode == 1
    # ... as a command that works wherever sessionstore came from: the extra's own requirements, from PyPI.
    assert missing.stderr.strip().endswith("install sessionstore's ag2 extra: pip install 'ag2[acp]<1.3,>=1.2.1'")
