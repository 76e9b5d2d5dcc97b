"""The full-text index is brought up to date in batches (revision 0005), and search stays exact meanwhile.

Appends commit without touching ``events_fts``; a writer indexes the newer
events every few hundred, after a short idle and when it closes. These tests
hold the scheme to what the README promises: search never misses a committed
event, the indexed part is always exact whatever is deleted or edited (by a
storage, a command or by hand), and the index trails by a bounded amount.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from uuid import UUID, uuid4

import pytest

from sessionstore import EventContext, ModelMessage, SQLiteStorage, ToolCall, UserMessage, admin, records
from sessionstore.schema.queries import UNINDEXED_EVENTS
from sessionstore.sqlite import lane
from sessionstore.sqlite import storage as sqlite
from sessionstore.sqlite.search import index_new_events

WORDS = ["apple", "banana", "cherry", "delta", "echo", "fox_trot", "golf", "hotel", "india", "juliet"]


def trails(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute(UNINDEXED_EVENTS).fetchone()[0])


def index_is_exact(path: Path) -> None:
    """FTS5's own check against the content (``rank`` 1): the index holds exactly what a rebuild would."""
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO events_fts (events_fts, rank) VALUES ('integrity-check', 1)")


def hits(path: Path, word: str) -> set[tuple[str, int]]:
    return {(hit.session_id, hit.position) for hit in records.search(path, word, limit=10**6)}


def copy_of(path: Path, tmp: Path) -> Path:
    """A consistent copy of the file and its log (SQLite's backup)."""
    copy = tmp / f"copy-{random.random()}.db"
    with sqlite3.connect(path) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    return copy


def rebuilt_copy(path: Path, tmp: Path) -> Path:
    """A copy of the file whose index is rebuilt from scratch: what every search must agree with."""
    copy = copy_of(path, tmp)
    with sqlite3.connect(copy) as conn:
        conn.execute("INSERT INTO events_fts (events_fts) VALUES ('rebuild')")
        conn.execute("UPDATE events_fts_progress SET indexed_through = (SELECT coalesce(max(id), 0) FROM events)")
    return copy


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))


def ctx(stream: UUID) -> EventContext:
    return EventContext.for_stream(stream)


async def write_and_close(path: Path, texts: list[str]) -> None:
    async with SQLiteStorage(path) as storage:
        for message in texts:
            await storage.save_event(UserMessage(message), ctx(uuid4()))


@pytest.mark.parametrize("seed", range(6))
async def test_after_any_mix_search_agrees_with_a_rebuilt_index(tmp_path: Path, seed: int) -> None:
    """Appends, set_history, drop_history, catch-ups, and edits, deletes and inserts by hand in ``sqlite3``,
    mixed at random: at every step each word finds exactly what a rebuilt index finds, the indexed part is
    exact (what a catch-up adds completes it to a rebuild), and at the end a catch-up leaves the index
    equal to a rebuild."""
    rng = random.Random(seed)
    path = tmp_path / "agent.db"
    streams = [uuid4() for _ in range(4)]
    histories: dict[UUID, list[object]] = {s: [] for s in streams}
    async with SQLiteStorage(path) as storage:
        for step in range(80):
            stream = rng.choice(streams)
            action = rng.random()
            if action < 0.45:
                event = rng.choice([UserMessage, ModelMessage])(text(rng))
                await storage.save_event(event, ctx(stream))
                histories[stream].append(event)
            elif action < 0.55:
                await storage.save_event(ToolCall("c1", "look_up", {"query": text(rng)}), ctx(stream))
                histories[stream] = await storage.get_history(stream)
            elif action < 0.65:
                kept = histories[stream][: rng.randint(0, len(histories[stream]))]
                histories[stream] = [*kept, UserMessage(text(rng))]
                await storage.set_history(stream, histories[stream])
            elif action < 0.7:
                await storage.drop_history(stream)
                histories[stream] = []
            elif action < 0.78:
                await storage._index()  # a catch-up, as the storage runs one every INDEX_EVERY events
            elif action < 0.86:  # an edit by hand, of an indexed or a newer event
                with sqlite3.connect(path) as conn:
                    row = conn.execute("SELECT id FROM events WHERE role = 'user' ORDER BY random() LIMIT 1").fetchone()
                    if row is not None:
                        payload = json.dumps({"content": text(rng)})
                        conn.execute("UPDATE events SET payload = ? WHERE id = ?", (payload, row[0]))
            elif action < 0.93:  # the newest events deleted by hand: their ids are handed out again
                with sqlite3.connect(path) as conn:
                    conn.execute("DELETE FROM events WHERE id > (SELECT max(id) - 3 FROM events)")
            else:  # a row inserted by hand, past the mark
                with sqlite3.connect(path) as conn:
                    session = conn.execute("SELECT id FROM sessions ORDER BY random() LIMIT 1").fetchone()
                    if session is not None:
                        conn.execute(
                            "INSERT INTO events (session, position, type, payload, created_at, role, text_path)"
                            " SELECT ?, coalesce(max(position), -1) + 1, 'user_message', ?, '2026-11-30 00:00:00',"
                            " 'user', '$.content' FROM events WHERE session = ?",
                            (session[0], json.dumps({"content": text(rng)}), session[0]),
                        )
            if step % 8 == 7:
                rebuilt = rebuilt_copy(path, tmp_path)
                for word in WORDS:
                    assert hits(path, word) == hits(rebuilt, word), (step, word)
                caught_up = copy_of(path, tmp_path)  # the indexed part is exact: a catch-up completes it
                with sqlite3.connect(caught_up) as conn:
                    while index_new_events(conn):
                        pass
                index_is_exact(caught_up)
    # Closed: the index is up to date, and equal to a rebuild.
    assert trails(path) == 0
    index_is_exact(path)


