"""Maintenance never starves an agent.

``prune``, ``delete``, ``import`` and ``check`` on a large file run while an
agent (another process) appends to the same file: none of its appends waits
more than 250 ms, because the commands work in short transactions of whole
sessions and leave the lock free between them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from uuid import UUID

from _support import CHILD_TIMEOUT, child

from sessionstore import records
from sessionstore.codec import TOKEN_COLUMNS, JsonCodec
from sessionstore.events import ModelMessage, ToolResult, UserMessage
from sessionstore.schema import queries
from sessionstore.sqlite import migrate as sqlite_migrate
from sessionstore.sqlite.connect import connect
from sessionstore.sqlite.search import index_new_events
from sessionstore.transfer import export_sessions

SESSIONS, EVENTS = 8_000, 12  # ~100,000 events: minutes of work in one transaction would starve anyone
OLD = "2025-01-01 00:00:00.000000"


def build(path: Path, first: int = 0) -> list[str]:
    """Released, long-untouched sessions, written as the storage writes them (index and all)."""
    sqlite_migrate.prepare_database(path)
    codec = JsonCodec()
    ids = []
    conn = connect(path, synchronous="OFF")
    conn.execute("BEGIN")
    for number in range(first, first + SESSIONS):
        sid = UUID(int=number + 1).hex
        ids.append(sid)
        values = {"cwd": "/w", "additional_directories": "[]", "mcp_servers": "[]", "meta": "{}", "title": None}
        row_id = conn.execute(
            queries.UPSERT_SESSION, {"sid": sid, **values, "created_at": OLD, "updated_at": OLD, "released": 1}
        ).fetchone()[0]
        rows = []
        for position in range(EVENTS):
            event = (UserMessage, ModelMessage, lambda text: ToolResult("c", text))[position % 3](
                f"words {number} " * 30
            )
            type_name, payload = codec.encode(event)
            role, shown, path_ = codec.describe(event)
            rows.append(
                {"id": row_id, "position": position, "type": type_name, "payload": payload, "now": OLD}
                | {"role": role, "text": None if path_ else shown, "text_path": path_}
                | dict.fromkeys(TOKEN_COLUMNS)
            )
        conn.executemany(queries.INSERT_EVENT, rows)
    index_new_events(conn, batch=SESSIONS * EVENTS)
    conn.execute("COMMIT")
    conn.close()
    return ids


def test_prune_delete_import_and_check_leave_an_agent_its_pace(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    doomed = build(db)
    source = tmp_path / "other.db"
    build(source, first=SESSIONS)
    dump = tmp_path / "other.jsonl"
    export_sessions(source, dump)

    stop, out = tmp_path / "stop", tmp_path / "paced.json"
    agent = subprocess.Popen(child("_paced.py", db, stop, out), stdout=subprocess.PIPE, text=True)
    try:
        assert agent.stdout is not None and agent.stdout.readline().strip() == "ready"
        script = Path(child("_paced.py")[0]).parent / "sessionstore"
        for command in (
            ["import", dump],
            ["delete", *doomed[:500]],
            ["prune", "--older-than", "30d", "--yes"],
            ["check"],
        ):
            done = subprocess.run([script, "--db", db, *map(str, command)], capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, (command, done.stderr)
        stop.touch()
        agent.wait(timeout=CHILD_TIMEOUT)
    finally:
        agent.kill()
    paced = json.loads(out.read_text())
    assert paced["appends"] > 100
    assert paced["slowest"] < 0.25, paced
    # And the work was done: every old session went (the agent's own is the one left).
    (left,) = records.list_sessions(db)
    assert left.events == paced["appends"] + 1
