"""Neutral events as the peers' native message shapes (shared by several adapters)."""

from __future__ import annotations

import json
from typing import Any


def responses_items(events: list[Any]) -> list[dict[str, Any]]:
    """OpenAI Responses API input items, as the Agents SDK stores them."""
    out: list[dict[str, Any]] = []
    for e in events:
        if e.kind == "user":
            out.append({"role": "user", "content": e.data["content"]})
        elif e.kind == "model":
            out.append({"role": "assistant", "content": e.data["content"]})
        elif e.kind == "tool_call":
            out.append(
                {
                    "type": "function_call",
                    "call_id": e.data["call_id"],
                    "name": e.data["name"],
                    "arguments": json.dumps(e.data["arguments"]),
                }
            )
        else:
            out.append({"type": "function_call_output", "call_id": e.data["call_id"], "output": e.data["content"]})
    return out


def plain_messages(events: list[Any]) -> list[dict[str, Any]]:
    """Messages as plain dicts (what a LangGraph state's ``messages`` channel holds here)."""
    out: list[dict[str, Any]] = []
    for e in events:
        if e.kind in ("user", "model"):
            out.append({"role": "user" if e.kind == "user" else "assistant", "content": e.data["content"]})
        elif e.kind == "tool_call":
            out.append(
                {
                    "role": "assistant",
                    "tool_calls": [{"id": e.data["call_id"], "name": e.data["name"], "args": e.data["arguments"]}],
                }
            )
        else:
            out.append({"role": "tool", "tool_call_id": e.data["call_id"], "content": e.data["content"]})
    return out
