"""Reading works on older files too (docs/cli.md): a file a previous release made is listed and shown with everything
its revision has, as it is after ``db upgrade``, and the reads change nothing in it."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from migration_data import sha256

from sessionstore import migrate
from sessionstore.cli import main

# Every revision since session_overview had every column it lists (0006), up to the one before head.
OLDER = [revision for revision, _, _ in migrate.history() if "0006" <= revision < migrate.HEAD]


def cli_json(capsys: pytest.CaptureFixture[str], *args: object) -> object:
    capsys.readouterr()
    assert main([*(str(a) for a in args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("revision", OLDER)
def test_an_older_file_lists_and_shows_what_it_will_after_upgrade(
    revision: str, built: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Derived titles (an untitled session listed under its first user message) and subagents came with 0006;
    a file at any later revision shows them before it is upgraded, as it does after."""
    old = built(revision)
    # An event another codec described (an AG2 event's type): its stored role and text are shown as they are, not
    # as sessionstore's own types would be described.
    with contextlib.closing(sqlite3.connect(old)) as conn, conn:
        conn.execute(
            "INSERT INTO events (session, position, type, payload, created_at, role, text) SELECT session,"
            " max(position) + 1, 'someone_elses_event', '{}', max(created_at), 'user', 'typed elsewhere' FROM events"
            " GROUP BY session ORDER BY session LIMIT 1"
        )
    upgraded = old.with_name("upgraded.db")
    shutil.copy(old, upgraded)
    migrate.upgrade(upgraded)
    before = sha256(old)

    def seen(db: Path) -> list[tuple[object, ...]]:
        listed = cli_json(capsys, "list", "--db", db)
        assert isinstance(listed, list)
        rows = []
        for entry in listed:
            shown = cli_json(capsys, "show", entry["session_id"], "--db", db)
            assert isinstance(shown, dict)
            subagents = [s["session"]["session_id"] for s in shown["subagents"]]
            events = [(e["position"], e["role"], e["text"]) for e in shown["events"]]
            rows.append((entry["session_id"], entry["title"], shown["session"]["title"], subagents, events))
        return rows

    old_rows = seen(old)
    assert old_rows == seen(upgraded)
    assert any(title and not title.startswith("Session ") for _, title, *_ in old_rows)  # a derived one
    assert any(subagents for *_, subagents, _ in old_rows)
    assert any(("user", "typed elsewhere") in [e[1:] for e in events] for *_, events in old_rows)
    assert sha256(old) == before
