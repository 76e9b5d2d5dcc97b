"""What AG2Codec costs per event, next to JsonCodec: ``python tests/ag2/_codec_bench.py [DIR]``.

Prints encode+decode (and describe) time per event for an AG2 ``ModelResponse``
carrying two tool calls against JsonCodec on a sessionstore ``ModelMessage``, then
the time per append through ``SQLiteStorage.save_event`` for each (one commit per
event, as AG2 saves them), on a file in DIR (default: a temporary folder).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path
from uuid import uuid4

from ag2.events import ModelMessage, ModelResponse, ToolCallEvent, ToolCallsEvent, Usage

from sessionstore import EventContext, JsonCodec, SQLiteStorage
from sessionstore import ModelMessage as OwnMessage
from sessionstore.ag2 import AG2Codec

TEXT = "Here is what I found in the repository; I will now read the two files you named. " * 2


def ag2_event() -> ModelResponse:
    calls = [
        ToolCallEvent("read_file", id=f"call-{i}", arguments=f'{{"path": "src/module_{i}.py", "lines": [1, 200]}}')
        for i in range(2)
    ]
    return ModelResponse(
        ModelMessage(TEXT),
        tool_calls=ToolCallsEvent(calls),
        usage=Usage(prompt_tokens=1200, completion_tokens=80, total_tokens=1280),
        model="gpt-test",
        provider="openai",
        finish_reason="tool_calls",
    )


def own_event() -> OwnMessage:
    return OwnMessage(TEXT)


def per_event(fn: object, number: int = 20_000) -> float:
    """Best of 5 runs, microseconds per call."""
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6  # type: ignore[arg-type]


def codec_figures() -> dict[str, float]:
    ag2_codec, json_codec = AG2Codec(), JsonCodec()
    event, own = ag2_event(), own_event()
    ag2_row, own_row = ag2_codec.encode(event), json_codec.encode(own)
    return {
        "ag2 encode": per_event(lambda: ag2_codec.encode(event)),
        "ag2 decode": per_event(lambda: ag2_codec.decode(*ag2_row)),
        "ag2 describe": per_event(lambda: ag2_codec.describe(event)),
        "json encode": per_event(lambda: json_codec.encode(own)),
        "json decode": per_event(lambda: json_codec.decode(*own_row)),
        "json describe": per_event(lambda: json_codec.describe(own)),
        "ag2 payload bytes": len(ag2_row[1].encode()),
        "json payload bytes": len(own_row[1].encode()),
    }


async def append_figure(folder: Path, codec: object, event: object, synchronous: str, count: int) -> float:
    """Median microseconds per save_event, one commit each."""
    times = []
    async with SQLiteStorage(folder / f"{uuid4().hex}.db", codec=codec, synchronous=synchronous) as storage:  # type: ignore[arg-type]
        context = EventContext.for_stream(uuid4())
        await storage.save_event(event, context)  # opens the file
        for _ in range(count):
            start = time.perf_counter()
            await storage.save_event(event, context)
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    for name, value in codec_figures().items():
        print(f"{name:>20}: {value:8.2f}{'' if 'bytes' in name else ' us'}")
    for synchronous in ("FULL", "NORMAL"):
        own = asyncio.run(append_figure(folder, JsonCodec(), own_event(), synchronous, 400))
        ag2 = asyncio.run(append_figure(folder, AG2Codec(), ag2_event(), synchronous, 400))
        print(f"append ({synchronous:>6}): json {own:8.1f} us, ag2 {ag2:8.1f} us, ratio {ag2 / own:.2f}")


if __name__ == "__main__":
    main()
