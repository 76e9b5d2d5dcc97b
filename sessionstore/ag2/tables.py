"""The closed tables: every class AG2Codec stores, under the stable name its rows carry.

A name is stored data: once written it must keep naming the same class, whatever AG2 renames or moves. Add rows;
never edit one (``tests/ag2/test_ag2_codec.py`` pins them all).

AG2's core classes are imported here, as every install of the ``ag2`` extra has them. Classes of AG2's optional
extras (a provider's client, A2A, AG-UI, A2UI, eval) are named by module and class in the ``EXTRA_*`` tables, and
known to a codec once their module is imported (:func:`loaded_extras`): importing ``ag2`` imports the clients of
the providers that are installed; A2A, AG-UI, A2UI and eval are imported by the applications that use them, or by
:func:`import_extras`. A class whose extra is missing is simply absent: its rows decode as ``StoredUnknownEvent``
and are written back as they were. Nothing is ever imported because a stored row names it.
"""

from __future__ import annotations

import builtins
import importlib
import sys
from collections.abc import Iterable, Mapping
from enum import Enum
from types import MappingProxyType
from typing import Final

import acp.exceptions
import ag2.exceptions as ag2_errors
from ag2.acp.events import ACPAvailableCommands, ACPElicitation, ACPModeChange, ACPPlan, ACPPlanEntry
from ag2.compact import CompactionSummary
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

from .. import errors

__all__ = [
    "DATACLASS_NAMES",
    "ENUM_NAMES",
    "EVENT_NAMES",
    "EXCEPTION_NAMES",
    "EXTRA_DATACLASSES",
    "EXTRA_EVENTS",
    "EXTRA_OBJECTS",
    "RESERVED_PREFIXES",
    "EXTRA_MODULES",
    "import_extras",
    "loaded_extras",
]

# -- The closed tables -----------------------------------------------------------------------------------------
# Stored data: a name, once written, must keep naming the same class. Add rows; never edit one.
# Events are named ag2.<snake_case of the class name without a trailing "Event">, ACP's under ag2.acp.

EVENT_NAMES: Final[Mapping[type[BaseEvent], str]] = MappingProxyType(
    {
        # ag2.events.input_events
        Input: "ag2.input",
        TextInput: "ag2.text_input",
        DataInput: "ag2.data_input",
        BinaryInput: "ag2.binary_input",
        FileIdInput: "ag2.file_id_input",
        UrlInput: "ag2.url_input",
        ModelRequest: "ag2.model_request",
        DrainedModelRequest: "ag2.drained_model_request",
        MessageEnqueued: "ag2.message_enqueued",  # transient
        # ag2.files.types
        UploadedFile: "ag2.uploaded_file",
        # ag2.events.types
        ModelEvent: "ag2.model",
        ModelResponse: "ag2.model_response",
        ModelMessage: "ag2.model_message",  # transient; nested in every ModelResponse
        ModelMessageChunk: "ag2.model_message_chunk",  # transient
        ModelReasoning: "ag2.model_reasoning",  # transient
        UsageEvent: "ag2.usage",
        HumanInputRequest: "ag2.human_input_request",
        ToolApprovalRequest: "ag2.tool_approval_request",
        HumanMessage: "ag2.human_message",
        # ag2.events.tool_events
        ToolEvent: "ag2.tool",
        ToolCallEvent: "ag2.tool_call",
        BuiltinToolCallEvent: "ag2.builtin_tool_call",
        ClientToolCallEvent: "ag2.client_tool_call",
        ToolCallsEvent: "ag2.tool_calls",
        ToolResultEvent: "ag2.tool_result",
        BuiltinToolResultEvent: "ag2.builtin_tool_result",
        ToolErrorEvent: "ag2.tool_error",
        ToolNotFoundEvent: "ag2.tool_not_found",
        ToolResultsEvent: "ag2.tool_results",
        # ag2.events.task_events
        TaskEvent: "ag2.task",
        TaskStarted: "ag2.task_started",
        TaskProgress: "ag2.task_progress",  # transient
        TaskCompleted: "ag2.task_completed",
        TaskFailed: "ag2.task_failed",
        TaskExpired: "ag2.task_expired",
        TaskCancelled: "ag2.task_cancelled",
        # ag2.events.alert
        ObserverAlert: "ag2.observer_alert",
        HaltEvent: "ag2.halt",
        # ag2.events.lifecycle
        UnknownEvent: "ag2.unknown",
        ObserverStarted: "ag2.observer_started",  # transient
        ObserverCompleted: "ag2.observer_completed",  # transient
        CompactionStarted: "ag2.compaction_started",  # transient
        CompactionCompleted: "ag2.compaction_completed",  # transient
        CompactionFailed: "ag2.compaction_failed",  # transient
        AggregationStarted: "ag2.aggregation_started",  # transient
        AggregationCompleted: "ag2.aggregation_completed",  # transient
        AggregationFailed: "ag2.aggregation_failed",  # transient
        EventLogFailed: "ag2.event_log_failed",  # transient
        # ag2.compact
        CompactionSummary: "ag2.compaction_summary",
        # ag2.events.voice
        TranscriptionChunkEvent: "ag2.transcription_chunk",
        TranscriptionCompletedEvent: "ag2.transcription_completed",
        SynthesizedAudioEvent: "ag2.synthesized_audio",
        RecordedAudioEvent: "ag2.recorded_audio",
        AudioPlaybackStartedEvent: "ag2.audio_playback_started",
        AudioPlaybackCompletedEvent: "ag2.audio_playback_completed",
        AudioInterruptedEvent: "ag2.audio_interrupted",
        # ag2.acp.events
        ACPPlan: "ag2.acp.plan",
        ACPModeChange: "ag2.acp.mode_change",
        ACPAvailableCommands: "ag2.acp.available_commands",
        ACPElicitation: "ag2.acp.elicitation",
    }
)
"""Every AG2 event class this codec stores, persistable and ``__transient__`` alike (transient ones appear nested)."""

