"""SIGTERM ends a command on PostgreSQL as Ctrl-C does: asyncio's handler cancels its work, the transaction rolls
back, and the database is as it was.

The import is stopped (SIGSTOP) once the server shows its transaction writing, and signalled while stopped: the
signal lands mid-transaction, not after it.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from _pgcli import TIMEOUT, child_env, script_path, synthetic_export
from pg_server import PostgresServer


def writing(server: PostgresServer, database: str) -> bool:
    """Whether a client of ``database`` is inside a transaction that has written (and not committed)."""
    return server.psql(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND backend_xid IS NOT NULL AND query NOT ILIKE 'commit%'",
        database=database,
    ).strip() not in ("", "0")


def test_sigterm_mid_import_leaves_the_database_as_it_was(
    pg_server: PostgresServer, pg_url: str, tmp_path: Path
) -> None:
    database = pg_url.rsplit("/", 1)[1]
    dump = synthetic_export(tmp_path / "all.jsonl", 150, 40)
    process = subprocess.Popen(
        [script_path(), "--db", pg_url, "import", str(dump)],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while not writing(pg_server, database):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.005)
        process.send_signal(signal.SIGSTOP)
        assert writing(pg_server, database), "the import committed before it could be stopped"
        process.send_signal(signal.SIGTERM)
        process.send_signal(signal.SIGCONT)
        _, err = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert (process.returncode, err) == (143, "sessionstore: interrupted by SIGTERM; nothing half-written was kept\n")
    assert pg_server.psql("SELECT count(*) FROM sessions", database=database).strip() == "0"
    assert pg_server.psql("SELECT count(*) FROM events", database=database).strip() == "0"
