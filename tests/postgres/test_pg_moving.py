"""Moving sessions between a SQLite file and a PostgreSQL database with the installed script:
``sessionstore export --all --db a.db | sessionstore import - --db postgresql://...`` and back give byte-identical
exports; an import into PostgreSQL is one transaction; text PostgreSQL cannot hold is refused before anything
is written."""

from __future__ import annotations

import subprocess
from datetime import UTC, date, datetime
from pathlib import Path
from uuid import uuid4

from _pgcli import Spec, child_env, conversation, run, script_path, write_db
from pg_server import PostgresServer

from sessionstore import ModelMessage, ToolCall, ToolResult, UnknownEvent, UserMessage
from sessionstore.schema.revisions import HEAD


def rich() -> list[Spec]:
    """Sessions with what a move could lose: times to the microsecond and on the second, unicode, control
    characters, NUL inside event text, 64-bit integers, unknown event types, held and released sessions."""
    return [
        Spec(conversation(), cwd="/home/me/project", title="Why is the build red?", meta={"client": "zed"}),
        Spec(
            [
                UserMessage("Straße naïve émigré 🚀 \x1b[31m tab\there", metadata={"big": 2**63 - 1, "neg": -(2**63)}),
                ToolCall(call_id="c\x00", name="write", arguments={"path": "/tmp/x", "bytes": b"\x00\xff", "n": 2**70}),
                ToolResult(call_id="c\x00", content="before\x00after"),
                ModelMessage(
                    "at", metadata={"when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "day": date(2026, 1, 2)}
                ),
                UnknownEvent(stored_type="myapp.handoff", payload='{"to":"reviewer","n":12345678901234567890}'),
            ],
            cwd="/srv/ünïcode",
            meta={"nested": {"list": [1, 2.5, None, True]}, "big": 2**64},
            updated_at=datetime(2024, 2, 29, 12, 0, 0, tzinfo=UTC),  # on the second: no microseconds to print
        ),
        Spec([UserMessage("still held")], released=False, session_id=uuid4().hex),
        Spec([]),
    ]


def shell(command: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command}"], capture_output=True, text=True, env=child_env(**env)
    )


def test_sqlite_to_postgresql_and_back_is_byte_identical(pg_url: str, tmp_path: Path) -> None:
    laptop = tmp_path / "laptop.db"
    write_db(laptop, rich())
    first = run("export", "--all", "--db", laptop)
    assert first.returncode == 0 and first.stdout.count('"kind":"session"') == 4

    moved = shell(
        f'"{script_path()}" export --all --db "$LAPTOP" | "{script_path()}" import - --db "$URL"',
        LAPTOP=str(laptop),
        URL=pg_url,
    )
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.startswith("imported 4 new, 0 replaced, 0 already present (")
    assert "***" in moved.stdout and pg_url.split(":")[2].split("@")[0] not in moved.stdout
    on_server = run("export", "--all", "--db", pg_url)
    assert on_server.returncode == 0 and on_server.stdout == first.stdout

    back = tmp_path / "back" / "again.db"
    home = shell(
        f'"{script_path()}" export --all --db "$URL" | "{script_path()}" import - --db "$BACK"',
        URL=pg_url,
        BACK=str(back),
    )
    assert home.returncode == 0, home.stderr
    assert run("export", "--all", "--db", back).stdout == first.stdout

    # Importing the same sessions again changes nothing, on either side.
    again = run("import", "-", "--db", pg_url, input=first.stdout)
    assert again.returncode == 0 and again.stdout.startswith("imported 0 new, 0 replaced, 4 already present")
    assert run("export", "--all", "--db", pg_url).stdout == first.stdout
    # What each database shows of them is the same too.
    for args in (
        ["list", "--json"],
        ["search", "émigré", "--json"],
        ["show", first.stdout.split('"session_id":"')[1][:8]],
    ):
        assert run(*args, "--db", pg_url).stdout == run(*args, "--db", laptop).stdout, args


