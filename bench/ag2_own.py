"""sessionstore event types for what AG2 stores beside the conversation: telemetry and copies of tool calls.

Registered as an application registers its own types; JsonCodec describes
them with no role, as AG2Codec does AG2's, so they are stored but not indexed
(see ``ag2_mix.py``). Imported only where sessionstore is installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessionstore import BaseEvent


@dataclass(frozen=True)
class UsageRecord(BaseEvent, type_name="bench.usage"):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    model: str = ""
    provider: str = ""


@dataclass(frozen=True)
class ModelCalls(BaseEvent, type_name="bench.model_calls"):
    """A model response that only calls tools (AG2: a ModelResponse with no text)."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    model: str = ""
    finish_reason: str = ""


@dataclass(frozen=True)
class ToolCalls(BaseEvent, type_name="bench.tool_calls"):
    calls: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ToolResults(BaseEvent, type_name="bench.tool_results"):
    results: list[dict[str, Any]] = field(default_factory=list)
