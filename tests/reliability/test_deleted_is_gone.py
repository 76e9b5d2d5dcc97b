"""Deleted means gone: after ``delete``, ``prune`` or ``close()`` without retention, no byte of a deleted
event's text is left in the database file, its write-ahead log or its full-text index.

Each test plants words found nowhere else, deletes the session holding them,
and searches the raw bytes of every file the database consists of.

Or it says when it is not gone yet: while another process holds an older
snapshot (here a real ``sqlite3`` shell inside ``BEGIN`` with a ``SELECT`` done),
the pages it may read cannot be overwritten. A delete then returns within a
bound all the same, says so, ``check`` reports it, and the storage finishes as
soon as that process lets go: in the background, when it closes, or when the
next one opens the file. The words are looked for with the real ``grep``.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from _support import CHILD_TIMEOUT

from sessionstore import EventContext, ModelMessage, SessionRecord, SessionStore, SQLiteStorage, ToolCall, UserMessage
from sessionstore.sqlite import storage as sqlite_storage
from sessionstore.sqlite.connect import SCRUB_WAIT

SCRIPT = Path(sys.executable).parent / "sessionstore"
DELETE_BOUND = SCRUB_WAIT + 4.0
"""A delete returns within this while another process holds an older snapshot: SCRUB_WAIT for it to let go, and
the rest for the command's own start and work (it took 20 tries of 30 s: ten minutes)."""
FINISHED_WITHIN = 10.0
"""Once that process lets go, the deleted text is gone within this (SCRUB_RETRY, 0.5 s, and a try)."""


def planted() -> list[str]:
    return [f"zq{secrets.token_hex(6)}" for _ in range(4)]


def copies(db: Path, words: list[str]) -> int:
    """How many times the words occur in the bytes of the file and its write-ahead log, by the real grep."""
    grep = shutil.which("grep")
    assert grep is not None
    files = [path for path in (db, Path(f"{db}-wal")) if path.exists()]
    patterns = [arg for word in words for arg in ("-e", word)]
    done = subprocess.run(
        [grep, "--binary-files=text", "-o", "-F", *patterns, *files], capture_output=True, timeout=CHILD_TIMEOUT
    )
    assert done.returncode in (0, 1), done.stderr  # 1: none found
    return len(done.stdout.splitlines())


