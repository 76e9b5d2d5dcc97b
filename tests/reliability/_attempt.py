"""Child for the read-only tests: try storage calls and report how each went, as JSON.

Usage: ``_attempt.py DB ACTION...``; each ACTION is ``open``, ``read`` (list the
sessions and read every history) or ``write`` (append one event). Prints one
JSON object per action: ``{"action", "ok", "error", "storage_error", "message",
"detail"}``. Run inside a namespace where the file's location is read-only, so
the checks happen in the parent, outside it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from uuid import uuid4

from sessionstore import EventContext, SQLiteStorage, StorageError, UserMessage


async def act(storage: SQLiteStorage, action: str) -> object:
    if action == "open":
        await storage.open()
        return None
    if action == "read":
        page = await storage.list_sessions()
        return {r.session_id: len(await storage.get_history(r.stream_id)) for r in page.sessions}
    if action == "write":
        await storage.save_event(UserMessage("more"), EventContext.for_stream(uuid4()))
        return None
    raise ValueError(action)


async def main(path: str, actions: list[str]) -> None:
    storage = SQLiteStorage(path)
    for action in actions:
        report: dict[str, object] = {"action": action, "ok": True}
        try:
            report["detail"] = await act(storage, action)
        except Exception as exc:
            report.update(
                ok=False, error=type(exc).__name__, storage_error=isinstance(exc, StorageError), message=str(exc)
            )
        print(json.dumps(report), flush=True)
    await storage.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
