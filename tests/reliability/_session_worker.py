"""Child process for the held-sessions property test: random operations on a few sessions of one shared file.

``python _session_worker.py DB LOG WORKER SEED SESSIONS STEPS``

Each step picks a session and one of: a turn (user message, a tool call, a pause, its result, an answer), a load
that repairs what a turn cut short left (as AG2 does: the call's result written as cancelled), a rewrite of the
history (``set_history`` of what it read), letting the session go, or deleting it. Every operation goes through a
registry with retention, so it holds the session first, and a session it adopts is repaired first, as AG2's load
and resume repair it (a turn begun over a killed turn's unanswered call would have that call repaired after it,
two turns interleaved in the transcript with no two holders at once); a session another live process holds is
skipped (``SessionHeldError``). LOG gets one JSON line per event acknowledged (``ack``) and per deletion about to
be made (``drop``), fsynced, so the test can check what survived even when this process is SIGKILLed mid-step.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from typing import Any
from uuid import UUID

from sessionstore import (
    ModelMessage,
    SessionHeldError,
    SessionStore,
    SQLiteStorage,
    ToolCall,
    ToolResult,
    UserMessage,
)

CANCELLED = "cancelled: the turn stopped before this tool finished"


def log(out: Any, **line: Any) -> None:
    out.write(json.dumps({**line, "at": time.time_ns()}) + "\n")
    out.flush()
    os.fsync(out.fileno())


def unanswered(events: list[Any]) -> list[str]:
    called = [e.call_id for e in events if isinstance(e, ToolCall)]
    answered = {e.call_id for e in events if isinstance(e, ToolResult)}
    return [c for c in called if c not in answered]


async def repair(storage: SQLiteStorage, history: Any, stream: UUID, out: Any) -> None:
    """The repair AG2 makes of a turn cut short: each call left unanswered gets a cancelled result."""
    for call_id in unanswered(list(await storage.get_history(stream))):
        await history.send(ToolResult(call_id=call_id, content=CANCELLED))
        log(out, kind="ack", session=stream.hex, text=f"repair {call_id}")


async def main(db: str, log_path: str, worker: str, seed: int, sessions: list[UUID], steps: int) -> None:
    rng = random.Random(seed)
    with open(log_path, "a") as out:
        async with SQLiteStorage(db) as storage:
            store = SessionStore(storage=storage, retain_history=True, max_sessions=len(sessions) + 1)
            for step in range(steps):
                stream = rng.choice(sessions)
                op = rng.choice(["turn", "turn", "turn", "load", "rewrite", "let_go", "delete"])
                try:
                    session, adopted = await store.get_or_adopt(stream, cwd="/work")
                except SessionHeldError:
                    await asyncio.sleep(rng.random() * 0.01)
                    continue
                history = store.stream(session)
                if adopted:  # as AG2's load and resume do before anything else: a turn a killed holder cut short
                    await repair(storage, history, stream, out)
                if op == "turn":
                    turn = f"{worker}.{step}"
                    async with session.turn():
                        for event in (
                            UserMessage(f"{turn} ask"),
                            ToolCall(call_id=f"call-{turn}", name="work", arguments={"n": step}),
                        ):
                            await history.send(event)
                            log(out, kind="ack", session=stream.hex, text=_text(event))
                        await asyncio.sleep(rng.random() * 0.02)  # a SIGKILL may land here, mid-call
                        done = ToolResult(call_id=f"call-{turn}", content=f"{turn} done")
                        for event in (done, ModelMessage(f"{turn} answer")):
                            await history.send(event)
                            log(out, kind="ack", session=stream.hex, text=_text(event))
                elif op == "load":
                    await repair(storage, history, stream, out)
                elif op == "rewrite":
                    await storage.set_history(stream, list(await storage.get_history(stream)))
                elif op == "let_go":
                    await store.aclose()  # lets every session go, retained
                    store = SessionStore(storage=storage, retain_history=True, max_sessions=len(sessions) + 1)
                else:
                    log(out, kind="drop", session=stream.hex)  # before: a kill after it is a drop that may not be
                    await store.close(session.session_id)
            await store.aclose()


def _text(event: Any) -> str:
    if isinstance(event, ToolCall):
        return f"call {event.call_id}"
    if isinstance(event, ToolResult):
        return f"result {event.call_id}"
    return str(event.content)


if __name__ == "__main__":
    db, log_path, worker, seed, ids, steps = sys.argv[1:7]
    asyncio.run(main(db, log_path, worker, int(seed), [UUID(i) for i in ids.split(",")], int(steps)))
