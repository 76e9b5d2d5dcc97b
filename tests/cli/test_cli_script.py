"""The installed ``sessionstore`` script, run as a person runs it: a subprocess over files the library wrote."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from _clitools import TIMEOUT, Run, Spec, child_env, conversation, fingerprint, script_path, write_db

from sessionstore import ModelMessage, UserMessage
from sessionstore.transfer import export_sessions


def test_from_something_odd_yesterday_to_the_transcript_in_two_commands(sessionstore: Run, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    older, newest = write_db(db, [Spec([UserMessage("old work")]), Spec(conversation(), cwd="/home/me/project")])
    env = child_env(SESSIONSTORE_DB=str(db))  # the default database, as a configured person would have it

    listed = sessionstore("list", env=env)
    assert listed.returncode == 0, listed.stderr
    header, first, second = listed.stdout.splitlines()
    assert header.split() == ["ID", "UPDATED", "EVENTS", "TOKENS", "CWD", "TITLE"]
    # Newest first; the title is derived from the first user message (first line, shortened).
    assert first.startswith(newest[:12]) and "/home/me/project" in first
    assert "Why is the build red? It was green yesterday." in first
    assert second.startswith(older[:12])

    shown = sessionstore("show", first.split()[0][:6], env=env)
    assert shown.returncode == 0, shown.stderr
    body = shown.stdout
    assert f"session  {newest}" in body
    transcript = body.split("\n\n", 1)[1].splitlines()
    stamped = [line[25:] for line in transcript if line[:2] == "20"]  # after "YYYY-MM-DD HH:MM:SS UTC  "
    expected = [
        ("system", "You are careful."),
        ("user", "Why is the build red?"),
        ("tool call", 'run(cmd="pytest -x")'),
        ("tool result", "1 failed: test_parse_dates"),
        ("assistant", "test_parse_dates fails: the fixture expects UTC."),
    ]
    assert stamped == [f"{who:<11}  {what}" for who, what in expected]
    assert "It was green yesterday." in body  # the second line of a message, indented under the first
    # An event that is not a message (here a type this version does not know) is counted, not shown...
    assert body.endswith("(1 event that is not a message not shown: myapp.handoff; --all shows it)\n")
    everything = sessionstore("show", first.split()[0][:6], "--all", env=env).stdout
    # ... unless asked for: then it is listed by its type name, with its payload.
    assert everything.splitlines()[-1][25:] == 'myapp.handoff  {"to_agent":"reviewer"}'


def test_json_output_is_machine_readable(sessionstore: Run, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    (sid,) = write_db(db, [Spec(conversation(), title="Red build", meta={"client": "zed"})])
    listed = json.loads(sessionstore("--db", db, "list", "--json").stdout)
    assert [(s["session_id"], s["title"], s["events"], s["meta"], s["released"]) for s in listed] == [
        (sid, "Red build", 6, {"client": "zed"}, True)
    ]
    shown = json.loads(sessionstore("show", sid, "--json", "--db", db).stdout)
    assert shown["session"]["session_id"] == sid
    assert [e["type"] for e in shown["events"]][-2:] == ["model_message", "myapp.handoff"]
    assert shown["events"][2]["payload"] == {"call_id": "c1", "name": "run", "arguments": {"cmd": "pytest -x"}}


def test_user_mistakes_print_one_line_exit_1_and_change_nothing(sessionstore: Run, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    ids = write_db(
        db,
        [
            Spec([UserMessage("a")], session_id="abc0" + "0" * 27 + "1"),
            Spec([UserMessage("b")], session_id="abc0" + "0" * 27 + "2"),
        ],
    )
    before = fingerprint(db)
    ambiguous = sessionstore("--db", db, "delete", "abc0")
    unknown = sessionstore("--db", db, "show", "ffff")
    for done in (ambiguous, unknown):
        assert done.returncode == 1 and done.stdout == ""
        assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("sessionstore: error: "), done.stderr
    a, b = ids
    assert ambiguous.stderr == f"sessionstore: error: 'abc0' is ambiguous: it matches {a}, {b}; give more digits\n"
    assert unknown.stderr == "sessionstore: error: no session matches 'ffff'\n"
    assert fingerprint(db) == before

    missing = tmp_path / "nothing-here.db"
    done = sessionstore("--db", missing, "list")
    assert (done.returncode, done.stderr) == (1, f"sessionstore: error: {missing}: no such database file\n")
    assert not missing.exists()
    # The default database (nobody named one) points the way: --db, $SESSIONSTORE_DB, or the demo that makes one.
    done = sessionstore("list", env=child_env(XDG_DATA_HOME=str(tmp_path / "data")))
    default = tmp_path / "data" / "sessionstore" / "sessions.db"
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"sessionstore: error: {default}: no such database file (the default database")
    assert "--db PATH or $SESSIONSTORE_DB" in done.stderr and "python -m sessionstore.demo write FILE" in done.stderr
    assert not (tmp_path / "data").exists()

    text = tmp_path / "notes.txt"
    text.write_text("these are my notes, not a database\n" * 200)
    done = sessionstore("--db", text, "show", "abc")
    assert done.returncode == 1 and "is not a SQLite database" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert text.read_text() == "these are my notes, not a database\n" * 200

    usage = sessionstore("--db", db, "prune", "--older-than", "soon")
    assert usage.returncode == 1 and usage.stderr.startswith("sessionstore: error: not an age: 'soon' (")
    assert len(usage.stderr.splitlines()) == 1


def test_export_import_round_trip_is_lossless_and_idempotent(sessionstore: Run, tmp_path: Path) -> None:
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    ids = write_db(src, [Spec(conversation(), title="Red build"), Spec([UserMessage("x"), ModelMessage("y")])])
    dump = tmp_path / "all.jsonl"
    exported = sessionstore("--db", src, "export", "--all", "-o", dump)
    assert exported.returncode == 0, exported.stderr

    first = sessionstore("--db", dst, "import", dump)  # import may create the database
    assert first.returncode == 0, first.stderr
    assert "imported 2 new, 0 replaced, 0 already present (8 events)" in first.stdout
    again = sessionstore("--db", dst, "import", dump)
    assert "imported 0 new, 0 replaced, 2 already present" in again.stdout

    # Lossless: exporting the copy gives the same bytes (both sessions, unknown event type and all).
    copy = sessionstore("--db", dst, "export", "--all").stdout
    assert copy == dump.read_text()
    assert sorted(json.loads(line)["session_id"] for line in copy.splitlines() if '"kind":"session"' in line) == sorted(
        ids
    )


def test_a_bad_import_file_changes_nothing(sessionstore: Run, tmp_path: Path) -> None:
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    write_db(src, [Spec([UserMessage(str(i))]) for i in range(3)])
    write_db(dst, [Spec([UserMessage("already here")])])
    dump = tmp_path / "all.jsonl"
    export_sessions(src, dump)
    lines = dump.read_text().splitlines()
    lines.insert(4, '{"kind": "event", "session_id": "nope"}')  # a broken line after a good session
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    before = fingerprint(dst)
    done = sessionstore("--db", dst, "import", bad)
    assert done.returncode == 1
    assert done.stderr == (
        f"sessionstore: error: {bad} line 5: an event must follow the line of its session; nothing was imported\n"
    )
    assert fingerprint(dst) == before

    fresh = tmp_path / "fresh.db"
    assert sessionstore("--db", fresh, "import", bad).returncode == 1
    assert not fresh.exists()  # a failed import does not leave an empty database behind


def test_progress_shows_on_a_terminal_only(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    write_db(db, [Spec([UserMessage(str(i))]) for i in range(3)])
    out = tmp_path / "all.jsonl"
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(
            [script_path(), "--db", str(db), "export", "--all", "-o", str(out)],
            stdout=subprocess.PIPE,
            stderr=secondary,
            env=child_env(),
            timeout=TIMEOUT,
        )
        os.close(secondary)
        secondary = -1
        terminal = b""
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # EIO: the child's end is closed and everything was read
                break
            if not chunk:
                break
            terminal += chunk
    finally:
        os.close(primary)
        if secondary != -1:
            os.close(secondary)
    assert done.returncode == 0
    assert b"exporting 3/3 sessions" in terminal
    assert f"exported 3 sessions to {out}".encode() in terminal

    piped = subprocess.run(
        [script_path(), "--db", str(db), "export", "--all", "-o", str(out)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=TIMEOUT,
    )
    assert piped.stderr == f"exported 3 sessions to {out}\n"  # no progress line in a pipe


def test_import_sessionstore_does_not_load_the_command_line() -> None:
    code = (
        "import sys, sessionstore; "
        "print(sorted(m for m in sys.modules if m in ('argparse', 'sessionstore.cli', 'sessionstore.admin',"
        " 'sessionstore.transfer') or m.split('.')[0] in ('alembic', 'sqlalchemy', 'aiosqlite')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
