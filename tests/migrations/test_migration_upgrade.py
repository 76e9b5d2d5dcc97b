"""Opening an older, newer or foreign file: upgraded with every row intact, or refused untouched."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from migration_data import FILLERS, sha256, snapshot

from sessionstore import (
    EventContext,
    MigrationError,
    SchemaError,
    SchemaOutOfDateError,
    SchemaTooNewError,
    SQLiteStorage,
    UserMessage,
    in_session,
    migrate,
)
from sessionstore.codec import legacy_description
from sessionstore.reads import text_at
from sessionstore.sqlite import migrate as sqlite_migrate

REVISIONS = [revision for revision, _, _ in reversed(migrate.history())]
Build = Callable[[str], Path]
ScriptsWith = Callable[..., Path]


def rows_of(path: Path) -> dict[str, list[tuple[object, ...]]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return snapshot(conn)


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.bak-*"))


def test_every_revision_has_a_filler() -> None:
    assert set(REVISIONS) <= set(FILLERS), "add a filler for the new revision to migration_data.FILLERS"


@pytest.mark.parametrize("revision", REVISIONS[:-1])
async def test_a_file_at_every_older_revision_upgrades_on_open_with_every_row_intact(
    built: Build, revision: str
) -> None:
    path = built(revision)
    before = rows_of(path)
    forked = revision >= "0012"  # from 0012 on, a fork and an earlier branch too (fill_forked)
    assert len(before["sessions"]) == (6 if forked else 4) and len(before["events"]) > 50

    async with SQLiteStorage(path) as storage:
        listed = await storage.list_sessions()
    # From 0006 on, the last is a subagent; an earlier branch is listed nowhere.
    assert len(listed.sessions) == (3 if revision >= "0006" else 4) + forked

    assert migrate.current(path) == migrate.HEAD
    assert rows_of(path) == before
    (backup,) = backups(path)
    assert backup.name.startswith(f"{path.name}.bak-{revision}-")
    assert os.stat(backup).st_mode & 0o777 == 0o600
    assert migrate.current(backup) == revision and rows_of(backup) == before
    with contextlib.closing(sqlite3.connect(path)) as conn:  # the new objects see the old rows
        # Every event of sessionstore's own types is in the transcript with the role and text its codec
        # gives it; the unknown type and the hand-broken payload are kept, with no role.
        described = [
            (row_id, *legacy_description(kind, payload))
            for row_id, kind, payload in conn.execute("SELECT id, type, payload FROM events ORDER BY id")
        ]

        # The text a person reads: stored, or at its path in the payload (what records.text_at reads there).
        assert [
            (row_id, role, text if path is None else text_at(payload, path), path)
            for row_id, payload, role, text, path in conn.execute(
                "SELECT id, payload, role, text, text_path FROM events ORDER BY id"
            )
        ] == described
        # A string content is kept once, in the payload; only other text is stored.
        assert (
            conn.execute("SELECT count(*) FROM events WHERE text IS NOT NULL AND text_path IS NOT NULL").fetchone()[0]
            == 0
        )
        messages = sum(1 for _, role, _, _ in described if role is not None)
        assert messages == len(before["events"]) - 2
        assert conn.execute("SELECT count(*) FROM transcript").fetchone() == (messages,)
        # Each row once: a fork's count holds the forked_at events it shares (0012 on), counted in their own session.
        own = "SELECT sum(events - coalesce(forked_at, 0)) FROM session_overview"
        assert conn.execute(own).fetchone() == (len(before["events"]),)
        hits = conn.execute(
            "SELECT e.type FROM events_fts JOIN events e ON e.id = events_fts.rowid WHERE events_fts MATCH 'careful'"
        ).fetchall()
        assert hits == [("system_message",)] * 4
        conn.execute("INSERT INTO events_fts (events_fts, rank) VALUES ('integrity-check', 1)")


def test_a_populated_file_goes_down_to_base_and_back_up(built: Build) -> None:
    path = built(migrate.HEAD)
    before = rows_of(path)
    for revision in reversed(REVISIONS[:-1]):  # down one revision at a time: the rows stay
        backup = migrate.downgrade(path, revision)
        assert backup is not None and Path(backup).exists()
        assert migrate.current(path) == revision
        if revision == "0011":
            # 0012's downgrade gives each fork and earlier branch the rows it shared: rows added (their sessions'
            # revisions count them), none changed.
            after = rows_of(path)
            assert [row[:-1] for row in after["sessions"]] == [row[:-1] for row in before["sessions"]]
            assert set(before["events"]) < set(after["events"])
            before = after
        assert rows_of(path) == before
    with contextlib.closing(sqlite3.connect(path)) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE '%fts%'")}
        assert names == set()  # 0002's views, triggers and FTS tables are gone with it

    backup = migrate.downgrade(path, "base")
    assert backup is not None and rows_of(Path(backup)) == before  # base drops the data; the backup keeps it
    assert migrate.current(path) is None
    with contextlib.closing(sqlite3.connect(path)) as conn:
        left = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    assert left <= {"alembic_version", "sqlite_sequence"}

    assert migrate.upgrade(path) is None  # nothing to back up in an empty file
    assert migrate.current(path) == migrate.HEAD
    assert rows_of(path) == {"sessions": [], "events": []}


def test_a_failing_revision_leaves_the_file_and_its_backup_intact(built: Build, scripts_with: ScriptsWith) -> None:
    scripts = scripts_with(
        boom=f'''
        """a revision that fails halfway, on purpose"""
        from alembic import op

        revision = "9000"
        down_revision = "{migrate.HEAD}"
        branch_labels = None
        depends_on = None


        def upgrade() -> None:
            op.execute("CREATE TABLE scratch (x INTEGER)")
            op.execute("UPDATE events SET payload = '{{}}'")
            op.execute("DELETE FROM sessions WHERE id = 1")
            raise RuntimeError("boom")


        def downgrade() -> None:
            pass
        '''
    )
    path = built("0001")
    before, original = rows_of(path), sha256(path)

    with pytest.raises(MigrationError) as caught:
        sqlite_migrate.prepare_database(path, scripts=scripts)

    (backup,) = backups(path)
    assert str(backup) in str(caught.value) and "boom" in str(caught.value)
    assert sha256(path) == original  # every revision of the run rolled back, 0002's too
    assert migrate.current(path) == "0001" and rows_of(path) == before
    assert migrate.current(backup) == "0001" and rows_of(backup) == before
    with contextlib.closing(sqlite3.connect(backup)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def _listing(folder: Path) -> dict[str, str]:
    return {entry.name: sha256(entry) for entry in folder.iterdir() if entry.is_file()}


async def test_a_file_from_a_newer_version_is_refused_byte_for_byte_untouched(built: Build) -> None:
    path = built(migrate.HEAD)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '7f3e9a2c'")
        conn.commit()
    before = _listing(path.parent)
    assert set(before) == {path.name}  # no -wal or -shm left from writing it

    with pytest.raises(SchemaTooNewError, match="7f3e9a2c"):
        sqlite_migrate.prepare_database(path)
    with pytest.raises(SchemaTooNewError, match="newer"):
        async with SQLiteStorage(path):
            pass
    with pytest.raises(SchemaTooNewError):
        migrate.upgrade(path)
    assert _listing(path.parent) == before


async def test_an_older_file_is_refused_untouched_when_auto_upgrade_is_off(built: Build) -> None:
    path = built("0001")
    before = _listing(path.parent)
    with pytest.raises(SchemaOutOfDateError) as caught:
        async with SQLiteStorage(path, auto_upgrade=False):
            pass
    assert f"sessionstore db upgrade --db {path}" in str(caught.value)
    assert _listing(path.parent) == before

    new = path.parent / "new.db"  # a new file is still created: nothing to upgrade
    async with SQLiteStorage(new, auto_upgrade=False) as storage:
        await storage.list_sessions()
    assert migrate.current(new) == migrate.HEAD


def test_a_foreign_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.commit()
    before = _listing(tmp_path)
    with pytest.raises(SchemaError, match="not a sessionstore database"):
        sqlite_migrate.prepare_database(path)
    assert _listing(tmp_path) == before


_OPEN = """
import asyncio, sys
from sessionstore import SQLiteStorage