async def test_search_finds_an_event_not_yet_indexed(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    stream = uuid4()
    async with SQLiteStorage(path) as storage:
        await storage.save_event(UserMessage("the zeppelin_manifest is ready"), ctx(stream))
        with sqlite3.connect(path) as conn:
            in_index = conn.execute("SELECT count(*) FROM events_fts WHERE events_fts MATCH 'zeppelin_manifest'")
            assert in_index.fetchone()[0] == 0  # committed, not indexed yet
        found = records.search(path, "zeppelin_manifest")
        assert [(h.session_id, h.position, h.role) for h in found] == [(stream.hex, 0, "user")]
        assert "[zeppelin_manifest]" in found[0].snippet
        # The installed command, another process, finds it too.
        done = subprocess.run(
            ["sessionstore", "search", "zeppelin_manifest", "--db", str(path), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert [hit["position"] for hit in json.loads(done.stdout)] == [0]
        # Raw FTS5 syntax works on the part not indexed yet as well.
        assert len(records.search(path, "zeppelin* AND ready", raw=True)) == 1


async def test_phrases_and_near_are_found_in_the_index_and_past_its_mark(tmp_path: Path) -> None:
    # Revision 0008 keeps where each word is (detail=full): a phrase matches the words side by side only, in the
    # index and in the scratch index of the events not indexed yet (which copies the index's options).
    path = tmp_path / "agent.db"
    stream = uuid4()
    apart, together = "the build went red after the merge", "why is the build red again"
    await write_and_close(path, [apart, together])
    assert trails(path) == 0
    async with SQLiteStorage(path) as storage:  # open: these two are past the mark while it runs
        await storage.save_event(UserMessage("red build, then the build red once more"), ctx(stream))
        await storage.save_event(UserMessage("a build that is red"), ctx(stream))
        assert trails(path) == 2

        def texts(query: str) -> set[str]:
            return {hit.snippet for hit in records.search(path, query, raw=True)}

        assert texts('"build red"') == {"why is the [build red] again", "red build, then the [build red] once more"}
        assert len(texts("NEAR(build red, 1)")) == 3  # at most one word between: not "a build that is red"
        assert len(texts("build AND red")) == 4
        # Plain words (not raw) are found anywhere, in any order, as before.
        assert len(records.search(path, '"build red"')) == 4
        done = subprocess.run(
            ["sessionstore", "search", '"build red"', "--fts", "--db", str(path), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert sorted(hit["position"] for hit in json.loads(done.stdout)) == [0, 0]
    index_is_exact(path)


async def test_the_index_trails_by_a_bounded_amount(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite, "INDEX_DELAY", 0.2)
    path = tmp_path / "agent.db"
    stream = uuid4()
    async with SQLiteStorage(path) as storage:
        for n in range(sqlite.INDEX_EVERY * 2 + 10):
            await storage.save_event(UserMessage(f"message {n}"), ctx(stream))
            # Caught up in the background at every INDEX_EVERY, after at most BACKGROUND_WAITS other commits.
            assert trails(path) <= sqlite.INDEX_EVERY + lane.BACKGROUND_WAITS + 1
        await asyncio.sleep(0.6)  # idle: the rest is indexed too
        assert trails(path) == 0
        index_is_exact(path)
        await storage.set_history(stream, [UserMessage("all new")])
    assert trails(path) == 0  # closing catches up
    index_is_exact(path)


def test_a_writer_killed_before_catching_up_is_caught_up_by_the_next(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    code = textwrap.dedent(
        f"""
        import asyncio, os, signal, uuid
        from sessionstore import EventContext, SQLiteStorage, UserMessage
        async def main():
            storage = SQLiteStorage({str(path)!r})
            for n in range(40):
                await storage.save_event(UserMessage(f"killed writer {{n}}"), EventContext.for_stream(uuid.uuid4()))
            os.kill(os.getpid(), signal.SIGKILL)
        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert done.returncode == -9
    assert trails(path) == 40
    assert len(records.search(path, "killed writer", limit=100)) == 40  # found all the same

    async def reopen() -> None:
        async with SQLiteStorage(path) as storage:
            await storage.open()

    asyncio.run(reopen())
    assert trails(path) == 0
    index_is_exact(path)


def test_check_reports_the_lag_and_repair_brings_back_a_lost_mark(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"

    asyncio.run(write_and_close(path, ["one"]))
    with sqlite3.connect(path) as conn:  # two rows written by hand: past the mark, as a killed writer leaves them
        for n in (1, 2):
            conn.execute(
                "INSERT INTO events (session, position, type, payload, created_at, role, text_path)"
                " VALUES (1, ?, 'user_message', ?, '2026-11-30 00:00:00', 'user', '$.content')",
                (n, json.dumps({"content": f"two {n}"})),
            )
    report = admin.check(path)
    assert report.ok and report.unindexed == 2
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM events_fts_progress")
    report = admin.check(path)
    assert not report.ok
    assert report.search_index == ["the full-text index has lost its mark (events_fts_progress has no row)"]
    repaired = admin.check(path, repair=True)
    assert repaired.ok and repaired.unindexed == 0
    index_is_exact(path)
    assert len(records.search(path, "two")) == 2
