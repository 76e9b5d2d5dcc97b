"""One event of every class AG2Codec stores, with every field set, built the same way in any process.

Shared by the tests and the child processes that read back what the tests wrote:
a fresh interpreter rebuilds these and compares them, field by field, with what
it decoded. Everything that varies by default (``created_at``, ids) is fixed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID

import acp.exceptions
import ag2.exceptions
from _codec_extras_samples import extra_samples
from ag2.acp.events import ACPAvailableCommands, ACPElicitation, ACPModeChange, ACPPlan, ACPPlanEntry
from ag2.compact import CompactionSummary
from ag2.eval.events import EvalCompleted, PairwiseCompleted, VariantCompleted
from ag2.events import (
    AggregationCompleted,
    AggregationFailed,
    AggregationStarted,
    AudioInterruptedEvent,
    AudioPlaybackCompletedEvent,
    AudioPlaybackStartedEvent,
    BaseEvent,
    BinaryInput,
    BinaryResult,
    BinaryType,
    BuiltinToolCallEvent,
    BuiltinToolResultEvent,
    ClientToolCallEvent,
    CompactionCompleted,
    CompactionFailed,
    CompactionStarted,
    DataInput,
    DrainedModelRequest,
    EventLogFailed,
    Field,
    FileIdInput,
    HaltEvent,
    HumanInputRequest,
    HumanMessage,
    Input,
    MessageEnqueued,
    ModelMessage,
    ModelMessageChunk,
    ModelReasoning,
    ModelRequest,
    ModelResponse,
    ObserverAlert,
    ObserverCompleted,
    ObserverStarted,
    RecordedAudioEvent,
    Severity,
    SynthesizedAudioEvent,
    TaskCancelled,
    TaskCompleted,
    TaskExpired,
    TaskFailed,
    TaskProgress,
    TaskStarted,
    TextInput,
    ToolApprovalRequest,
    ToolCallEvent,
    ToolCallsEvent,
    ToolErrorEvent,
    ToolNotFoundEvent,
    ToolResult,
    ToolResultEvent,
    ToolResultsEvent,
    TranscriptionChunkEvent,
    TranscriptionCompletedEvent,
    UnknownEvent,
    UrlInput,
    Usage,
    UsageEvent,
)
from ag2.events.task_events import TaskEvent
from ag2.events.tool_events import ToolEvent
from ag2.events.types import ModelEvent
from ag2.files.types import FileProvider, UploadedFile
from ag2.task import TaskSpec
from pydantic import BaseModel

# -- an application's own classes, registered under its own names -----------------------------------------------


class Mood(Enum):
    CALM = "calm"
    BUSY = "busy"


class Point(BaseModel):
    x: int
    y: int
    label: str = ""
    raw: bytes = b""
    when: datetime | None = None
    mood: Mood = Mood.CALM
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reading:
    celsius: float
    taken: date
    notes: list[str] = field(default_factory=list)


class AppError(Exception):
    """An application's exception, registered so it comes back as itself."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"app failed with {code}: {detail}")
        self.code = code


class Handoff(BaseEvent):
    """An application's own event."""

    to_agent: str = Field(kw_only=False)
    mood: Mood = Mood.CALM
    reading: Reading | None = None
    steps: list[ToolCallEvent] = Field(default_factory=list)


EXTRA: dict[type, str] = {
    Mood: "tests.mood",
    Point: "tests.point",
    Reading: "tests.reading",
    AppError: "tests.app_error",
    Handoff: "tests.handoff",
}

STREAM = UUID("0b7c6f1e-2d47-4f7a-9a43-5b1de0c6a001")
NESTED: dict[Any, Any] = {
    "bytes": b"\x00\xffraw",
    "when": datetime(2026, 11, 29, 12, 30, 1, 123456, tzinfo=UTC),
    "offset": datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    "day": date(2026, 2, 28),
    "id": UUID("12345678-1234-5678-1234-567812345678"),
    "tuple": (1, "two", (3.5, None)),
    "decimal": Decimal("1.50"),
    "int_keys": {1: "one"},
    "tag_lookalike": {"$event": ["ag2.tool_call", {}]},
    "ag2_lookalike": {"__event__": "ag2.events.types.ModelMessage", "content": "only data"},
    "unicode": "héllo ✓ 漢字 🎉",
    "big": 2**70,
    "neg_zero": -0.0,
    "empty": {},
}


def _call(name: str, call_id: str, arguments: str = "{}", cls: type[ToolCallEvent] = ToolCallEvent) -> ToolCallEvent:
    return cls(name, id=call_id, arguments=arguments, vendor_metadata={"caller": {"type": "direct"}})