async def main() -> None:
    async with SQLiteStorage(sys.argv[1]) as storage:
        await storage.list_sessions()

asyncio.run(main())
print(sorted(name for name in sys.modules if name.split(".")[0] in ("alembic", "mako")))
"""


def test_opening_a_file_at_head_does_not_import_alembic(built: Build) -> None:
    at_head, old = built(migrate.HEAD, "head.db"), built("0001", "old.db")

    def imported(path: Path) -> str:
        done = subprocess.run([sys.executable, "-c", _OPEN, str(path)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert imported(at_head) == "[]"
    assert "'alembic'" in imported(old)  # the probe sees an import when there is one


_RACER = """
import sys, time
from pathlib import Path
import alembic.command  # loaded before the start line, so neither process has a head start
from sessionstore.sqlite.migrate import prepare_database

print("ready", flush=True)
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
prepare_database(Path(sys.argv[1]))
print("done", flush=True)
"""


def test_two_processes_opening_an_old_file_at_once_migrate_it_once(built: Build, tmp_path: Path) -> None:
    path = built("0001")
    before = rows_of(path)
    go = tmp_path / "go"
    racers = [
        subprocess.Popen([sys.executable, "-c", _RACER, str(path), str(go)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        for racer in racers:
            assert racer.stdout is not None and racer.stdout.readline().strip() == "ready"
        go.touch()
        outputs = [racer.communicate(timeout=60)[0] for racer in racers]
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
    assert [racer.returncode for racer in racers] == [0, 0]
    assert all(output.strip() == "done" for output in outputs)
    assert len(backups(path)) == 1
    assert migrate.current(path) == migrate.HEAD and rows_of(path) == before


async def test_two_storages_in_one_process_migrate_their_files_at_once(built: Build, tmp_path: Path) -> None:
    # Alembic keeps process-wide state while it runs; two files opened together must not tear it.
    old = [built("0001", f"old{number}.db") for number in range(3)]
    new = [tmp_path / f"new{number}.db" for number in range(3)]
    storages = [SQLiteStorage(path) for path in [*old, *new]]
    await asyncio.gather(*(storage.open() for storage in storages))
    await asyncio.gather(*(storage.aclose() for storage in storages))
    assert [migrate.current(path) for path in [*old, *new]] == [migrate.HEAD] * 6


def test_0005_marks_what_0004_indexed_and_a_downgrade_indexes_what_was_not_yet(built: Build) -> None:
    """Up: every event already there is indexed, so the mark starts at the newest. Down: the events past the
    mark are indexed before 0003's triggers (which index each event as it comes) return."""
    path = built("0004")
    migrate.upgrade(path, "0005")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        newest = conn.execute("SELECT max(id) FROM events").fetchone()[0]
        assert conn.execute("SELECT indexed_through FROM events_fts_progress").fetchall() == [(newest,)]
        conn.execute(  # a new event, past the mark: not in the index yet
            "INSERT INTO events (session, position, type, payload, created_at, role, text_path)"
            " VALUES (1, 1000, 'user_message', '{\"content\": \"quokka\"}', '2026-11-30 00:00:00', 'user', '$.content')"
        )
        conn.commit()
        assert conn.execute("SELECT count(*) FROM events_fts WHERE events_fts MATCH 'quokka'").fetchone() == (0,)
    migrate.downgrade(path, "0004")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT count(*) FROM events_fts WHERE events_fts MATCH 'quokka'").fetchone() == (1,)
        conn.execute("INSERT INTO events_fts (events_fts, rank) VALUES ('integrity-check', 1)")
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "events_fts_progress" not in tables


