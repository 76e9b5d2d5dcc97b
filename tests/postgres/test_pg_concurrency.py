"""Correct under real concurrency, at PostgreSQL's default isolation (read committed): real processes, a real server.

Many processes appending to one session never produce two events at one position, a gap, or a lost write; a
``set_history`` is whole or absent; a writer killed with SIGKILL mid-stream and a server restarted mid-stream (as
if it crashed) lose nothing acknowledged, and the writers reconnect and carry on.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from uuid import UUID, uuid4

import asyncpg  # type: ignore[import-untyped]
from pg_server import PostgresServer

WRITER = Path(__file__).with_name("_pg_writer.py")


def start(mode: str, url: str, acks: Path, name: str, count: int, *sessions: UUID) -> subprocess.Popen[bytes]:
    args = [sys.executable, str(WRITER), mode, url, str(acks), name, str(count), *(s.hex for s in sessions)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


async def histories(url: str) -> dict[str, list[tuple[int, str]]]:
    """Every session's (position, content) rows in position order."""
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        rows = await conn.fetch(
            "SELECT s.session_id, e.position, e.payload::json ->> 'content' FROM events e"
            " JOIN sessions s ON s.id = e.session ORDER BY s.session_id, e.position"
        )
    finally:
        await conn.close()
    found: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for sid, position, content in rows:
        found[sid].append((position, content))
    return found


def acknowledged(acks: Path) -> tuple[dict[str, list[str]], int]:
    """What each session was told was written, in order, and how many calls failed."""
    done: dict[str, list[str]] = defaultdict(list)
    failed = 0
    for line in acks.read_text().splitlines():
        if line.startswith("? "):
            failed += 1
        else:
            sid, text = line.split(" ", 1)
            done[sid].append(text)
    return done, failed


def check_appends(stored: dict[str, list[tuple[int, str]]], acks: dict[str, list[str]], sessions: list[UUID]) -> None:
    for sid in (s.hex for s in sessions):
        rows = stored[sid]
        assert [position for position, _ in rows] == list(range(len(rows))), "two events at one position, or a gap"
        texts = [text for _, text in rows]
        assert len(texts) == len(set(texts)), "an event stored twice"
        assert set(acks[sid]) <= set(texts), f"acknowledged but lost: {sorted(set(acks[sid]) - set(texts))[:5]}"
        by_writer: dict[str, list[int]] = defaultdict(list)
        for text in texts:
            name, i = text.rsplit(":", 1)
            by_writer[name].append(int(i))
        assert all(seq == sorted(seq) for seq in by_writer.values()), "a writer's order was not kept"


def wait_for(condition: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the writers made no progress"
        time.sleep(0.05)


def test_processes_appending_to_one_session_never_share_a_position_or_lose_a_write(pg_url: str, tmp_path: Path) -> None:
    shared = uuid4()
    own = [uuid4() for _ in range(6)]
    acks = tmp_path / "acks"
    writers = [start("append", pg_url, acks, f"w{n}", 120, shared, own[n]) for n in range(6)]
    outcomes = [w.communicate(timeout=300) for w in writers]
    assert [w.returncode for w in writers] == [0] * 6, outcomes
    done, failed = acknowledged(acks)
    assert failed == 0
    stored = asyncio.run(histories(pg_url))
    assert len(stored[shared.hex]) == 6 * 120 and all(len(stored[s.hex]) == 120 for s in own)
    check_appends(stored, done, [shared, *own])


def test_a_killed_writer_and_a_restarted_server_lose_nothing_acknowledged(
    pg_server: PostgresServer, pg_url: str, tmp_path: Path
) -> None:
    shared, rewritten = uuid4(), uuid4()
    acks = tmp_path / "acks"
    acks.touch()
    appenders = [start("append", pg_url, acks, f"w{n}", 1_000_000, shared) for n in range(4)]
    rewriter = start("rewrite", pg_url, acks, "r", 1_000_000, rewritten)
    wait_for(lambda: len(acknowledged(acks)[0][shared.hex]) >= 200)
    os.kill(appenders[0].pid, signal.SIGKILL)  # mid-stream, wherever it is
    time.sleep(0.5)
    pg_server.restart("immediate")  # as if the server crashed, then came back on the same port
    at_restart = len(acknowledged(acks)[0][shared.hex])
    wait_for(lambda: len(acknowledged(acks)[0][shared.hex]) >= at_restart + 300)  # they reconnected
    Path(f"{acks}.stop").touch()
    outcomes = [p.communicate(timeout=300) for p in [*appenders, rewriter]]
    assert appenders[0].returncode == -signal.SIGKILL
    assert [p.returncode for p in [*appenders[1:], rewriter]] == [0] * 4, outcomes
    done, failed = acknowledged(acks)
    stored = asyncio.run(histories(pg_url))
    check_appends(stored, done, [shared])
    # Noticed: a call failed, or an append in flight was settled (the storage logs it; see PostgresStorage._settle).
    settled = sum(err.count(b"connection was lost during an append") for _, err in outcomes)
    assert failed + settled > 0, "the restart was not noticed: it proves nothing"
    # The rewritten session holds one generation, whole: the last acknowledged one, or a later unacknowledged one.
    generation = [text for _, text in stored[rewritten.hex]]
    name, g, _ = generation[0].split(":")
    assert generation == [f"{name}:{g}:{j}" for j in range(1 + int(g) % 7)]
    assert int(g) >= int(done[rewritten.hex][-1].split(":")[1])
