"""Subagents on PostgreSQL (issue 19): a family of sessions moved from a SQLite file by export and import keeps its
links, and every command answers as on the file (the installed script, a real server). The storage's own writes
on PostgreSQL are in ``tests/storage/test_storage_subagents.py``."""

from __future__ import annotations

import json
from pathlib import Path

from _pgcli import Family, run, same_search, write_family


def moved(tmp_path: Path, url: str) -> tuple[Path, Family, str]:
    """A family written into a SQLite file by the library, moved into the PostgreSQL database; the export."""
    db = tmp_path / "agent.db"
    family = write_family(db)
    exported = run("export", "--all", "--db", db)
    assert exported.returncode == 0, exported.stderr
    imported = run("import", "-", "--db", url, input=exported.stdout)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.startswith("imported 4 new")
    return db, family, exported.stdout


def same_on_both(db: Path, url: str, *args: str) -> str:
    lite, pg = run(*args, "--db", db), run(*args, "--db", url)
    assert (pg.returncode, pg.stdout, pg.stderr) == (lite.returncode, lite.stdout, lite.stderr), args
    return pg.stdout


def test_reading_a_family_answers_as_on_sqlite(pg_url: str, tmp_path: Path) -> None:
    db, f, exported = moved(tmp_path, pg_url)
    assert run("export", "--all", "--db", pg_url).stdout == exported  # the links moved, byte for byte
    listed = json.loads(same_on_both(db, pg_url, "list", "--json"))
    assert [s["session_id"] for s in listed] == [f.other, f.session]
    shown = same_on_both(db, pg_url, "show", f.session)
    assert f"    subagent {f.subagent[:12]}  Count the kumquat trees  (2 events)" in shown.splitlines()
    assert f"        subagent {f.nested[:12]}  Double-check the quokka census  (2 events)" in shown.splitlines()
    tree = json.loads(same_on_both(db, pg_url, "show", f.session, "--json"))
    assert tree["subagents"][0]["subagents"][0]["session"]["parent_id"] == f.subagent
    same_on_both(db, pg_url, "show", f.subagent)
    hits = json.loads(same_search(db, pg_url, "quokka", "--json").stdout)
    assert {(h["session_id"], h["parent_id"]) for h in hits} == {(f.nested, f.subagent)}
    assert f"(subagent of {f.subagent[:12]})" in same_search(db, pg_url, "quokka").stdout


def test_deleting_a_session_deletes_its_subagents_as_on_sqlite(pg_url: str, tmp_path: Path) -> None:
    db, f, _ = moved(tmp_path, pg_url)
    assert same_on_both(db, pg_url, "delete", f.session[:8]) == f"deleted {f.session} and its 2 subagents\n"
    assert [s["session_id"] for s in json.loads(same_on_both(db, pg_url, "list", "--json"))] == [f.other]
    assert "nothing matches" in run("search", "quokka", "--db", pg_url).stderr
    for where in (db, pg_url):
        stats = json.loads(run("stats", "--json", "--db", where).stdout)
        assert (stats["sessions"], stats["events"]) == (1, 1), where


def test_a_subagent_whose_session_is_nowhere_is_refused_whole(pg_url: str, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    f = write_family(db)
    only = run("export", f.subagent, "--db", db).stdout  # its session is not in the file
    refused = run("import", "-", "--db", pg_url, input=only)
    assert refused.returncode == 1
    assert f"is a subagent of session {f.session}, which is neither earlier in the file nor stored" in refused.stderr
    assert json.loads(run("stats", "--json", "--db", pg_url).stdout)["sessions"] == 0
