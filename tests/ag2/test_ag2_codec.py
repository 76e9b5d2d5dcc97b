"""AG2Codec: AG2's events stored by SQLiteStorage, read back exactly, by name, never by import.

(Named test_ag2_codec.py, not test_codec.py: pytest imports test files by their
base name, and tests/test_codec.py already has that one.)
"""

from __future__ import annotations

import enum
import json
import math
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from _codec_extras_samples import gemini_events
from _codec_samples import EXTRA, IDENTITY_COMPARED, STREAM, Handoff, Mood, Point, Reading, samples
from ag2 import Agent
from ag2.acp.mappers import history_to_session_updates
from ag2.compact import CompactionSummary
from ag2.events import (
    BaseEvent,
    BinaryInput,
    BinaryType,
    BuiltinToolCallEvent,
    ClientToolCallEvent,
    DataInput,
    Field,
    FileIdInput,
    HumanInputRequest,
    HumanMessage,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TaskFailed,
    TaskStarted,
    TextInput,
    ToolCallEvent,
    ToolCallsEvent,
    ToolErrorEvent,
    ToolResult,
    ToolResultEvent,
    ToolResultsEvent,
    TranscriptionCompletedEvent,
    UnknownEvent,
    UrlInput,
    Usage,
    UsageEvent,
)
from ag2.history import MemoryStorage
from ag2.stream import MemoryStream
from ag2.testing import TestConfig
from pydantic import BaseModel
from pydantic_core import to_json

from sessionstore import EventContext, EventEncodeError, EventTypes, JsonCodec, SQLiteStorage
from sessionstore import ModelMessage as SessionstoreModelMessage
from sessionstore import UnknownEvent as SessionstoreUnknownEvent
from sessionstore.ag2 import AG2Codec
from sessionstore.ag2.codec import StoredUnknownEvent, StoredValue
from sessionstore.ag2.tables import (
    DATACLASS_NAMES,
    ENUM_NAMES,
    EVENT_NAMES,
    EXCEPTION_NAMES,
    EXTRA_DATACLASSES,
    EXTRA_EVENTS,
    EXTRA_OBJECTS,
)

HERE = Path(__file__).resolve().parent
CHILD_TIMEOUT = 120.0
codec = AG2Codec(extra=EXTRA)


