"""Revision 0008: the full-text index made anew in place (Datasette finds it, phrases work), and back."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from datasette.utils import detect_fts
from migration_data import sha256, snapshot

from sessionstore import MigrationError, migrate, records
from sessionstore.schema.queries import UNINDEXED_EVENTS
from sessionstore.sqlite import migrate as sqlite_migrate

Build = Callable[[str], Path]

PHRASE = "'\"zeppelin manifest\"'"


def declaration(conn: sqlite3.Connection) -> str:
    return str(conn.execute("SELECT sql FROM sqlite_master WHERE name = 'events_fts'").fetchone()[0])


def add_unindexed_event(path: Path) -> int:
    """A message written past the index's mark, as a storage leaves it between its batches (0005); how many events
    are past the mark now (the fixtures' rows, written by plain SQL, are too)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(
            "INSERT INTO events (session, position, type, payload, role, text, text_path, created_at)"
            " SELECT 1, 1000, 'user_message', '{\"content\": \"the zeppelin manifest is ready\"}', 'user', NULL,"
            " '$.content', '2026-12-03 00:00:00.000000'"
        )
        conn.commit()
        return int(conn.execute(UNINDEXED_EVENTS).fetchone()[0])


def test_an_older_file_gets_the_new_index_rebuilt_with_every_event(built: Build) -> None:
    path = built("0007")
    add_unindexed_event(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert "content='transcript'" in declaration(conn) and "detail='none'" in declaration(conn)
        assert detect_fts(conn, "transcript") is None and detect_fts(conn, "events") is None  # the user's report
        with pytest.raises(sqlite3.OperationalError, match="phrase queries are not supported"):
            conn.execute(f"SELECT rowid FROM events_fts WHERE events_fts MATCH {PHRASE}").fetchall()
        before = snapshot(conn)

    assert migrate.upgrade(path) is not None  # backed up, then upgraded in place
    assert migrate.current(path) == migrate.HEAD
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert snapshot(conn) == before
        assert 'content="transcript"' in declaration(conn) and "detail=full" in declaration(conn)
        # What Datasette itself detects (its own function): the transcript's page and the events' page.
        assert detect_fts(conn, "transcript") == "events_fts" and detect_fts(conn, "events") == "events_fts"
        # Rebuilt within the upgrade: the event past the old mark is in, and the mark is at the newest event.
        assert conn.execute(UNINDEXED_EVENTS).fetchone() == (0,)
        found = conn.execute(
            "SELECT t.position, t.rowid = t.event_id FROM events_fts"
            f" JOIN transcript AS t ON t.rowid = events_fts.rowid WHERE events_fts MATCH {PHRASE}"
        ).fetchall()
        assert found == [(1000, 1)]
        assert conn.execute("SELECT count(*) FROM events_fts WHERE events_fts MATCH 'careful'").fetchone() == (4,)
        conn.execute("INSERT INTO events_fts (events_fts, rank) VALUES ('integrity-check', 1)")
    hits = records.search(path, '"zeppelin manifest"', raw=True)
    assert [(hit.position, hit.snippet) for hit in hits] == [(1000, "the [zeppelin manifest] is ready")]


def test_a_downgrade_puts_the_old_index_back_whole(built: Build) -> None:
    path = built("0008")
    add_unindexed_event(path)
    migrate.downgrade(path, "0007")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert "detail='none'" in declaration(conn) and detect_fts(conn, "transcript") is None
        assert [row[1] for row in conn.execute("PRAGMA table_info(transcript)")][-1] == "event_id"
        assert conn.execute(UNINDEXED_EVENTS).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM events_fts WHERE events_fts MATCH 'zeppelin'").fetchone() == (1,)
        conn.execute("INSERT INTO events_fts (events_fts, rank) VALUES ('integrity-check', 1)")
    migrate.upgrade(path)
    assert [hit.position for hit in records.search(path, '"zeppelin manifest"', raw=True)] == [1000]


def test_a_failure_after_the_rebuild_leaves_the_old_index_as_it_was(
    built: Build, scripts_with: Callable[..., Path]
) -> None:
    scripts = scripts_with(
        boom='''
        """fails after 0008 (and 0009, PostgreSQL's alone) in the same upgrade"""
        revision = "9000"
        down_revision = "0010"
        branch_labels = None
        depends_on = None


        def upgrade() -> None:
            raise RuntimeError("boom")


        def downgrade() -> None:
            pass
        '''
    )
    path = built("0007")
    trailing = add_unindexed_event(path)
    original = sha256(path)
    with pytest.raises(MigrationError, match="boom"):
        sqlite_migrate.prepare_database(path, scripts=scripts)
    assert sha256(path) == original and migrate.current(path) == "0007"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert "detail='none'" in declaration(conn) and conn.execute(UNINDEXED_EVENTS).fetchone() == (trailing,)