def _noted(error: BaseException) -> BaseException:
    error.add_note("while reading the config")
    return error


def samples() -> list[Any]:
    """Every class in AG2Codec's event table (and the registered ``Handoff``), each field away from its default."""
    call = _call("read_file", "call-1", '{"path": "/etc/hosts", "lines": [1, 10]}')
    call.source = "function:app.tools:read_file"
    second = _call("weather", "call-2", '{"city": "Zürich"}')
    point = Point(
        x=1,
        y=2,
        label="p",
        raw=b"\x01\xfe",
        when=datetime(2026, 3, 1, 8, 0, tzinfo=UTC),
        mood=Mood.BUSY,
        tags=("a", "b"),
    )
    result = ToolResult(TextInput("127.0.0.1 localhost"), DataInput(point), final=True, metadata={"lines": 2})
    ok = ToolResultEvent(parent_id="call-1", name="read_file", result=result)
    failed = ToolErrorEvent(
        parent_id="call-2",
        name="weather",
        error=ValueError("no such city", "Zürich"),
        result=ToolResult("Traceback (most recent call last):\nValueError: no such city"),
    )
    alert = ObserverAlert(source="budget", severity=Severity.WARNING, message="80% spent", data={"spent": 0.8})
    usage = Usage(
        prompt_tokens=120,
        completion_tokens=30.5,
        total_tokens=150.5,
        cache_read_input_tokens=0,
        cache_creation_input_tokens=None,
        thinking_tokens=7,
    )
    events: list[Any] = [
        Input(metadata={"source": "test"}),
        TextInput("hello ✓", metadata={"lang": "en"}),
        DataInput(point),
        DataInput(dict(NESTED)),
        DataInput(Reading(21.5, date(2026, 5, 1), ["shade"])),
        DataInput(Decimal("2.50")),
        BinaryInput(
            b"\x89PNG\r\n\x1a\n\x00\xff",
            media_type="image/png",
            kind=BinaryType.IMAGE,
            vendor_metadata={"filename": "a.png"},
        ),
        FileIdInput("file-1", filename="a.pdf"),
        UrlInput("https://example.com/doc.pdf", kind=BinaryType.DOCUMENT),
        UploadedFile("file-2", filename="b.txt", provider=FileProvider.OPENAI, bytes_count=10, purpose="assistants"),
        ModelRequest(
            [
                TextInput("What is in /etc/hosts?"),
                BinaryInput(b"RIFF\x00", media_type="audio/wav", kind=BinaryType.AUDIO),
                UrlInput("https://example.com/a.png", kind=BinaryType.IMAGE),
                FileIdInput("file-3"),
                DataInput({"n": 1}),
            ]
        ),
        DrainedModelRequest([TextInput("and later this")]),
        MessageEnqueued(),
        ModelEvent(),
        ModelResponse(
            ModelMessage("Here it is.", metadata={"refusal": None, "nested": {"k": (1, 2)}}),
            tool_calls=ToolCallsEvent([call, second]),
            usage=usage,
            response_force=True,
            files=[BinaryResult(b"\x00\x01gif", {"filename": "chart.gif"})],
            model="gpt-test",
            provider="openai",
            finish_reason="tool_calls",
            response_id="resp-1",
        ),
        ModelMessage("just text", metadata={"logprobs": [0.5, -1.25]}),
        ModelMessageChunk("chu"),
        ModelReasoning("thinking..."),
        UsageEvent(
            usage,
            kind="subtask",
            model="gpt-test",
            provider="openai",
            finish_reason="stop",
            label="researcher",
            parts=[UsageEvent(Usage(prompt_tokens=1), model="a"), UsageEvent(Usage(completion_tokens=2), model="b")],
        ),
        HumanInputRequest("Proceed?", id="ask-1", timeout=30.0, task_id="task-1"),
        ToolApprovalRequest("May read_file run?", id="ask-2", timeout=None, task_id=None, tool_call_id="call-1"),
        HumanMessage("yes", parent_id="ask-1"),
        ToolEvent(),
        call,
        _call("web_search", "builtin-1", '{"query": "sqlite wal"}', BuiltinToolCallEvent),
        ClientToolCallEvent("open_editor", id="client-1", arguments='{"file": "a.py"}'),
        ToolCallsEvent([call, second]),
        ok,
        BuiltinToolResultEvent(parent_id="builtin-1", name="web_search", result=ToolResult("3 results")),
        failed,
        ToolNotFoundEvent(
            parent_id="call-9",
            name="nope",
            error=ag2.exceptions.ToolNotFoundError("nope"),
            result=ToolResult("ag2.exceptions.ToolNotFoundError: Tool `nope` not found\n"),
        ),
        ToolResultsEvent([ok, failed]),
        TaskEvent(task_id="task-1", agent_name="researcher", objective="find it"),
        TaskStarted(
            task_id="task-1",
            agent_name="researcher",
            objective="find it",
            parent_tool_call_id="call-1",
            spec=TaskSpec("Find it", "the file", {"paths": ["/etc"]}, "search"),
            expires_at="2026-12-01T00:00:00+00:00",
        ),
        TaskProgress(task_id="task-1", agent_name="researcher", objective="find it", content="half", payload={"p": 1}),
        TaskCompleted(
            task_id="task-1",
            agent_name="researcher",
            objective="find it",
            result={"found": True, "where": ("/etc", "hosts")},
            task_stream=UUID("9f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f"),
            usage=usage,
        ),
        TaskFailed(
            task_id="task-2",
            agent_name="researcher",
            objective="read it",
            error=FileNotFoundError(2, "No such file or directory", "/nope.txt"),
        ),
        TaskExpired(task_id="task-3", agent_name="researcher", objective="slow"),
        TaskCancelled(task_id="task-4", agent_name="researcher", objective="stop", reason="the user said so"),
        alert,
        HaltEvent(reason="budget exhausted", source="budget", alerts=[alert]),
        UnknownEvent(type_name="app.events.Future", data={"kept": [1, 2]}),
        ObserverStarted(name="budget"),
        ObserverCompleted(name="budget"),
        CompactionStarted(agent="a", strategy="summarize", event_count=40),
        CompactionCompleted(
            agent="a", strategy="summarize", events_before=40, events_after=3, llm_calls=1, usage={"tokens": 10}
        ),
        CompactionFailed(agent="a", strategy="summarize", error_type="TimeoutError", error="slow model"),
        AggregationStarted(agent="a", strategy="memory", event_count=4),
        AggregationCompleted(agent="a", strategy="memory", event_count=4, llm_calls=2, usage={"tokens": 3}),
        AggregationFailed(agent="a", strategy="memory", error_type="KeyError", error="'x'"),
        EventLogFailed(agent="a", error_type="OSError", error="disk full"),
        CompactionSummary(summary="We looked at /etc/hosts together.", event_count=12),
        TranscriptionChunkEvent("hel"),
        TranscriptionCompletedEvent("hello there"),
        SynthesizedAudioEvent(b"\x00\x01\x02"),
        RecordedAudioEvent(b"\xff\xfe"),
        AudioPlaybackStartedEvent(),
        AudioPlaybackCompletedEvent(),
        AudioInterruptedEvent(),
        ACPPlan([ACPPlanEntry("read the file", "completed", "high"), ACPPlanEntry("answer", "pending")]),
        ACPModeChange("architect"),
        ACPAvailableCommands(["/help", "/compact"]),
        ACPElicitation("Which branch?", "form", url=None, fields=["branch"]),
        ACPElicitation("Sign in", "url", url="https://example.com/login"),
        # Exceptions: each kind the table knows, with what makes up its message.
        _error("key", KeyError("missing")),
        _error("unicode", UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")),
        _error("group", ExceptionGroup("two failed", [ValueError("a"), TypeError("b")])),
        _error("noted", _noted(RuntimeError("config broken"))),
        _error("resolution", ag2.exceptions.ToolResolutionError(["x"], ["y", "z"])),
        _error("acp", acp.exceptions.RequestError(-32602, "Invalid params", {"field": "path"})),
        _error("app", AppError(7, "quota")),
        Handoff("planner", mood=Mood.BUSY, reading=Reading(-3.0, date(2026, 1, 2)), steps=[second]),
    ]
    events[-2].ad_hoc = "set on the instance, kept as AG2's event_to_dict keeps it"
    events += extra_samples()  # the classes of AG2's optional extras (the test extra installs them all)
    _stamp(events)
    return events


def _error(call_id: str, error: BaseException) -> ToolErrorEvent:
    return ToolErrorEvent(parent_id=call_id, name="tool", error=error, result=ToolResult(f"failed: {error}"))


def _stamp(value: Any, counter: list[int] | None = None) -> None:
    """Give every event (nested ones too) a fixed, distinct ``created_at`` with all its float digits."""
    counter = counter if counter is not None else [0]
    if isinstance(value, BaseEvent):
        counter[0] += 1
        value.created_at = 1796056742.3029044 + counter[0] * 0.0173
        for key, item in list(vars(value).items()):
            if key[:1] != "_":
                _stamp(item, counter)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _stamp(item, counter)
    elif isinstance(value, dict):
        for item in value.values():
            _stamp(item, counter)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _stamp(getattr(value, f.name), counter)
    elif type(value).__module__.startswith("ag2.") and hasattr(type(value), "__slots__"):
        for slot in _slots(value):
            _stamp(getattr(value, slot, None), counter)


def _slots(value: Any) -> list[str]:
    return [s for klass in type(value).__mro__ for s in vars(klass).get("__slots__", ()) if s != "__weakref__"]


def differences(expected: Any, actual: Any, path: str = "event") -> list[str]:
    """Every place where ``actual`` is not exactly ``expected``: types, values, every attribute (not only ==)."""
    if type(expected) is not type(actual):
        return [f"{path}: {type(expected).__name__} became {type(actual).__name__}"]
    if isinstance(expected, BaseEvent):
        want = {k: v for k, v in vars(expected).items() if k[:1] != "_"}
        got = {k: v for k, v in vars(actual).items() if k[:1] != "_"}
        if list(want) != list(got):
            return [f"{path}: attributes {list(want)} became {list(got)}"]
        return [d for k in want for d in differences(want[k], got[k], f"{path}.{k}")]
    if isinstance(expected, BaseException):
        out = differences(expected.args, actual.args, f"{path}.args")
        out += differences(str(expected), str(actual), f"{path}.str")
        out += differences(getattr(expected, "__notes__", None), getattr(actual, "__notes__", None), f"{path}.notes")
        for attr in ("filename", "filename2"):
            out += differences(getattr(expected, attr, None), getattr(actual, attr, None), f"{path}.{attr}")
        want = {k: v for k, v in vars(expected).items() if k[:1] != "_"}
        got = {k: v for k, v in vars(actual).items() if k[:1] != "_"}
        return out + differences(want, got, f"{path}.__dict__")
    if isinstance(expected, BaseModel):
        # Every attribute as the SDK holds it, which fields it was given, and its extra fields.
        out = [] if expected == actual else [f"{path}: {expected!r} != {actual!r}"]
        if expected.model_fields_set != actual.model_fields_set:
            out.append(f"{path}: fields set {expected.model_fields_set} became {actual.model_fields_set}")
        out += differences(getattr(expected, "__pydantic_extra__", None), getattr(actual, "__pydantic_extra__", None))
        return out + differences(vars(expected), vars(actual), path)
    if hasattr(expected, "SerializeToString") and hasattr(expected, "DESCRIPTOR"):  # a protobuf message
        same = expected == actual and expected.SerializeToString() == actual.SerializeToString()
        return [] if same else [f"{path}: {expected} became {actual}"]
    if dataclasses.is_dataclass(expected) and not isinstance(expected, type):
        return [
            d
            for f in dataclasses.fields(expected)
            for d in differences(getattr(expected, f.name), getattr(actual, f.name), f"{path}.{f.name}")
        ]
    if isinstance(expected, dict):
        if list(expected) != list(actual) or [type(k) for k in expected] != [type(k) for k in actual]:
            return [f"{path}: keys {list(expected)} became {list(actual)}"]
        return [d for k in expected for d in differences(expected[k], actual[k], f"{path}[{k!r}]")]
    if isinstance(expected, (list, tuple)):
        if len(expected) != len(actual):
            return [f"{path}: length {len(expected)} became {len(actual)}"]
        return [
            d for i, (e, a) in enumerate(zip(expected, actual, strict=True)) for d in differences(e, a, f"{path}[{i}]")
        ]
    if type(expected).__module__.startswith("ag2.eval") and not dataclasses.is_dataclass(expected):
        return [
            d for slot in _slots(expected) for d in differences(*_slot_pair(expected, actual, slot), f"{path}.{slot}")
        ]
    if isinstance(expected, float):
        same = (math.isnan(expected) and math.isnan(actual)) or (
            expected == actual and math.copysign(1, expected) == math.copysign(1, actual)
        )
        return [] if same else [f"{path}: {expected!r} became {actual!r}"]
    if isinstance(expected, datetime):
        if expected != actual or expected.utcoffset() != actual.utcoffset():
            return [f"{path}: {expected!r} became {actual!r}"]
        return []
    return [] if expected == actual else [f"{path}: {expected!r} became {actual!r}"]


def _slot_pair(expected: Any, actual: Any, slot: str) -> tuple[Any, Any]:
    return getattr(expected, slot, "<unset>"), getattr(actual, slot, "<unset>")


# AG2 compares these events' values by identity (TaskFailed's exception, the eval results' classes have no __eq__),
# so no decoded copy is ever == to them; their fields are compared one by one instead.
IDENTITY_COMPARED = (TaskFailed, EvalCompleted, VariantCompleted, PairwiseCompleted)
