"""The benchmark's smoke mode runs end to end, so the bench command cannot rot.

It runs with only what the test environment has: sessionstore, MemoryStorage
and the raw sqlite3 floor are measured; each peer that is not installed here
must still get its row, saying so.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = {
    "openai_sqlite": "OpenAI Agents SQLiteSession",
    "openai_sqlalchemy": "OpenAI Agents SQLAlchemySession",
    "adk_database": "Google ADK DatabaseSessionService",
    "adk_sqlite": "Google ADK SqliteSessionService",
    "langgraph": "LangGraph AsyncSqliteSaver",
}
WORKLOADS = ["a", "b", "c", "d", "e0", "e1", "e2", "f", "g"]


def test_smoke_run_writes_the_table_with_every_store(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    table = (tmp_path / "results.md").read_text()
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines() if line.startswith("| ")}
    raw = json.loads((tmp_path / "results.json").read_text())["stores"]

    # The three stores the test environment always has are measured, every workload
    # that applies to them gets a number (a failure would show as "error").
    for key in ("memory", "raw", "sessionstore"):
        assert raw[key]["problem"] is None
        for workload in WORKLOADS:
            cell = raw[key]["cells"][workload]
            assert cell["value"] is not None or cell["problem"].startswith("n/a"), (key, workload, cell, done.stdout)
    assert "error" not in rows["sessionstore SQLiteStorage"], table
    assert "error" not in rows["raw sqlite3 floor"], table
    assert raw["sessionstore"]["cells"]["a"]["value"] > 0

    # A peer that cannot be imported here is reported, not left out.
    for key, label in PEERS.items():
        assert label in rows, f"{label} missing from the table"
        if raw[key]["problem"] is not None:
            assert raw[key]["problem"].startswith("not installed")
            assert rows[label].count("not installed") == len(WORKLOADS)
    assert "Targets (sessionstore):" in table
