"""The event payloads every store gets: one deterministic, realistic mix.

A turn is a user message (~200 B), a tool call (~150 B), its result (~600 B)
and a model message (~800 B). Each store converts these neutral events into its
own native objects *before* timing starts, so only storage is measured.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

_WORDS = (
    "the agent reads file writes patch runs tests session store commit durable sqlite event history "
    "model user tool call result error retry queue batch write ahead log page cache index query json "
    "payload stream turn prompt answer context window token budget plan step check diff merge branch"
).split()

TYPE_NAMES = {
    "user": "user_message",
    "model": "model_message",
    "tool_call": "tool_call",
    "tool_result": "tool_result",
}


@dataclass(frozen=True)
class Ev:
    """A neutral event: ``kind`` is user/model/tool_call/tool_result, ``data`` its JSON object."""

    kind: str
    data: dict[str, Any]

    @property
    def type_name(self) -> str:
        return TYPE_NAMES[self.kind]

    def json(self) -> str:
        """The payload as sessionstore's codec writes it (compact JSON, fields only)."""
        return json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))


def _text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:size]


def make_events(count: int, seed: int = 7, scale: float = 1.0) -> list[Ev]:
    """``count`` events of the mix; ``scale`` multiplies every text's length (2.4 gives ~1 KiB events)."""
    rng = random.Random(seed)

    def text(low: int, high: int) -> str:
        return _text(rng, int(rng.randint(low, high) * scale))

    events: list[Ev] = []
    call = 0
    while len(events) < count:
        step = len(events) % 4
        if step == 0:
            events.append(Ev("user", {"content": text(150, 250)}))
        elif step == 1:
            call += 1
            args = {"path": f"src/module_{rng.randint(1, 99)}.py", "query": text(40, 90)}
            events.append(Ev("tool_call", {"call_id": f"call_{call}", "name": "search_files", "arguments": args}))
        elif step == 2:
            events.append(Ev("tool_result", {"call_id": f"call_{call}", "content": text(400, 800)}))
        else:
            events.append(Ev("model", {"content": text(600, 1000)}))
    return events


def json_bytes(events: list[Ev]) -> int:
    """The raw JSON bytes of ``events``: the yardstick for file size."""
    return sum(len(e.json().encode()) for e in events)