DATACLASS_NAMES: Final[Mapping[type, str]] = MappingProxyType(
    {
        Usage: "ag2.usage",
        ToolResult: "ag2.tool_result",
        BinaryResult: "ag2.binary_result",
        TaskSpec: "ag2.task_spec",
        ACPPlanEntry: "ag2.acp.plan_entry",
    }
)
"""The dataclasses AG2's events hold, by the name their ``$dataclass`` tag carries."""

ENUM_NAMES: Final[Mapping[type[Enum], str]] = MappingProxyType(
    {
        BinaryType: "ag2.binary_type",
        Severity: "ag2.severity",
        FileProvider: "ag2.file_provider",
    }
)
"""The enums AG2's events hold, by the name their ``$enum`` tag carries."""

EXCEPTION_NAMES: Final[Mapping[type[BaseException], str]] = MappingProxyType(
    {
        **{
            cls: f"ag2.{cls.__name__}"
            for cls in (
                ag2_errors.AG2Error,
                ag2_errors.ToolConflictError,
                ag2_errors.ToolResolutionError,
                ag2_errors.ToolExecutionError,
                ag2_errors.ToolNotFoundError,
                ag2_errors.UnsupportedToolError,
                ag2_errors.BlockedToolsUnsupportedError,
                ag2_errors.ClientExecutedShellUnsupportedError,
                ag2_errors.WebFetchOptionUnsupportedError,
                ag2_errors.WebFetchUrlSourceToolNotFoundError,
                ag2_errors.UnsupportedInputError,
                ag2_errors.HumanInputError,
                ag2_errors.HumanInputNotProvidedError,
                ag2_errors.HumanInputFailedError,
                ag2_errors.HumanInputTimeoutError,
                ag2_errors.ConfigNotProvidedError,
                ag2_errors.SkillError,
                ag2_errors.SkillNotFoundError,
                ag2_errors.InvalidSkillNameError,
                ag2_errors.InvalidSkillError,
                ag2_errors.SkillDownloadError,
                ag2_errors.SkillInstallError,
            )
        },
        acp.exceptions.RequestError: "acp.RequestError",
        # sessionstore's own: a tool whose result could not be stored fails with EventEncodeError.
        **{
            cls: f"sessionstore.{cls.__name__}"
            for cls in (
                errors.UnknownSessionError,
                errors.SessionLimitError,
                errors.SessionBusyError,
                errors.ConnectionOverloadedError,
                errors.StorageError,
                errors.EventEncodeError,
                errors.InvalidSessionIdError,
                errors.InvalidCursorError,
                errors.InvalidWindowError,
                errors.InvalidForkPositionError,
                errors.SessionHeldError,
                errors.NotADatabaseError,
                errors.DatabaseCorruptError,
                errors.DatabaseReadOnlyError,
                errors.DatabaseFullError,
                errors.DatabaseBusyError,
                errors.SchemaError,
                errors.SchemaTooNewError,
                errors.SchemaOutOfDateError,
                errors.MigrationError,
                errors.DowngradeRefusedError,
                errors.DatabaseNotFoundError,
                errors.NoSuchSessionError,
                errors.AmbiguousSessionIdError,
                errors.ImportFileError,
                errors.ImportConflictError,
                errors.UsageError,
                errors.UnsafeFileError,
                errors.DatabaseUnavailableError,
                errors.NotOnPostgreSQLError,
                errors.AccessDeniedError,
                errors.ForkedByAnotherRoleError,
                errors.SettingError,
                errors.ParentSessionMissingError,
            )
        },
    }
)
"""AG2's, the ACP SDK's and sessionstore's exceptions, by name. Python's built-in ones go by their own names."""