def test_a_conflict_imports_nothing_and_replace_replaces(pg_url: str, tmp_path: Path) -> None:
    sid = uuid4().hex
    ours, theirs = tmp_path / "ours.db", tmp_path / "theirs.db"
    write_db(ours, [Spec([UserMessage("one")]), Spec([UserMessage("ours")], session_id=sid)])
    write_db(theirs, [Spec([UserMessage("theirs"), ModelMessage("differs")], session_id=sid)])
    assert run("import", "-", "--db", pg_url, input=run("export", "--all", "--db", ours).stdout).returncode == 0
    before = run("export", "--all", "--db", pg_url).stdout
    file = tmp_path / "theirs.jsonl"
    assert run("export", "--all", "-o", file, "--db", theirs).returncode == 0

    refused = run("import", file, "--db", pg_url)
    assert refused.returncode == 1 and f"session {sid} is already stored with different events" in refused.stderr
    assert run("export", "--all", "--db", pg_url).stdout == before
    replaced = run("import", file, "--replace", "--db", pg_url)
    assert replaced.returncode == 0 and replaced.stdout.startswith("imported 0 new, 1 replaced, 0 already present")
    assert run("export", sid, "--db", pg_url).stdout == run("export", sid, "--db", theirs).stdout


def test_a_failed_import_leaves_the_database_as_it_was(pg_server: PostgresServer, pg_url: str, tmp_path: Path) -> None:
    laptop = tmp_path / "laptop.db"
    ids = write_db(laptop, [Spec([UserMessage(f"session {n}")]) for n in range(6)])
    assert run("import", "-", "--db", pg_url, input=run("export", ids[0], "--db", laptop).stdout).returncode == 0
    before = run("export", "--all", "--db", pg_url).stdout
    # The server refuses the fifth session's row: the four before it were already written in the transaction.
    pg_server.psql(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" IF NEW.session_id = '{ids[4]}' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$;"
        " CREATE TRIGGER refuse BEFORE INSERT ON sessions FOR EACH ROW EXECUTE FUNCTION refuse()",
        database=pg_url.rsplit("/", 1)[1],
    )
    failed = run("import", "-", "--db", pg_url, input=run("export", "--all", "--db", laptop).stdout)
    assert failed.returncode == 1 and "refused by the test" in failed.stderr and failed.stderr.count("\n") == 1
    assert run("export", "--all", "--db", pg_url).stdout == before


def test_nul_text_is_refused_whole_before_anything_is_written(pg_url: str, tmp_path: Path) -> None:
    laptop = tmp_path / "laptop.db"
    write_db(laptop, [Spec([UserMessage("fine")]), Spec([UserMessage("x")], title="a NUL\x00in the title")])
    export = run("export", "--all", "--db", laptop).stdout
    refused = run("import", "-", "--db", pg_url, input=export)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "<stdin> line 4: the session's title holds a NUL character (U+0000)" in refused.stderr
    assert "nothing was imported" in refused.stderr
    assert run("list", "--db", pg_url).stderr == "no sessions\n"
    # The same file goes into another SQLite file as it is (SQLite text holds U+0000).
    other = tmp_path / "other.db"
    assert run("import", "-", "--db", other, input=export).returncode == 0
    assert run("export", "--all", "--db", other).stdout == export


def test_import_into_an_empty_database_builds_its_schema(pg_empty_url: str, tmp_path: Path) -> None:
    laptop = tmp_path / "laptop.db"
    write_db(laptop, [Spec(conversation())])
    export = run("export", "--all", "--db", laptop).stdout
    assert run("import", "-", "--db", pg_empty_url, input=export).returncode == 0
    assert run("db", "current", "--db", pg_empty_url).stdout == f"{HEAD} (head)\n"
    assert run("export", "--all", "--db", pg_empty_url).stdout == export
