"""A scripted model for the ACP tests: replays a script, keeps its place, records what it is given.

AG2's ``ag2.testing.TestConfig`` starts its script over on every ACP turn (the
executor asks the config for a new client each turn), and knows nothing across
processes. This one keeps its place in the recording file itself: the next
step is the one after the last recorded call, so a script runs on across turns
and across agent processes killed and restarted on the same files.

Usable from a subprocess: :func:`scripted_model` reads the script and the
recording paths from ``SESSIONSTORE_TEST_SCRIPT`` and ``SESSIONSTORE_TEST_RECORDING``
(the example agent takes it as ``--model-factory _acp_model:scripted_model``).

Script: a JSON list of steps, one per model call:
``{"say": "text"}`` answers with text; ``{"tool": "name", "arguments": {...}, "id": "call_1"}``
asks for a tool call. Recording: one JSON line per call,
``{"call": n, "messages": [...], "tools": [...]}``, each message rendered by
:func:`render` (role and text), written and fsynced before the model answers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ag2 import Context
from ag2.config import LLMClient, ModelConfig, ModelProvider
from ag2.events import (
    BaseEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextInput,
    ToolCallEvent,
    ToolCallsEvent,
    ToolResultEvent,
    ToolResultsEvent,
)

SCRIPT_ENV = "SESSIONSTORE_TEST_SCRIPT"
RECORDING_ENV = "SESSIONSTORE_TEST_RECORDING"


def _text(parts: Sequence[Any]) -> str:
    return "".join(p.content for p in parts if isinstance(p, TextInput))


def render(event: BaseEvent) -> dict[str, Any]:
    """One history event as the model saw it: who, what; other events by class name only."""
    name = type(event).__name__
    if isinstance(event, ModelRequest):
        return {"event": name, "role": "user", "text": _text(event.parts)}
    if isinstance(event, ModelResponse):
        calls = event.tool_calls.calls if event.tool_calls else []
        return {
            "event": name,
            "role": "assistant",
            "text": event.message.content if event.message is not None else None,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.serialized_arguments} for c in calls],
        }
    if isinstance(event, ToolResultsEvent):
        results = [{"id": r.parent_id, "name": r.name, "text": _text(r.result.parts)} for r in event.results]
        return {"event": name, "role": "tool", "results": results}
    if isinstance(event, ToolResultEvent):
        return {"event": name, "id": event.parent_id, "text": _text(event.result.parts)}
    return {"event": name}


def read_recording(path: Path) -> list[dict[str, Any]]:
    """Every recorded call, in order (an empty list before the first)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_script(path: Path, steps: Sequence[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(list(steps)))
    return path


class ScriptedClient(LLMClient):
    def __init__(self, script: Path, recording: Path) -> None:
        self.script = script
        self.recording = recording

    async def __call__(self, messages: Sequence[BaseEvent], context: Context, **kwargs: Any) -> ModelResponse:
        steps = json.loads(self.script.read_text())
        position = len(read_recording(self.recording))
        if position >= len(steps):
            raise RuntimeError(f"the script {self.script} has {len(steps)} steps; call {position + 1} has none")
        step = steps[position]
        line = {
            "call": position,
            "messages": [render(m) for m in messages],
            "tools": sorted(
                getattr(getattr(t, "function", None), "name", type(t).__name__) for t in kwargs.get("tools", ())
            ),
        }
        with self.recording.open("a") as out:
            out.write(json.dumps(line) + "\n")
            out.flush()
            os.fsync(out.fileno())
        if "say" in step:
            message = ModelMessage(step["say"])
            await context.send(message)
            return ModelResponse(message)
        call = ToolCallEvent(name=step["tool"], arguments=json.dumps(step.get("arguments", {})), id=step["id"])
        return ModelResponse(tool_calls=ToolCallsEvent([call]))


class ScriptedConfig(ModelConfig):
    """An AG2 model config whose every client plays the same script from where the recording says it is."""

    def __init__(self, script: Path, recording: Path) -> None:
        self.script = Path(script)
        self.recording = Path(recording)

    @property
    def provider(self) -> ModelProvider:
        raise NotImplementedError

    @property
    def model(self) -> str:
        return "scripted"

    def copy(self) -> ScriptedConfig:
        return self

    def create(self) -> ScriptedClient:
        return ScriptedClient(self.script, self.recording)


def scripted_model() -> ScriptedConfig:
    """The model factory for subprocesses: script and recording from the environment."""
    return ScriptedConfig(Path(os.environ[SCRIPT_ENV]), Path(os.environ[RECORDING_ENV]))
