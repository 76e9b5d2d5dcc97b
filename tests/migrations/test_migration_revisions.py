"""Which revision is which is Alembic's answer: the head, the history, the arguments, the direction of a move."""

from __future__ import annotations

import contextlib
import io
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from migration_data import sha256

from sessionstore import SchemaError, SchemaTooNewError, migrate
from sessionstore.schema import revisions as schema_revisions
from sessionstore.sqlite import migrate as sqlite_migrate

Build = Callable[[str], Path]
ScriptsWith = Callable[..., Path]


def test_history_and_head_are_alembics() -> None:
    out = io.StringIO()
    config = Config(stdout=out)
    config.set_main_option("script_location", str(schema_revisions.script_location()))
    command.history(config)  # "0002 -> 0003 (head), each event's role and text, ..."
    lines = [re.fullmatch(r"(\S+) -> (\S+?)( \(head\))?, (.*)", line) for line in out.getvalue().splitlines()]
    assert all(lines)
    assert migrate.history() == [
        (line[2], None if line[1] == "<base>" else line[1], line[4]) for line in lines if line is not None
    ]
    assert [line[2] for line in lines if line is not None and line[3]] == [migrate.head()]


def test_a_branched_history_has_no_head(scripts_with: ScriptsWith) -> None:
    scripts = scripts_with(
        sideways='''
        """a second revision on top of 0002"""
        revision = "9000"
        down_revision = "0002"
        branch_labels = None
        depends_on = None


        def upgrade() -> None:
            pass


        def downgrade() -> None:
            pass
        '''
    )
    head = migrate.HEAD
    with pytest.raises(SchemaError, match=rf"have 2 heads \(({head}, 9000|9000, {head})\); expected one"):
        migrate.head(scripts=scripts)


@pytest.mark.parametrize("argument", ["nope", "0002@head", "-1", "heads", ""])
def test_a_revision_argument_is_head_base_or_an_exact_id(built: Build, argument: str) -> None:
    path = built("0002")
    before = sha256(path)
    known = f"known: base, {', '.join(revision for revision, _, _ in reversed(migrate.history()))}, head"
    for move in (migrate.upgrade, migrate.downgrade):
        with pytest.raises(SchemaError, match=f"^no schema revision {re.escape(repr(argument))}; {known}$"):
            move(path, argument)
    assert sha256(path) == before and not list(path.parent.glob("*.bak-*"))


def test_a_move_the_wrong_way_says_which_way_and_changes_nothing(built: Build) -> None:
    path = built("0002")
    before = sha256(path)
    with pytest.raises(SchemaError, match="is at 0002; to reach 0001, downgrade it"):
        migrate.upgrade(path, "0001")
    with pytest.raises(SchemaError, match="is at 0002; to reach base, downgrade it"):
        migrate.upgrade(path, "base")
    with pytest.raises(SchemaError, match=f"is at 0002; to reach {migrate.HEAD}, upgrade it"):
        migrate.downgrade(path, "head")
    assert sha256(path) == before and not list(path.parent.glob("*.bak-*"))
    assert migrate.upgrade(path, "0002") is None and migrate.downgrade(path, "0002") is None  # already there


@pytest.mark.parametrize("recorded", ["0002@head", "000", ""])
def test_a_recorded_revision_is_known_only_exactly(built: Build, recorded: str) -> None:
    path = built(migrate.HEAD)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE alembic_version SET version_num = ?", (recorded,))
        conn.commit()
    before = sha256(path)
    with pytest.raises(SchemaTooNewError, match="does not know"):
        sqlite_migrate.prepare_database(path)
    with pytest.raises(SchemaTooNewError, match="does not know"):
        migrate.downgrade(path, "0001")
    assert sha256(path) == before