def child(*args: object, env: dict[str, str] | None = None) -> Any:
    """Run ``_codec_child.py`` in a fresh interpreter; its JSON report."""
    done = subprocess.run(
        [sys.executable, str(HERE / "_codec_child.py"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def stored_rows(db: Path, stream: UUID) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT e.type, e.payload FROM events e JOIN sessions s ON s.id = e.session "
            "WHERE s.session_id = ? ORDER BY e.position",
            (stream.hex,),
        ).fetchall()


async def store(db: Path, stream: UUID, events: list[Any], the_codec: AG2Codec = codec) -> None:
    async with SQLiteStorage(db, codec=the_codec) as storage:
        for event in events:
            await storage.save_event(event, EventContext.for_stream(stream))


# -- the table of names ---------------------------------------------------------------------------------------------

# Written out a second time on purpose: these names are in every database ever written. A test that fails
# here means a stored name was changed or removed; add rows, never edit one.
PINNED = {
    "ag2.events.input_events.Input": "ag2.input",
    "ag2.events.input_events.TextInput": "ag2.text_input",
    "ag2.events.input_events.DataInput": "ag2.data_input",
    "ag2.events.input_events.BinaryInput": "ag2.binary_input",
    "ag2.events.input_events.FileIdInput": "ag2.file_id_input",
    "ag2.events.input_events.UrlInput": "ag2.url_input",
    "ag2.events.input_events.ModelRequest": "ag2.model_request",
    "ag2.events.input_events.DrainedModelRequest": "ag2.drained_model_request",
    "ag2.events.input_events.MessageEnqueued": "ag2.message_enqueued",
    "ag2.files.types.UploadedFile": "ag2.uploaded_file",
    "ag2.events.types.ModelEvent": "ag2.model",
    "ag2.events.types.ModelResponse": "ag2.model_response",
    "ag2.events.types.ModelMessage": "ag2.model_message",
    "ag2.events.types.ModelMessageChunk": "ag2.model_message_chunk",
    "ag2.events.types.ModelReasoning": "ag2.model_reasoning",
    "ag2.events.types.UsageEvent": "ag2.usage",
    "ag2.events.types.HumanInputRequest": "ag2.human_input_request",
    "ag2.events.types.ToolApprovalRequest": "ag2.tool_approval_request",
    "ag2.events.types.HumanMessage": "ag2.human_message",
    "ag2.events.tool_events.ToolEvent": "ag2.tool",
    "ag2.events.tool_events.ToolCallEvent": "ag2.tool_call",
    "ag2.events.tool_events.BuiltinToolCallEvent": "ag2.builtin_tool_call",
    "ag2.events.tool_events.ClientToolCallEvent": "ag2.client_tool_call",
    "ag2.events.tool_events.ToolCallsEvent": "ag2.tool_calls",
    "ag2.events.tool_events.ToolResultEvent": "ag2.tool_result",
    "ag2.events.tool_events.BuiltinToolResultEvent": "ag2.builtin_tool_result",
    "ag2.events.tool_events.ToolErrorEvent": "ag2.tool_error",
    "ag2.events.tool_events.ToolNotFoundEvent": "ag2.tool_not_found",
    "ag2.events.tool_events.ToolResultsEvent": "ag2.tool_results",
    "ag2.events.task_events.TaskEvent": "ag2.task",
    "ag2.events.task_events.TaskStarted": "ag2.task_started",
    "ag2.events.task_events.TaskProgress": "ag2.task_progress",
    "ag2.events.task_events.TaskCompleted": "ag2.task_completed",
    "ag2.events.task_events.TaskFailed": "ag2.task_failed",
    "ag2.events.task_events.TaskExpired": "ag2.task_expired",
    "ag2.events.task_events.TaskCancelled": "ag2.task_cancelled",
    "ag2.events.alert.ObserverAlert": "ag2.observer_alert",
    "ag2.events.alert.HaltEvent": "ag2.halt",
    "ag2.events.lifecycle.UnknownEvent": "ag2.unknown",
    "ag2.events.lifecycle.ObserverStarted": "ag2.observer_started",
    "ag2.events.lifecycle.ObserverCompleted": "ag2.observer_completed",
    "ag2.events.lifecycle.CompactionStarted": "ag2.compaction_started",
    "ag2.events.lifecycle.CompactionCompleted": "ag2.compaction_completed",
    "ag2.events.lifecycle.CompactionFailed": "ag2.compaction_failed",
    "ag2.events.lifecycle.AggregationStarted": "ag2.aggregation_started",
    "ag2.events.lifecycle.AggregationCompleted": "ag2.aggregation_completed",
    "ag2.events.lifecycle.AggregationFailed": "ag2.aggregation_failed",
    "ag2.events.lifecycle.EventLogFailed": "ag2.event_log_failed",
    "ag2.compact.CompactionSummary": "ag2.compaction_summary",
    "ag2.events.voice.TranscriptionChunkEvent": "ag2.transcription_chunk",
    "ag2.events.voice.TranscriptionCompletedEvent": "ag2.transcription_completed",
    "ag2.events.voice.SynthesizedAudioEvent": "ag2.synthesized_audio",
    "ag2.events.voice.RecordedAudioEvent": "ag2.recorded_audio",
    "ag2.events.voice.AudioPlaybackStartedEvent": "ag2.audio_playback_started",
    "ag2.events.voice.AudioPlaybackCompletedEvent": "ag2.audio_playback_completed",
    "ag2.events.voice.AudioInterruptedEvent": "ag2.audio_interrupted",
    "ag2.acp.events.ACPPlan": "ag2.acp.plan",
    "ag2.acp.events.ACPModeChange": "ag2.acp.mode_change",
    "ag2.acp.events.ACPAvailableCommands": "ag2.acp.available_commands",
    "ag2.acp.events.ACPElicitation": "ag2.acp.elicitation",
    # values nested in events (their tags name them; same rule: never edit)
    "$dataclass ag2.events.types.Usage": "ag2.usage",
    "$dataclass ag2.events.tool_events.ToolResult": "ag2.tool_result",
    "$dataclass ag2.events.types.BinaryResult": "ag2.binary_result",
    "$dataclass ag2.task.TaskSpec": "ag2.task_spec",
    "$dataclass ag2.acp.events.ACPPlanEntry": "ag2.acp.plan_entry",
    "$enum ag2.events.input_events.BinaryType": "ag2.binary_type",
    "$enum ag2.events.alert.Severity": "ag2.severity",
    "$enum ag2.files.types.FileProvider": "ag2.file_provider",
}

PINNED_EXTRAS = {
    # AG2's optional extras, by module and class (the same rule: never edit a row)
    "ag2.openai.reasoning": "ag2.config.openai.events.OpenAIReasoningEvent",
    "ag2.openai.server_tool_call": "ag2.config.openai.events.OpenAIServerToolCallEvent",
    "ag2.openai.server_tool_result": "ag2.config.openai.events.OpenAIServerToolResultEvent",
    "ag2.openai.shell_command_chunk": "ag2.config.openai.events.OpenAIShellCommandChunk",
    "ag2.openai.shell_output_chunk": "ag2.config.openai.events.OpenAIShellOutputChunk",
    "ag2.openai.prompt_cache_diagnostics": "ag2.config.openai.events.OpenAIPromptCacheDiagnostics",
    "ag2.anthropic.redacted_thinking": "ag2.config.anthropic.events.AnthropicRedactedThinkingEvent",
    "ag2.anthropic.container_upload": "ag2.config.anthropic.events.AnthropicContainerUploadEvent",
    "ag2.anthropic.server_tool_call": "ag2.config.anthropic.events.AnthropicServerToolCallEvent",
    "ag2.anthropic.server_tool_result": "ag2.config.anthropic.events.AnthropicServerToolResultEvent",
    "ag2.anthropic.cache_diagnostics": "ag2.config.anthropic.events.AnthropicCacheDiagnostics",
    "ag2.gemini.tool_call": "ag2.config.gemini.events.GeminiToolCallEvent",
    "ag2.gemini.server_tool_call": "ag2.config.gemini.events.GeminiServerToolCallEvent",
    "ag2.gemini.server_tool_result": "ag2.config.gemini.events.GeminiServerToolResultEvent",
    "ag2.xai.assistant": "ag2.config.xai.events.XAIAssistantEvent",
    "ag2.ag_ui.event": "ag2.ag_ui.events.AGUIEvent",
    "ag2.a2a.event": "ag2.a2a.events.A2AEvent",
    "ag2.a2a.message": "ag2.a2a.events.A2AMessage",
    "ag2.a2a.task_snapshot": "ag2.a2a.events.A2ATaskSnapshot",
    "ag2.a2a.task_status_update": "ag2.a2a.events.A2ATaskStatusUpdate",
    "ag2.a2a.task_artifact_update": "ag2.a2a.events.A2ATaskArtifactUpdate",
    "ag2.a2a.text_artifact": "ag2.a2a.events.A2ATextArtifact",
    "ag2.a2a.tool_call_artifact": "ag2.a2a.events.A2AToolCallArtifact",
    "ag2.a2ui.message": "ag2.a2ui.events.A2UIMessageEvent",
    "ag2.a2ui.client": "ag2.a2ui.events.A2UIClientEvent",
    "ag2.a2ui.validation_failed": "ag2.a2ui.events.A2UIValidationFailedEvent",
    "ag2.eval.event": "ag2.eval.events.EvalEvent",
    "ag2.eval.started": "ag2.eval.events.EvalStarted",
    "ag2.eval.task_evaluated": "ag2.eval.events.TaskEvaluated",
    "ag2.eval.completed": "ag2.eval.events.EvalCompleted",
    "ag2.eval.variant_started": "ag2.eval.events.VariantStarted",
    "ag2.eval.variant_completed": "ag2.eval.events.VariantCompleted",
    "ag2.eval.pairwise_started": "ag2.eval.events.PairwiseStarted",
    "ag2.eval.pairwise_compared": "ag2.eval.events.PairwiseCompared",
    "ag2.eval.pairwise_completed": "ag2.eval.events.PairwiseCompleted",
    "$dataclass ag2.a2ui.action_response_request": "ag2.a2ui.incoming.ActionResponseRequest",
    "$dataclass ag2.a2ui.incoming_action": "ag2.a2ui.incoming.A2UIIncomingAction",
    "$dataclass ag2.a2ui.incoming_surface_error": "ag2.a2ui.incoming.A2UIIncomingSurfaceError",
    "$dataclass ag2.a2ui.incoming_function_error": "ag2.a2ui.incoming.A2UIIncomingFunctionError",
    "$dataclass ag2.a2ui.incoming_function_response": "ag2.a2ui.incoming.A2UIIncomingFunctionResponse",
    "$dataclass ag2.a2ui.incoming_action_result": "ag2.a2ui.incoming.A2UIIncomingActionResult",
    "$dataclass ag2.a2ui.incoming_error_result": "ag2.a2ui.incoming.A2UIIncomingErrorResult",
    "$dataclass ag2.a2ui.incoming_function_response_result": "ag2.a2ui.incoming.A2UIIncomingFunctionResponseResult",
    "$dataclass ag2.a2ui.incoming_unknown_result": "ag2.a2ui.incoming.A2UIIncomingUnknownResult",
    "$dataclass ag2.eval.feedback": "ag2.eval._types.Feedback",
    "$dataclass ag2.eval.task": "ag2.eval.dataset.task.Task",
    "$dataclass ag2.eval.trace_ref": "ag2.eval.sources.trace_source.TraceRef",
    "$dataclass ag2.eval.token_usage": "ag2.eval.trace.TokenUsage",
    "$dataclass ag2.eval.task_result": "ag2.eval.results.result.TaskResult",
    "$dataclass ag2.eval.score_stats": "ag2.eval.results.result.ScoreStats",
    "$dataclass ag2.eval.aggregates": "ag2.eval.results.result.Aggregates",
    "$dataclass ag2.eval.pairwise_case": "ag2.eval.pairwise.PairwiseCase",
    "$object ag2.eval.run_result": "ag2.eval.results.result.RunResult",
    "$object ag2.eval.pairwise_run_result": "ag2.eval.pairwise.PairwiseRunResult",
    "$object ag2.eval.trace": "ag2.eval.trace.Trace",
    "$object ag2.eval.suite": "ag2.eval.dataset.suite.Suite",
}


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_every_event_class_of_every_installed_ag2_module_has_a_stored_name() -> None:
    """Every AG2 module this install has is imported (the test extra installs every AG2 extra that defines
    events), not only what ``import ag2, ag2.acp`` loads: was, provider events unmapped and CI never saw them."""
    found = child("tables")
    assert found["ag2"].startswith("1.2.")
    # AG2 1.2.1 with its extras installed; proves the walk saw the classes it checks.
    assert (len(found["persistable"]), len(found["transient"])) == (59, 36)
    assert found["unloaded"] == [], "event classes in AG2 modules that could not be imported: install their extra"
    assert found["missing_persistable"] == [], "give these AG2 event classes a name in EVENT_NAMES or EXTRA_EVENTS"
    # Transient classes are saved with persist_all=True, and appear nested (ModelMessage in ModelResponse).
    assert found["missing_transient"] == [], "give these AG2 event classes a name in EVENT_NAMES or EXTRA_EVENTS"
    assert set(found["persistable"]) | set(found["transient"]) == set(found["known"])
    assert set(found["known"].values()) == set(EVENT_NAMES.values()) | set(EXTRA_EVENTS)


def test_stored_names_never_change() -> None:
    current = {_qualified(cls): name for cls, name in EVENT_NAMES.items()}
    current |= {f"$dataclass {_qualified(cls)}": name for cls, name in DATACLASS_NAMES.items()}
    current |= {f"$enum {_qualified(cls)}": name for cls, name in ENUM_NAMES.items()}
    assert current == PINNED
    extras = {name: ".".join(where) for name, where in EXTRA_EVENTS.items()}
    extras |= {f"$dataclass {name}": ".".join(where) for name, where in EXTRA_DATACLASSES.items()}
    extras |= {f"$object {name}": ".".join(where) for name, where in EXTRA_OBJECTS.items()}
    assert extras == PINNED_EXTRAS


def test_names_are_distinct_and_under_ag2() -> None:
    for table in (EVENT_NAMES, DATACLASS_NAMES, ENUM_NAMES, EXTRA_EVENTS, EXTRA_DATACLASSES, EXTRA_OBJECTS):
        names = list(table.values() if table in (EVENT_NAMES, DATACLASS_NAMES, ENUM_NAMES) else table)
        assert len(set(names)) == len(names)
        assert all(re.fullmatch(r"ag2\.[a-z0-9_.]+", name) for name in names)
    assert all(name.startswith(("ag2.", "acp.", "sessionstore.")) for name in EXCEPTION_NAMES.values())
    assert len(set(EXCEPTION_NAMES.values())) == len(EXCEPTION_NAMES)


@pytest.mark.parametrize("module", ["ag2.exceptions", "sessionstore.errors"])
def test_every_exception_class_of_ag2_and_of_sessionstore_is_in_the_table(module: str) -> None:
    defined = {
        cls
        for cls in vars(__import__(module, fromlist=["_"])).values()
        if isinstance(cls, type) and issubclass(cls, BaseException) and cls.__module__ == module
    }
    assert defined and defined <= set(EXCEPTION_NAMES)


# -- round trips ----------------------------------------------------------------------------------------------------


def test_the_samples_cover_every_class_in_the_table() -> None:
    assert set(AG2Codec().event_names()) - {Handoff} == {type(event) for event in samples()} - {Handoff}
    assert len(AG2Codec().event_names()) == len(EVENT_NAMES) + len(EXTRA_EVENTS)


async def test_a_row_of_an_extra_missing_here_is_kept_byte_for_byte_and_decodes_where_it_is_installed(
    tmp_path: Path,
) -> None:
    """A process without google-genai (AG2's gemini extra not installed) reads Gemini's events as
    StoredUnknownEvent and writes them back unchanged; a process with it decodes them."""
    db = tmp_path / "agent.db"
    events = gemini_events()
    await store(db, STREAM, events)
    before = stored_rows(db, STREAM)
    report = child("without", db, STREAM, "google.genai")
    assert report["sdk_imported"] == []
    assert [row[:2] for row in report["decoded"]] == [["StoredUnknownEvent", t] for t, _ in before]
    assert all("ag2.config.gemini.events is not imported" in row[2] for row in report["decoded"])
    assert stored_rows(db, STREAM) == before  # the rewrite (set_history) left every row as it was
    report = child("without", db, STREAM, "no_such_sdk")  # blocks nothing AG2 uses
    assert [row[0] for row in report["decoded"]] == [type(e).__name__ for e in events]


async def test_every_event_round_trips_exactly_in_a_fresh_process(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    events = samples()
    await store(db, STREAM, events)
    assert [t for t, _ in stored_rows(db, STREAM)] == [codec.encode(e)[0] for e in events]

    report = child("read", db, STREAM)  # a new interpreter: nothing cached, every class imported afresh
    assert report["count"] == report["expected"] == len(events)
    for row in report["events"]:
        assert row["same_class"], row
        assert row["differences"] == [], row  # every public attribute, created_at included, nested ones too
        assert row["equal"] in (True, None), row  # None: compared field by field only (IDENTITY_COMPARED)
        assert row["rewritten_as_stored"], row  # encoding what was read gives the stored text back
    assert {row["class"] for row in report["events"] if row["equal"] is None} == {
        cls.__name__ for cls in IDENTITY_COMPARED
    }


def test_payloads_are_json_objects_of_the_public_attributes(tmp_path: Path) -> None:
    call = ToolCallEvent("read_file", id="c1", arguments='{"path": "/etc/hosts"}')
    assert call.serialized_arguments == {"path": "/etc/hosts"}  # fills AG2's private cache
    type_name, payload = codec.encode(call)
    assert type_name == "ag2.tool_call"
    assert list(json.loads(payload)) == [k for k in vars(call) if not k.startswith("_")]
    assert "_serialized_arguments" in vars(call) and "_serialized_arguments" not in payload
    back = codec.decode(type_name, payload)
    assert isinstance(back, ToolCallEvent)
    assert vars(back)["_serialized_arguments"] is None  # a cache, rebuilt on demand
    assert back.serialized_arguments == {"path": "/etc/hosts"}


async def test_the_sqlite_shell_reads_payloads_with_json_extract(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    response = ModelResponse(ModelMessage("hi"), tool_calls=ToolCallsEvent([ToolCallEvent("ls", id="c1")]))
    await store(db, STREAM, [response])
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT type, json_extract(payload, '$.message.\"$event\"[1].content'),"
            ' json_extract(payload, \'$.tool_calls."$event"[1].calls[0]."$event"[1].name\') FROM events'
        ).fetchone()
    assert row == ("ag2.model_response", "hi", "ls")


def test_private_caches_start_afresh_and_recompute_the_same() -> None:
    failed = TaskFailed(task_id="t", agent_name="a", objective="o", error=KeyError("k"))
    text = failed.content  # fills TaskFailed._content
    back = codec.decode(*codec.encode(failed))
    assert isinstance(back, TaskFailed)
    assert vars(back)["_content"] == ""
    assert back.content == text


def test_nan_infinities_and_lone_surrogates_round_trip() -> None:
    event = ModelMessage("bad \ud800 text", metadata={"nan": math.nan, "inf": math.inf, "ninf": -math.inf})
    type_name, payload = codec.encode(event)
    payload.encode("utf-8")  # storable as UTF-8 text
    assert "NaN" not in payload and "Infinity" not in payload
    back = codec.decode(type_name, payload)
    assert isinstance(back, ModelMessage)
    assert back.content == "bad \ud800 text"
    assert math.isnan(back.metadata["nan"]) and back.metadata["inf"] == math.inf and back.metadata["ninf"] == -math.inf


def test_a_field_added_or_removed_by_another_ag2_version_is_handled() -> None:
    stored = json.loads(codec.encode(ModelResponse(ModelMessage("hi"), response_id="r1"))[1])
    del stored["response_force"], stored["files"]  # written before AG2 had these fields
    stored["retired_field"] = [1, 2]  # a field a later AG2 dropped
    payload = json.dumps(stored)
    back = codec.decode("ag2.model_response", payload)
    assert isinstance(back, ModelResponse)
    assert (back.response_force, back.files, back.response_id) == (False, [], "r1")  # AG2's defaults
    assert vars(back)["retired_field"] == [1, 2]  # kept, as AG2's event_to_dict would keep it
    assert json.loads(codec.encode(back)[1])["retired_field"] == [1, 2]


# -- exceptions -----------------------------------------------------------------------------------------------------


class LocalPermissionError(PermissionError):
    """Not in any table: stored as its nearest ancestor there."""


def test_an_exception_of_a_class_not_in_the_table_comes_back_as_its_nearest_known_ancestor() -> None:
    error = LocalPermissionError(13, "Permission denied", "/root/x")
    error.detail = "not stored: it belongs to the class that is not in the table"
    event = ToolErrorEvent(parent_id="c1", name="write", error=error, result=ToolResult("denied"))
    type_name, payload = codec.encode(event)
    back = codec.decode(type_name, payload)
    assert isinstance(back, ToolErrorEvent)
    assert type(back.error) is PermissionError
    assert str(back.error) == str(error) == "[Errno 13] Permission denied: '/root/x'"
    assert vars(back.error)["_sessionstore_raised_as"] == _qualified(LocalPermissionError)
    assert not hasattr(back.error, "detail")
    assert codec.encode(back) == (type_name, payload)  # the original class name survives a rewrite
    assert codec.describe(back)[:2] == ("tool", "LocalPermissionError: [Errno 13] Permission denied: '/root/x'")


class BrokenStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def test_exception_arguments_that_cannot_be_stored_leave_the_message() -> None:
    error = RuntimeError("lock held by", object())
    back = codec.decode(*codec.encode(TaskFailed(task_id="t", agent_name="a", objective="o", error=error)))
    assert isinstance(back, TaskFailed)
    assert type(back.error) is RuntimeError
    assert back.error.args == (str(error),)

    looped = ValueError("holds itself")
    looped.args = (looped,)
    back = codec.decode(*codec.encode(TaskFailed(task_id="t", agent_name="a", objective="o", error=looped)))
    assert isinstance(back, TaskFailed) and type(back.error) is ValueError

    broken = ToolErrorEvent(parent_id="c", name="t", error=BrokenStr(object()), result=ToolResult("tb"))
    back = codec.decode(*codec.encode(broken))
    assert isinstance(back, ToolErrorEvent) and type(back.error) is Exception
    assert codec.describe(broken)[0] == "tool"


# -- unknown and undecodable rows -----------------------------------------------------------------------------------


def test_an_unknown_type_name_keeps_its_text_and_is_written_back_unchanged() -> None:
    raw = '{"created_at": 1700000000.5, "new_field": [1, 2], "x": {"$event": ["ag2.v9_thing", {}]}}'
    event = codec.decode("ag2.from_version_9", raw)
    assert isinstance(event, StoredUnknownEvent) and isinstance(event, UnknownEvent)
    assert (event.type_name, event.payload) == ("ag2.from_version_9", raw)
    assert event.data["new_field"] == [1, 2] and event.created_at == 1700000000.5
    assert "not known" in event.reason
    assert codec.encode(event) == ("ag2.from_version_9", raw)


@pytest.mark.parametrize(
    "payload",
    [
        "not json",
        "",
        "[1, 2]",
        '{"content": "x", "to_dict": 1}',  # names something the class defines: never set on an instance
        '{"content": "x", "__class__": "x"}',
        '{"content": {"$event": ["ag2.no_such_event", {}]}}',
        '{"content": {"$dataclass": ["ag2.no_such", {}]}}',
        '{"content": {"$dataclass": ["ag2.usage", {"not_a_field": 1}]}}',
        '{"content": {"$enum": ["ag2.binary_type", "hologram"]}}',
        '{"content": {"$enum": ["ag2.binary_type"]}}',
        '{"content": {"$pydantic": ["tests.point", {"x": "not a number"}]}}',
        '{"content": {"$exception": ["NoSuchError", {"args": []}]}}',
        '{"content": {"$exception": ["ValueError", {"args": "not a list"}]}}',
        '{"content": {"$exception": ["ValueError", {"args": [], "attrs": {"_private": 1}}]}}',
        '{"content": {"$decimal": 1.5}}',
        '{"content": {"$bytes": "!!!"}}',
        '{"content": "x"} trailing',
        "[" * 100_000 + "]" * 100_000,
    ],
)
def test_undecodable_payloads_become_unknown_events_holding_the_text(payload: str) -> None:
    event = codec.decode("ag2.model_message", payload)
    assert isinstance(event, StoredUnknownEvent)
    assert (event.type_name, event.payload) == ("ag2.model_message", payload)
    assert event.reason
    assert codec.encode(event) == ("ag2.model_message", payload)


async def test_unknown_rows_are_stored_back_byte_for_byte(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    raw = '{ "spacing" : "kept",\n"n": 1e3, "u": "\\u00e9" }'
    unknown = codec.decode("app.from_the_future", raw)
    await store(db, STREAM, [unknown])
    async with SQLiteStorage(db, codec=AG2Codec()) as storage:
        (again,) = await storage.get_history(STREAM)
        await storage.set_history(STREAM, [again, ModelMessage("after")])
    assert stored_rows(db, STREAM)[0] == ("app.from_the_future", raw)


async def test_ag2_passes_over_unknown_events_in_replay_and_in_a_turn(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    stream = uuid4()
    request = ModelRequest([TextInput("hello")])
    reply = ModelResponse(ModelMessage("hi there"))
    unknown = codec.decode("app.from_the_future", '{"text": "a newer kind of event"}')
    await store(db, stream, [request, unknown, reply])

    async with SQLiteStorage(db, codec=AG2Codec()) as storage:
        history = list(await storage.get_history(stream))
        assert isinstance(history[1], StoredUnknownEvent)
        # What ACP's session/load sends: the unknown row adds nothing and breaks nothing.
        replayed = history_to_session_updates(history, session_id="s")
        assert replayed == history_to_session_updates([history[0], history[2]], session_id="s")
        assert len(replayed) == 2

        # A real turn on that history: AG2 reads it, calls the model, and appends after it.
        agent = Agent("a", config=TestConfig("fine, thanks"))
        answer = await agent.ask("how are you?", stream=MemoryStream(storage, id=stream))
        assert answer.body == "fine, thanks"
    rows = stored_rows(db, stream)
    assert rows[1] == ("app.from_the_future", '{"text": "a newer kind of event"}')
    assert [t for t, _ in rows[3:]] == ["ag2.model_request", "ag2.model_response"]


# -- stored data never chooses what is imported or constructed --------------------------------------------------------

CANARY = """
import os, pathlib
from dataclasses import dataclass
from enum import Enum

pathlib.Path(os.environ["CANARY_MARKER"]).write_text("imported")

@dataclass
class Boom:
    def __post_init__(self):
        pathlib.Path(os.environ["CANARY_MARKER"]).write_text("constructed")

class Color(Enum):
    RED = "red"

class BoomError(Exception):
    pass
"""

HOSTILE = [
    ("ss_canary.Boom", "{}"),
    ("ss_canary.events.BoomEvent", '{"created_at": 1.0}'),
    ("ag2.events.types.ModelResponse", "{}"),  # AG2's own qualified names are not type names here
    ("subprocess.Popen", '{"args": ["touch", "/tmp/ss_canary_popen"]}'),
    ("ag2.model_request", '{"parts": [{"__event__": "ss_canary.Boom", "x": 1}]}'),
    ("ag2.model_request", '{"parts": [{"__dataclass__": "ss_canary.Boom", "data": {}}]}'),
    ("ag2.model_request", '{"parts": [{"__pydantic__": "ss_canary.Boom", "data": {}}]}'),
    ("ag2.model_request", '{"parts": [{"__enum__": "ss_canary.Color", "value": "red"}]}'),
    ("ag2.model_request", '{"parts": [{"__exception__": "ss_canary.BoomError", "message": "x"}]}'),
    ("ag2.model_request", '{"parts": [{"$event": ["ss_canary.Boom", {}]}]}'),
    ("ag2.model_request", '{"parts": [{"$dataclass": ["ss_canary.Boom", {}]}]}'),
    ("ag2.model_request", '{"parts": [{"$pydantic": ["ss_canary.Boom", {}]}]}'),
    ("ag2.model_request", '{"parts": [{"$enum": ["ss_canary.Color", "red"]}]}'),
    ("ag2.model_request", '{"parts": [{"$exception": ["ss_canary.BoomError", {"args": []}]}]}'),
    ("ag2.tool_error", '{"error": {"$exception": ["ValueError", {"args": [], "raised_as": "ss_canary.BoomError"}]}}'),
    ("ag2.model_request", '{"parts": [{"$object": ["ss_canary.Boom", {}]}]}'),
    ("ag2.model_request", '{"parts": [{"$stored_value": ["ss_canary.Boom", {}]}]}'),
    ("ag2.model_request", '{"parts": [{"$path": ["ss_canary.Boom", "/"]}]}'),
    ("ag2.openai.reasoning", '{"content": "", "item": {"$arm": ["Boom", {"id": "x"}]}}'),
    ("ag2.a2a.message", '{"message": {"$bytes": ""}}'),  # an extra's module the process has not imported
]
# Only text: a stand-in's class name is never imported.
NAMED_ONLY = {'{"parts": [{"$stored_value": ["ss_canary.Boom", {}]}]}'}


def _canary(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    folder = tmp_path / "canary"
    folder.mkdir()
    (folder / "ss_canary.py").write_text(textwrap.dedent(CANARY))
    marker = tmp_path / "canary-ran"
    return marker, {**os.environ, "CANARY_MARKER": str(marker)}


async def test_stored_names_and_tags_never_import_or_construct_anything(tmp_path: Path) -> None:
    marker, env = _canary(tmp_path)
    db = tmp_path / "agent.db"
    # Planted through the public API: an unknown row is written exactly as given.
    await store(db, STREAM, [StoredUnknownEvent(type_name=t, payload=p) for t, p in HOSTILE])
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps(HOSTILE))

    report = child("canary", db, STREAM, tmp_path / "canary", pairs, env=env)
    assert report["imported"] == [] and report["ran"] is False
    assert report["a2a_imported"] is False
    assert not marker.exists() and not Path("/tmp/ss_canary_popen").exists()
    decoded = report["decoded"]
    assert len(decoded) == 2 * len(HOSTILE)
    for (type_name, payload), (kind, stored_type, reason) in zip(HOSTILE * 2, decoded, strict=True):
        if type_name == "ag2.model_request" and ('"$' not in payload or payload in NAMED_ONLY):
            assert kind == "ModelRequest"  # AG2's markers are only data here: dicts in a list
        elif type_name == "ag2.tool_error":
            assert kind == "ToolErrorEvent"  # raised_as is only text
        else:
            assert (kind, stored_type) == ("StoredUnknownEvent", type_name) and reason


def test_the_canary_would_fire_under_ag2s_own_decoding(tmp_path: Path) -> None:
    """Shows the canary test above can fail: AG2's deserialize_value imports and constructs it."""
    marker, env = _canary(tmp_path)
    report = child("control", tmp_path / "canary", env=env)
    assert report == {"imported": ["ss_canary"], "ran": True, "value": "Boom"}
    assert marker.read_text() == "constructed"


# -- mutable events ---------------------------------------------------------------------------------------------------


def test_changing_an_event_after_encoding_it_changes_nothing_encoded() -> None:
    call = ToolCallEvent("ls", id="c1", arguments='{"path": "/"}', vendor_metadata={"k": [1]})
    response = ModelResponse(ModelMessage("x", metadata={"m": {"n": 1}}), tool_calls=ToolCallsEvent([call]))
    before = codec.encode(response)
    call.name = "rm"
    call.vendor_metadata["k"].append(2)
    response.message.metadata["m"]["n"] = 2  # type: ignore[union-attr]
    response.tool_calls.calls.append(ToolCallEvent("extra", id="c2"))
    back = codec.decode(*before)
    assert isinstance(back, ModelResponse)
    assert [(c.name, c.vendor_metadata) for c in back.tool_calls.calls] == [("ls", {"k": [1]})]
    assert back.message is not None and back.message.metadata == {"m": {"n": 1}}
    assert codec.encode(response) != before


def test_every_decode_builds_new_objects() -> None:
    text = codec.encode(ModelRequest([TextInput("a", metadata={"tags": ["x"]})]))
    first, second = codec.decode(*text), codec.decode(*text)
    assert isinstance(first, ModelRequest) and isinstance(second, ModelRequest)
    first.parts[0].metadata["tags"].append("y")
    first.parts.append(TextInput("b"))
    assert second == codec.decode(*text) and len(second.parts) == 1
    assert second.parts[0].metadata == {"tags": ["x"]}


def test_the_codec_says_its_events_are_mutable() -> None:
    assert AG2Codec.frozen_events is False and codec.frozen_events is False


# -- registration -----------------------------------------------------------------------------------------------------


class Audit(BaseEvent):
    who: str
    mood: Mood = Mood.CALM


class WithSet(BaseEvent):
    tags: set[str] = Field(default_factory=set)


class WithPath(BaseEvent):
    where: Path | None = None


class WithLooseEnum(BaseEvent):
    color: LooseColor | None = None


class LooseColor(enum.Enum):
    RED = "red"


@dataclass
class LooseDataclass:
    x: int = 0


class LooseModel(BaseModel):
    x: int = 0


class WithLooseDataclass(BaseEvent):
    value: LooseDataclass | None = None


class WithLooseModel(BaseEvent):
    values: list[LooseModel] = Field(default_factory=list)


class WithLooseEvent(BaseEvent):
    inner: Audit | None = None


class HiddenField(TextInput):
    @property  # type: ignore[misc]
    def content(self) -> str:
        return "always this"


class NoFields(BaseEvent):
    x: int = 0


del NoFields._event_fields_  # type: ignore[attr-defined]


class SetEnum(enum.Enum):
    A = frozenset({1})


class NotAnything:
    pass


@pytest.mark.parametrize(
    "cls, name, match",
    [
        (NotAnything, "app.x", r"NotAnything: AG2Codec stores AG2 event classes"),
        ("Audit", "app.x", r"'Audit': not a class"),
        (StoredUnknownEvent, "app.x", r"undecoded rows are written back"),
        (Audit, "", r"a name must be a non-empty string"),
        (Audit, " app.audit", r"a name must be a non-empty string"),
        (Audit, "ag2.tool_call", r"that name is ag2\.events\.tool_events\.ToolCallEvent's"),
        (Audit, "ValueError", r"that name is builtins\.ValueError's"),
        (Audit, "ag2.audit", r"names under ag2\., acp\. and sessionstore\. are kept"),
        (Audit, "acp.audit", r"names under ag2\., acp\. and sessionstore\. are kept"),
        (Audit, "sessionstore.audit", r"names under ag2\., acp\. and sessionstore\. are kept"),
        (ToolCallEvent, "app.call", r"ToolCallEvent as 'app\.call': it is already stored as 'ag2\.tool_call'"),
        (Mood, "app.mood", r"Mood as 'app\.mood': it is already stored as 'tests\.mood'"),
        (WithSet, "app.w", r"WithSet: its field 'tags' is annotated set\[str\]; a set cannot be stored"),
        (WithPath, "app.w", r"WithPath: its field 'where' is annotated .*Path.*; a \w*Path cannot be stored"),
        (WithLooseEnum, "app.w", r"WithLooseEnum: its field 'color' .*LooseColor is not registered"),
        (WithLooseDataclass, "app.w", r"'value' .*LooseDataclass is not registered"),
        (WithLooseModel, "app.w", r"'values' .*LooseModel is not registered"),
        (WithLooseEvent, "app.w", r"'inner' .*Audit is not registered"),
        (HiddenField, "app.w", r"HiddenField: its field 'content' is hidden by <property"),
        (NoFields, "app.w", r"NoFields: .*NoFields has no AG2 event fields"),
        (SetEnum, "app.e", r"SetEnum: cannot store a frozenset at SetEnum\.A"),
    ],
)
def test_a_class_that_cannot_be_stored_is_refused_when_registered(cls: Any, name: str, match: str) -> None:
    fresh = AG2Codec(extra=EXTRA)
    with pytest.raises(ValueError, match=match):
        fresh.register(cls, name)
    if cls not in EXTRA:  # the same refusal from the constructor
        with pytest.raises(ValueError, match=match):
            AG2Codec(extra={**EXTRA, cls: name})


def test_one_name_names_one_class() -> None:
    fresh = AG2Codec(extra={Mood: "tests.mood"})
    fresh.register(Audit, "app.audit")
    fresh.register(Audit, "app.audit")  # the same registration again is fine
    with pytest.raises(ValueError, match=r"that name is tests?.*Audit's"):
        fresh.register(Handoff, "app.audit")
    with pytest.raises(ValueError, match=r"already stored as 'app\.audit'"):
        fresh.register(Audit, "app.audit2")
    with pytest.raises(ValueError, match=r"'app\.same': that name is .*Point's"):
        AG2Codec(extra={Point: "app.same", Reading: "app.same"})


def test_a_refused_registration_adds_nothing() -> None:
    fresh = AG2Codec()
    with pytest.raises(ValueError):
        fresh.register(WithLooseEnum, "app.w")
    with pytest.raises(EventEncodeError):
        fresh.encode(WithLooseEnum())
    fresh.register(LooseColor, "app.color")
    fresh.register(WithLooseEnum, "app.w")  # now its field's type is known
    back = fresh.decode(*fresh.encode(WithLooseEnum(color=LooseColor.RED)))
    assert isinstance(back, WithLooseEnum) and back.color is LooseColor.RED


def test_an_application_event_registered_later_is_stored_under_its_own_name() -> None:
    plain = AG2Codec()
    event = Audit(who="ops")
    with pytest.raises(EventEncodeError, match=r"Audit is not an AG2 event class this codec knows.*register"):
        plain.encode(event)
    stored_before = AG2Codec(extra={Mood: "tests.mood", Audit: "app.audit"}).encode(event)
    assert isinstance(plain.decode(*stored_before), StoredUnknownEvent)  # unknown until registered
    plain.register(Mood, "tests.mood")
    plain.register(Audit, "app.audit")
    type_name, payload = plain.encode(event)
    assert (type_name, payload) == stored_before
    assert type_name == "app.audit" and "Audit" not in payload and __name__ not in payload
    back = plain.decode(type_name, payload)
    assert isinstance(back, Audit) and back == event and back.created_at == event.created_at


class UnregisteredModel(BaseModel):
    x: int = 1


@dataclass
class UnregisteredDataclass:
    x: int = 1


def test_a_value_the_codec_cannot_rebuild_is_stored_as_what_the_model_saw() -> None:
    """Was: a tool returning its own pydantic model or dataclass failed the turn (EventEncodeError), where AG2's
    MemoryStorage holds it. Now it comes back as a StoredValue holding the JSON AG2 gave the model for it."""
    weather = UnregisteredModel(x=7)
    back = codec.decode(*codec.encode(ModelRequest([DataInput(weather)])))
    stand_in = back.parts[0].data
    assert isinstance(stand_in, StoredValue)
    assert stand_in.type_name == f"{__name__}.UnregisteredModel"
    assert to_json(stand_in) == to_json(weather) == b'{"x":7}'  # what AG2's serializer hands the model
    spec = codec.decode(
        *codec.encode(TaskStarted(task_id="t", agent_name="a", objective="o", spec=UnregisteredDataclass()))
    )
    assert isinstance(spec.spec, StoredValue) and spec.spec.root == {"x": 1}
    # Written back as read: a set_history of what was read leaves the row as it was.
    row = codec.encode(back)
    assert codec.encode(codec.decode(*row)) == row
    # Sets round-trip as sets (sorted in the text, so the same set is always the same row).
    tagged = codec.decode(*codec.encode(ModelMessage("x", metadata={"tags": {"b", "a"}, "frozen": frozenset({3})})))
    assert tagged.metadata == {"tags": {"a", "b"}, "frozen": frozenset({3})}
    # An application's event class must be registered (it needs a stored name); anything else is refused as before.
    with pytest.raises(EventEncodeError, match=r"Audit is not an AG2 event class this codec knows.*register"):
        AG2Codec().encode(Audit(who="ops"))
    with pytest.raises(EventEncodeError, match=r"not an AG2 event: sessionstore\.events\.ModelMessage"):
        codec.encode(SessionstoreModelMessage("x"))
    with pytest.raises(EventEncodeError, match=r"not an AG2 event"):
        codec.encode("text")
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(EventEncodeError, match=r"nested too deeply"):
        codec.encode(ModelMessage("x", metadata={"loop": looped}))
    # Was refused (EventEncodeError): an int of more digits than Python writes in decimal, and a bytearray (was
    # bytes), come back as they were; AG2's MemoryStorage holds both, and AG2 sends each to a model its own way.
    huge = codec.decode(*codec.encode(ModelMessage("x", metadata={"n": -(10**5000), "b": bytearray(b"\x00a")})))
    assert huge.metadata == {"n": -(10**5000), "b": bytearray(b"\x00a")} and type(huge.metadata["b"]) is bytearray


def test_json_codec_refuses_a_class_it_cannot_build_when_it_is_registered() -> None:
    """Was: registered fine, then JsonCodec.decode raised a bare TypeError on its first row."""

    class NotAnEvent:
        pass

    @dataclass(frozen=True)
    class NotOurs:  # a dataclass, but not a sessionstore event: encode refused it, decode built it
        x: int = 0

    types = EventTypes()
    for cls in (NotAnEvent, NotOurs, ModelMessage):
        with pytest.raises(ValueError, match=r"event types subclass sessionstore\.BaseEvent"):
            types.register(cls, "bad")  # type: ignore[arg-type]
    assert types.names() == []
    assert isinstance(JsonCodec(types).decode("bad", "{}"), SessionstoreUnknownEvent)


# -- describe ---------------------------------------------------------------------------------------------------------


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def boom(n: int) -> str:
    """Always fails."""
    raise ValueError(f"bad {n}")


def chart() -> Point:
    """A structured result."""
    return Point(x=3, y=4)


async def test_a_real_agent_turn_is_stored_and_each_call_and_result_is_told_once(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    stream = uuid4()
    script = TestConfig(
        ToolCallEvent("weather", arguments='{"city": "Paris"}'),
        [ToolCallEvent("boom", arguments='{"n": 3}'), ToolCallEvent("nope")],
        ToolCallEvent("chart"),
        "It is sunny in Paris.",
        raise_tool_errors=False,
    )
    async with SQLiteStorage(db, codec=codec) as storage:
        agent = Agent("a", config=script, tools=[weather, boom, chart])
        answer = await agent.ask("Weather in Paris?", stream=MemoryStream(storage, id=stream))
        assert answer.body == "It is sunny in Paris."

    async with SQLiteStorage(db, codec=codec) as storage:  # read back from the file, not from a cache
        history = list(await storage.get_history(stream))
    told = [(role, text) for role, text, _ in map(codec.describe, history) if role is not None]
    assert told[:3] == [
        ("user", "Weather in Paris?"),
        ("tool_call", 'weather(city="Paris")'),
        ("tool", "sunny in Paris"),
    ]
    # The two calls of one response run concurrently: AG2 publishes their calls, then their results, in either order
    # (CI saw both orders); the store keeps the order they were published in.
    assert sorted(told[3:5]) == [("tool_call", "boom(n=3)"), ("tool_call", "nope()")]
    assert sorted(told[5:7]) == [("tool", "ToolNotFoundError: Tool `nope` not found"), ("tool", "ValueError: bad 3")]
    assert told[7:] == [
        ("tool_call", "chart()"),
        ("tool", '{"x":3,"y":4,"label":"","raw":"","when":null,"mood":"calm","tags":[]}'),
        ("assistant", "It is sunny in Paris."),
    ]
    # What AG2 stored besides: the same calls and results again, with no role.
    silent = [type(e).__name__ for e in history if codec.describe(e)[:2] == (None, None)]
    assert sorted(set(silent)) == ["ModelResponse", "ToolCallsEvent", "ToolResultsEvent"]
    assert silent.count("ToolCallsEvent") == silent.count("ToolResultsEvent") == 3


@pytest.mark.parametrize(
    "event, told",
    [
        (
            ModelRequest(
                [
                    TextInput("look at"),
                    BinaryInput(b"\x89PNG", media_type="image/png", kind=BinaryType.IMAGE),
                    UrlInput("https://example.com/a.pdf", kind=BinaryType.DOCUMENT),
                    FileIdInput("file-1", filename="notes.txt"),
                    DataInput({"k": [1, "é"]}),
                ]
            ),
            ("user", 'look at\n[image]\n[document] https://example.com/a.pdf\n[file] notes.txt\n{"k": [1, "é"]}'),
        ),
        (ModelResponse(ModelMessage("hello")), ("assistant", "hello")),
        (ModelResponse(tool_calls=ToolCallsEvent([ToolCallEvent("ls")])), (None, None)),
        (ModelResponse(ModelMessage("")), (None, None)),
        (ToolCallEvent("grep", arguments='{"pattern": "a\\"b", "n": 2}'), ("tool_call", 'grep(pattern="a\\"b", n=2)')),
        (ToolCallEvent("odd", arguments="not json"), ("tool_call", "odd(not json)")),
        (BuiltinToolCallEvent("web_search", arguments='{"q": "x"}'), ("tool_call", 'web_search(q="x")')),
        (ClientToolCallEvent("open"), (None, None)),
        (ToolCallsEvent([ToolCallEvent("ls")]), (None, None)),
        (ToolResultEvent(parent_id="c", name="t", result=ToolResult("a", "b")), ("tool", "a\nb")),
        (ToolResultsEvent([ToolResultEvent(parent_id="c", name="t", result=ToolResult("a"))]), (None, None)),
        (
            ToolErrorEvent(parent_id="c", name="t", error=KeyError("k"), result=ToolResult("tb")),
            ("tool", "KeyError: 'k'"),
        ),
        (
            ToolErrorEvent(parent_id="c", name="t", error=TimeoutError(), result=ToolResult("tb")),
            ("tool", "TimeoutError"),
        ),
        (HumanMessage("yes please"), ("user", "yes please")),
        (HumanInputRequest("Proceed?"), ("assistant", "Proceed?")),
        (CompactionSummary(summary="so far", event_count=3), ("system", "so far")),
        (UsageEvent(Usage(prompt_tokens=1)), (None, None)),
        (TaskStarted(task_id="t", agent_name="a", objective="o"), (None, None)),
        (TranscriptionCompletedEvent("hello"), (None, None)),  # followed by a ModelRequest with the same words
        (ModelMessage("nested only"), (None, None)),
        (StoredUnknownEvent(type_name="x", payload="{}"), (None, None)),
        (Handoff("planner"), (None, None)),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseEvent) else None,
)
def test_describe_gives_each_event_its_role_and_text(event: Any, told: tuple[str | None, str | None]) -> None:
    assert codec.describe(event)[:2] == told


def test_describe_roles_are_the_transcript_roles() -> None:
    from sessionstore.codec import ROLES

    roles = {codec.describe(event)[0] for event in samples()}
    assert roles - {None} == set(ROLES)


# -- cost -----------------------------------------------------------------------------------------------------------


def test_class_layouts_are_worked_out_once_per_class(monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = AG2Codec()
    response = ModelResponse(ModelMessage("x"), tool_calls=ToolCallsEvent([ToolCallEvent("a"), ToolCallEvent("b")]))
    fresh.encode(response)
    looked_up: list[type] = []
    original = fresh._encoder_for
    monkeypatch.setattr(fresh, "_encoder_for", lambda cls: looked_up.append(cls) or original(cls))
    for _ in range(3):
        fresh.decode(*fresh.encode(response))
    assert looked_up == []


def test_a_text_kept_as_a_path_reads_back_the_same_in_sqlite_and_in_python() -> None:
    # The row stores where a message's text is instead of a second copy: SQLite's json_extract (the views,
    # the index) and records.text_at (the command line) must both find exactly the text describe gave.
    from sessionstore.reads import text_at

    codec = AG2Codec(extra=EXTRA)
    found = 0
    with sqlite3.connect(":memory:") as conn:
        for event in [*samples(), ModelRequest(parts=[TextInput(content="zürich ✓ \U0001f389")])]:
            _, payload = codec.encode(event)
            _role, text, path = codec.describe(event)
            if path is None:
                continue
            found += 1
            assert conn.execute("SELECT json_extract(?, ?)", (payload, path)).fetchone() == (text,), event
            assert text_at(payload, path) == text
    assert found >= 4  # requests, responses, results, human messages at least


async def test_persist_all_keeps_every_event_as_ag2s_memory_storage_does(tmp_path: Path) -> None:
    """Was: ``MemoryStream(SQLiteStorage(...), persist_all=True)`` failed at once with a pydantic SchemaError (AG2
    fills a subscriber's ``context`` by its annotation). Now the file holds what AG2's MemoryStorage holds,
    transient events included, and reads them back in a fresh storage."""

    def script() -> TestConfig:
        return TestConfig(ToolCallEvent("weather", arguments='{"city": "Paris"}'), "It is sunny in Paris.")

    memory = MemoryStorage()
    stream = uuid4()
    await Agent("a", config=script(), tools=[weather]).ask("Weather?", stream=MemoryStream(memory, persist_all=True))
    expected = [type(e).__name__ for history in memory._MemoryStorage__data.values() for e in history]
    assert {"ModelMessage", "ToolResultEvent"} <= set(expected)
    assert any(getattr(cls, "__transient__", False) for cls in AG2Codec().event_names() if cls.__name__ in expected)

    db = tmp_path / "agent.db"
    async with SQLiteStorage(db, codec=AG2Codec()) as storage:
        answer = await Agent("a", config=script(), tools=[weather]).ask(
            "Weather?", stream=MemoryStream(storage, id=stream, persist_all=True)
        )
        assert answer.body == "It is sunny in Paris."
    async with SQLiteStorage(db, codec=AG2Codec()) as storage:
        history = list(await storage.get_history(stream))
    assert [type(e).__name__ for e in history] == expected


def test_any_tool_return_value_reaches_the_model_as_the_same_text_after_a_restart(tmp_path: Path) -> None:
    """A tool may return the application's own pydantic model or dataclass, a dict, list, str, number, None or
    bytes (was: the first two failed the turn with EventEncodeError; a bytearray came back as bytes, which AG2
    sends unquoted; an int of over 4300 digits, bare or in a model, could not be stored, and the model was told
    so instead). A second process (a restart) sends OpenAI's real client the same conversation, byte for byte,
    that the first process sent."""
    db, recording, stream = tmp_path / "agent.db", tmp_path / "requests.jsonl", str(uuid4())
    for mode in ("first", "again"):
        done = subprocess.run(
            [sys.executable, str(HERE / "_tool_values_child.py"), str(db), stream, str(recording), mode],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT,
            cwd=HERE,
        )
        assert done.returncode == 0, done.stderr
    _asked, with_results, after_restart = (json.loads(line) for line in recording.read_text().splitlines())
    told = [m["content"] for m in with_results["messages"] if m["role"] == "tool"]
    assert told == [
        '{"city":"Paris","celsius":21.5,"sunny":true}',
        '{"station":"ORY","values":[3,1,4]}',
        '{"city":"Zürich","nested":{"ok":true,"n":null}}',
        '[1,"two",3.0,null]',
        "plain text",
        "42",
        "0.1",
        "null",
        "raw bytes",
        '"raw bytearray"',
        "1" + "0" * 5000,
        '{"n":5000,"value":-1' + "0" * 5000 + "}",
    ]
    assert after_restart["messages"][: len(with_results["messages"])] == with_results["messages"]
    assert [m["role"] for m in after_restart["messages"][len(with_results["messages"]) :]] == ["assistant", "user"]
