"""Administration: deleting, pruning and naming sessions, and checking a file.

One function per command, each one ``BEGIN IMMEDIATE`` transaction on the
file (:func:`writing`), so a failed call (an unknown id, say) leaves the file
exactly as it was, and other processes queue for the lock as they do with the
storage. Every user mistake is found before anything is written. Writes need
the file at the schema revision this version expects; an older file is
refused with the command that upgrades it, rather than upgraded as a side
effect of, say, deleting a session.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from . import queries, records
from .database import BUSY_TIMEOUT, HEAD, check_private, connect, read_revision, transaction
from .errors import SchemaError, UsageError, from_sqlite
from .storage import SessionRecord, utc_text

__all__ = [
    "BATCH_SECONDS",
    "CheckReport",
    "check",
    "delete_sessions",
    "in_batches",
    "parse_age",
    "prune",
    "set_title",
    "writable",
    "writing",
]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class CheckReport:
    integrity: list[str]
    foreign_keys: list[str]
    revision: str | None
    head: str = HEAD

    @property
    def ok(self) -> bool:
        return self.integrity == ["ok"] and not self.foreign_keys and self.revision == self.head

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "integrity": self.integrity,
            "foreign_keys": self.foreign_keys,
            "revision": self.revision,
            "head": self.head,
        }


@contextlib.contextmanager
def writable(db: str | Path, *, busy_timeout: float = BUSY_TIMEOUT) -> Iterator[sqlite3.Connection]:
    """A connection to an existing file at the expected schema revision, the user's own, to write to."""
    path = Path(db).expanduser()
    conn = connect(path, busy_timeout=busy_timeout, check_tables=True)
    try:
        check_private(path)
        revision = read_revision(conn, path)[0]
        if revision != HEAD:
            raise SchemaError(
                f"{path} is at schema revision {revision!r}, this sessionstore writes {HEAD!r};"
                " run `sessionstore db upgrade` first"
            )
        yield conn
    except sqlite3.Error as exc:
        raise from_sqlite(exc, path) from exc
    finally:
        conn.close()


@contextlib.contextmanager
def writing(db: str | Path, *, busy_timeout: float = BUSY_TIMEOUT) -> Iterator[sqlite3.Connection]:
    """One short write transaction on an existing file (see :func:`writable`): all or nothing."""
    with writable(db, busy_timeout=busy_timeout) as conn, transaction(conn, Path(db)):
        yield conn


BATCH_SECONDS = 0.025
"""How long one transaction of a long command (prune, delete, import) may hold the write lock."""
PAUSE_SECONDS = 0.030
"""How long the lock is then left free. Longer than a batch, and longer than the first waits of SQLite's busy
handler (1, 2, 5, 10, 15, 20 ms...), so an agent waiting to append gets it at its next try: its write never waits
much more than one batch, however large the command's work."""


def in_batches(
    conn: sqlite3.Connection, path: Path, items: Iterable[T], apply: Callable[[sqlite3.Connection, T], R]
) -> Iterator[R]:
    """``apply`` each item in turn, in as many short transactions as it takes, each of whole items.

    Maintenance never starves an agent: no transaction holds the lock past
    :data:`BATCH_SECONDS`, and between two the lock is free. An interrupted run
    has applied whole items only.
    """
    remaining = iter(items)
    done = False
    while not done:
        results: list[R] = []
        with transaction(conn, path):
            started = time.monotonic()
            while time.monotonic() - started < BATCH_SECONDS:
                item = next(remaining, _END)
                if item is _END:
                    done = True
                    break
                results.append(apply(conn, cast(T, item)))
        yield from results
        if not done:
            time.sleep(PAUSE_SECONDS)


_END: Any = object()


def _delete(conn: sqlite3.Connection, sid: str) -> str:
    conn.execute(queries.DELETE_SESSION, {"sid": sid})
    return sid


def delete_sessions(db: str | Path, prefixes: Sequence[str]) -> list[str]:
    """``sessionstore delete``: the sessions (ids or unique prefixes) and their events; the full ids.

    Every prefix is resolved before anything is deleted (one that matches none
    or several deletes nothing); then whole sessions go, in short transactions.
    """
    with writable(db) as conn:
        ids = records.resolve_all(conn, prefixes)
        return list(in_batches(conn, Path(db), ids, _delete))


_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(text: str) -> timedelta:
    """``"30d"`` -> 30 days. Units: s, m (minutes), h, d, w."""
    match = _AGE.match(text.lower())
    if match is None:
        raise UsageError(f"not an age: {text!r} (use a number and a unit s, m, h, d or w, e.g. 30d)")
    try:
        return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    except OverflowError:
        raise UsageError(
            f"not an age: {text!r} is longer than any calendar (at most {timedelta.max.days:,}d)"
        ) from None


_PRUNABLE = "released = 1 AND updated_at < :cutoff"


def prune(
    db: str | Path,
    older_than: timedelta,
    *,
    dry_run: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> list[SessionRecord]:
    """``sessionstore prune``: released sessions not updated for ``older_than``; deleted unless ``dry_run``.

    A session still held by a registry (not released) is never pruned, however old. Whole sessions
    go in short transactions (:func:`in_batches`), so an agent writing meanwhile is never starved.
    """
    try:
        cutoff = utc_text(datetime.now(UTC) - older_than)
    except OverflowError:  # older than the calendar goes back: nothing is that old
        cutoff = utc_text(datetime.min.replace(tzinfo=UTC))
    if dry_run:
        with records.reading(db) as conn:
            return list(records.iter_sessions(conn, where=_PRUNABLE, cutoff=cutoff))
    with writable(db) as conn:
        doomed = list(records.iter_sessions(conn, where=_PRUNABLE, cutoff=cutoff))
        for done, _ in enumerate(in_batches(conn, Path(db), [r.session_id for r in doomed], _delete), 1):
            if progress is not None:
                progress(done, len(doomed))
        return doomed


def set_title(db: str | Path, prefix: str, title: str | None) -> str:
    """``sessionstore title``: set (or with ``None`` clear) a stored session's title; returns its full id."""
    with writing(db) as conn:
        sid = records.resolve(conn, prefix)
        conn.execute(queries.SET_TITLE, {"sid": sid, "title": title})
        return sid


def check(db: str | Path) -> CheckReport:
    """``sessionstore check``: SQLite's integrity and foreign-key checks, and the revision against this version's."""
    with records.reading(db) as conn:
        integrity = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
        foreign = [
            f"{table} row {rowid} points at a missing {parent} row"
            for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check")
        ]
        return CheckReport(integrity, foreign, read_revision(conn)[0])
