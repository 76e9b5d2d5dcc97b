"""A failed command leaves every file as it was, and never removes or changes a file it did not create.

An import into a new database builds it beside its path and puts it there only
once complete: an agent that starts using that path meanwhile never loses a
write to the import's failure, interruption or success.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path
from uuid import uuid4

import pytest
from _clitools import TIMEOUT, child_env, script_path, synthetic_export

from sessionstore import EventContext, ModelMessage, SQLiteStorage, records


@pytest.fixture
def big_export(tmp_path: Path) -> Path:
    return synthetic_export(tmp_path / "all.jsonl", 150, 40)


def start_import(dump: Path, target: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [script_path(), "--db", str(target), "import", str(dump)],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_building(target: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not list(target.parent.glob(f".{target.name}.import-*")):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.002)


async def agent_writes(target: Path, count: int) -> list[str]:
    sid = uuid4()
    async with SQLiteStorage(target) as storage:
        for n in range(count):
            await storage.save_event(ModelMessage(f"agent {n}"), EventContext.for_stream(sid))
        return [e.content for e in await storage.get_history(sid)]


def agent_events(target: Path) -> int:
    return sum(record.events or 0 for record in records.list_sessions(target))


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda n: signal.Signals(n).name)
def test_an_interrupted_import_leaves_an_agents_new_file_whole(big_export: Path, tmp_path: Path, number: int) -> None:
    """Ctrl-C, and SIGTERM and SIGHUP as Ctrl-C (``kill``, ``timeout``, systemd, a closed terminal)."""
    target = tmp_path / "new.db"
    process = start_import(big_export, target)
    try:
        wait_for_building(target, process)
        written = asyncio.run(agent_writes(target, 20))  # the agent starts on the path meanwhile
        process.send_signal(number)
        _, err = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert process.returncode == 128 + number, err
    by = "" if number == signal.SIGINT else f" by {signal.Signals(number).name}"
    assert err == f"sessionstore: interrupted{by}; nothing half-written was kept\n"  # and nothing else
    assert written == [f"agent {n}" for n in range(20)]
    assert agent_events(target) == 20  # every acknowledged write is still there
    assert not list(tmp_path.glob(".new.db.import-*"))  # and nothing the import made is left


def test_an_import_finding_its_path_taken_imports_nothing_there(big_export: Path, tmp_path: Path) -> None:
    target = tmp_path / "new.db"
    process = start_import(big_export, target)
    try:
        wait_for_building(target, process)
        asyncio.run(agent_writes(target, 5))
        _, err = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert process.returncode == 1
    assert err == (
        f"sessionstore: error: {target} was created by someone else while the import ran;"
        " nothing was imported into it\n"
    )
    assert agent_events(target) == 5
    assert not list(tmp_path.glob(".new.db.import-*"))


def test_a_new_database_appears_only_complete(big_export: Path, tmp_path: Path) -> None:
    target = tmp_path / "folder" / "new.db"
    process = start_import(big_export, target)
    try:
        seen_incomplete = False
        while process.poll() is None:
            seen_incomplete |= target.exists() and agent_events(target) not in (0, 150 * 40)
        out, err = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert "imported 150 new" in out and not seen_incomplete
    assert agent_events(target) == 150 * 40
    assert sorted(p.name for p in target.parent.iterdir()) == ["new.db"]
