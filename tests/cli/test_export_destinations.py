"""Output goes where the user pointed: a regular file whole or not at all, a device or FIFO in place,
the database itself and its companions refused, and errors that name the user's path."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from _clitools import Run, Spec, fingerprint, write_db

from sessionstore import UserMessage

HEADER = '{"format":"sessionstore-export","version":3}'


def exported(sessionstore: Run, db: Path, out: Path | str) -> tuple[int, str]:
    done = sessionstore("--db", db, "export", "--all", "-o", out)
    return done.returncode, done.stderr


def test_a_device_and_a_fifo_are_written_in_place(sessionstore: Run, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    write_db(db, [Spec([UserMessage("hello")])])
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a device node like /dev/null, in a folder of our own
    assert exported(sessionstore, db, null)[0] == 0
    assert stat.S_ISCHR(null.stat().st_mode)  # still a device, not a regular file put in its place

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    assert exported(sessionstore, db, fifo)[0] == 0
    reader.join(timeout=60)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert received and received[0].startswith(HEADER) and "hello" in received[0]


def test_the_database_and_its_companions_are_refused_untouched(sessionstore: Run, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    write_db(db, [Spec([UserMessage("keep me")])])
    (tmp_path / "agent.db-wal").write_bytes(b"")  # a companion, as a running agent leaves it
    link = tmp_path / "sneaky.jsonl"
    link.symlink_to(db)
    before = fingerprint(db)
    for target in (db, tmp_path / "agent.db-wal", link):
        code, err = exported(sessionstore, db, target)
        assert code == 1 and err.startswith(f"sessionstore: error: {target} is ")
        assert err.endswith("; export to another file\n")
    assert fingerprint(db) == before


def test_a_regular_file_is_replaced_whole_through_a_link_and_keeps_its_mode(sessionstore: Run, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    write_db(db, [Spec([UserMessage("hello")])])
    real = tmp_path / "exports" / "latest.jsonl"
    real.parent.mkdir()
    real.write_text("old contents\n")
    real.chmod(0o640)
    link = tmp_path / "latest.jsonl"
    link.symlink_to(real)
    assert exported(sessionstore, db, link)[0] == 0
    assert link.is_symlink() and real.read_text().startswith(HEADER)
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert [p.name for p in real.parent.iterdir()] == ["latest.jsonl"]  # no temporary file left


def test_errors_name_the_path_the_user_gave(sessionstore: Run, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    write_db(db, [Spec([UserMessage("hello")])])
    folder = tmp_path / "a folder"
    folder.mkdir()
    code, err = exported(sessionstore, db, folder)
    assert (code, err) == (1, f"sessionstore: error: {folder} is a folder; name a file to export to\n")
    missing = tmp_path / "no such folder" / "out.jsonl"
    code, err = exported(sessionstore, db, missing)
    assert (code, err) == (1, f"sessionstore: error: {missing}: the folder {missing.parent} does not exist\n")
    assert not missing.parent.exists()
