"""Each command's behaviour, run in this process through ``sessionstore.cli.main`` (the script's own entry point)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from _clitools import Call, Spec, conversation, fingerprint, now, sqlite3_shell, write_db

from sessionstore import ModelMessage, UserMessage, migrate
from sessionstore.cli import default_db_path
from sessionstore.sqlite.holds import Holds
from sessionstore.storage import holder


def test_list_filters_by_cwd_and_limits(call: Call, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    a, b, c = write_db(
        db,
        [
            Spec([UserMessage("one")], cwd="/a"),
            Spec([UserMessage("two")], cwd="/b"),
            Spec([UserMessage("three")], cwd="/a", title="Named"),
        ],
    )
    ids = [s["session_id"] for s in json.loads(call("--db", db, "list", "--json").out)]
    assert ids == [c, b, a]
    in_a = json.loads(call("--db", db, "list", "--cwd", "/a", "--json").out)
    assert [(s["session_id"], s["title"], s["stored_title"]) for s in in_a] == [(c, "Named", "Named"), (a, "one", None)]
    assert [s["session_id"] for s in json.loads(call("--db", db, "list", "-n", "1", "--json").out)] == [c]
    empty = call("--db", db, "list", "--cwd", "/nowhere")
    assert (empty.code, empty.out, empty.err) == (0, "", "no sessions in /nowhere\n")


def test_title_is_set_cleared_and_otherwise_derived(call: Call, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    long = "Please look at why   the nightly build keeps failing on the date parsing tests since the upgrade to 3.12"
    (sid,) = write_db(db, [Spec([ModelMessage("hello"), UserMessage(long)])])
    (listed,) = json.loads(call("--db", db, "list", "--json").out)
    # Derived from the first *user* message, shortened, and the same title a person sees in sqlite3.
    assert listed["title"].startswith("Please look at why") and listed["title"].endswith("…")
    assert len(listed["title"]) <= 80 and listed["stored_title"] is None
    assert listed["title"] == sqlite3_shell(db, "SELECT title FROM session_overview;")

    done = call("--db", db, "title", sid[:8], "Nightly build")
    assert done.code == 0 and done.out == f"{sid}: title set to 'Nightly build'\n"
    assert json.loads(call("--db", db, "list", "--json").out)[0]["title"] == "Nightly build"
    assert call("--db", db, "title", sid[:8], "--clear").code == 0
    assert json.loads(call("--db", db, "list", "--json").out)[0]["stored_title"] is None
    assert call("--db", db, "title", sid[:8]).code == 1  # neither a title nor --clear


def test_delete_takes_prefixes_and_is_all_or_nothing(call: Call, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    a, b = write_db(db, [Spec([UserMessage("a")]), Spec([UserMessage("b")])])
    before = fingerprint(db)
    failed = call("--db", db, "delete", a[:10], "0" * 32)  # one good id, one unknown: nothing is deleted
    assert failed.code == 1 and failed.err == f"sessionstore: error: no session matches {'0' * 32!r}\n"
    assert fingerprint(db) == before
    done = call("--db", db, "delete", a[:10].upper())
    assert (done.code, done.out) == (0, f"deleted {a}\n")
    assert [s["session_id"] for s in json.loads(call("--db", db, "list", "--json").out)] == [b]
    assert (
        sqlite3_shell(
            db, f"SELECT count(*) FROM events e JOIN sessions s ON s.id = e.session WHERE s.session_id = '{a}';"
        )
        == "0"
    )
    assert sqlite3_shell(db, "SELECT count(*) FROM events;") == "1"  # the cascade took only a's events


def test_prune_shows_then_deletes_only_old_sessions_no_live_process_holds(call: Call, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    old, never_released, held, fresh = write_db(
        db,
        [
            Spec([UserMessage("old")], updated_at=now() - timedelta(days=40)),
            # Written without a registry (or by one whose process died): no one holds it, so it is pruned too.
            Spec([UserMessage("never released")], updated_at=now() - timedelta(days=40), released=False),
            Spec([UserMessage("held")], updated_at=now() - timedelta(days=40), released=False),
            Spec([UserMessage("fresh")], updated_at=now() - timedelta(days=2)),
        ],
    )
    holder = hold(db, held)  # a live holder, as a registry's process would be
    before = fingerprint(db)
    dry = call("--db", db, "prune", "--older-than", "30d")
    assert dry.code == 0
    assert dry.out.splitlines()[0] == "would delete 2 sessions not updated for 30d:"
    assert old[:12] in dry.out and never_released[:12] in dry.out
    assert held[:12] not in dry.out and fresh[:12] not in dry.out
    assert dry.out.splitlines()[-1] == "run again with --yes to delete them"
    assert fingerprint(db) == before

    done = call("--db", db, "prune", "--older-than", "4w", "--yes")
    assert done.code == 0 and done.out.startswith("deleted 2 sessions not updated for 4w:")
    remaining = {s["session_id"] for s in json.loads(call("--db", db, "list", "--json").out)}
    assert remaining == {held, fresh}
    assert call("--db", db, "prune", "--older-than", "1d", "--yes").out.startswith("deleted 1 session not updated")
    expected = "nothing to prune: no session older than 1d that no live process holds\n"
    assert call("--db", db, "prune", "--older-than", "1d").out == expected
    holder.close()  # its process ended: the session is prunable
    assert call("--db", db, "prune", "--older-than", "1d", "--yes").out.startswith("deleted 1 session not updated")


def hold(db: Path, session_id: str) -> Holds:
    """Hold ``session_id`` as a registry's storage does (its lock and its mark), until the result is closed."""
    holds = Holds(db)
    row_id = int(sqlite3_shell(db, f"SELECT id FROM sessions WHERE session_id = '{session_id}';"))
    assert holds.take(row_id)
    sqlite3_shell(db, f"UPDATE sessions SET held_by = '{holder()}' WHERE id = {row_id};")
    return holds


