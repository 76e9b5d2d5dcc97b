"""A large database to time the command line on: ``python3 bench/bigfile.py PATH [--sessions N] [--events M]``.

Writes ``N`` sessions of ``M`` events each (default 100,000 x 10 = 1M events)
as the storage writes them (same statements, same role and text columns, the
full-text index kept by its triggers), in large transactions so it takes
minutes rather than hours. Every session's first user message holds a word
unique to it (``needle<n>``), so a search with exactly one hit is known.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

from sessionstore import ModelMessage, ToolCall, ToolResult, UserMessage
from sessionstore.codec import JsonCodec
from sessionstore.schema import queries
from sessionstore.sqlite.connect import connect
from sessionstore.sqlite.migrate import prepare
from sessionstore.sqlite.search import index_new_events
from sessionstore.storage import utc_text

# The token columns of revision 0010, NULL: what an event without usage binds (a commit before it ignores them).
NO_TOKENS: dict[str, None] = dict.fromkeys(
    ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
)

WORDS = (
    "the agent reads file writes patch runs tests session store commit durable sqlite event history model user "
    "tool call result error retry queue batch write ahead log page cache index query json payload stream turn"
).split()


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def build(path: Path, sessions: int, events: int, seed: int = 1) -> None:
    prepare(path)
    codec = JsonCodec()
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    conn = connect(path, synchronous="OFF")
    conn.execute("PRAGMA cache_size = -200000")
    began = time.perf_counter()
    conn.execute("BEGIN")
    for number in range(sessions):
        sid = UUID(int=rng.getrandbits(128)).hex
        when = utc_text(start + timedelta(seconds=number * 7))
        row_id = conn.execute(
            queries.UPSERT_SESSION,
            {
                "sid": sid,
                "cwd": f"/home/me/project{number % 50}",
                "additional_directories": "[]",
                "mcp_servers": "[]",
                "meta": "{}",
                "title": None,
                "created_at": when,
                "updated_at": when,
                "released": 1,
            },
        ).fetchone()[0]
        rows = []
        for position in range(events):
            kind = position % 4
            if position == 0:
                event: object = UserMessage(f"needle{number} " + sentence(rng, 20))
            elif kind == 1:
                event = ToolCall(call_id=f"c{position}", name="run", arguments={"cmd": sentence(rng, 4)})
            elif kind == 2:
                event = ToolResult(call_id=f"c{position - 1}", content=sentence(rng, 60))
            elif kind == 3:
                event = ModelMessage(sentence(rng, 80))
            else:
                event = UserMessage(sentence(rng, 25))
            type_name, payload = codec.encode(event)
            role, text, text_path = codec.describe(event)
            rows.append(
                {"id": row_id, "position": position, "type": type_name, "payload": payload, "now": when}
                | {"role": role, "text": None if text_path else text, "text_path": text_path}
                | NO_TOKENS
            )
        conn.executemany(queries.INSERT_EVENT, rows)
        if number % 5000 == 4999:
            conn.execute("COMMIT")
            conn.execute("BEGIN")
            print(f"{number + 1} sessions, {time.perf_counter() - began:.0f} s", flush=True)
    conn.execute("COMMIT")
    conn.execute("BEGIN")
    index_new_events(conn, batch=sessions * events)  # as a storage would have, in batches, as it wrote them
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=10)
    args = parser.parse_args()
    if args.path.exists():
        raise SystemExit(f"{args.path} exists; give a new path")
    build(args.path, args.sessions, args.events)


if __name__ == "__main__":
    main()
