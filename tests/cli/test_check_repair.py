"""``check`` finds what ``search`` and the views depend on, and says how to repair it; ``check --repair`` does.

SQLite's own integrity check passes on a file whose full-text index was damaged
in place (its blocks zeroed) or whose view was dropped by hand: ``search`` then
silently finds nothing. ``check`` must not say ok there.
"""

from __future__ import annotations

from pathlib import Path

from _clitools import Call, Spec, conversation, fingerprint, sqlite3_shell, write_db


def test_a_damaged_index_and_a_dropped_view_are_found_and_repaired(call: Call, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    write_db(db, [Spec(conversation()) for _ in range(5)])
    assert call("--db", db, "check").code == 0

    sqlite3_shell(db, "UPDATE events_fts_data SET block = zeroblob(length(block)) WHERE id > 10;")
    assert sqlite3_shell(db, "PRAGMA integrity_check;") == "ok"  # SQLite sees nothing wrong
    assert call("--db", db, "search", "fixture").code == 1  # and search finds nothing
    before = fingerprint(db)
    found = call("--db", db, "check")
    assert found.code == 1 and fingerprint(db) == before  # check reads only
    assert "search index  the full-text index does not find" in found.out
    assert found.out.endswith("NOT OK: run `sessionstore check --repair` to put the views back and rebuild the index\n")

    repaired = call("--db", db, "check", "--repair")
    assert repaired.code == 0 and repaired.out.startswith("repaired      rebuilt the full-text index\n")
    assert call("--db", db, "search", "fixture").out.count("fixture") == 5

    sqlite3_shell(db, "DROP VIEW session_overview; DROP TRIGGER events_fts_insert;")
    found = call("--db", db, "check", "--json")
    assert (
        found.code == 1 and '"session_overview is missing"' in found.out and "events_fts_insert is missing" in found.out
    )
    assert call("--db", db, "check", "--repair").code == 0
    assert call("--db", db, "check").code == 0
    assert sqlite3_shell(db, "SELECT count(*) FROM session_overview;") == "5"
