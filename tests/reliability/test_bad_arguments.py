"""Bad arguments: a clear error or a faithful round trip, as documented, and never a damaged file."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from _support import sqlite3_shell

from sessionstore import (
    BaseEvent,
    EventContext,
    EventEncodeError,
    InvalidCursorError,
    InvalidSessionIdError,
    SessionRecord,
    SessionStore,
    SQLiteStorage,
    ToolCall,
    ToolResult,
    UnknownSessionError,
    UserMessage,
)

NOT_IDS: list[Any] = [
    "'; DROP TABLE sessions; --",
    "00000000000000000000000000000001' OR '1'='1",
    "not-a-uuid",
    "0" * 31,
    "",
    None,
    42,
    b"\x00" * 16,
]


def assert_file_whole(db: Path, sessions: int) -> None:
    assert sqlite3_shell(db, "PRAGMA integrity_check;") == "ok"
    assert sqlite3_shell(db, "SELECT count(*) FROM sessions;") == str(sessions)
    tables = sqlite3_shell(db, "SELECT group_concat(name) FROM (SELECT name FROM sqlite_master WHERE type = 'table');")
    assert {"sessions", "events"} <= set(tables.split(","))


@pytest.fixture
async def storage(tmp_path: Path) -> Any:
    async with SQLiteStorage(tmp_path / "args.db") as storage:
        await storage.save_event(UserMessage("keep me"), EventContext.for_stream(UUID(int=1)))
        yield storage


@pytest.mark.parametrize("bad", NOT_IDS, ids=repr)
async def test_session_ids_that_are_not_uuids(storage: SQLiteStorage, bad: Any) -> None:
    calls = [
        storage.get_history(bad),
        storage.set_history(bad, []),
        storage.drop_history(bad),
        storage.save_event(UserMessage("x"), EventContext.for_stream(bad)),
        storage.load_session(bad),
        storage.touch_session(bad),
        storage.set_title(bad, "t"),
    ]
    for call in calls:
        with pytest.raises(InvalidSessionIdError, match="uuid"):
            await call
    store = SessionStore(storage=storage)
    with pytest.raises(InvalidSessionIdError):
        await store.get_or_adopt(bad)
    if isinstance(bad, str):
        with pytest.raises(UnknownSessionError):
            await store.get(bad)
    assert await storage.get_history(UUID(int=1)) == [UserMessage("keep me")]
    assert_file_whole(storage.path, sessions=1)


@pytest.mark.parametrize("bad", [b for b in NOT_IDS if isinstance(b, str)], ids=repr)
async def test_session_records_with_ids_that_are_not_hex(storage: SQLiteStorage, bad: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        await storage.save_session(SessionRecord(session_id=bad))
    assert_file_whole(storage.path, sessions=1)


async def test_sql_in_text_is_stored_as_text(storage: SQLiteStorage) -> None:
    sql = "'); DROP TABLE events; --"
    stream_id = uuid4()
    await storage.save_event(UserMessage(sql, metadata={sql: sql}), EventContext.for_stream(stream_id))
    await storage.save_session(SessionRecord(session_id=stream_id.hex, cwd=sql, meta={sql: sql}, title=sql))
    assert await storage.get_history(stream_id) == [UserMessage(sql, metadata={sql: sql})]
    record = await storage.load_session(stream_id)
    assert record is not None and (record.cwd, record.meta, record.title) == (sql, {sql: sql}, sql)
    assert (await storage.list_sessions(cwd=sql)).sessions[0].session_id == stream_id.hex
    assert (await storage.list_sessions(cwd="' OR 1=1 --")).sessions == []
    with pytest.raises(ValueError, match="cursor"):
        await storage.list_sessions(cursor="' OR 1=1 --")
    assert_file_whole(storage.path, sessions=2)


async def test_ten_megabyte_events_round_trip(storage: SQLiteStorage, tmp_path: Path) -> None:
    stream_id = uuid4()
    text = "é" * (5 * 1024 * 1024)  # 10 MB of UTF-8
    blob = bytes(range(256)) * (10 * 1024 * 1024 // 256)
    events: list[BaseEvent] = [UserMessage(text), ToolResult(call_id="big", content=blob)]
    for event in events:
        await storage.save_event(event, EventContext.for_stream(stream_id))
    await storage.set_history(uuid4(), [ToolCall(call_id="c", name="n", arguments={"data": text})])
    async with SQLiteStorage(storage.path) as fresh:
        assert await fresh.get_history(stream_id) == events
    assert_file_whole(storage.path, sessions=3)


UNENCODABLE = "lone \ud800 high, lone \udfff low, escaped \udcff byte"


async def test_lone_surrogates_in_events_round_trip(storage: SQLiteStorage) -> None:
    """Text Python holds but UTF-8 cannot (lone surrogates): stored \\u-escaped, read back equal."""
    stream_id = uuid4()
    event = ToolCall(call_id=UNENCODABLE, name="n", arguments={UNENCODABLE: [UNENCODABLE]}, metadata={"k": UNENCODABLE})
    await storage.save_event(event, EventContext.for_stream(stream_id))
    async with SQLiteStorage(storage.path) as fresh:
        assert await fresh.get_history(stream_id) == [event]
    assert sqlite3_shell(storage.path, "SELECT min(json_valid(payload)) FROM events;") == "1"


@pytest.mark.parametrize("field", ["cwd", "title", "meta", "additional_directories"])
async def test_lone_surrogates_in_session_records_are_refused_clearly(storage: SQLiteStorage, field: str) -> None:
    """Session records are plain columns: unencodable text is refused with a typed error, nothing written."""
    stream_id = uuid4()
    value: Any = {
        "cwd": UNENCODABLE,
        "title": UNENCODABLE,
        "meta": {"k": UNENCODABLE},
        "additional_directories": [UNENCODABLE],
    }[field]
    with pytest.raises(EventEncodeError, match="surrogate"):
        await storage.save_session(SessionRecord(session_id=stream_id.hex, **{field: value}))
    assert await storage.load_session(stream_id) is None
    assert_file_whole(storage.path, sessions=1)


async def test_a_cwd_to_list_by_that_no_row_can_hold_is_refused_clearly(storage: SQLiteStorage) -> None:
    """Was the driver's UnicodeEncodeError from inside the read (over ACP, "Internal error")."""
    with pytest.raises(EventEncodeError, match="surrogate"):
        await storage.list_sessions(cwd=UNENCODABLE)
    assert len((await storage.list_sessions(cwd="/nowhere")).sessions) == 0