# Python's built-in exception classes under their canonical names (not the aliases: IOError is OSError).
BUILTIN_EXCEPTIONS: Final[Mapping[type[BaseException], str]] = MappingProxyType(
    {
        cls: cls.__name__
        for cls in vars(builtins).values()
        if isinstance(cls, type) and issubclass(cls, BaseException) and getattr(builtins, cls.__name__) is cls
    }
)

# Names applications may not take: AG2's future classes get names under these.
RESERVED_PREFIXES: Final = ("ag2.", "acp.", "sessionstore.")


# -- AG2's optional extras --------------------------------------------------------------------------------------
# Named the same way, under the extra's own prefix. Transient classes too: MemoryStream(storage, persist_all=True)
# saves them, and some appear nested in persisted ones.

EXTRA_EVENTS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        # ag2[openai]: the Responses API's reasoning items and hosted tools (the mapper sends them back)
        "ag2.openai.reasoning": ("ag2.config.openai.events", "OpenAIReasoningEvent"),
        "ag2.openai.server_tool_call": ("ag2.config.openai.events", "OpenAIServerToolCallEvent"),
        "ag2.openai.server_tool_result": ("ag2.config.openai.events", "OpenAIServerToolResultEvent"),
        "ag2.openai.shell_command_chunk": ("ag2.config.openai.events", "OpenAIShellCommandChunk"),  # transient
        "ag2.openai.shell_output_chunk": ("ag2.config.openai.events", "OpenAIShellOutputChunk"),  # transient
        "ag2.openai.prompt_cache_diagnostics": ("ag2.config.openai.events", "OpenAIPromptCacheDiagnostics"),  # tr.
        # ag2[anthropic]
        "ag2.anthropic.redacted_thinking": ("ag2.config.anthropic.events", "AnthropicRedactedThinkingEvent"),
        "ag2.anthropic.container_upload": ("ag2.config.anthropic.events", "AnthropicContainerUploadEvent"),
        "ag2.anthropic.server_tool_call": ("ag2.config.anthropic.events", "AnthropicServerToolCallEvent"),
        "ag2.anthropic.server_tool_result": ("ag2.config.anthropic.events", "AnthropicServerToolResultEvent"),
        "ag2.anthropic.cache_diagnostics": ("ag2.config.anthropic.events", "AnthropicCacheDiagnostics"),  # transient
        # ag2[gemini]: every function call carries its thought signature
        "ag2.gemini.tool_call": ("ag2.config.gemini.events", "GeminiToolCallEvent"),
        "ag2.gemini.server_tool_call": ("ag2.config.gemini.events", "GeminiServerToolCallEvent"),
        "ag2.gemini.server_tool_result": ("ag2.config.gemini.events", "GeminiServerToolResultEvent"),
        # ag2[xai]: the whole assistant turn, as the SDK's protobuf bytes
        "ag2.xai.assistant": ("ag2.config.xai.events", "XAIAssistantEvent"),
        # ag2[ag-ui]
        "ag2.ag_ui.event": ("ag2.ag_ui.events", "AGUIEvent"),
        # ag2[a2a]: all transient
        "ag2.a2a.event": ("ag2.a2a.events", "A2AEvent"),
        "ag2.a2a.message": ("ag2.a2a.events", "A2AMessage"),
        "ag2.a2a.task_snapshot": ("ag2.a2a.events", "A2ATaskSnapshot"),
        "ag2.a2a.task_status_update": ("ag2.a2a.events", "A2ATaskStatusUpdate"),
        "ag2.a2a.task_artifact_update": ("ag2.a2a.events", "A2ATaskArtifactUpdate"),
        "ag2.a2a.text_artifact": ("ag2.a2a.events", "A2ATextArtifact"),
        "ag2.a2a.tool_call_artifact": ("ag2.a2a.events", "A2AToolCallArtifact"),
        # ag2[a2ui]: all transient
        "ag2.a2ui.message": ("ag2.a2ui.events", "A2UIMessageEvent"),
        "ag2.a2ui.client": ("ag2.a2ui.events", "A2UIClientEvent"),
        "ag2.a2ui.validation_failed": ("ag2.a2ui.events", "A2UIValidationFailedEvent"),
        # ag2.eval (in the core package; its results are plain classes): all transient but EvalEvent
        "ag2.eval.event": ("ag2.eval.events", "EvalEvent"),
        "ag2.eval.started": ("ag2.eval.events", "EvalStarted"),
        "ag2.eval.task_evaluated": ("ag2.eval.events", "TaskEvaluated"),
        "ag2.eval.completed": ("ag2.eval.events", "EvalCompleted"),
        "ag2.eval.variant_started": ("ag2.eval.events", "VariantStarted"),
        "ag2.eval.variant_completed": ("ag2.eval.events", "VariantCompleted"),
        "ag2.eval.pairwise_started": ("ag2.eval.events", "PairwiseStarted"),
        "ag2.eval.pairwise_compared": ("ag2.eval.events", "PairwiseCompared"),
        "ag2.eval.pairwise_completed": ("ag2.eval.events", "PairwiseCompleted"),
    }
)
"""Event classes of AG2's optional extras: name -> (module, class)."""

