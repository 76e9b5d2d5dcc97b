"""The JSON codec: exact round trips, unknown types kept, hostile payloads harmless."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import uuid4

import msgspec  # noqa: F401  (imported, decode_rows takes its quick path for a batch of any length)
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import (
    BaseEvent,
    EventEncodeError,
    EventTypes,
    JsonCodec,
    ModelMessage,
    SystemMessage,
    ToolCall,
    ToolResult,
    UnknownEvent,
    UserMessage,
)

codec = JsonCodec()

NESTED: dict[str, Any] = {
    "bytes": b"\x00\xffraw",
    "when": datetime(2026, 11, 29, 12, 30, 1, 123456, tzinfo=UTC),
    "offset": datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    "naive": datetime(2026, 1, 1, 8, 0),
    "day": date(2026, 2, 28),
    "id": uuid4(),
    "tuple": (1, "two", (3.5, None)),
    "list": [1, [2, [3, {"deep": True}]]],
    "int_keys": {1: "one", 2: "two"},
    "tag_lookalike": {"$bytes": "not really"},
    "unicode": "héllo wörld ✓ 漢字 🎉",
    "big": 2**70,
    "huge": -(10**5000),  # more digits than Python writes in decimal (sys.get_int_max_str_digits())
    "bytearray": bytearray(b"\x00\xffraw"),
    "neg_zero": -0.5,
    "empty": {},
}

ALL_EVENTS: list[BaseEvent] = [
    UserMessage("hello", metadata={"client": "zed"}),
    ModelMessage("hi there", metadata=NESTED),
    SystemMessage("be brief"),
    ToolCall(call_id="c1", name="read_file", arguments={"path": "/etc/hosts", "lines": (1, 10)}),
    ToolResult(call_id="c1", content={"text": "127.0.0.1 localhost", "raw": b"\x01"}, is_error=False),
    ToolResult(call_id="c2", content="boom", is_error=True),
]


@pytest.mark.parametrize("event", ALL_EVENTS, ids=lambda e: type(e).__name__)
def test_every_builtin_event_round_trips_exactly(event: BaseEvent) -> None:
    type_name, payload = codec.encode(event)
    back = codec.decode(type_name, payload)
    assert type(back) is type(event)
    assert back == event
    json.loads(payload)  # always valid JSON text, so json_extract works on it


def test_types_of_nested_values_survive() -> None:
    back = codec.decode(*codec.encode(ModelMessage("x", metadata=NESTED)))
    assert isinstance(back, ModelMessage)
    for key, value in NESTED.items():
        assert type(back.metadata[key]) is type(value), key
    assert back.metadata["tuple"][2] == (3.5, None)
    assert back.metadata["offset"].utcoffset() == timedelta(hours=5, minutes=30)


def test_payload_is_plain_json_for_plain_values() -> None:
    type_name, payload = codec.encode(ModelMessage("readable"))
    assert type_name == "model_message"
    assert json.loads(payload) == {"content": "readable"}


def test_nan_and_infinities_round_trip_as_valid_json() -> None:
    event = ModelMessage("f", metadata={"nan": math.nan, "inf": math.inf, "ninf": -math.inf})
    _, payload = codec.encode(event)
    assert "NaN" not in payload and "Infinity" not in payload
    back = codec.decode("model_message", payload)
    assert isinstance(back, ModelMessage)
    assert math.isnan(back.metadata["nan"])
    assert back.metadata["inf"] == math.inf and back.metadata["ninf"] == -math.inf


def test_lone_surrogates_round_trip_as_ascii_escapes() -> None:
    event = UserMessage("bad \ud800 text")
    _, payload = codec.encode(event)
    payload.encode("utf-8")  # storable as UTF-8 text
    assert codec.decode("user_message", payload) == event


def test_values_json_cannot_hold_are_refused_with_a_typed_error() -> None:
    with pytest.raises(EventEncodeError, match=r"Decimal at metadata\.price"):
        codec.encode(ModelMessage("x", metadata={"price": Decimal("1.5")}))
    with pytest.raises(EventEncodeError, match="not an event"):
        codec.encode("just a string")  # type: ignore[arg-type]


def test_an_unregistered_class_is_refused() -> None:
    @dataclass(frozen=True)
    class Stray(BaseEvent):
        x: int = 0

    with pytest.raises(EventEncodeError, match="no registered type name"):
        codec.encode(Stray())


def test_applications_register_their_own_types_under_stable_names() -> None:
    @dataclass(frozen=True)
    class Handoff(BaseEvent, type_name="tests.handoff"):
        to_agent: str
        reasons: list[str] = field(default_factory=list)

    event = Handoff("planner", reasons=["too long"])
    type_name, payload = codec.encode(event)
    assert type_name == "tests.handoff"
    assert "test_codec" not in payload and "Handoff" not in payload  # no module path on disk
    assert codec.decode(type_name, payload) == event


def test_a_private_registry_only_knows_what_it_was_given() -> None:
    types = EventTypes()
    types.register(UserMessage, "user_message")
    private = JsonCodec(types)
    assert private.decode(*private.encode(UserMessage("a"))) == UserMessage("a")
    decoded = private.decode(*codec.encode(ModelMessage("b")))
    assert isinstance(decoded, UnknownEvent)
    with pytest.raises(EventEncodeError):
        private.encode(ModelMessage("b"))


def test_one_name_cannot_serve_two_classes() -> None:
    types = EventTypes()
    types.register(UserMessage, "dup")
    with pytest.raises(ValueError, match="already used"):
        types.register(ModelMessage, "dup")


def test_unknown_type_name_keeps_the_raw_payload_and_writes_it_back_unchanged() -> None:
    raw = '{"future_field": [1, 2, 3], "text": "from v9"}'
    event = codec.decode("made_by_a_newer_version", raw)
    assert isinstance(event, UnknownEvent)
    assert (event.stored_type, event.payload) == ("made_by_a_newer_version", raw)
    assert codec.encode(event) == ("made_by_a_newer_version", raw)


@pytest.mark.parametrize(
    "payload",
    [
        "not json at all",
        "",
        "[1, 2]",
        '"a string"',
        '{"content": "x", "surprise": 1}',
        '{"metadata": {"$bytes": "!!!not base64"}, "content": "x"}',
        '{"metadata": {"$datetime": 42}, "content": "x"}',
        '{"metadata": {"$unknown_tag": 1}, "content": "x"}',
        '{"metadata": {"$items": [[[1], 2]]}, "content": "x"}',
        '{"metadata": {"$float": "1e999"}, "content": "x"}',
        "{}",
        "[" * 100_000 + "]" * 100_000,
    ],
)
def test_undecodable_payloads_become_unknown_events_not_errors(payload: str) -> None:
    event = codec.decode("model_message", payload)
    assert isinstance(event, UnknownEvent)
    assert event.payload == payload and event.stored_type == "model_message"
    assert event.reason


@pytest.mark.parametrize(
    "type_name, payload",
    [
        ("os.system", '{"command": "touch /tmp/pwned"}'),
        ("builtins.eval", '{"source": "1+1"}'),
        ("sessionstore_test_never_imported.Evil", "{}"),
        ("model_message", '{"__class__": "os.system", "content": "x"}'),
        ("model_message", '{"content": {"py/object": "subprocess.Popen"}}'),
    ],
)
def test_stored_data_never_chooses_what_is_imported(type_name: str, payload: str) -> None:
    before = set(sys.modules)
    event = codec.decode(type_name, payload)
    assert set(sys.modules) == before
    assert "sessionstore_test_never_imported" not in sys.modules
    if isinstance(event, ModelMessage):
        # A hostile-looking value is only data: a dict, never an object.
        assert event.content == {"py/object": "subprocess.Popen"}
    else:
        assert isinstance(event, UnknownEvent)


@pytest.mark.parametrize("payload", ['  {"content": "x"}  ', '{"content": "x"}\n', '\t{"content":"x"}'])
def test_payloads_edited_with_white_space_still_decode(payload: str) -> None:
    assert codec.decode("model_message", payload) == ModelMessage("x")


@pytest.mark.parametrize("payload", ['{"content": "x"} {"content": "y"}', '{"content": "x"}]', '{"content": "x"'])
def test_trailing_or_missing_text_is_not_silently_ignored(payload: str) -> None:
    event = codec.decode("model_message", payload)
    assert isinstance(event, UnknownEvent) and event.payload == payload


def test_only_pure_defaults_are_left_out_of_the_payload() -> None:
    """A default made fresh on every call (a new id) must be stored, or decoding would make another."""

    @dataclass(frozen=True)
    class Stamped(BaseEvent, type_name="tests.stamped"):
        text: str = ""
        tags: list[str] = field(default_factory=list)
        ident: object = field(default_factory=uuid4)

    event = Stamped()
    type_name, payload = codec.encode(event)
    assert json.loads(payload) == {"ident": {"$uuid": str(event.ident)}}
    assert codec.decode(type_name, payload) == event


def test_decoding_a_long_history_pauses_the_collector_and_restores_it() -> None:
    import gc

    from sessionstore.codec import decode_all

    rows = [codec.encode(ModelMessage(f"m{i}", metadata={"i": i})) for i in range(2000)]
    expected = [ModelMessage(f"m{i}", metadata={"i": i}) for i in range(2000)]
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    try:
        decoded = decode_all(codec, rows)
        during = len(collections)
    finally:
        gc.callbacks.remove(count)
    assert decoded == expected
    assert during == 0 and gc.isenabled()  # no collection in the middle, and the collector is back on
    gc.disable()
    try:
        decode_all(codec, rows[:3])
        assert not gc.isenabled()  # one the application had turned off stays off
    finally:
        gc.enable()


def _typed(value: Any) -> Any:
    """A value with the type of every part beside it, so ``1`` and ``1.0`` and ``True`` differ, and ``-0.0``
    from ``0.0``: what decoding two ways must agree on exactly."""
    if isinstance(value, dict):
        return ("dict", [(_typed(k), _typed(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_typed(v) for v in value])
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, BaseEvent):  # its fields by name: the order of an instance's dict is no part of it
        return (type(value).__name__, [(k, _typed(v)) for k, v in sorted(vars(value).items())])
    return (type(value).__name__, value)


# Payloads the quick path (msgspec) parses or refuses: each must decode exactly as decode() decodes it alone.
EDGE_PAYLOADS = [
    ("model_message", '{"content":"plain"}'),
    ("model_message", '{"content":"x","metadata":{"big":' + str(2**70) + ',"neg":-' + str(2**80) + "}}"),
    ("model_message", '{"content":"x","metadata":{"i64":9223372036854775807,"u64":18446744073709551615}}'),
    ("model_message", '{"content":"x","metadata":{"below":-9223372036854775809,"above":18446744073709551616}}'),
    ("model_message", '{"content":"x","metadata":{"f":[0.1,-0.0,1e308,5e-324,1.7976931348623157e308,1E2,1e-400]}}'),
    ("model_message", '{"content":"x","metadata":{"huge":1e400,"neg":-1e400}}'),
    ("model_message", '{"content":"x","metadata":{"long":3.14159265358979323846264338327950288419716939937510}}'),
    ("model_message", '{"content":"\\ud800 lone","metadata":{}}'),
    ("model_message", '{"content":"\\ud83c\\udf89 pair \\u00e9 \\n\\t\\"\\\\ \\/"}'),
    ("model_message", '{"content":"raw\ncontrol"}'),
    ("model_message", '{"content":"a","content":"b"}'),
    ("model_message", '{"content":"x","metadata":{"k":1,"k":2}}'),
    ("model_message", '{"content":"héllo ✓ 漢字 🎉"}'),
    ("model_message", '{"content":"x","metadata":null}'),
    ("model_message", '{"content":"x","surprise":1}'),
    ("model_message", '{"metadata":{}}'),
    ("model_message", "[1, 2]"),
    ("model_message", '"text"'),
    ("model_message", "{}"),
    ("model_message", ""),
    ("model_message", "not json"),
    ("model_message", '{"content": "x"} trailing'),
    ("model_message", '  {"content": "x"}\n'),
    ("model_message", '{"content":NaN}'),
    ("model_message", '{"content":Infinity}'),
    ("model_message", '{"content":01}'),
    ("model_message", '{"content":1.}'),
    ("model_message", '{"content":"x",}'),
    ("model_message", "[" * 100_000 + "]" * 100_000),
    ("model_message", '{"content":' + "[" * 5_000 + "]" * 5_000 + "}"),
    ("model_message", '{"content":"costs 5 dollars, or $5"}'),
    ("tool_call", '{"call_id":"c","name":"n","arguments":{"path":"a","deep":{"x":[1,true,false,null]}}}'),
    ("tool_call", '{"call_id":"c","name":"n"}'),
    ("tool_call", '{"call_id":"c"}'),
    ("tool_result", '{"call_id":"c","content":[1,2.5,"s"],"is_error":true}'),
    ("tool_result", '{"call_id":"c","content":null,"is_error":1}'),
    ("token_usage", '{"input_tokens":5,"model":"m"}'),
    ("not_registered", '{"content":"x"}'),
]


def test_decoding_rows_at_once_gives_exactly_what_decoding_each_gives() -> None:
    decoded = codec.decode_rows(EDGE_PAYLOADS)
    alone = [codec.decode(type_name, payload) for type_name, payload in EDGE_PAYLOADS]
    assert [_typed(e) for e in decoded] == [_typed(e) for e in alone]
    assert [type(e) for e in decoded] == [type(e) for e in alone]
    assert sum(isinstance(e, UnknownEvent) for e in decoded) >= 10  # the refusals stay refusals
    # Twice, now that every type has its plan (the first row of a type goes the long way and makes it).
    again = codec.decode_rows(EDGE_PAYLOADS)
    assert [_typed(e) for e in again] == [_typed(e) for e in alone]


def test_events_decoded_at_once_are_fresh_frozen_and_equal_to_what_was_encoded() -> None:
    events = [e for e in ALL_EVENTS if "$" not in codec.encode(e)[1]] * 3
    rows = [codec.encode(e) for e in events]
    decoded = codec.decode_rows(rows)
    assert decoded == events
    first, second = decoded[0], decoded[len(ALL_EVENTS)]
    assert first is not second and first.metadata is not second.metadata  # no default shared between events
    with pytest.raises(AttributeError):
        first.metadata = {}  # type: ignore[misc]


# Any text, lone surrogates too (json.dumps writes them as escapes, or as themselves without ensure_ascii).
texts = st.text(st.characters(blacklist_categories=()))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(content=json_values, metadata=st.dictionaries(texts, json_values, max_size=3), ascii=st.booleans())
def test_any_json_payload_decodes_at_once_as_it_does_alone(content: Any, metadata: dict[str, Any], ascii: bool) -> None:
    payload = json.dumps({"content": content, "metadata": metadata}, ensure_ascii=ascii)
    rows = [("model_message", payload)] * 2
    alone = codec.decode("model_message", payload)
    assert [_typed(e) for e in codec.decode_rows(rows)] == [_typed(alone)] * 2


def test_a_subclass_that_decodes_its_own_way_decodes_every_row_its_way() -> None:
    class Shouting(JsonCodec):
        def decode(self, type_name: str, payload: str) -> BaseEvent:
            event = super().decode(type_name, payload)
            return ModelMessage(event.content.upper()) if isinstance(event, ModelMessage) else event

    rows = [codec.encode(ModelMessage("quiet"))] * 3
    assert Shouting().decode_rows(rows) == [ModelMessage("QUIET")] * 3


def test_a_long_history_goes_straight_to_the_oldest_generation_and_frozen_objects_stay_frozen() -> None:
    import gc

    from sessionstore.codec import decode_all

    rows = [codec.encode(ModelMessage(f"m{i}", metadata={"i": i})) for i in range(5000)]
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        decoded = decode_all(codec, rows)
        young = gc.get_count()[0]
        more = [[i] for i in range(100)]  # allocations that would set off the young pass over the events
    finally:
        gc.callbacks.remove(count)
    assert young < gc.get_threshold()[0] and collections == []  # no pass over them, then or at the next allocation
    assert gc.is_tracked(decoded[0]) and gc.isenabled() and more

    frozen = [{"kept": "frozen"} for _ in range(10)]  # an application's own frozen objects
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        decode_all(codec, rows)
        assert gc.get_freeze_count() == before  # none thawed, none of ours frozen
    finally:
        gc.unfreeze()
    assert frozen


def test_decoding_never_imports_msgspec_and_decodes_alike_once_it_is_imported() -> None:
    """A storage imports it as it opens (quick_ready), off the event loop: never in the middle of a read."""
    code = (
        "import sys\n"
        "from sessionstore import JsonCodec, ModelMessage\n"
        "from sessionstore.codec import decode_all, quick_ready\n"
        "codec = JsonCodec()\n"
        "rows = [codec.encode(ModelMessage(str(i))) for i in range(5000)]\n"
        "slow = decode_all(codec, rows)\n"
        "print('msgspec' in sys.modules)\n"
        "quick_ready()\n"
        "quick = decode_all(codec, rows)\n"
        "print('msgspec' in sys.modules, slow == quick, quick[-1] == ModelMessage('4999'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "True", "True"]
