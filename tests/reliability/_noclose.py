"""Child that never calls ``aclose()``: the interpreter must still exit, promptly, with every write committed.

Usage: ``_noclose.py DB MODE``. ``MODE`` is how the program ends:

``run``      ``asyncio.run`` returns with the storage still open
``loop``     a hand-made event loop is neither closed nor cleaned up
``pending``  ``asyncio.run`` returns while more writes are still in flight

Prints ``<hex> <n>`` once ``n`` acknowledged events were written to session ``hex``.
"""

from __future__ import annotations

import asyncio
import sys
from uuid import uuid4

from sessionstore import EventContext, SQLiteStorage, UserMessage


async def main(path: str, mode: str) -> None:
    storage = SQLiteStorage(path)
    stream_id = uuid4()
    context = EventContext.for_stream(stream_id)
    for seq in range(50):
        await storage.save_event(UserMessage(str(seq)), context)
    print(stream_id.hex, 50, flush=True)
    if mode == "pending":
        # Fire-and-forget writes still queued when the program ends: each is
        # committed whole or not at all; none may hang the exit.
        pending = [asyncio.ensure_future(storage.save_event(UserMessage(str(seq)), context)) for seq in range(50, 100)]
        await asyncio.sleep(0)
        assert not all(task.done() for task in pending)


if __name__ == "__main__":
    if sys.argv[2] == "loop":
        asyncio.new_event_loop().run_until_complete(main(sys.argv[1], sys.argv[2]))
    else:
        asyncio.run(main(sys.argv[1], sys.argv[2]))