def test_import_refuses_a_changed_session_unless_replace(call: Call, tmp_path: Path) -> None:
    db, other = tmp_path / "agent.db", tmp_path / "other.db"
    (sid,) = write_db(db, [Spec([UserMessage("v1")])])
    write_db(other, [Spec([UserMessage("v1"), ModelMessage("and more")], session_id=sid)])
    dump = tmp_path / "other.jsonl"
    assert call("--db", other, "export", sid[:6], "-o", dump).code == 0
    before = fingerprint(db)
    refused = call("--db", db, "import", dump)
    assert refused.code == 1
    assert f"session {sid} is already stored with different events" in refused.err
    assert "--replace" in refused.err and len(refused.err.splitlines()) == 1
    assert fingerprint(db) == before
    replaced = call("--db", db, "import", dump, "--replace")
    assert replaced.code == 0 and "0 new, 1 replaced" in replaced.out
    shown = json.loads(call("--db", db, "show", sid, "--json").out)
    assert [e["payload"]["content"] for e in shown["events"]] == ["v1", "and more"]


def test_export_needs_ids_or_all(call: Call, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    write_db(db, [Spec([UserMessage("a")])])
    done = call("--db", db, "export")
    assert (done.code, done.err) == (1, "sessionstore: error: give session ids to export, or --all\n")
    header, session, event = call("--db", db, "export", "--all").out.splitlines()
    assert json.loads(header) == {"format": "sessionstore-export", "version": 3}
    assert json.loads(session)["kind"] == "session"
    assert json.loads(event)["payload"] == '{"content":"a"}'  # the stored text, verbatim


def test_stats_and_check(call: Call, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    write_db(db, [Spec(conversation()), Spec([UserMessage("a")])])
    stats = json.loads(call("--db", db, "stats", "--json").out)
    assert (stats["sessions"], stats["released"], stats["events"]) == (2, 2, 7)
    assert stats["event_types"]["user_message"] == 2
    assert stats["file_size"] == db.stat().st_size
    assert stats["revision"] == stats["head"]
    ok = call("--db", db, "check")
    assert ok.code == 0 and ok.out.splitlines()[-1] == "ok"

    # Damage by hand, as someone with the sqlite3 shell and foreign keys off could.
    sqlite3_shell(
        db,
        "PRAGMA foreign_keys = OFF; INSERT INTO events (session, position, type, payload, created_at)"
        " VALUES (999, 0, 'user_message', '{}', '2026-01-01 00:00:00.000000');",
    )
    bad = call("--db", db, "check")
    assert bad.code == 1
    assert "foreign keys  events row 8 points at a missing sessions row" in bad.out
    assert bad.out.splitlines()[-1] == "NOT OK"
    assert json.loads(call("--db", db, "check", "--json").out)["ok"] is False


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["show", "ab"],
        ["search", "x"],
        ["stats"],
        ["check"],
        ["export", "--all"],
        ["delete", "ab"],
        ["prune", "--older-than", "1d"],
        ["title", "ab", "x"],
        ["datasette"],
    ],
)
def test_commands_never_create_a_missing_database(call: Call, tmp_path: Path, args: list[str]) -> None:
    missing = tmp_path / "sub" / "missing.db"
    done = call("--db", missing, *args)
    assert (done.code, done.out, done.err) == (1, "", f"sessionstore: error: {missing}: no such database file\n")
    assert not missing.parent.exists()


