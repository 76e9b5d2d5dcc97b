"""Crash-test child: writes as fast as it can until it is killed.

Run as ``_writer.py`` it is a *zygote*: it imports sessionstore once, then for
each ``DB SYNCHRONOUS TAG`` line on stdin forks a writer, prints ``pid <pid>``,
waits for the writer to die and prints ``exit <returncode>`` (negative: killed
by that signal). Forking a warm interpreter makes a crash round cost the kill
delay rather than an interpreter start, so the suite can afford many rounds;
each writer is still a separate process with its own connections.

A writer creates three sessions (with client
context) through a retaining :class:`SessionStore`, then appends to each from
its own task while a fourth task keeps rewriting a fourth session's whole
history with ``set_history``. Every line on stdout is an acknowledgement, printed
only after the call it reports has returned:

``S <hex>``         the session was created (its record is committed)
``E <hex> <seq>``   event ``seq`` of that session is committed
``H <hex> <n>``     that session's history is now exactly events 0..n-1
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback

from sessionstore import ModelMessage, SessionStore, SQLiteStorage, ToolCall, UserMessage


def context(tag: str, index: int) -> dict[str, object]:
    """The client context of session ``index``; the parent rebuilds it to compare."""
    return {
        "cwd": f"/work/{tag}/{index}",
        "additional_directories": [f"/extra/{tag}/{index}", "/shared"],
        "mcp_servers": [{"name": f"srv{index}", "command": "mcp", "args": [tag, str(index)], "env": []}],
        "meta": {"tag": tag, "index": index, "nested": {"ok": True}},
    }


def event(seq: int) -> object:
    kind = seq % 3
    if kind == 0:
        return UserMessage(f"user {seq}")
    if kind == 1:
        return ModelMessage(f"model {seq}")
    return ToolCall(call_id=f"c{seq}", name="run", arguments={"seq": seq})


def ack(line: str) -> None:
    # One write(2) per line, shorter than PIPE_BUF: a kill never leaves half a line.
    os.write(1, (line + "\n").encode())


async def append_forever(store: SessionStore, index: int, tag: str) -> None:
    session = await store.create(**context(tag, index))
    ack(f"S {session.session_id}")
    stream = store.stream(session)
    seq = 0
    while True:
        await stream.send(event(seq))  # type: ignore[arg-type]
        ack(f"E {session.session_id} {seq}")
        seq += 1


async def rewrite_forever(store: SessionStore, tag: str) -> None:
    session = await store.create(**context(tag, 99))
    ack(f"S {session.session_id}")
    history = store.stream(session).history
    n = 0
    while True:
        n += 7
        await history.replace([event(seq) for seq in range(n)])  # type: ignore[misc]
        ack(f"H {session.session_id} {n}")


async def main(path: str, synchronous: str, tag: str) -> None:
    storage = SQLiteStorage(path, synchronous=synchronous)  # type: ignore[arg-type]
    store = SessionStore(storage=storage, retain_history=True)
    await asyncio.gather(*(append_forever(store, i, tag) for i in range(3)), rewrite_forever(store, tag))


def writer(path: str, synchronous: str, tag: str) -> None:
    try:
        asyncio.run(main(path, synchronous, tag))
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


def zygote() -> None:
    for command in sys.stdin:
        path, synchronous, tag = command.split()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            writer(path, synchronous, tag)
        ack(f"pid {pid}")
        _, status = os.waitpid(pid, 0)
        ack(f"exit {os.waitstatus_to_exitcode(status)}")


if __name__ == "__main__":
    zygote()
