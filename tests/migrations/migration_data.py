"""Realistic conversations, written as plain SQL at any revision's schema.

Deterministic (seeded), so a failure reproduces. Messages are 300-1000 bytes of
prose and code-ish words; every event type appears, plus an event type the
package does not know and a payload hand-edited into invalid JSON.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import uuid
from pathlib import Path

from sessionstore.codec import legacy_description

WORDS = (
    "the a to of and in is it that for on with as this be are not was by at from or have an you can if will but "
    "file test build error function value return import module class string list dict config path line run fix "
    "check update change write read open close session event message model user agent tool call result output "
    "input parse format date time zone fixture expects failure passed failed assert raise exception traceback "
    "database table index query column row schema migration upgrade version commit branch merge release deploy "
    "server client request response header status timeout retry cache memory disk thread process async await "
    "because when then there which would should could about into over after before while where what how why "
    "please thanks sure here let me look see think try again done works now also just only first next last"
).split()


# Zipf-like: common words often, rare ones sometimes.
_WEIGHTS = [1 / (rank + 8) for rank in range(len(WORDS))]


def _identifier(rng: random.Random) -> str:
    head = rng.choice(("parse", "load", "save", "get", "set", "test", "run", "make", "check", "read"))
    tail = rng.choice(("dates", "config", "items", "user", "path", "rows", "schema", "events", "cache", "index"))
    return f"{head}_{tail}_{rng.randrange(1000):03d}"


def prose(rng: random.Random, low: int = 300, high: int = 1000) -> str:
    target = rng.randint(low, high)
    parts: list[str] = []
    size = 0
    while size < target:
        word = _identifier(rng) if rng.random() < 0.08 else rng.choices(WORDS, weights=_WEIGHTS)[0]
        parts.append(word)
        size += len(word) + 1
    text = " ".join(parts)
    return text[:1].upper() + text[1:] + "."


def conversation(rng: random.Random, turns: int) -> list[tuple[str, str]]:
    """``(type, payload)`` rows of one session: every event type, several turns."""
    dump = json.dumps
    rows: list[tuple[str, str]] = [
        ("system_message", dump({"content": "You are a careful coding agent. " + prose(rng)}))
    ]
    for turn in range(turns):
        rows.append(("user_message", dump({"content": prose(rng)})))
        call_id = f"call_{turn}_{rng.randrange(10**6)}"
        arguments = {"cmd": f"pytest -x tests/test_{_identifier(rng)}.py", "timeout": rng.randint(5, 120)}
        rows.append(("tool_call", dump({"call_id": call_id, "name": "run", "arguments": arguments})))
        if turn % 3 == 2:
            content: object = {"exit": 1, "stdout": prose(rng, 200, 600), "files": [_identifier(rng) + ".py"]}
        else:
            content = prose(rng)
        rows.append(("tool_result", dump({"call_id": call_id, "content": content, "is_error": turn % 4 == 3})))
        rows.append(("model_message", dump({"content": prose(rng), "metadata": {"tokens": rng.randint(50, 900)}})))
    return rows


def fill(conn: sqlite3.Connection, *, sessions: int = 4, turns: int = 3, seed: int = 7) -> None:
    """Write ``sessions`` sessions at the 0001 schema (unchanged through head so far)."""
    rng = random.Random(seed)
    for number in range(sessions):
        stamp = f"2026-11-{10 + number:02d} 09:{number:02d}:00.{number:06d}"
        title = None if number % 2 else f"Session {number}: why is the build red?"
        cur = conn.execute(
            "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, title,"
            " created_at, updated_at, released, revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
            (
                uuid.UUID(int=rng.getrandbits(128)).hex,
                f"/home/me/project{number % 2}",
                json.dumps([f"/home/me/lib{number}"]),
                json.dumps([{"name": "files", "command": "mcp-files"}]),
                json.dumps({"client": "zed", "n": number}),
                title,
                stamp,
                stamp,
                number % 2,
            ),
        )
        session = cur.lastrowid
        rows = conversation(rng, turns)
        if number == 0:
            rows.append(("myapp.handoff", json.dumps({"to_agent": "reviewer", "content": "handoff note"})))
            rows.append(("model_message", '{"content": "hand-edited and broken'))  # invalid JSON on purpose
            rows.append(("tool_result", json.dumps({"call_id": "x", "content": True})))
        conn.executemany(
            "INSERT INTO events (session, position, type, payload, created_at) VALUES (?, ?, ?, ?, ?)",
            [(session, position, kind, payload, stamp) for position, (kind, payload) in enumerate(rows)],
        )


def fill_described(conn: sqlite3.Connection) -> None:
    """:func:`fill`, then each event's role and text as sessionstore's codec describes it (0003 on)."""
    fill(conn)
    rows = conn.execute("SELECT id, type, payload FROM events").fetchall()
    described = [(row_id, legacy_description(kind, payload)) for row_id, kind, payload in rows]
    conn.executemany(
        "UPDATE events SET role = ?, text = ?, text_path = ? WHERE id = ?",
        [(d.role, None if d.path else d.text, d.path, row_id) for row_id, d in described],
    )


def fill_linked(conn: sqlite3.Connection) -> None:
    """:func:`fill_described`, the last session a subagent of the one before it (0006 on)."""
    fill_described(conn)
    conn.execute(
        "UPDATE sessions SET parent = (SELECT max(id) - 1 FROM sessions) WHERE id = (SELECT max(id) FROM sessions)"
    )


def fill_held(conn: sqlite3.Connection) -> None:
    """:func:`fill_linked`, the first session marked held by a process that has since ended (0007 on)."""
    fill_linked(conn)
    conn.execute(
        "UPDATE sessions SET held_by = 'pid 999999 on gone (agent.py) since 2026-12-02 00:00:00 UTC'"
        " WHERE id = (SELECT min(id) FROM sessions)"
    )


def fill_forked(conn: sqlite3.Connection) -> None:
    """:func:`fill_held`, then a fork of the first session at position 3 with one event of its own, and an
    earlier branch of the second holding its last event (0012 on)."""
    fill_held(conn)
    first, second = (row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY id LIMIT 2"))
    stamp = "2026-12-05 10:00:00.000000"
    fork = conn.execute(
        "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, title, created_at,"
        " updated_at, released, revision, forked_from, forked_at) VALUES (?, '.', '[]', '[]', '{}', NULL, ?, ?, 0, 0,"
        " ?, 3)",
        (uuid.UUID(int=10).hex, stamp, stamp, first),
    ).lastrowid
    conn.execute(
        # As the codec describes it: a string content is read at its path, not stored twice.
        "INSERT INTO events (session, position, type, payload, created_at, role, text, text_path) VALUES (?, 3,"
        " 'user_message', '{\"content\": \"a fork of its own\"}', ?, 'user', NULL, '$.content')",
        (fork, stamp),
    )
    branch = conn.execute(
        "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, title, created_at,"
        " updated_at, released, revision, forked_from, forked_at, branch_of) VALUES (?, '.', '[]', '[]', '{}', NULL,"
        " ?, ?, 0, 0, ?, (SELECT max(position) FROM events WHERE session = ?), ?)",
        (uuid.UUID(int=11).hex, stamp, stamp, second, second, second),
    ).lastrowid
    conn.execute(
        "UPDATE events SET session = ? WHERE session = ? AND position = (SELECT max(position) FROM events WHERE"
        " session = ?)",
        (branch, second, second),
    )


# How to fill a file at each revision. The upgrade test builds every revision
# with its filler; a revision without one fails that test until it has one.
FILLERS = {
    "0001": fill,
    "0002": fill,
    "0003": fill_described,
    "0004": fill_described,
    "0005": fill_described,
    "0006": fill_linked,
    "0007": fill_held,
    "0008": fill_held,
    "0009": fill_held,
    "0010": fill_held,
    "0011": fill_held,
    "0012": fill_forked,
    "0013": fill_forked,
    "0014": fill_forked,
    "0015": fill_forked,  # PostgreSQL only: a file is unchanged
}

# The columns every revision has: what an upgrade and a downgrade must keep as they were.
SESSION_COLUMNS = "id, session_id, cwd, additional_directories, mcp_servers, meta, title, created_at, updated_at,"
SESSION_COLUMNS += " released, revision"
EVENT_COLUMNS = "id, session, position, type, payload, created_at"


def snapshot(conn: sqlite3.Connection) -> dict[str, list[tuple[object, ...]]]:
    """Every row of the models' tables (the columns of every revision), in a stable order."""
    return {
        "sessions": conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY id").fetchall(),
        "events": conn.execute(f"SELECT {EVENT_COLUMNS} FROM events ORDER BY id").fetchall(),
    }


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
