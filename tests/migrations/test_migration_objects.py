"""Views, triggers and the FTS index as named objects: a downgrade puts back exactly what the upgrade replaced."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from migration_data import sha256

from sessionstore import MigrationError, migrate
from sessionstore.sqlite import migrate as sqlite_migrate

Build = Callable[[str], Path]
ScriptsWith = Callable[..., Path]

REVISIONS = [revision for revision, _, _ in reversed(migrate.history())]
# Revisions that change a PostgreSQL database alone: on a file they are a step that changes nothing.
POSTGRESQL_ONLY = {"0009", "0011", "0013", "0015"}


def master(path: Path) -> list[tuple[str, str, str, str | None]]:
    """The schema as SQLite keeps it, statement text and all (not ``rootpage``: a rebuilt object moves)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()


@pytest.mark.parametrize("revision", REVISIONS[:-1])
def test_a_downgrade_restores_the_schema_it_upgraded_exactly(built: Build, revision: str) -> None:
    path = built(revision)
    before = master(path)
    migrate.upgrade(path)
    changed = set(REVISIONS[REVISIONS.index(revision) + 1 :]) - POSTGRESQL_ONLY
    assert (master(path) != before) == bool(changed)
    migrate.downgrade(path, revision)
    assert master(path) == before


_CREATE = '''
"""recent events, a view"""
from alembic import op
from sessionstore.migrations.sqlobjects import View

revision = "9001"
down_revision = "{head}"
branch_labels = None
depends_on = None

RECENT = View("recent_events", "SELECT id FROM events ORDER BY id DESC LIMIT 10")


def upgrade() -> None:
    op.create_object(RECENT)


def downgrade() -> None:
    op.drop_object(RECENT)
'''

_REPLACE = '''
"""recent events, with their type"""
from alembic import op
from sessionstore.migrations.sqlobjects import View

revision = "9002"
down_revision = "9001"
branch_labels = None
depends_on = None

RECENT = View("recent_events", "SELECT id, type FROM events ORDER BY id DESC LIMIT 10")


def upgrade() -> None:
    op.replace_object(RECENT, replaces="9001.RECENT")


def downgrade() -> None:
    op.replace_object(RECENT, replace_with="9001.RECENT")
'''


def test_a_revision_replaces_an_earlier_object_by_name(built: Build, scripts_with: ScriptsWith) -> None:
    scripts = scripts_with(recent=_CREATE.format(head=migrate.HEAD), recent_type=_REPLACE)
    path = built(migrate.HEAD)

    def view() -> tuple[str | None, list[str]]:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'recent_events'").fetchone()
            columns = [row[1] for row in conn.execute("PRAGMA table_info(recent_events)")]
        return (sql[0] if sql else None), columns

    sqlite_migrate.upgrade(path, "9001", scripts=scripts)
    first = view()
    assert first == ("CREATE VIEW recent_events AS\nSELECT id FROM events ORDER BY id DESC LIMIT 10", ["id"])
    sqlite_migrate.upgrade(path, "9002", scripts=scripts)
    assert view() == (
        "CREATE VIEW recent_events AS\nSELECT id, type FROM events ORDER BY id DESC LIMIT 10",
        ["id", "type"],
    )
    sqlite_migrate.downgrade(path, "9001", scripts=scripts)
    assert view() == first  # 9001's definition, from 9001's module: 9002 does not repeat it
    sqlite_migrate.downgrade(path, migrate.HEAD, scripts=scripts)
    assert view() == (None, [])


def test_a_name_that_names_nothing_fails_the_migration_and_changes_nothing(
    built: Build, scripts_with: ScriptsWith
) -> None:
    scripts = scripts_with(
        typo=f'''
        """names a view 0002 never defined"""
        from alembic import op
        from sessionstore.migrations import sqlobjects  # its operations, for a revision that only names objects

        revision = "9001"
        down_revision = "{migrate.HEAD}"
        branch_labels = None
        depends_on = None


        def upgrade() -> None:
            op.drop_object("0002.TRANSCRIPTS")


        def downgrade() -> None:
            pass
        '''
    )
    path = built(migrate.HEAD)
    before = sha256(path)
    with pytest.raises(MigrationError, match=r"'0002\.TRANSCRIPTS' names no SQLObject"):
        sqlite_migrate.upgrade(path, scripts=scripts)
    assert sha256(path) == before
