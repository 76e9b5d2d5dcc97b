"""Property: several processes doing random things to a few sessions of one file, some of them SIGKILLed, never
write one session at once.

Three worker processes (``_session_worker.py``) run turns, loads that repair what a killed turn left, rewrites,
let-gos and deletes on four shared sessions, each through a registry that holds a session before touching it.
Meanwhile the test SIGKILLs a random worker now and then and starts another in its place. Afterwards, in every
session: no tool call has two results; every event a worker was told was stored is there (unless a delete of its
session came after it); and each turn's events are together, never interleaved with another's (two writers of one
session at once would interleave them). Was: a second process repaired a call whose turn was still running in
the first, and the call ended with two results.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import time
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from _support import CHILD_TIMEOUT, child, child_env

from sessionstore import ModelMessage, SQLiteStorage, ToolCall, ToolResult, UserMessage

WORKERS = 3
SESSIONS = 4
STEPS = 100_000  # more than RUN_SECONDS allows: every worker is killed mid-way, at the latest at the end
MIN_KILLS = 4
MIN_TURNS = 30  # turns finished (their answers acknowledged) across the workers before the run stops
RUN_LIMIT = 90.0  # seconds: only stops a run that cannot get there (a machine too loaded), which then fails


def turn_of(event: Any) -> str | None:
    """The turn (``worker.step``) an event belongs to, from what the worker wrote in it."""
    if isinstance(event, (UserMessage, ModelMessage)):
        return str(event.content).split(" ")[0]
    if isinstance(event, (ToolCall, ToolResult)):
        return event.call_id.removeprefix("call-")
    return None


@pytest.mark.parametrize("seed", [11, 29])
async def test_no_session_is_written_by_two_holders_at_once(tmp_path: Path, seed: int) -> None:
    db, logs = tmp_path / "agent.db", tmp_path / "logs"
    logs.mkdir()
    async with SQLiteStorage(db):
        pass
    sessions = ",".join(uuid4().hex for _ in range(SESSIONS))
    rng = random.Random(seed)
    started = 0

    def start() -> subprocess.Popen[bytes]:
        nonlocal started
        started += 1
        name = f"w{started}"
        argv = child("_session_worker.py", db, logs / f"{name}.jsonl", name, rng.randrange(1 << 30), sessions, STEPS)
        return subprocess.Popen(argv, env=child_env(), stderr=subprocess.PIPE)

    def finished_turns() -> int:
        return sum(log.read_text().count(' answer", "at"') for log in logs.glob("*.jsonl"))

    workers = [start() for _ in range(WORKERS)]
    kills = 0
    deadline = time.monotonic() + RUN_LIMIT
    try:
        while (kills < MIN_KILLS or finished_turns() < MIN_TURNS) and time.monotonic() < deadline:
            await asyncio.sleep(rng.uniform(0.2, 0.8))
            alive = [w for w in workers if w.poll() is None]
            if alive:
                victim = rng.choice(alive)
                victim.kill()
                victim.wait(CHILD_TIMEOUT)
                kills += 1
                workers[workers.index(victim)] = start()
        for w in workers:
            assert w.poll() is None, w.stderr.read() if w.stderr else b""  # none ended on its own (an error)
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait(CHILD_TIMEOUT)
    assert kills >= MIN_KILLS and finished_turns() >= MIN_TURNS, "the workers did not get far enough"

    lines = [json.loads(line) for log in logs.glob("*.jsonl") for line in log.read_text().splitlines() if line]
    async with SQLiteStorage(db) as storage:
        histories = {sid: list(await storage.get_history(UUID(sid))) for sid in sessions.split(",")}
    for sid, events in histories.items():
        # No tool call has two results.
        results = [e.call_id for e in events if isinstance(e, ToolResult)]
        assert len(results) == len(set(results)), f"a call with two results in {sid}: {results}"
        # Each turn's events are together: a turn never resumes after another turn's events.
        finished: set[str] = set()
        current = None
        for event in events:
            turn = turn_of(event)
            if turn != current:
                shown = " | ".join(_text(e) for e in events)
                assert turn not in finished, f"turn {turn} interleaved with another in {sid}: {shown}"
                if current is not None:
                    finished.add(current)
                current = turn
        # Every acknowledged event is there, unless its session was deleted after it.
        texts = {_text(e) for e in events}
        drops = [line["at"] for line in lines if line["kind"] == "drop" and line["session"] == sid]
        for line in lines:
            if line["kind"] == "ack" and line["session"] == sid and not any(at > line["at"] for at in drops):
                assert line["text"] in texts, f"acknowledged {line['text']!r} missing from {sid}"


def _text(event: Any) -> str:
    if isinstance(event, ToolCall):
        return f"call {event.call_id}"
    if isinstance(event, ToolResult):
        return f"repair {event.call_id}" if "cancelled" in str(event.content) else f"result {event.call_id}"
    return str(event.content)