def test_a_file_that_is_not_a_sessionstore_database(call: Call, tmp_path: Path) -> None:
    # Empty, it is told the command that gives it the schema, and that command works.
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    done = call("--db", empty, "list")
    fix = f"sessionstore db upgrade --db {empty}"
    assert (done.code, done.err) == (
        1,
        f"sessionstore: error: {empty} has no sessionstore schema yet; give it one with `{fix}`\n",
    )
    assert empty.read_bytes() == b""
    assert call(*fix.split()[1:]).code == 0 and call("--db", empty, "list").code == 0
    # Another program's file is left alone; the message says how to name or make a sessionstore database.
    theirs = tmp_path / "theirs.db"
    with contextlib.closing(sqlite3.connect(theirs)) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    before = theirs.read_bytes()
    done = call("--db", theirs, "list")
    assert done.code == 1 and f"{theirs} is not a sessionstore database: it holds other tables" in done.err
    assert done.err.rstrip().endswith("or make a new one with `sessionstore db upgrade --db NEW.db`")
    assert theirs.read_bytes() == before
    folder = tmp_path / "folder.db"
    folder.mkdir()
    assert call("--db", folder, "stats").err == f"sessionstore: error: {folder} is a folder, not a database file\n"


def test_default_database_location(call: Call, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONSTORE_DB", str(tmp_path / "from-env.db"))
    assert Path(default_db_path()) == tmp_path / "from-env.db"
    monkeypatch.delenv("SESSIONSTORE_DB")
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
        assert default_db_path() == tmp_path / "data" / "sessionstore" / "sessions.db"
        (sid,) = write_db(default_db_path(), [Spec([UserMessage("found by default")])])
        assert sid[:12] in call("list").out
        monkeypatch.delenv("XDG_DATA_HOME")
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        assert default_db_path() == tmp_path / "home" / ".local" / "share" / "sessionstore" / "sessions.db"
    assert os.environ.get("SESSIONSTORE_DB") is None


def test_db_commands_move_the_schema_and_writes_wait_for_head(call: Call, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    (sid,) = write_db(db, [Spec([UserMessage("hello there")])])
    head, previous = [revision for revision, _, _ in migrate.history()][:2]
    assert call("--db", db, "db", "current").out == f"{head} (head)\n"
    history = call("--db", db, "db", "history").out.splitlines()
    assert history[0].startswith(f"{previous} -> {head} (head): ") and history[-1].startswith("base -> 0001: ")

    down = call("--db", db, "db", "downgrade", "0001")
    assert down.code == 0 and down.out.startswith(f"downgraded {db} from {head} to 0001; backup at ")
    assert call("--db", db, "db", "current").out == f"0001 (head is {head}: run `sessionstore db upgrade --db {db}`)\n"
    # Reading still works on the older file; writing and searching say what to run; check fails.
    assert sid[:12] in call("--db", db, "list").out
    before = fingerprint(db)
    refused = call("--db", db, "delete", sid[:6])
    assert refused.code == 1 and refused.err.endswith(f"run `sessionstore db upgrade --db {db}` first\n")
    searched = call("--db", db, "search", "hello").err
    assert f"is at schema revision '0001', this sessionstore searches '{head}'" in searched
    assert call("--db", db, "check").code == 1
    assert fingerprint(db) == before

    up = call("--db", db, "db", "upgrade")
    assert up.code == 0 and up.out.startswith(f"upgraded {db} from 0001 to {head}")
    assert call("--db", db, "search", "hello").out.startswith(sid[:12])  # indexed by the upgrade
    assert call("--db", db, "db", "upgrade").out == f"{db} is already at {head}\n"
    unknown = call("--db", db, "db", "downgrade", "nope")
    assert unknown.code == 1 and unknown.err.startswith("sessionstore: error: no schema revision 'nope'")
    missing = tmp_path / "missing.db"
    assert call("--db", missing, "db", "upgrade").code == 1 and not missing.exists()
