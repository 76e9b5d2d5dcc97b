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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from . import queries, records
from .database import BUSY_TIMEOUT, HEAD, check_private, connect, read_revision, transaction
from .errors import SchemaError, UsageError, from_sqlite
from .storage import SessionRecord, utc_text

__all__ = ["CheckReport", "check", "delete_sessions", "parse_age", "prune", "set_title", "writing"]


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
def writing(db: str | Path, *, busy_timeout: float = BUSY_TIMEOUT) -> Iterator[sqlite3.Connection]:
    """One write transaction on an existing file at the expected schema revision: all or nothing."""
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
        with transaction(conn, path):
            yield conn
    except sqlite3.Error as exc:
        raise from_sqlite(exc, path) from exc
    finally:
        conn.close()


def delete_sessions(db: str | Path, prefixes: Sequence[str]) -> list[str]:
    """``sessionstore delete``: the sessions (ids or unique prefixes) and their events, all or none; the full ids."""
    with writing(db) as conn:
        ids = records.resolve_all(conn, prefixes)
        conn.executemany(queries.DELETE_SESSION, [{"sid": sid} for sid in ids])
        return ids


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

    A session still held by a registry (not released) is never pruned, however old.
    """
    try:
        cutoff = utc_text(datetime.now(UTC) - older_than)
    except OverflowError:  # older than the calendar goes back: nothing is that old
        cutoff = utc_text(datetime.min.replace(tzinfo=UTC))
    if dry_run:
        with records.reading(db) as conn:
            return list(records.iter_sessions(conn, where=_PRUNABLE, cutoff=cutoff))
    with writing(db) as conn:
        doomed = list(records.iter_sessions(conn, where=_PRUNABLE, cutoff=cutoff))
        for done, record in enumerate(doomed, 1):
            conn.execute(queries.DELETE_SESSION, {"sid": record.session_id})
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
