"""(j) AG2's events through ``SQLiteStorage(path, codec=AG2Codec())`` against sessionstore's own events.

The same conversation twice: once as the events an AG2 agent saves for it,
once as sessionstore events carrying the same content, one for one. A turn (a
user message, a tool call, its result, the model's answer) is nine AG2 events,
in the order an agent emits them. AG2Codec gives a role (and so a row in the
full-text index) only to the four that carry the conversation; the copies and
the telemetry get none. The mirror does the same: sessionstore's own message
types for those four, and for the others event types registered here (as an
application registers its own, in ``bench/ag2_own.py``), which JsonCodec
describes with no role::

    ModelRequest(TextInput)            UserMessage                    user
    UsageEvent                         bench.usage                    -
    ModelResponse(tool calls, Usage)   bench.model_calls              -
    ToolCallsEvent                     bench.tool_calls               -
    ToolCallEvent                      ToolCall                       tool_call
    ToolResultEvent                    ToolResult                     tool
    ToolResultsEvent                   bench.tool_results             -
    UsageEvent                         bench.usage                    -
    ModelResponse(text, Usage)         ModelMessage(metadata=usage)   assistant

So both write nine rows a turn and index the same four texts: the difference
is the codec's. Both are appended one ``save_event`` per event (each returning
after its own commit, as AG2 saves them) to a fresh file, in interleaved
rounds; the paired ratio is AG2's time per event over ours.
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
    from ag2_own import ModelCalls, ToolCalls, ToolResults, UsageRecord

    import sessionstore as ss

    ag2: list[Any] = []
    own: list[Any] = []
    neutral = make_events(turns * 4, seed=3)
    for number in range(turns):
        user, call, result, answer = neutral[number * 4 : number * 4 + 4]
        prompt = 900 + 300 * number
        tokens = [(prompt, 40), (prompt + 400, 220)]
        usages = [Usage(prompt_tokens=p, completion_tokens=c, total_tokens=p + c) for p, c in tokens]
        records = [UsageRecord(p, c, p + c, model="gpt-test", provider="openai") for p, c in tokens]
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
        calls = [{"id": call_id, "name": name, "arguments": arguments}]
        usage = {"prompt_tokens": tokens[1][0], "completion_tokens": tokens[1][1]}
        own += [
            ss.UserMessage(user.data["content"]),
            records[0],
            ModelCalls(calls, model="gpt-test", finish_reason="tool_calls"),
            ToolCalls(calls),
            ss.ToolCall(call_id, name, dict(call.data["arguments"])),
            ss.ToolResult(call_id, text),
            ToolResults([{"call_id": call_id, "name": name, "content": text}]),
            records[1],
            ss.ModelMessage(answer.data["content"], metadata={"usage": usage}),
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
