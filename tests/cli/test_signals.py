"""SIGTERM and SIGHUP end a command as Ctrl-C does, and what SIGKILL leaves is found and removed.

``kill``, ``timeout`` and systemd send SIGTERM; a closed terminal sends SIGHUP.
Sent to the installed script mid-operation, each removes what the command was
writing (an import's copy of its input, an export's next file; a new database:
``test_import_safety.py``) and exits 128 + the signal. A process killed with
SIGKILL cannot clean up: ``check`` reports what it left, one line each, and the
next command writing the same target removes it.

Mid-operation is made certain, not likely: an import is fed through a FIFO past
the pipe's buffer, so it is still reading when signalled; an export is stopped
(SIGSTOP) once its scratch file is seen, and signalled while stopped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _clitools import TIMEOUT, Run, child_env, script_path, synthetic_export

from sessionstore.transfer import import_sessions

CAUGHT = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def interrupted(number: int) -> str:
    by = "" if number == signal.SIGINT else f" by {signal.Signals(number).name}"
    return f"sessionstore: interrupted{by}; nothing half-written was kept\n"


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An export of 300 sessions of 40 events (about 27 MB) and a database holding them."""
    folder = tmp_path_factory.mktemp("big")
    dump = synthetic_export(folder / "big.jsonl", 300, 40, 2000)
    db = folder / "big.db"
    import_sessions(db, dump)
    return dump, db


