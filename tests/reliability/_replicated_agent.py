"""Litestream child: an agent writing to a file that Litestream replicates, until it is killed.

Usage: ``_replicated_agent.py DB ACKS``. Three sessions live in a retaining
:class:`SessionStore` get an event each in turn, as fast as the file takes them;
meanwhile victim sessions, each holding a word of its own, are written and
deleted, in turn by the registry (``close``: ``drop_history``), by the
``sessionstore delete`` command, and by ``sessionstore prune`` (a victim is let
go first, so that no live process holds it; the three live sessions are held,
so prune never takes them). It prints ``ready`` once the live sessions exist;
every line it appends to the file ``ACKS`` is an acknowledgement, written only
after the call it reports has returned (a file, not a pipe: nobody has to read
it while the agent runs):

``E <hex> <seq>``      event ``keep <hex> <seq>`` of that session is committed
``V <hex> <word>``     a victim's events, holding ``word``, are committed
``D <hex> <how>``      that victim is deleted (``close``, ``delete`` or ``prune``)
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from pathlib import Path

from sessionstore import AgentSession, ModelMessage, SessionStore, SQLiteStorage, UserMessage

SCRIPT = Path(sys.executable).parent / "sessionstore"
WAYS = ("close", "delete", "prune")


ACKS = -1
"""The acknowledgements' file descriptor (opened for appending in :func:`main`)."""


def ack(line: str) -> None:
    # One write(2) per line: a kill never leaves half a line.
    os.write(ACKS, (line + "\n").encode())


async def keep_writing(store: SessionStore, sessions: list[AgentSession]) -> None:
    seq = 0
    while True:
        for session in sessions:
            async with session.turn():
                await store.stream(session).send(UserMessage(f"keep {session.session_id} {seq}"))
            ack(f"E {session.session_id} {seq}")
        seq += 1
        await asyncio.sleep(0.005)


async def command(db: str, *args: str) -> None:
    proc = await asyncio.create_subprocess_exec(SCRIPT, "--db", db, *args, stdout=asyncio.subprocess.DEVNULL)
    if await proc.wait() != 0:
        raise SystemExit(f"sessionstore {args[0]} failed ({proc.returncode})")


async def delete_victims(store: SessionStore, db: str) -> None:
    for n in range(10**9):
        how = WAYS[n % len(WAYS)]
        victim = await store.create(cwd="/victims")
        word = f"zq{secrets.token_hex(6)}"
        async with victim.turn():
            await store.stream(victim).send(UserMessage(f"please forget {word}"))
            await store.stream(victim).send(ModelMessage(f"forgetting {word} " * 40))
        ack(f"V {victim.session_id} {word}")
        if how == "close":
            await store.close(victim.session_id)
        else:
            await store.forget(victim.session_id)  # no live process holds it now
            if how == "delete":
                await command(db, "delete", victim.session_id)
            else:
                await command(db, "prune", "--older-than", "0s", "--yes")
        ack(f"D {victim.session_id} {how}")


async def main(db: str, acks: str) -> None:
    global ACKS
    ACKS = os.open(acks, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    async with SQLiteStorage(db) as storage:
        store = SessionStore(storage=storage, retain_history=True)
        sessions = [await store.create(cwd="/agent") for _ in range(3)]
        print("ready", flush=True)
        await asyncio.gather(keep_writing(store, sessions), delete_victims(store, db))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