async def test_lone_surrogates_in_a_title_are_refused_clearly(storage: SQLiteStorage) -> None:
    with pytest.raises(EventEncodeError, match="surrogate"):
        await storage.set_title(UUID(int=1), UNENCODABLE)
    record = await storage.load_session(UUID(int=1))
    assert record is not None and record.title is None
    assert_file_whole(storage.path, sessions=1)


async def test_nan_and_infinities_in_events_round_trip(storage: SQLiteStorage) -> None:
    stream_id = uuid4()
    values = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "nested": [math.nan, {"x": -math.inf}]}
    event = ToolResult(call_id="f", content=values, metadata={"score": math.inf})
    await storage.save_event(event, EventContext.for_stream(stream_id))
    async with SQLiteStorage(storage.path) as fresh:
        (back,) = await fresh.get_history(stream_id)
    assert isinstance(back, ToolResult) and back.metadata == {"score": math.inf}
    content = back.content
    assert math.isnan(content["nan"]) and content["inf"] == math.inf and content["-inf"] == -math.inf
    assert math.isnan(content["nested"][0]) and content["nested"][1] == {"x": -math.inf}
    # Stored as tagged JSON that SQLite's own JSON functions accept.
    assert sqlite3_shell(storage.path, "SELECT min(json_valid(payload)) FROM events;") == "1"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
async def test_nan_and_infinities_in_session_records_are_refused_clearly(storage: SQLiteStorage, value: float) -> None:
    """Session records are plain JSON columns: bare NaN is not JSON, so it is refused, nothing written."""
    stream_id = uuid4()
    with pytest.raises(EventEncodeError, match="meta"):
        await storage.save_session(SessionRecord(session_id=stream_id.hex, meta={"score": value}))
    assert await storage.load_session(stream_id) is None
    assert sqlite3_shell(storage.path, "SELECT min(json_valid(meta)) FROM sessions;") == "1"
    assert_file_whole(storage.path, sessions=1)


async def test_an_int_past_pythons_decimal_limit_is_stored_and_read_back_exactly(storage: SQLiteStorage) -> None:
    """Python refuses to write an int of more than 4,300 digits in decimal (it was a plain ValueError, then a refusal);
    a tool may return one, and AG2's own storage keeps it: it is stored (as hex) and comes back the same int."""
    stream_id = uuid4()
    huge = ToolResult(call_id="c", content=-(10**5000) - 7)
    await storage.save_event(huge, EventContext.for_stream(stream_id))
    assert (await storage.get_history(stream_id))[-1] == huge
    assert_file_whole(storage.path, sessions=2)


class NotRegistered(BaseEvent):
    pass


@pytest.mark.parametrize(
    "bad",
    [
        UserMessage("x", metadata={"handle": object()}),
        ToolResult(call_id="c", content={1, 2, 3}),
        ToolCall(call_id="c", name="n", arguments={"f": lambda: None}),
        NotRegistered(),
        "not an event",
    ],
    ids=["object", "set", "function", "unregistered", "str"],
)
async def test_unencodable_events_are_refused_and_nothing_written(storage: SQLiteStorage, bad: Any) -> None:
    stream_id = uuid4()
    with pytest.raises(EventEncodeError):
        await storage.save_event(bad, EventContext.for_stream(stream_id))
    with pytest.raises(EventEncodeError):
        await storage.set_history(UUID(int=1), [UserMessage("replacement"), bad])
    assert await storage.get_history(UUID(int=1)) == [UserMessage("keep me")]  # the old history, whole
    assert await storage.load_session(stream_id) is None
    assert_file_whole(storage.path, sessions=1)


def _cursor(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


BAD_CURSORS: list[Any] = [
    123,  # a number, where ACP says string
    "not base64 at all!",
    _cursor(5),
    _cursor(["0001-01-01T00:00:00+14:00", "0" * 32]),  # year 1 at +14:00 is before year 1 in UTC
    _cursor(["2026-01-01T00:00:00+00:00", 5]),
    _cursor(["2026-01-01T00:00:00", "0" * 32]),  # naive
    _cursor([[[[[[[[[[["deep"]]]]]]]]]], "x"]),
    "W" * 100_000,
]


@pytest.mark.parametrize("cursor", BAD_CURSORS, ids=range(len(BAD_CURSORS)))
async def test_a_cursor_the_store_never_issued_is_one_clear_error(storage: SQLiteStorage, cursor: Any) -> None:
    """Was: some of these raised OverflowError, RecursionError or AttributeError (ACP answered -32603)."""
    for store in (storage, SessionStore(storage=storage, retain_history=True)):
        with pytest.raises(InvalidCursorError, match="invalid session list cursor"):
            await store.list_sessions(cursor=cursor)
    page = await storage.list_sessions()
    assert [s.session_id for s in page.sessions] == [UUID(int=1).hex]  # and the store goes on working
