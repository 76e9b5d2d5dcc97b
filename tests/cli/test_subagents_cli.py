"""Subagents on the command line (issue 19): listed with their session, shown under it, found naming it, deleted,
pruned, exported and imported with it. The database is written by the library as an agent writes it; what is
stored is read back with the real ``sqlite3`` shell where that is promised."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from uuid import UUID

import pytest
from _clitools import Call, Family, Run, fingerprint, now, sqlite3_shell, write_family, write_family_async

from sessionstore import SQLiteStorage

SHORT = 12


@pytest.fixture
def family(tmp_path: Path) -> tuple[Path, Family]:
    db = tmp_path / "agent.db"
    return db, write_family(db)


def test_list_shows_sessions_of_their_own_and_the_sqlite3_shell_sees_the_link(
    call: Call, family: tuple[Path, Family]
) -> None:
    db, f = family
    listed = call("--db", db, "list")
    assert listed.code == 0
    assert [line.split()[0] for line in listed.out.splitlines()[1:]] == [f.other[:SHORT], f.session[:SHORT]]
    as_json = json.loads(call("--db", db, "list", "--json").out)
    assert [(s["session_id"], s["parent_id"]) for s in as_json] == [(f.other, None), (f.session, None)]

    shell = sqlite3_shell(db, "SELECT session_id, coalesce(parent_id, '-') FROM session_overview ORDER BY rowid;")
    assert shell.splitlines() == [
        f"{f.session}|-",
        f"{f.subagent}|{f.session}",
        f"{f.nested}|{f.subagent}",
        f"{f.other}|-",
    ]
    assert sqlite3_shell(db, "SELECT count(*) FROM session_overview WHERE parent_id IS NULL;") == "2"


def test_show_nests_each_subagent_where_it_started(call: Call, family: tuple[Path, Family]) -> None:
    db, f = family
    shown = call("--db", db, "show", f.session[:8])
    assert shown.code == 0
    lines = shown.out.splitlines()
    assert "subagents 2 (each shown where it started, indented)" in lines
    transcript = [re.sub(r"^\s*(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC  )?", "", line) for line in lines]
    start = transcript.index("user         Plan the orchard survey")
    assert transcript[start:] == [
        "user         Plan the orchard survey",
        'tool call    task_counter(objective="count")',
        "",
        f"subagent {f.subagent[:SHORT]}  Count the kumquat trees  (2 events)",
        "user       Count the kumquat trees",
        "",
        f"subagent {f.nested[:SHORT]}  Double-check the quokka census  (2 events)",
        "user       Double-check the quokka census",
        "assistant  The quokka census is confirmed",
        "",
        "assistant  There are 12 kumquat trees",
        "",
        "tool result  There are 12 kumquat trees",
        "assistant    Survey planned",
    ]
    # Indented one step per level: the subagent's lines by four spaces, its own subagent's by eight.
    assert next(line for line in lines if "Count the kumquat trees  (2" in line).startswith("    subagent ")
    assert next(line for line in lines if "quokka census is confirmed" in line).startswith("        2")

    child = call("--db", db, "show", f.subagent).out.splitlines()
    assert child[1] == f"parent   {f.session} (this session is one of its subagents)"
    assert "a subagent: kept and deleted with its session" in child[4]
    assert f"    subagent {f.nested[:SHORT]}  Double-check the quokka census  (2 events)" in child


def test_show_json_carries_the_link_and_the_subagents(call: Call, family: tuple[Path, Family]) -> None:
    db, f = family
    shown = json.loads(call("--db", db, "show", f.session, "--json").out)
    assert (shown["session"]["session_id"], shown["session"]["parent_id"]) == (f.session, None)
    assert shown["events"][0]["text"] == "Plan the orchard survey"
    (subagent,) = shown["subagents"]
    assert (subagent["session"]["session_id"], subagent["session"]["parent_id"]) == (f.subagent, f.session)
    assert [e["text"] for e in subagent["events"]] == ["Count the kumquat trees", "There are 12 kumquat trees"]
    (nested,) = subagent["subagents"]
    assert (nested["session"]["session_id"], nested["session"]["parent_id"]) == (f.nested, f.subagent)
    assert nested["subagents"] == []
    assert json.loads(call("--db", db, "show", f.other, "--json").out)["subagents"] == []


def test_a_search_hit_in_a_subagent_names_its_parent(call: Call, family: tuple[Path, Family]) -> None:
    db, f = family
    found = call("--db", db, "search", "quokka")
    assert found.out.splitlines()[0] == (
        f"{f.nested[:SHORT]}  Double-check the quokka census  (subagent of {f.subagent[:SHORT]})"
    )
    hits = json.loads(call("--db", db, "search", "quokka", "--json").out)
    assert {(h["session_id"], h["parent_id"]) for h in hits} == {(f.nested, f.subagent)}
    hits = json.loads(call("--db", db, "search", "kumquat", "--json").out)
    assert {(h["session_id"], h["parent_id"]) for h in hits} == {(f.subagent, f.session), (f.session, None)}
    assert "subagent of" not in call("--db", db, "search", "survey").out


def test_deleting_a_session_deletes_its_subagents(sessionstore: Run, family: tuple[Path, Family]) -> None:
    db, f = family
    done = sessionstore("--db", db, "delete", f.subagent[:10])  # a subagent alone: its own goes with it
    assert (done.returncode, done.stdout) == (0, f"deleted {f.subagent} and its 1 subagent\n")
    assert sqlite3_shell(db, "SELECT count(*) FROM sessions;") == "2"
    family_db = db.with_name("again.db")
    g = write_family(family_db)
    done = sessionstore("--db", family_db, "delete", g.session, g.subagent)  # named after its parent too
    assert (done.returncode, done.stdout) == (0, f"deleted {g.session} and its 2 subagents\ndeleted {g.subagent}\n")
    assert sqlite3_shell(family_db, "SELECT session_id FROM sessions;") == g.other
    assert sqlite3_shell(family_db, "SELECT count(*) FROM events;") == "1"
    # Deleted means gone: the subagents' words are not in the file's index any more either.
    assert sqlite3_shell(family_db, "SELECT count(*) FROM events_fts WHERE events_fts MATCH 'quokka';") == "0"


async def test_prune_never_takes_a_subagent_without_its_session(call: Call, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    f = await write_family_async(db)
    old = now() - timedelta(days=40)
    async with SQLiteStorage(db) as storage:  # the subagent old and released, its session not released and new
        subagent = await storage.load_session(UUID(hex=f.subagent))
        session = await storage.load_session(UUID(hex=f.session))
        assert subagent is not None and session is not None
        await storage.save_session(replace(subagent, updated_at=old, released=True))
        await storage.save_session(replace(session, released=False))
    for args in ((), ("--yes",)):
        done = call("--db", db, "prune", "--older-than", "30d", *args)
        assert done.out == "nothing to prune: no session older than 30d that no live process holds\n"
    assert sqlite3_shell(db, "SELECT count(*) FROM sessions;") == "4"

    async with SQLiteStorage(db) as storage:  # now the session is old and released: it goes, with both
        await storage.save_session(replace(session, updated_at=old, released=True))
    done = call("--db", db, "prune", "--older-than", "30d", "--yes")
    assert done.out.splitlines()[0] == "deleted 1 session not updated for 30d:"
    assert sqlite3_shell(db, "SELECT session_id FROM sessions;") == f.other


def test_export_and_import_carry_the_link_byte_for_byte(
    call: Call, family: tuple[Path, Family], tmp_path: Path
) -> None:
    db, f = family
    everything = call("--db", db, "export", "--all").out
    lines = [json.loads(line) for line in everything.splitlines()]
    assert lines[0] == {"format": "sessionstore-export", "version": 3}
    parents = {line["session_id"]: line["parent_id"] for line in lines if line.get("kind") == "session"}
    assert parents == {f.session: None, f.subagent: f.session, f.nested: f.subagent, f.other: None}

    copy = tmp_path / "copy.db"
    dump = tmp_path / "all.jsonl"
    dump.write_text(everything)
    assert call("--db", copy, "import", dump).code == 0
    assert call("--db", copy, "export", "--all").out == everything  # byte for byte, links included
    assert call("--db", copy, "show", f.session).out == call("--db", db, "show", f.session).out
    assert call("--db", copy, "import", dump).out.startswith("imported 0 new, 0 replaced, 4 already present")

    # A session exported by id takes its subagents along, each after its parent, whatever order they are named in.
    for named in ([f.session], [f.nested, f.session]):
        exported = [json.loads(line) for line in call("--db", db, "export", *named).out.splitlines()[1:]]
        assert [line["session_id"] for line in exported if line.get("kind") == "session"] == [
            f.session,
            f.subagent,
            f.nested,
        ]
    only = [json.loads(line) for line in call("--db", db, "export", f.subagent).out.splitlines()[1:]]
    assert [line["session_id"] for line in only if line.get("kind") == "session"] == [f.subagent, f.nested]


def test_an_import_refuses_a_subagent_whose_session_is_nowhere(
    call: Call, family: tuple[Path, Family], tmp_path: Path
) -> None:
    db, f = family
    dump = tmp_path / "subagent.jsonl"
    dump.write_text(call("--db", db, "export", f.subagent).out)  # its parent is not in the file
    target = tmp_path / "target.db"
    assert call("--db", target, "import", dump).err == (
        f"sessionstore: error: session {f.subagent} (line 2) is a subagent of session {f.session}, which is"
        " neither earlier in the file nor stored; nothing was imported\n"
    )
    assert not target.exists()  # a new file is made whole or not at all
    other = tmp_path / "other.db"
    write_family(other)
    before = fingerprint(other)
    assert call("--db", other, "import", dump).code == 1
    assert fingerprint(other) == before

    # Where its session is stored, it is linked under it.
    done = call("--db", db, "delete", f.subagent)
    assert (
        done.code == 0 and sqlite3_shell(db, f"SELECT count(*) FROM sessions WHERE session_id = '{f.nested}';") == "0"
    )
    assert call("--db", db, "import", dump).out.startswith("imported 2 new")
    assert sqlite3_shell(db, f"SELECT parent_id FROM session_overview WHERE session_id = '{f.nested}';") == f.subagent


def test_an_export_from_before_subagents_imports_as_sessions_of_their_own(call: Call, tmp_path: Path) -> None:
    old = tmp_path / "v2.jsonl"
    old.write_text(
        '{"format":"sessionstore-export","version":2}\n'
        '{"kind":"session","session_id":"' + "a" * 32 + '","cwd":"/w","additional_directories":[],"mcp_servers":[],'
        '"meta":{},"title":null,"created_at":"2026-11-01T10:00:00+00:00","updated_at":"2026-11-01T10:00:00+00:00",'
        '"released":true}\n'
        '{"kind":"event","session_id":"' + "a" * 32 + '","position":0,"type":"user_message",'
        '"payload":"{\\"content\\":\\"from version 2\\"}","role":"user","text":null,"text_path":"$.content",'
        '"created_at":"2026-11-01T10:00:00+00:00"}\n'
    )
    db = tmp_path / "new.db"
    assert call("--db", db, "import", old).out.startswith("imported 1 new")
    (listed,) = json.loads(call("--db", db, "list", "--json").out)
    assert (listed["session_id"], listed["parent_id"], listed["title"]) == ("a" * 32, None, "from version 2")
