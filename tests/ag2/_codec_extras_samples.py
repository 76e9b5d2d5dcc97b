"""One event of every class of AG2's optional extras (providers, A2A, AG-UI, A2UI, eval), built as AG2 builds them.

The provider SDKs' values are made the way each SDK makes them from an HTTP response: openai's and anthropic's
``construct_type`` (no validation, so values the API sends and ``model_validate`` would reject are kept, such as
a web-search source ``{"type": "api"}``, and fields the SDK does not know land in the model's extras), and
google-genai's validated models. AG2's own ``from_item``/``from_block``/``from_*`` builders then make the events.
Everything that varies (``created_at``, uuid4 ids) is fixed, so a fresh process builds the same events.
"""

from __future__ import annotations

from typing import Any

import anthropic._models
import openai._models
from a2a.types import Artifact, Message, Part, Role, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus
from a2a.types import TaskStatusUpdateEvent as A2ATaskStatusUpdateEvent
from ag2.a2a.events import (
    A2AEvent,
    A2AMessage,
    A2ATaskArtifactUpdate,
    A2ATaskSnapshot,
    A2ATaskStatusUpdate,
    A2ATextArtifact,
    A2AToolCallArtifact,
)
from ag2.a2ui.events import A2UIClientEvent, A2UIMessageEvent, A2UIValidationFailedEvent
from ag2.a2ui.incoming import (
    A2UIIncomingAction,
    A2UIIncomingActionResult,
    A2UIIncomingErrorResult,
    A2UIIncomingSurfaceError,
    ActionResponseRequest,
)
from ag2.ag_ui.events import AGUIEvent
from ag2.config.anthropic.events import (
    AnthropicCacheDiagnostics,
    AnthropicContainerUploadEvent,
    AnthropicRedactedThinkingEvent,
    AnthropicServerToolCallEvent,
    AnthropicServerToolResultEvent,
)
from ag2.config.gemini.events import GeminiServerToolCallEvent, GeminiServerToolResultEvent, GeminiToolCallEvent
from ag2.config.openai.events import (
    OpenAIPromptCacheDiagnostics,
    OpenAIReasoningEvent,
    OpenAIServerToolCallEvent,
    OpenAIServerToolResultEvent,
    OpenAIShellCommandChunk,
    OpenAIShellOutputChunk,
)
from ag2.config.xai.events import XAIAssistantEvent
from ag2.eval._types import Feedback
from ag2.eval.dataset import Suite
from ag2.eval.dataset import Task as EvalTask
from ag2.eval.events import (
    EvalCompleted,
    EvalEvent,
    EvalStarted,
    PairwiseCompared,
    PairwiseCompleted,
    PairwiseStarted,
    TaskEvaluated,
    VariantCompleted,
    VariantStarted,
)
from ag2.eval.pairwise import PairwiseCase, PairwiseRunResult
from ag2.eval.results.result import RunResult, TaskResult
from ag2.eval.sources.trace_source import TraceRef
from ag2.eval.trace import Trace
from ag2.events import ModelMessage, ModelRequest, ModelResponse, TextInput, ToolCallEvent, Usage, UsageEvent
from ag_ui.core import RunStartedEvent, TextMessageContentEvent
from anthropic.types.beta import BetaContainerUploadBlock  # noqa: F401  (the SDK's beta twin is not what AG2 holds)
from google.genai import types as genai
from openai.types.responses import (
    ResponseCodeInterpreterToolCall,
    ResponseFileSearchToolCall,
    ResponseFunctionShellToolCall,
    ResponseFunctionShellToolCallOutput,
    ResponseFunctionWebSearch,
    ResponseReasoningItem,
)
from openai.types.responses.response_output_item import ImageGenerationCall, McpCall, McpListTools

from ag2.config.anthropic.events import AnthropicServerToolResultBlockType  # isort: skip
from anthropic.types import ContainerUploadBlock, RedactedThinkingBlock, ServerToolUseBlock  # isort: skip

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489")