async def test_0006_upgrades_a_0005_file_in_place_and_links_the_subagents_written_from_then_on(built: Build) -> None:
    """A 0005 file holding conversations: upgraded on open, every row kept, every old session one of its own (nothing
    recorded which stream started which); a subagent written afterwards is linked, listed with its session, deleted
    with it; and the file goes back down to 0005 with what it then holds."""
    path = built("0005")
    before = rows_of(path)
    sessions = [UUID(hex=str(row[1])) for row in before["sessions"]]
    subagent = uuid4()
    async with SQLiteStorage(path) as storage:
        listed = (await storage.list_sessions()).sessions
        assert {r.session_id for r in listed} == {s.hex for s in sessions}
        assert all(r.parent_id is None for r in listed)
        with in_session(sessions[0]):
            await storage.save_event(UserMessage("a subagent after the upgrade"), EventContext.for_stream(subagent))
        record = await storage.load_session(subagent)
        assert record is not None and record.parent_id == sessions[0].hex
        assert len((await storage.list_sessions()).sessions) == 4

    assert migrate.current(path) == migrate.HEAD
    (backup,) = backups(path)
    assert migrate.current(backup) == "0005" and rows_of(backup) == before
    after = rows_of(path)
    assert after["sessions"][:4] == before["sessions"] and after["events"][: len(before["events"])] == before["events"]
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT session_id, parent FROM sessions WHERE parent IS NOT NULL").fetchall() == [
            (subagent.hex, 1)
        ]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []

    migrate.downgrade(path, "0005")  # the subagent is a session of its own again; nothing is lost
    assert rows_of(path) == after
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert "parent" not in {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}
        assert "parent_id" not in {row[1] for row in conn.execute("PRAGMA table_info(session_overview)")}

    async with SQLiteStorage(path) as storage:  # up again on open; deleting the old session now leaves it alone
        await storage.drop_history(sessions[0])
        assert await storage.load_session(subagent) is not None
        with in_session(sessions[1]):
            await storage.save_event(UserMessage("linked again"), EventContext.for_stream(subagent := uuid4()))
        await storage.drop_history(sessions[1])  # and a subagent linked since goes with its session
        assert await storage.load_session(subagent) is None
        assert len((await storage.list_sessions()).sessions) == 3
