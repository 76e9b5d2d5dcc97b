"""``import`` reads any readable input once: a file, standard input, a pipe, ``<(...)``, a FIFO.

Each is given to the installed script as a person gives it (bash's process
substitution, a real ``mkfifo``, a pipe into stdin). The input is checked whole
before anything is written, so what can be read only once is copied, privately,
beside the database as it is read; the copy is gone when the import ends.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest
from _clitools import TIMEOUT, Run, Spec, child_env, conversation, fingerprint, script_path, write_db

from sessionstore import ModelMessage, UserMessage
from sessionstore.transfer import export_sessions


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    src = tmp_path / "src.db"
    write_db(src, [Spec(conversation(), title="Red build"), Spec([UserMessage("x"), ModelMessage("y")])])
    out = tmp_path / "all.jsonl"
    export_sessions(src, out)
    return out


def scratch_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") and ".import-" in p.name)


def exported(sessionstore: Run, db: Path) -> str:
    done = sessionstore("--db", db, "export", "--all")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_process_substitution(sessionstore: Run, dump: Path, tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    bash = shutil.which("bash")
    assert bash is not None
    command = 'exec "$0" import <(cat "$1") --db "$2"'
    done = subprocess.run(
        [bash, "-c", command, script_path(), dump, db], capture_output=True, text=True, env=child_env(), timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"imported 2 new, 0 replaced, 0 already present (8 events) into {db}\n"
    assert exported(sessionstore, db) == dump.read_text()  # every byte of it, read once
    assert scratch_files(tmp_path) == []

    garbage = tmp_path / "garbage.txt"
    garbage.write_text("not an export\n")
    bad = subprocess.run(
        [bash, "-c", command, script_path(), garbage, db], capture_output=True, text=True, env=child_env()
    )
    assert bad.returncode == 1
    assert re.fullmatch(  # the input as the shell gave it, in one line
        r"sessionstore: error: /dev/fd/[0-9]+ line 1: not a JSON object; nothing was imported\n", bad.stderr
    ), bad.stderr


def test_a_fifo_fed_slowly_is_read_once(sessionstore: Run, dump: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "feed"
    os.mkfifo(fifo)
    db = tmp_path / "agent.db"
    write_db(db, [Spec([UserMessage("already here")])])
    process = subprocess.Popen(
        [script_path(), "--db", str(db), "import", str(fifo)],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    copies: list[list[str]] = []
    try:
        with open(fifo, "w", encoding="utf-8") as feed:  # opens once the import has opened its end
            for line in dump.read_text().splitlines(keepends=True):
                feed.write(line)
                feed.flush()
                time.sleep(0.005)
            copies.append(scratch_files(tmp_path))  # while the import waits for the rest
            modes = [stat.S_IMODE((tmp_path / name).stat().st_mode) for name in copies[0]]
        # Closing the FIFO ends the input; an import that opened it again would wait here for ever.
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert out == f"imported 2 new, 0 replaced, 0 already present (8 events) into {db}\n"
    assert len(copies[0]) == 1 and copies[0][0].startswith(".agent.db.import-") and modes == [0o600]
    assert scratch_files(tmp_path) == []  # the copy went with the import
    stored = exported(sessionstore, db).splitlines()
    assert all(line in stored for line in dump.read_text().splitlines())  # every line of it, as written


def test_stdin_piped_or_a_file_read_from_where_it_stands(sessionstore: Run, dump: Path, tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    piped = sessionstore("--db", db, "import", "-", input=dump.read_text())
    assert piped.returncode == 0, piped.stderr
    assert "imported 2 new" in piped.stdout

    # A regular file as standard input, already read up to the export by whoever handed it over (the shell in
    # `{ read -r line; sessionstore import -; } < file`): the import starts where the input stands.
    framed = tmp_path / "framed.txt"
    framed.write_text("a first line that is not the export's\n" + dump.read_text())
    fd = os.open(framed, os.O_RDONLY)
    try:
        os.lseek(fd, len("a first line that is not the export's\n"), os.SEEK_SET)
        again = subprocess.run(
            [script_path(), "--db", str(tmp_path / "other.db"), "import", "-"],
            stdin=fd,
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=TIMEOUT,
        )
    finally:
        os.close(fd)
    assert again.returncode == 0, again.stderr
    assert exported(sessionstore, tmp_path / "other.db") == dump.read_text()
    assert scratch_files(tmp_path) == []


def test_a_stream_with_a_flaw_at_its_end_imports_nothing(sessionstore: Run, dump: Path, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    write_db(db, [Spec([UserMessage("already here")])])
    before = fingerprint(db)
    lines = dump.read_text().splitlines()
    # A payload with 1e999 (infinity to a JSON reader), last: the sessions before it are checked, not written.
    last = lines[-1].replace('"payload":"{', '"payload":"{\\"score\\":1e999,')
    done = sessionstore("--db", db, "import", "-", input="\n".join([*lines[:-1], last]) + "\n")
    assert done.returncode == 1
    assert done.stderr == (
        f"sessionstore: error: <stdin> line {len(lines)}: the payload holds 1e999, which is not a finite number"
        " (JSON has no NaN or infinity); nothing was imported\n"
    )
    assert fingerprint(db) == before
    assert scratch_files(tmp_path) == []


def test_errors_name_the_input_as_given(sessionstore: Run, dump: Path, tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    missing = sessionstore("--db", db, "import", "./nowhere/../missing.jsonl")
    assert missing.stderr == "sessionstore: error: ./nowhere/../missing.jsonl: no such file\n"
    folder = sessionstore("--db", db, "import", f"{tmp_path}/")
    assert folder.stderr == f"sessionstore: error: {tmp_path}/ is a folder, not an export file\n"
    assert not db.exists() and scratch_files(tmp_path) == []
