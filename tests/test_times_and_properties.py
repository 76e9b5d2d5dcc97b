"""One rule for times, and properties that hold for any input (hypothesis).

* A session's timestamps are instants: a naive datetime is refused by every
  storage and by import alike, never read as local time by one and UTC by another.
* A datetime inside an event comes back equal, with its zone (a ``ZoneInfo``
  stays that zone, not a fixed offset) and its fold.
* Any event the codec accepts round-trips exactly; any damage to an export is
  imported exactly or refused with a line number, never half-imported.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from uuid import uuid4
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionstore import (
    EventEncodeError,
    JsonCodec,
    MemoryStorage,
    ModelMessage,
    SessionRecord,
    SQLiteStorage,
    ToolCall,
    ToolResult,
    UserMessage,
    records,
    transfer,
)
from sessionstore.errors import ImportFileError

codec = JsonCodec()


@pytest.mark.parametrize(
    "when",
    [
        datetime(2026, 10, 25, 2, 30, tzinfo=ZoneInfo("Europe/Paris"), fold=1),  # the second 02:30
        datetime(2026, 10, 25, 2, 30, tzinfo=ZoneInfo("Europe/Paris")),
        datetime(2026, 3, 8, 12, 0, tzinfo=ZoneInfo("America/New_York")),
        datetime(2026, 1, 1, fold=1),  # naive, as a value inside an event: kept naive, fold too
        datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    ],
    ids=str,
)
def test_datetimes_in_events_come_back_equal_zone_and_fold_included(when: datetime) -> None:
    back = codec.decode(*codec.encode(ModelMessage("x", metadata={"when": when}))).metadata["when"]  # type: ignore[attr-defined]
    assert back == when and back.fold == when.fold
    assert back.tzinfo == when.tzinfo and back.utcoffset() == when.utcoffset()


async def test_naive_session_times_are_refused_by_every_storage(tmp_path: Path) -> None:
    naive = SessionRecord(session_id=uuid4().hex, created_at=datetime(2026, 1, 1), updated_at=datetime.now(UTC))
    for storage in (MemoryStorage(), SQLiteStorage(tmp_path / "agent.db")):
        with pytest.raises(EventEncodeError, match="timezone-aware"):
            await storage.save_session(naive)  # type: ignore[attr-defined]
        assert await storage.load_session(naive.stream_id) is None  # type: ignore[attr-defined]
        if isinstance(storage, SQLiteStorage):
            await storage.aclose()


# -- properties --------------------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)  # Python text UTF-8 can hold
_values: Any = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | _text
    | st.binary(max_size=20)
    | st.datetimes(timezones=st.none() | st.timezones())
    | st.dates()
    | st.uuids(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(_text | st.integers(), children, max_size=4)
    ),
    max_leaves=20,
)
_events = st.one_of(
    st.builds(UserMessage, _text, metadata=st.dictionaries(_text, _values, max_size=3)),
    st.builds(ModelMessage, _text),
    st.builds(ToolCall, call_id=_text, name=_text, arguments=st.dictionaries(_text, _values, max_size=4)),
    st.builds(ToolResult, call_id=_text, content=_values, is_error=st.booleans()),
)


def _same(a: Any, b: Any) -> bool:
    # NaN is not equal to itself; the codec keeps it, so compare its text.
    return json.dumps(a, default=repr, sort_keys=True) == json.dumps(b, default=repr, sort_keys=True)


@settings(max_examples=300, deadline=None)
@given(_events)
def test_any_event_round_trips_exactly(event: Any) -> None:
    type_name, payload = codec.encode(event)
    back = codec.decode(type_name, payload)
    assert type(back) is type(event)
    assert back == event or _same(back, event)
    assert codec.encode(back) == (type_name, payload)  # and writes back the same bytes


@pytest.fixture(scope="module")
def export_lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    import asyncio

    folder = tmp_path_factory.mktemp("export")
    db = folder / "source.db"

    async def write() -> None:
        async with SQLiteStorage(db) as storage:
            for n in range(3):
                sid = uuid4()
                await storage.save_session(SessionRecord(session_id=sid.hex, cwd=f"/w{n}", meta={"n": n}))
                await storage.set_history(sid, [UserMessage(f"hello {n}"), ModelMessage("hi"), ToolResult("c", [n])])

    asyncio.run(write())
    out = folder / "all.jsonl"
    transfer.export_sessions(db, out)
    return out.read_text().splitlines()


_damage = st.lists(
    st.tuples(st.sampled_from(["drop", "swap", "cut", "flip", "insert", "dup"]), st.integers(0, 10**6)),
    min_size=1,
    max_size=3,
)


def _damaged(lines: list[str], moves: list[tuple[str, int]]) -> list[str]:
    out = list(lines)
    for move, seed in moves:
        rng = random.Random(seed)
        at = rng.randrange(len(out)) if out else 0
        if move == "drop" and out:
            del out[at]
        elif move == "swap" and len(out) > 1:
            other = rng.randrange(len(out))
            out[at], out[other] = out[other], out[at]
        elif move == "cut" and out:
            out[at] = out[at][: rng.randrange(len(out[at]) + 1)]
        elif move == "flip" and out and out[at]:
            i = rng.randrange(len(out[at]))
            out[at] = out[at][:i] + rng.choice('{}[]":,0x\\') + out[at][i + 1 :]
        elif move == "insert":
            out.insert(at, rng.choice(["", "{}", "[]", "null", '{"kind":"event"}', "\ufeff"]))
        elif move == "dup" and out:
            out.insert(at, out[at])
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_damage)
def test_a_damaged_export_is_imported_exactly_or_refused_with_its_line(
    export_lines: list[str], tmp_path: Path, moves: list[tuple[str, int]]
) -> None:
    lines = _damaged(export_lines, moves)
    source = tmp_path / f"damaged-{uuid4().hex}.jsonl"
    source.write_text("\n".join(lines) + "\n")
    target = tmp_path / f"target-{uuid4().hex}.db"
    try:
        summary = transfer.import_sessions(target, source)
    except ImportFileError as exc:
        assert " line " in str(exc) or "is empty" in str(exc), str(exc)
        assert not target.exists()  # nothing half-made is left at the path
        return
    # Imported: exactly what the file says, session by session.
    stored = {r.session_id: r for r in records.list_sessions(target)}
    claimed = [json.loads(line) for line in lines[1:] if line.strip()]
    sessions = [obj for obj in claimed if obj.get("kind") == "session"]
    assert summary.added == len(sessions) == len(stored)
    for obj in sessions:
        events = [e for e in claimed if e.get("kind") == "event" and e["session_id"] == obj["session_id"]]
        assert stored[obj["session_id"]].events == len(events)
        read = records.read_session(target, obj["session_id"]).events
        assert [(e.position, e.type, e.payload) for e in read] == [
            (e["position"], e["type"], e["payload"]) for e in events
        ]
