"""(j) AG2's events through ``SQLiteStorage(path, codec=AG2Codec())`` against sessionstore's own events.

The same conversation twice: once as the events an AG2 agent saves for it,
once as sessionstore's own events carrying the same text, one for one. A turn
(a user message, a tool call, its result, the model's answer) is nine AG2
events, in the order an agent emits them::

    ModelRequest(TextInput)            UserMessage
    UsageEvent                         ModelMessage("", metadata=usage)
    ModelResponse(tool calls, Usage)   ToolCall
    ToolCallsEvent                     ToolCall
    ToolCallEvent                      ToolCall
    ToolResultEvent                    ToolResult
    ToolResultsEvent                   ToolResult
    UsageEvent                         ModelMessage("", metadata=usage)
    ModelResponse(text, Usage)         ModelMessage(text, metadata=usage)

Both are appended one ``save_event`` per event (each returning after its own
commit, as AG2 saves them) to a fresh file, in interleaved rounds; the paired
ratio is AG2's time per event over ours.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

from payloads import make_events
from rounds import Sample
from workloads import run


def codec() -> Any:
    """``AG2Codec()``, or ImportError when this sessionstore or environment has none."""
    from sessionstore.ag2 import AG2Codec

    return AG2Codec()


def conversation(turns: int) -> tuple[list[Any], list[Any]]:
    """(AG2 events, sessionstore events) for ``turns`` turns of the bench's neutral mix."""
    from ag2.events import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextInput,
        ToolCallEvent,
        ToolCallsEvent,
        ToolResult,
        ToolResultEvent,
        ToolResultsEvent,
        Usage,
        UsageEvent,
    )

    import sessionstore as ss

    ag2: list[Any] = []
    own: list[Any] = []
    neutral = make_events(turns * 4, seed=3)
    for number in range(turns):
        user, call, result, answer = neutral[number * 4 : number * 4 + 4]
        prompt = 900 + 300 * number
        usages = [Usage(prompt_tokens=prompt, completion_tokens=40, total_tokens=prompt + 40)]
        usages.append(Usage(prompt_tokens=prompt + 400, completion_tokens=220, total_tokens=prompt + 620))
        meta = [{"usage": {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens}} for u in usages]
        name, call_id = call.data["name"], call.data["call_id"]
        arguments = json.dumps(call.data["arguments"])
        text = result.data["content"]
        tool_call = ToolCallEvent(name, id=call_id, arguments=arguments)
        tool_result = ToolResultEvent(parent_id=call_id, name=name, result=ToolResult(text))
        ag2 += [
            ModelRequest([TextInput(user.data["content"])]),
            UsageEvent(usages[0], model="gpt-test", provider="openai"),
            ModelResponse(
                tool_calls=ToolCallsEvent([tool_call]),
                usage=usages[0],
                model="gpt-test",
                provider="openai",
                finish_reason="tool_calls",
            ),
            ToolCallsEvent([tool_call]),
            tool_call,
            tool_result,
            ToolResultsEvent([tool_result]),
            UsageEvent(usages[1], model="gpt-test", provider="openai"),
            ModelResponse(
                ModelMessage(answer.data["content"]),
                usage=usages[1],
                model="gpt-test",
                provider="openai",
                finish_reason="stop",
            ),
        ]
        own_call = ss.ToolCall(call_id, name, dict(call.data["arguments"]))
        own_result = ss.ToolResult(call_id, text)
        own += [
            ss.UserMessage(user.data["content"]),
            ss.ModelMessage("", metadata=meta[0]),
            ss.ToolCall(call_id, name, dict(call.data["arguments"]), metadata=meta[0]),
            own_call,
            own_call,
            own_result,
            own_result,
            ss.ModelMessage("", metadata=meta[1]),
            ss.ModelMessage(answer.data["content"], metadata=meta[1]),
        ]
    return ag2, own


def payload_bytes(events: list[Any], event_codec: Any) -> float:
    """Mean JSON bytes per stored payload (untimed)."""
    return sum(len(event_codec.encode(e)[1].encode()) for e in events) / len(events)


def sample_append(path: Path, events: list[Any], event_codec: Any | None) -> Sample:
    """Microseconds per ``save_event``, one commit each, on a fresh file; the history read back to check."""
    from sessionstore import EventContext, SQLiteStorage

    async def go() -> float:
        stream = uuid4()
        async with SQLiteStorage(path, codec=event_codec) as storage:
            context = EventContext.for_stream(stream)
            start = time.perf_counter()
            for event in events:
                await storage.save_event(event, context)
            elapsed = time.perf_counter() - start
            got = list(await storage.get_history(stream))
        if len(got) != len(events):
            raise AssertionError(f"read back {len(got)} of {len(events)} events")
        return elapsed

    return {"j": run(go()) / len(events) * 1e6}