def start(*args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [script_path(), *map(str, args)], env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def scratch(folder: Path, name: str) -> list[Path]:
    return sorted(folder.glob(f".{name}.*"))


def until(condition: Callable[[], object], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "waited too long"
        time.sleep(0.0005)


def stopped_with_scratch(process: subprocess.Popen[str], folder: Path, name: str) -> list[Path]:
    """Wait for the command's scratch file, then stop the process (SIGSTOP): it is mid-write while stopped."""
    until(lambda: scratch(folder, name), process)
    process.send_signal(signal.SIGSTOP)
    left = scratch(folder, name)
    assert left, "the command finished before it could be stopped mid-write"
    return left


@pytest.fixture
def feeding(big: tuple[Path, Path], tmp_path: Path) -> Iterator[Callable[[subprocess.Popen[str]], Path]]:
    """A FIFO with a writer that writes the start of a large export (well past the pipe's 64 KiB) and then
    waits, open, until the reader is gone: once it has written, the import is reading and waiting for more."""
    fifo = tmp_path / "feed"
    os.mkfifo(fifo)
    written = threading.Event()
    threads: list[threading.Thread] = []
    start_of_export = big[0].read_bytes()[:1_000_000]

    def writer(process: subprocess.Popen[str]) -> None:
        try:
            with open(fifo, "wb") as handle:  # opens once the import has opened its end
                handle.write(start_of_export)
                handle.flush()
                written.set()
                while process.poll() is None:
                    time.sleep(0.01)
        except BrokenPipeError:
            pass

    def feed(process: subprocess.Popen[str]) -> Path:
        thread = threading.Thread(target=writer, args=(process,), daemon=True)
        thread.start()
        threads.append(thread)
        assert written.wait(TIMEOUT), "the import never read its input"
        return fifo

    yield feed
    for thread in threads:
        thread.join(TIMEOUT)


@pytest.mark.parametrize("number", CAUGHT, ids=lambda n: signal.Signals(n).name)
def test_a_signal_while_an_import_reads_its_input_leaves_nothing(
    feeding: Callable[[subprocess.Popen[str]], Path], tmp_path: Path, number: int
) -> None:
    process = start("--db", tmp_path / "new.db", "import", tmp_path / "feed")
    try:
        feeding(process)
        assert scratch(tmp_path, "new.db"), "the import keeps no copy of its input"
        process.send_signal(number)
        _, err = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert (process.returncode, err) == (128 + number, interrupted(number))
    assert scratch(tmp_path, "new.db") == [] and not (tmp_path / "new.db").exists()


@pytest.mark.parametrize("number", CAUGHT, ids=lambda n: signal.Signals(n).name)
def test_a_signal_during_an_export_keeps_the_old_file_and_leaves_nothing(
    big: tuple[Path, Path], tmp_path: Path, number: int
) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("the previous export\n")
    process = start("--db", big[1], "export", "--all", "-o", out)
    try:
        stopped_with_scratch(process, tmp_path, "out.jsonl")
        process.send_signal(number)
        process.send_signal(signal.SIGCONT)
        _, err = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert (process.returncode, err) == (128 + number, interrupted(number))
    assert out.read_text() == "the previous export\n"
    assert scratch(tmp_path, "out.jsonl") == []


def test_what_sigkill_left_of_an_import_is_reported_by_check_and_removed(
    sessionstore: Run, feeding: Callable[[subprocess.Popen[str]], Path], tmp_path: Path
) -> None:
    db = tmp_path / "agent.db"
    small = synthetic_export(tmp_path / "small.jsonl", 1, 2)
    assert sessionstore("--db", db, "import", small).returncode == 0
    process = start("--db", db, "import", tmp_path / "feed")
    try:
        feeding(process)
        process.kill()  # SIGKILL: nothing runs after it
        process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    (left,) = scratch(tmp_path, "agent.db")  # the copy of its input, holding conversation text

    found = sessionstore("--db", db, "check")
    assert found.returncode == 1
    reported = [line for line in found.stdout.splitlines() if line.startswith("leftover")]
    assert reported == [
        f"leftover      {left}: an import's copy of its input, {left.stat().st_size:,} bytes,"
        f" left by process {process.pid}, which is gone"
    ]
    assert found.stdout.splitlines()[-1] == "NOT OK: run `sessionstore check --repair` to remove the leftovers"
    assert json.loads(sessionstore("--db", db, "check", "--json").stdout)["leftovers"] == [reported[0][14:]]
    assert left.exists()  # check reads only

    repaired = sessionstore("--db", db, "check", "--repair")
    assert repaired.returncode == 0, repaired.stdout
    assert f"repaired      removed {left}\n" in repaired.stdout
    assert scratch(tmp_path, "agent.db") == []


def test_what_sigkill_left_of_a_new_database_goes_with_the_next_import(
    sessionstore: Run, big: tuple[Path, Path], tmp_path: Path
) -> None:
    db = tmp_path / "new.db"
    process = start("--db", db, "import", big[0])
    try:
        left = stopped_with_scratch(process, tmp_path, "new.db")
        process.kill()
        process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert left[0].name.startswith(".new.db.import-") and not db.exists()

    small = synthetic_export(tmp_path / "small.jsonl", 1, 2)
    again = sessionstore("--db", db, "import", small)
    assert again.returncode == 0, again.stderr
    assert scratch(tmp_path, "new.db") == []
    assert sessionstore("--db", db, "check").stdout.splitlines()[-1] == "ok"


def test_what_sigkill_left_of_an_export_goes_with_the_next_export(
    sessionstore: Run, big: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    process = start("--db", big[1], "export", "--all", "-o", out)
    try:
        stopped_with_scratch(process, tmp_path, "out.jsonl")
        process.kill()
        process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert scratch(tmp_path, "out.jsonl") and not out.exists()

    small_db = tmp_path / "small.db"
    assert sessionstore("--db", small_db, "import", synthetic_export(tmp_path / "small.jsonl", 1, 2)).returncode == 0
    again = sessionstore("--db", small_db, "export", "--all", "-o", out)
    assert again.returncode == 0, again.stderr
    assert scratch(tmp_path, "out.jsonl") == []
    assert out.read_text().count('"kind":"session"') == 1  # the new export, whole


@pytest.mark.parametrize("number", CAUGHT, ids=lambda n: signal.Signals(n).name)
def test_a_signal_while_a_backup_is_taken_leaves_nothing(big: tuple[Path, Path], tmp_path: Path, number: int) -> None:
    """``db downgrade`` (and upgrade) back the file up first, under a hidden name. Was: Ctrl-C, SIGTERM or SIGHUP
    mid-copy left that copy, holding every conversation, until the next backup; only SQLite's and the disk's own
    errors removed it."""
    db = tmp_path / "agent.db"
    db.write_bytes(big[1].read_bytes())  # at the head revision, closed cleanly (no -wal)
    before = db.read_bytes()
    process = start("--db", db, "db", "downgrade", "0011")
    try:
        left = stopped_with_scratch(process, tmp_path, "agent.db")
        assert left[0].name.startswith(".agent.db.backing-up-"), left
        process.send_signal(number)
        process.send_signal(signal.SIGCONT)
        _, err = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert (process.returncode, err) == (128 + number, interrupted(number))
    assert scratch(tmp_path, "agent.db") == []
    assert not list(tmp_path.glob("agent.db.bak-*"))  # no backup: the command moved nothing
    assert db.read_bytes() == before