@contextmanager
def snapshot_held(db: Path) -> Iterator[Callable[[], None]]:
    """A real ``sqlite3`` shell in another process, inside ``BEGIN`` with a ``SELECT`` done: it holds a snapshot
    of the file as it is now until the function given is called (``COMMIT``; the shell stays open, so that
    closing its connection, which would checkpoint the file itself, does not do the storage's work)."""
    shell = shutil.which("sqlite3")
    assert shell is not None, "the sqlite3 command-line shell is needed (apt-get install sqlite3)"
    proc = subprocess.Popen(
        [shell, "-batch", str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None

    def say(sql: str) -> str:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(sql)
        proc.stdin.flush()
        assert select.select([proc.stdout], [], [], CHILD_TIMEOUT)[0], "the sqlite3 shell did not answer"
        return proc.stdout.readline().strip()

    try:
        assert say("BEGIN;\nSELECT count(*) FROM events;\n").isdigit()
        yield lambda: None if say("COMMIT;\nSELECT 'let go';\n") == "let go" else pytest.fail("no COMMIT")
    finally:
        proc.stdin.close()
        proc.wait(timeout=CHILD_TIMEOUT)


async def eventually(condition: Callable[[], bool], within: float = FINISHED_WITHIN) -> float:
    """Seconds until ``condition()`` held (the event loop runs meanwhile); fails after ``within``."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < within, f"not within {within} s"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


def command(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, "--db", db, *args], capture_output=True, text=True, timeout=CHILD_TIMEOUT)


def reported(db: Path) -> bool:
    """Whether ``sessionstore check --json`` says deleted text is left in the file."""
    done = command(db, "check", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return bool(json.loads(done.stdout)["deleted_text_left"])


def leftovers(db: Path, words: list[str]) -> list[str]:
    data = b"".join(Path(f"{db}{suffix}").read_bytes() for suffix in ("", "-wal") if Path(f"{db}{suffix}").exists())
    return [word for word in words if word.encode() in data]


async def fill(storage: SQLiteStorage, words: list[str], others: int = 30) -> str:
    """Sessions of ordinary text, and one holding the planted words (returned)."""
    for n in range(others):
        sid = uuid4()
        await storage.set_history(sid, [UserMessage(f"ordinary words {n} " * 20), ModelMessage("nothing to see " * 10)])
    secret = uuid4()
    await storage.save_session(SessionRecord(session_id=secret.hex, title=f"about {words[3]}"))
    context = EventContext.for_stream(secret)
    await storage.save_event(UserMessage(f"please remember {words[0]} for me"), context)
    await storage.save_event(ToolCall(call_id="c", name="note", arguments={"text": words[1]}), context)
    await storage.save_event(ModelMessage(f"noted {words[2]}"), context)
    return secret.hex


@pytest.mark.parametrize("how", ["delete", "prune"])
async def test_the_commands_leave_no_byte_of_a_deleted_conversation(tmp_path: Path, how: str) -> None:
    db = tmp_path / "agent.db"
    words = planted()
    async with SQLiteStorage(db) as storage:
        secret = await fill(storage, words)
        await storage.touch_session(UUID(hex=secret), released=True)
    assert leftovers(db, words) == words  # they are there to begin with
    script = Path(sys.executable).parent / "sessionstore"
    command = ["delete", secret] if how == "delete" else ["prune", "--older-than", "0s", "--yes"]
    done = subprocess.run([script, "--db", db, *command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert leftovers(db, words) == []


async def test_close_without_retention_leaves_no_byte(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    words = planted()
    async with SQLiteStorage(db) as storage:
        await fill(storage, [planted()[0], *planted()[1:]])  # other sessions, other words
        store = SessionStore(storage=storage, retain_history=False)
        session = await store.create(cwd="/w", title=f"about {words[3]}")
        stream = store.stream(session)
        async with session.turn():
            await stream.send(UserMessage(f"please remember {words[0]} for me"))
            await stream.send(ToolCall(call_id="c", name="note", arguments={"text": words[1]}))
            await stream.send(ModelMessage(f"noted {words[2]}"))
        assert leftovers(db, words) != []
        await store.close(session.session_id)
        assert leftovers(db, words) == []  # gone as soon as close() returns, the storage still open
        assert (await storage.list_sessions()).sessions  # and the other conversations are all there


@pytest.mark.parametrize("how", ["delete", "prune"])
async def test_a_command_returns_while_another_process_holds_a_snapshot_and_says_so(tmp_path: Path, how: str) -> None:
    """The delete commits and returns within DELETE_BOUND, exit 0, one line saying the text is not gone yet;
    ``check`` reports it; once the shell lets go, the next storage to open the file removes it."""
    db = tmp_path / "agent.db"
    words = planted()
    async with SQLiteStorage(db) as storage:
        secret = await fill(storage, words)
        await storage.touch_session(UUID(hex=secret), released=True)
    with snapshot_held(db) as let_go:
        started = time.monotonic()
        done = command(db, *(["delete", secret] if how == "delete" else ["prune", "--older-than", "0s", "--yes"]))
        took = time.monotonic() - started
        assert done.returncode == 0, done.stderr
        assert took < DELETE_BOUND, f"{how} took {took:.1f} s"
        assert secret not in command(db, "list", "--json").stdout  # committed
        assert done.stderr.count("\n") == 1 and "the deleted text remains in" in done.stderr, done.stderr
        assert copies(db, words) > 0  # honest: not gone yet
        assert reported(db)
        assert "deleted text  remains in" in command(db, "check").stdout
        let_go()
        assert copies(db, words) > 0  # nobody has finished it yet: the command has exited
        async with SQLiteStorage(db):
            await eventually(lambda: copies(db, words) == 0)
        assert not reported(db)


async def test_the_storage_finishes_in_the_background_once_the_reader_lets_go(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    words = planted()
    async with SQLiteStorage(db) as storage:
        secret = await fill(storage, words)
        with snapshot_held(db) as let_go:
            started = time.monotonic()
            await asyncio.wait_for(storage.drop_history(UUID(hex=secret)), CHILD_TIMEOUT)
            assert time.monotonic() - started < DELETE_BOUND
            assert copies(db, words) > 0 and reported(db)
            context = EventContext.for_stream(uuid4())
            await storage.save_event(UserMessage("the storage writes on meanwhile"), context)
            let_go()
            await eventually(lambda: copies(db, words) == 0)  # the storage still open, nobody else at work
            assert not reported(db)
            await storage.save_event(UserMessage("and after"), context)
        assert len(await storage.get_history(context.stream.id)) == 2


async def test_closing_finishes_what_the_reader_held_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_storage, "SCRUB_RETRY", 3600.0)  # no try in the background: the close's own
    db = tmp_path / "agent.db"
    words = planted()
    storage = SQLiteStorage(db)
    secret = await fill(storage, words)
    with snapshot_held(db) as let_go:
        await asyncio.wait_for(storage.drop_history(UUID(hex=secret)), CHILD_TIMEOUT)
        await asyncio.sleep(0.5)  # the background's first try, while the shell holds on
        let_go()
        await asyncio.sleep(0.5)
        assert copies(db, words) > 0  # no second try in the background
        await storage.aclose()
        assert copies(db, words) == 0
        assert not reported(db)


async def test_a_running_storage_finishes_a_commands_delete(tmp_path: Path) -> None:
    """The command could not finish, and exited; a storage open on the file all along notices (when it next
    indexes what it wrote) and finishes once the shell lets go."""
    db = tmp_path / "agent.db"
    words = planted()
    async with SQLiteStorage(db) as storage:
        secret = await fill(storage, words)
        with snapshot_held(db) as let_go:
            assert command(db, "delete", secret).returncode == 0
            assert copies(db, words) > 0
            let_go()
            context = EventContext.for_stream(uuid4())
            for n in range(3):
                await storage.save_event(UserMessage(f"an agent writing {n}"), context)
            await eventually(lambda: copies(db, words) == 0)
            assert not reported(db)


async def test_check_repair_finishes_it(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    words = planted()
    async with SQLiteStorage(db) as storage:
        secret = await fill(storage, words)
    with snapshot_held(db) as let_go:
        assert command(db, "delete", secret).returncode == 0
        held = command(db, "check", "--repair")
        assert held.returncode == 0 and "deleted text  remains in" in held.stdout  # still held: nothing to do yet
        let_go()
        done = command(db, "check", "--repair")
        assert done.returncode == 0, done.stdout
        assert "removed the deleted text" in done.stdout and "deleted text  " not in done.stdout
        assert copies(db, words) == 0