def _openai(cls: Any, data: dict[str, Any]) -> Any:
    return openai._models.construct_type(type_=cls, value=data)


def _anthropic(cls: Any, data: dict[str, Any]) -> Any:
    return anthropic._models.construct_type(type_=cls, value=data)


def openai_events() -> list[Any]:
    reasoning = _openai(
        ResponseReasoningItem,
        {
            "id": "rs_0a1",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Looking up the weather first."}],
            "encrypted_content": "gAAAAABo-opaque-reasoning-state==",
            "a_field_a_later_api_adds": {"kept": ["as", "it", "came"]},  # lands in the model's extras
        },
    )
    web_search = _openai(
        ResponseFunctionWebSearch,
        {
            "id": "ws_0b2",
            "type": "web_search_call",
            "status": "completed",
            "action": {
                "type": "search",
                "query": "weather paris",
                "queries": ["weather paris", "paris forecast"],
                # The API sends sources the SDK's model_validate rejects (no url, an unknown type).
                "sources": [{"type": "api"}, {"type": "url", "url": "https://meteo.example/paris"}],
            },
        },
    )
    code = _openai(
        ResponseCodeInterpreterToolCall,
        {
            "id": "ci_0c3",
            "type": "code_interpreter_call",
            "status": "completed",
            "code": "print(6 * 7)",
            "container_id": "cntr_1",
            "outputs": [{"type": "logs", "logs": "42\n"}, {"type": "image", "url": "https://files.example/plot.png"}],
        },
    )
    image = _openai(
        ImageGenerationCall,
        {"id": "ig_0d4", "type": "image_generation_call", "status": "completed", "result": "iVBORw0KGgo="},
    )
    file_search = _openai(
        ResponseFileSearchToolCall,
        {
            "id": "fs_0e5",
            "type": "file_search_call",
            "status": "completed",
            "queries": ["refund policy"],
            "results": [
                {"file_id": "file_1", "filename": "policy.md", "score": 0.82, "text": "Refunds within 30 days."}
            ],
        },
    )
    mcp = _openai(
        McpCall,
        {
            "id": "mcp_0f6",
            "type": "mcp_call",
            "name": "lookup",
            "server_label": "docs",
            "arguments": '{"q": "x"}',
            "output": "found",
        },
    )
    listing = _openai(
        McpListTools,
        {
            "id": "mcpl_1",
            "type": "mcp_list_tools",
            "server_label": "docs",
            "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
        },
    )
    shell = _openai(
        ResponseFunctionShellToolCall,
        {
            "id": "sh_1",
            "type": "shell_call",
            "call_id": "call_sh_1",
            "status": "completed",
            "action": {"commands": ["ls", "pwd"], "timeout_ms": 1000, "max_output_length": 4096},
        },
    )
    shell_output = _openai(
        ResponseFunctionShellToolCallOutput,
        {
            "id": "sho_1",
            "type": "shell_call_output",
            "call_id": "call_sh_1",
            "status": "completed",
            "output": [{"stdout": "a.py\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
        },
    )
    calls = [OpenAIServerToolCallEvent.from_item(i) for i in (web_search, code, image, file_search, mcp, listing)]
    shell_call = OpenAIServerToolCallEvent.from_item(shell)
    return [
        OpenAIReasoningEvent("Looking up the weather first.", item=reasoning),
        *calls,
        shell_call,
        OpenAIServerToolResultEvent.from_item(web_search, parent_id="ws_0b2"),
        OpenAIServerToolResultEvent.from_item(code, parent_id="ci_0c3"),
        OpenAIServerToolResultEvent.from_item(image, parent_id="ig_0d4"),
        OpenAIServerToolResultEvent.from_shell_output(shell_output, call=shell, parent_id="sh_1"),
        OpenAIShellCommandChunk("ls -", command_index=0, output_index=1),
        OpenAIShellOutputChunk(command_index=0, output_index=1, item_id="sh_1", stdout="a.py", stderr=None),
        OpenAIPromptCacheDiagnostics("cache_miss", reason="tools_changed", cache_missed_tokens=1200),
    ]


def anthropic_events() -> list[Any]:
    redacted = _anthropic(RedactedThinkingBlock, {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"})
    upload = _anthropic(ContainerUploadBlock, {"type": "container_upload", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"})
    server_call = _anthropic(
        ServerToolUseBlock,
        {
            "type": "server_tool_use",
            "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
            "name": "web_search",
            "input": {"query": "claude shannon birth date"},
            "caller": {"type": "direct"},
        },
    )
    result_block = _anthropic(
        AnthropicServerToolResultBlockType,
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
            "content": [
                {
                    "type": "web_search_result",
                    "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
                    "title": "Claude Shannon - Wikipedia",
                    "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5",
                    "page_age": "April 30, 2025",
                }
            ],
        },
    )
    code_block = _anthropic(
        AnthropicServerToolResultBlockType,
        {
            "type": "code_execution_tool_result",
            "tool_use_id": "srvtoolu_02",
            "content": {
                "type": "code_execution_result",
                "stdout": "4\n",
                "stderr": "",
                "return_code": 0,
                "content": [{"type": "code_execution_output", "file_id": "file_out_1"}],
            },
        },
    )
    return [
        AnthropicRedactedThinkingEvent(block=redacted),
        AnthropicContainerUploadEvent(block=upload),
        AnthropicServerToolCallEvent(
            id=server_call.id, name="web_search", arguments='{"query": "claude shannon birth date"}', block=server_call
        ),
        AnthropicServerToolResultEvent.from_block(result_block),
        AnthropicServerToolResultEvent.from_block(code_block),
        AnthropicCacheDiagnostics("messages_changed", cache_missed_input_tokens=2048, previous_message_id="msg_1"),
    ]


def gemini_events() -> list[Any]:
    code_part = genai.Part(
        executable_code=genai.ExecutableCode(code="print(2 + 2)", language=genai.Language.PYTHON),
        thought_signature=b"\x12\x9a\x00sig-for-code",
    )
    result_part = genai.Part(
        code_execution_result=genai.CodeExecutionResult(outcome=genai.Outcome.OUTCOME_OK, output="4\n")
    )
    grounding = genai.GroundingMetadata(
        web_search_queries=["weather paris"],
        grounding_chunks=[
            genai.GroundingChunk(web=genai.GroundingChunkWeb(uri="https://meteo.example", title="Meteo", domain="x"))
        ],
        search_entry_point=genai.SearchEntryPoint(rendered_content="<div>chip</div>", sdk_blob=b"\x01\x02"),
    )
    call = GeminiServerToolCallEvent.from_grounding(grounding, name="web_search")
    call.id = "00000000-0000-4000-8000-000000000001"  # uuid4 in AG2
    code_call = GeminiServerToolCallEvent.from_executable_code(code_part)
    assert code_call is not None
    code_call.id = "00000000-0000-4000-8000-000000000002"
    return [
        GeminiToolCallEvent(
            name="get_weather", id="call_g1", arguments='{"city": "Paris"}', thought_signature=b"\x0a\xffCi8BVtd"
        ),
        code_call,
        GeminiServerToolResultEvent.from_code_execution_result(result_part, parent_id="code_1"),
        call,
        GeminiServerToolResultEvent.from_grounding(grounding, parent_id=call.id, name="web_search"),
    ]


def protocol_events() -> list[Any]:
    """xAI's protobuf turn, AG-UI, A2A (protobuf messages) and A2UI (TypedDicts, dataclasses)."""
    task = Task(
        id="task-1",
        context_id="ctx-1",
        status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
        history=[Message(message_id="m1", role=Role.ROLE_USER, parts=[Part(text="hello")])],
    )
    artifact = TaskArtifactUpdateEvent(
        task_id="task-1", context_id="ctx-1", artifact=Artifact(artifact_id="a1", parts=[Part(text="partial")])
    )
    status = A2ATaskStatusUpdateEvent(
        task_id="task-1", context_id="ctx-1", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
    )
    action = A2UIIncomingAction(
        name="submit",
        surface_id="s1",
        source_component_id="button-1",
        timestamp="2026-12-02T00:00:00Z",
        context={"form": {"email": "a@example.org"}, "count": 2},
        response_request=ActionResponseRequest(action_id="act-1"),
    )
    return [
        XAIAssistantEvent(proto_bytes=b"\x0a\x04grok\x12\x00\xff", model="grok-4", finish_reason="stop"),
        AGUIEvent(TextMessageContentEvent(message_id="m1", delta="Hel", raw_event={"x": 1})),
        AGUIEvent(RunStartedEvent(thread_id="t1", run_id="r1")),
        A2AEvent(),
        A2ATaskSnapshot(task=task),
        A2AMessage(message=Message(message_id="m2", role=Role.ROLE_AGENT, parts=[Part(text="hi")])),
        A2ATaskStatusUpdate(update=status, state=TaskState.TASK_STATE_COMPLETED),
        A2ATaskArtifactUpdate(update=artifact, append=True, last_chunk=False),
        A2ATextArtifact(update=artifact, text="partial", append=False, last_chunk=True),
        A2AToolCallArtifact(update=artifact, call=ToolCallEvent("search", id="c9", arguments='{"q": "x"}')),
        A2UIMessageEvent({"version": "v0.9", "createSurface": {"surfaceId": "s1", "catalogId": "basic"}}),
        A2UIClientEvent(A2UIIncomingActionResult(action=action)),
        A2UIClientEvent(
            A2UIIncomingErrorResult(
                error=A2UIIncomingSurfaceError(code="E1", surface_id="s1", message="bad", path=None)
            )
        ),
        A2UIValidationFailedEvent(["missing surfaceId"], 3),
    ]


def eval_events() -> list[Any]:
    task = EvalTask(inputs={"input": "2+2?"}, task_id="task-0001", reference_outputs={"answer": "4"}, tags=("math",))
    trace = Trace(
        events=[ModelRequest([TextInput("2+2?")]), ModelResponse(ModelMessage("4")), UsageEvent(Usage(10, 2))],
        exception=None,
        duration_ms=12,
    )
    feedback = (Feedback("exact", score=True, comment="matched"), Feedback("tone", value="terse"))
    result = RunResult(
        run_id="run-1",
        tasks=(TaskResult(task=task, trace=trace, feedback=feedback, trace_ref=TraceRef("tr-1", task_id="task-0001")),),
        suite=Suite([task], name="arith", source="inline"),
        target_path="app:agent",
        concurrency=2,
        duration_ms=40,
        created_at="2026-12-02T00:00:00+00:00",
        label="baseline",
    )
    pairwise = PairwiseRunResult(
        run_id="pw-1",
        cases=(PairwiseCase("task-0001", "judge", "b", reasoning="shorter", detail={"swap": ["b", "b"]}),),
        variant_a="a",
        variant_b="b",
        keys=("judge",),
        created_at="2026-12-02T00:00:00+00:00",
        duration_ms=9,
        n_pairs=1,
        store_dir="/tmp/eval-runs",
    )
    return [
        EvalEvent(run_id="run-1", label="baseline"),
        EvalStarted(run_id="run-1", suite="arith", total=1),
        TaskEvaluated(run_id="run-1", task_id="task-0001", feedback=feedback, variant=None),
        EvalCompleted(run_id="run-1", result=result),
        VariantStarted(run_id="run-1", variant="b", index=1, total=2),
        VariantCompleted(run_id="run-1", variant="b", result=result),
        PairwiseStarted(run_id="pw-1", variant_a="a", variant_b="b", total=1),
        PairwiseCompared(run_id="pw-1", task_id="task-0001", key="judge", winner="b"),
        PairwiseCompleted(run_id="pw-1", result=pairwise),
    ]


def extra_samples() -> list[Any]:
    return [*openai_events(), *anthropic_events(), *gemini_events(), *protocol_events(), *eval_events()]
