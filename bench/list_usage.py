"""``sessionstore list --json`` of every session, this checkout against another revision, on SQLite and PostgreSQL.

    python3 bench/list_usage.py --against main --rounds 12
    python3 bench/list_usage.py --against main --rounds 4 --sessions 1000 --only sqlite     # quick

One database of each kind holds ``--sessions`` sessions of three events each (a prompt, a usage event, a reply),
written by SQL (a file; a database on a throwaway PostgreSQL server, the tests' own) after the revision compared
against made its schema. Each round runs the command line of both versions once on each database, as whole
processes writing to /dev/null, in alternating order (the machine's load drifts). Reported per database: each
version's median, and the paired ratio, the other's time over this checkout's: median (min-max), and in how many
rounds this checkout was faster. The two print the same JSON (checked once, untimed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # pg_server: the tests' own server

SESSION_COLUMNS = ("session_id", "cwd", "additional_directories", "mcp_servers", "meta", "created_at", "updated_at")
SESSION_COLUMNS += ("released", "revision")
EVENT_COLUMNS = ("session", "position", "type", "payload", "created_at", "role", "text", "text_path")
EVENT_COLUMNS += ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


def sessions(count: int) -> list[tuple[Any, ...]]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        (f"{n:032x}", "/work", "[]", "[]", "{}", start + timedelta(seconds=n), start + timedelta(seconds=n), False, 3)
        for n in range(1, count + 1)
    ]


def events(row_ids: list[int]) -> list[tuple[Any, ...]]:
    at = datetime(2026, 1, 2, tzinfo=UTC)
    out: list[tuple[Any, ...]] = []
    for n in row_ids:
        prompt = json.dumps({"content": f"question {n}"})
        usage = json.dumps({"input_tokens": 100 + n, "output_tokens": 20})
        reply = json.dumps({"content": f"answer {n}"})
        out.append((n, 0, "user_message", prompt, at, "user", None, "$.content", None, None, None, None, None))
        out.append((n, 1, "token_usage", usage, at, None, None, None, 100 + n, 20, n % 7, 0, 0))
        out.append((n, 2, "model_message", reply, at, "assistant", None, "$.content", None, None, None, None, None))
    return out


def build_sqlite(path: Path, count: int) -> None:
    from sessionstore import SQLiteStorage
    from sessionstore.storage import utc_text

    async def made() -> None:
        async with SQLiteStorage(path):
            pass

    asyncio.run(made())
    conn = sqlite3.connect(path)
    with conn:
        rows = [(*r[:5], utc_text(r[5]), utc_text(r[6]), *r[7:]) for r in sessions(count)]
        conn.executemany(f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)}) VALUES ({', '.join('?' * 9)})", rows)
        ids = [int(i) for (i,) in conn.execute("SELECT id FROM sessions ORDER BY id")]
        marks = ", ".join("?" * len(EVENT_COLUMNS))
        rows = [(*e[:4], utc_text(e[4]), *e[5:]) for e in events(ids)]
        conn.executemany(f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) VALUES ({marks})", rows)
    conn.close()


def build_postgres(url: str, count: int) -> None:
    import asyncpg  # type: ignore[import-untyped]

    from sessionstore.postgres import PostgresStorage

    async def made() -> None:
        async with PostgresStorage(url):
            pass
        conn = await asyncpg.connect(url.replace("+asyncpg", ""))
        try:
            # Times as the columns take them here: naive UTC (timestamp without time zone).
            naive = [(*r[:5], r[5].replace(tzinfo=None), r[6].replace(tzinfo=None), *r[7:]) for r in sessions(count)]
            await conn.copy_records_to_table("sessions", records=naive, columns=SESSION_COLUMNS)
            ids = [int(r[0]) for r in await conn.fetch("SELECT id FROM sessions ORDER BY id")]
            rows = [(*e[:4], e[4].replace(tzinfo=None), *e[5:]) for e in events(ids)]
            await conn.copy_records_to_table("events", records=rows, columns=EVENT_COLUMNS)
            await conn.execute("ANALYZE")
        finally:
            await conn.close()

    asyncio.run(made())


def listed(root: Path, db: str, out: int | None = subprocess.DEVNULL) -> tuple[float, bytes]:
    """One ``sessionstore list --json`` of ``root``'s code: its wall time (seconds) and its output."""
    env = os.environ | {"PYTHONPATH": str(root)}
    command = [sys.executable, "-m", "sessionstore.cli", "list", "--json", "--db", db]
    started = time.perf_counter()
    # Run from elsewhere: ``-m`` puts the working directory first on sys.path, before PYTHONPATH.
    done = subprocess.run(command, env=env, stdout=out, stderr=subprocess.PIPE, cwd=tempfile.gettempdir(), check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{root}: {' '.join(command)} failed: {done.stderr.decode()}")
    return took, done.stdout or b""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="a git revision to compare with (required)")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--only", choices=("sqlite", "postgres"))
    parser.add_argument("--build", nargs=2, metavar=("KIND", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        kind, db = args.build
        (build_sqlite if kind == "sqlite" else build_postgres)(Path(db) if kind == "sqlite" else db, args.sessions)
        return
    if args.against is None:
        parser.error("--against REV is required")
    folder = Path(tempfile.mkdtemp())
    worktree = folder / "against"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(worktree), args.against], check=True)
    versions = {args.against: worktree, "this checkout": HERE.parent}
    try:
        with contextlib.ExitStack() as stack:
            databases = {}
            if args.only != "postgres":
                databases["sqlite"] = str(folder / "list.db")
            if args.only != "sqlite":
                from pg_server import running

                server = stack.enter_context(running())
                databases["postgres"] = server.url(server.create_database())
            for kind, db in databases.items():  # the schema of the older version, which both read
                env = os.environ | {"PYTHONPATH": str(worktree)}
                build = [sys.executable, __file__, "--build", kind, db, "--sessions", str(args.sessions)]
                subprocess.run(build, env=env, check=True)
                outputs = {listed(root, db, subprocess.PIPE)[1] for root in versions.values()}
                assert len(outputs) == 1, f"{kind}: the two versions list different JSON"
            times: dict[tuple[str, str], list[float]] = {(k, v): [] for k in databases for v in versions}
            for number in range(args.rounds):
                order = list(versions.items())
                for name, root in order if number % 2 == 0 else reversed(order):
                    for kind, db in databases.items():
                        times[kind, name].append(listed(root, db)[0])
        load = os.getloadavg()
        print(f"sessionstore list --json, {args.sessions:,} sessions, {args.rounds} rounds, load {load[0]:.1f}")
        for kind in databases:
            old, new = times[kind, args.against], times[kind, "this checkout"]
            ratios = [o / n for o, n in zip(old, new, strict=True)]
            print(
                f"{kind}: {args.against} {statistics.median(old) * 1e3:.0f} ms, this checkout"
                f" {statistics.median(new) * 1e3:.0f} ms; paired {statistics.median(ratios):.2f}x as fast"
                f" ({min(ratios):.2f}-{max(ratios):.2f}), faster in {sum(r > 1 for r in ratios)} of {len(ratios)}"
            )
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], check=False)


if __name__ == "__main__":
    main()