EXTRA_DATACLASSES: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        # ag2[a2ui]: what the client's A2UI envelope parsed into
        "ag2.a2ui.action_response_request": ("ag2.a2ui.incoming", "ActionResponseRequest"),
        "ag2.a2ui.incoming_action": ("ag2.a2ui.incoming", "A2UIIncomingAction"),
        "ag2.a2ui.incoming_surface_error": ("ag2.a2ui.incoming", "A2UIIncomingSurfaceError"),
        "ag2.a2ui.incoming_function_error": ("ag2.a2ui.incoming", "A2UIIncomingFunctionError"),
        "ag2.a2ui.incoming_function_response": ("ag2.a2ui.incoming", "A2UIIncomingFunctionResponse"),
        "ag2.a2ui.incoming_action_result": ("ag2.a2ui.incoming", "A2UIIncomingActionResult"),
        "ag2.a2ui.incoming_error_result": ("ag2.a2ui.incoming", "A2UIIncomingErrorResult"),
        "ag2.a2ui.incoming_function_response_result": ("ag2.a2ui.incoming", "A2UIIncomingFunctionResponseResult"),
        "ag2.a2ui.incoming_unknown_result": ("ag2.a2ui.incoming", "A2UIIncomingUnknownResult"),
        # ag2.eval
        "ag2.eval.feedback": ("ag2.eval._types", "Feedback"),
        "ag2.eval.task": ("ag2.eval.dataset.task", "Task"),
        "ag2.eval.trace_ref": ("ag2.eval.sources.trace_source", "TraceRef"),
        "ag2.eval.token_usage": ("ag2.eval.trace", "TokenUsage"),
        "ag2.eval.task_result": ("ag2.eval.results.result", "TaskResult"),
        "ag2.eval.score_stats": ("ag2.eval.results.result", "ScoreStats"),
        "ag2.eval.aggregates": ("ag2.eval.results.result", "Aggregates"),
        "ag2.eval.pairwise_case": ("ag2.eval.pairwise", "PairwiseCase"),
    }
)
"""Dataclasses the events of AG2's optional extras hold: name -> (module, class)."""

EXTRA_OBJECTS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        "ag2.eval.run_result": ("ag2.eval.results.result", "RunResult"),
        "ag2.eval.pairwise_run_result": ("ag2.eval.pairwise", "PairwiseRunResult"),
        "ag2.eval.trace": ("ag2.eval.trace", "Trace"),
        "ag2.eval.suite": ("ag2.eval.dataset.suite", "Suite"),
    }
)
"""Plain classes with ``__slots__`` (no dataclass, no pydantic) that AG2's eval events hold: stored as their slots."""


EXTRA_MODULES: Final = frozenset(
    module for t in (EXTRA_EVENTS, EXTRA_DATACLASSES, EXTRA_OBJECTS) for module, _ in t.values()
)
"""Every module the ``EXTRA_*`` tables name."""


def loaded_extras(modules: Iterable[str]) -> list[tuple[str, str, str, type]]:
    """``(module, kind, name, class)`` of the ``EXTRA_*`` rows of ``modules`` that this process has imported.

    Never imports anything: a module is known once something in the process (AG2 itself, for its provider
    clients, or the application, for A2A, AG-UI, A2UI or eval) imported it. A module still being imported
    (one of its names missing) is left out whole, to be looked at again later.
    """
    out: list[tuple[str, str, str, type]] = []
    for module in modules:
        loaded = sys.modules.get(module)
        if loaded is None:
            continue
        rows = [
            (kind, name, getattr(loaded, qualname, None))
            for kind, table in (("event", EXTRA_EVENTS), ("dataclass", EXTRA_DATACLASSES), ("object", EXTRA_OBJECTS))
            for name, (where, qualname) in table.items()
            if where == module
        ]
        if all(isinstance(cls, type) for _, _, cls in rows):
            out.extend((module, kind, name, cls) for kind, name, cls in rows if isinstance(cls, type))
    return out


def import_extras() -> dict[str, str]:
    """Import every module the ``EXTRA_*`` tables name whose AG2 extra is installed; return the others, with why.

    AG2Codec knows an extra's classes once its module is imported; a process that reads rows of an extra it never
    uses itself (a viewer, a migration) calls this first. A2A's module alone takes about 0.7 s to import.
    """
    missing: dict[str, str] = {}
    for module in sorted(EXTRA_MODULES):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            missing[module] = str(exc)
    return missing
