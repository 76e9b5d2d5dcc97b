"""The floor: plain sqlite3 at the same durability, one INSERT and COMMIT per event.

WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE`` (so several processes queue for
the lock), the payload as compact JSON text. It blocks the event loop while it
writes: nothing can be cheaper per committed event, which is why it is the floor.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from . import Adapter, sqlite_pragmas

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, session TEXT NOT NULL, position INTEGER NOT NULL,"
    " type TEXT NOT NULL, payload TEXT NOT NULL, UNIQUE (session, position))"
)


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


class Store(Adapter):
    key = "raw"
    durability = "WAL, synchronous=FULL, BEGIN IMMEDIATE + INSERT + COMMIT per event"

    def convert(self, events: list[Any]) -> list[Any]:
        return [(e.type_name, e.json()) for e in events]

    async def open(self, path: Path) -> None:
        self.conn = connect(path)
        self.conn.execute(SCHEMA)
        self.next: dict[str, int] = {}

    async def close(self) -> None:
        self.conn.close()

    async def create(self, key: str) -> None:
        row = self.conn.execute("SELECT COALESCE(MAX(position), -1) + 1 FROM events WHERE session = ?", (key,))
        self.next[key] = row.fetchone()[0]

    async def append(self, key: str, event: Any) -> None:
        position = self.next[key]
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(
            "INSERT INTO events (session, position, type, payload) VALUES (?, ?, ?, ?)", (key, position, *event)
        )
        self.conn.execute("COMMIT")
        self.next[key] = position + 1

    async def load(self, key: str, events: list[Any]) -> None:
        start = self.next[key]
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(
            "INSERT INTO events (session, position, type, payload) VALUES (?, ?, ?, ?)",
            [(key, start + i, t, p) for i, (t, p) in enumerate(events)],
        )
        self.conn.execute("COMMIT")
        self.next[key] = start + len(events)

    async def read(self, key: str) -> list[Any]:
        rows = self.conn.execute("SELECT type, payload FROM events WHERE session = ? ORDER BY position", (key,))
        return [(t, json.loads(p)) for t, p in rows]

    async def replace(self, key: str, events: list[Any]) -> None:
        # The floor for "set_history appending one event": the one INSERT it comes down to.
        await self.append(key, events[-1])

    pragma_source = "its sqlite3 connection"

    async def pragmas(self, key: str) -> dict[str, str]:
        return sqlite_pragmas(self.conn)

    def cold_start_code(self, path: Path, key: str) -> str:
        return f"""
import json, sqlite3
conn = sqlite3.connect({str(path)!r})
rows = conn.execute("SELECT type, payload FROM events WHERE session = ? ORDER BY position", ({key!r},))
events = [(t, json.loads(p)) for t, p in rows]
assert events
conn.close()
"""
