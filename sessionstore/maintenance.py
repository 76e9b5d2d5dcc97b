"""Operating on a database file as a whole: what ``sessionstore`` (the command) does, callable from Python.

Every function takes a :class:`~sessionstore.SQLiteStorage` or a path and works
on the file through its own short-lived ``sqlite3`` connection (in a thread, so
the functions are safe to await from a running application):

* Reading never creates, migrates or writes the file: a missing file is a
  :class:`DatabaseNotFoundError`, and the connection is ``query_only``.
* Writing is one ``BEGIN IMMEDIATE`` transaction per call, so a failed call
  (an unknown id, a bad line in an import file) leaves the file exactly as it
  was, and other processes queue for the lock as they do with the storage.
  Every user mistake is found before the transaction starts.
* Writes need the file at the schema revision this version expects; an older
  file is refused with the command that upgrades it, rather than upgraded as a
  side effect of, say, deleting a session.

The export format is JSON Lines: a header ``{"format": "sessionstore-export",
"version": 2}``, then per session a ``{"kind": "session", ...}`` line followed by
one ``{"kind": "event", ...}`` line per event, the payload as the stored JSON
text verbatim (lossless, even for event types this version cannot decode), with
the role and text its codec gave it. Version 1 files (no role and text) are
read too: their events are sessionstore's own, described as the codec does.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, TypeAlias, TypeVar

from .codec import ROLES, Description, JsonCodec
from .errors import NotADatabaseError, SchemaError, StorageError, from_sqlite
from .migrate import HEAD
from .models import EVENT_TEXT, utc_text
from .sqlite import SQLiteStorage
from .storage import shorten_title

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "AmbiguousSessionIdError",
    "CheckReport",
    "DatabaseNotFoundError",
    "ImportConflictError",
    "ImportFileError",
    "ImportSummary",
    "NoSuchSessionError",
    "SearchHit",
    "SessionSummary",
    "Stats",
    "StoredEvent",
    "Target",
    "check",
    "delete_sessions",
    "derive_title",
    "legacy_description",
    "export_jsonl",
    "import_jsonl",
    "list_sessions",
    "parse_age",
    "prune",
    "read_session",
    "resolve_id",
    "search",
    "set_title",
    "stats",
]

Target: TypeAlias = "SQLiteStorage | str | os.PathLike[str]"
Progress: TypeAlias = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while a long operation runs."""

T = TypeVar("T")

EXPORT_FORMAT = "sessionstore-export"
EXPORT_VERSION = 2
# Versions import reads: 1 had no role and text per event.
_READABLE_VERSIONS = (1, 2)


class DatabaseNotFoundError(StorageError):
    """There is no database file at the path; nothing was created."""


class NoSuchSessionError(StorageError, LookupError):
    """No stored session's id starts with the given prefix."""


class AmbiguousSessionIdError(StorageError, LookupError):
    """More than one stored session's id starts with the given prefix."""


class ImportFileError(StorageError, ValueError):
    """The file to import is not a valid export; nothing was imported."""


class ImportConflictError(StorageError):
    """A session in the file is already stored with different events; nothing was imported."""


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """A stored session as listings show it. ``title`` is the stored one, else derived."""

    session_id: str
    title: str | None
    cwd: str
    created_at: datetime
    updated_at: datetime
    released: bool
    events: int
    stored_title: str | None = None
    additional_directories: list[Any] = field(default_factory=list)
    mcp_servers: list[Any] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "title": self.title,
            "stored_title": self.stored_title,
            "cwd": self.cwd,
            "additional_directories": self.additional_directories,
            "mcp_servers": self.mcp_servers,
            "meta": self.meta,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "released": self.released,
            "events": self.events,
        }


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event row as stored: the payload is the JSON text, undecoded."""

    position: int
    type: str
    payload: str
    created_at: datetime
    role: str | None = None
    text: str | None = None
    # Where the text sits in the payload, when it is not stored on its own.
    text_path: str | None = None

    def to_json(self) -> dict[str, Any]:
        try:
            payload: Any = json.loads(self.payload)
        except ValueError:
            payload = self.payload  # edited by hand into something that is not JSON: shown as it is
        return {
            "position": self.position,
            "type": self.type,
            "payload": payload,
            "role": self.role,
            "text": self.text,
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class SearchHit:
    session_id: str
    title: str | None
    position: int
    type: str
    snippet: str
    role: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "title": self.title,
            "position": self.position,
            "type": self.type,
            "role": self.role,
            "snippet": self.snippet,
        }


@dataclass(frozen=True, slots=True)
class ImportSummary:
    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    events: int = 0


@dataclass(frozen=True, slots=True)
class Stats:
    path: str
    sessions: int
    released: int
    events: int
    event_types: dict[str, int]
    file_size: int
    wal_size: int
    revision: str | None
    head: str

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "sessions": self.sessions,
            "released": self.released,
            "events": self.events,
            "event_types": self.event_types,
            "file_size": self.file_size,
            "wal_size": self.wal_size,
            "revision": self.revision,
            "head": self.head,
        }


@dataclass(frozen=True, slots=True)
class CheckReport:
    integrity: list[str]
    foreign_keys: list[str]
    revision: str | None
    head: str

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


# -- small pure helpers ----------------------------------------------------------------------


# The same rule the storage lists untitled sessions under.
derive_title = shorten_title


_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(text: str) -> timedelta:
    """``"30d"`` -> 30 days. Units: s, m (minutes), h, d, w."""
    match = _AGE.match(text.lower())
    if match is None:
        raise ValueError(f"not an age: {text!r} (use a number and a unit s, m, h, d or w, e.g. 30d)")
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def _parse_stamp(text: str) -> datetime:
    """Stored text (naive UTC) or ISO 8601 (with or without offset) to an aware UTC datetime."""
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    return when.astimezone(UTC)


def _normalise_prefix(prefix: str) -> str:
    cleaned = prefix.strip().lower().replace("-", "")
    if not cleaned or len(cleaned) > 32 or re.fullmatch(r"[0-9a-f]+", cleaned) is None:
        raise NoSuchSessionError(f"not a session id: {prefix!r} (ids are hex digits; any unique prefix works)")
    return cleaned


# -- connections -------------------------------------------------------------------------------


def _path_of(target: Target) -> Path:
    if isinstance(target, SQLiteStorage):
        return target.path
    return Path(target).expanduser()


def _timeout_of(target: Target) -> float:
    return target.busy_timeout if isinstance(target, SQLiteStorage) else 30.0


def _connect(path: Path, timeout: float, *, write: bool) -> sqlite3.Connection:
    """A connection to an existing sessionstore database; never creates the file."""
    if not path.exists():
        raise DatabaseNotFoundError(f"{path}: no such database file")
    if path.is_dir():
        raise NotADatabaseError(f"{path} is a folder, not a database file")
    try:
        # mode=rw opens an existing file only (never creates one), and still opens
        # read-only when the file is write-protected; reads are query_only besides.
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=rw", uri=True, timeout=timeout, isolation_level=None)
    except sqlite3.Error as exc:
        raise from_sqlite(exc, path) from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        if not write:
            conn.execute("PRAGMA query_only = ON")
        names = {str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.Error as exc:
        conn.close()
        raise from_sqlite(exc, path) from exc
    if not {"sessions", "events"} <= names:
        conn.close()
        raise NotADatabaseError(f"{path} is not a sessionstore database (it has no sessions and events tables)")
    return conn


def _revision(conn: sqlite3.Connection) -> str | None:
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.OperationalError:
        return None
    return None if row is None else str(row[0])


def _head() -> str:
    # The constant the storage itself opens files against (kept equal to the scripts' head by a test),
    # rather than migrate.head(), which would load Alembic for every command.
    return HEAD


def _has(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


@contextmanager
def _reading(target: Target) -> Iterator[sqlite3.Connection]:
    path = _path_of(target)
    conn = _connect(path, _timeout_of(target), write=False)
    try:
        yield conn
    except sqlite3.Error as exc:
        raise from_sqlite(exc, path) from exc
    finally:
        conn.close()


@contextmanager
def _writing(target: Target) -> Iterator[sqlite3.Connection]:
    """One write transaction on an existing file at the expected schema revision: all or nothing."""
    path = _path_of(target)
    conn = _connect(path, _timeout_of(target), write=True)
    try:
        revision, head = _revision(conn), _head()
        if revision != head:
            raise SchemaError(
                f"{path} is at schema revision {revision!r}, this sessionstore writes {head!r};"
                " run `sessionstore db upgrade` first"
            )
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise from_sqlite(exc, path) from exc
    finally:
        conn.close()


async def _run(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(func, *args, **kwargs)


# -- ids ---------------------------------------------------------------------------------------


def _resolve(conn: sqlite3.Connection, prefix: str) -> str:
    cleaned = _normalise_prefix(prefix)
    # A range scan over the unique index rather than LIKE (which the index cannot serve case-insensitively).
    rows = conn.execute(
        "SELECT session_id FROM sessions WHERE session_id >= ? AND session_id < ? ORDER BY session_id LIMIT 6",
        (cleaned, cleaned + "g"),
    ).fetchall()
    if not rows:
        raise NoSuchSessionError(f"no session matches {prefix!r}")
    if len(rows) > 1:
        ids = [str(r[0]) for r in rows]
        # As many digits as it takes to tell the candidates apart (git does the same).
        width = max(8, 1 + max(_common(a, b) for a, b in itertools.pairwise(ids)))
        shown = ", ".join(sid[:width] for sid in ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise AmbiguousSessionIdError(f"{prefix!r} is ambiguous: it matches {shown}; give more digits")
    return str(rows[0][0])


def _common(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _resolve_all(conn: sqlite3.Connection, prefixes: Sequence[str]) -> list[str]:
    ids: list[str] = []
    for prefix in prefixes:
        sid = _resolve(conn, prefix)
        if sid not in ids:
            ids.append(sid)
    return ids


async def resolve_id(target: Target, prefix: str) -> str:
    """The full id of the one stored session whose id starts with ``prefix`` (dashes and case ignored)."""

    def work() -> str:
        with _reading(target) as conn:
            return _resolve(conn, prefix)

    return await _run(work)


# -- listing and reading -----------------------------------------------------------------------

# The title column: the session_overview view's (a stored title, else one derived from the first user
# message) where the file has the view, so `list` and a person's `sqlite3` agree; else the first user
# message, shortened here.
_VIEW_TITLE = "(SELECT o.title FROM session_overview AS o WHERE o.session_id = s.session_id)"
_FIRST_USER = (
    "(SELECT json_extract(e.payload, '$.content') FROM events AS e"
    " WHERE e.session = s.id AND e.type = 'user_message' AND json_valid(e.payload) ORDER BY e.position LIMIT 1)"
)
_SUMMARY_SQL = (
    "SELECT s.session_id, s.title, s.cwd, s.created_at, s.updated_at, s.released,"
    " (SELECT count(*) FROM events AS e WHERE e.session = s.id) AS events, {title},"
    " s.additional_directories, s.mcp_servers, s.meta"
    " FROM sessions AS s"
)


def _loads(text: object, default: Any) -> Any:
    try:
        return json.loads(str(text)) if text is not None else default
    except ValueError:
        return default


def _summary(row: Sequence[Any], *, from_view: bool) -> SessionSummary:
    sid, stored, cwd, created, updated, released, events, title, dirs, servers, meta = row
    if not from_view:
        title = stored if stored is not None else derive_title(title if isinstance(title, str) else None)
    return SessionSummary(
        session_id=str(sid),
        title=title,
        stored_title=stored,
        cwd=str(cwd),
        created_at=_parse_stamp(str(created)),
        updated_at=_parse_stamp(str(updated)),
        released=bool(released),
        events=int(events),
        additional_directories=_loads(dirs, []),
        mcp_servers=_loads(servers, []),
        meta=_loads(meta, {}),
    )


def _summaries(
    conn: sqlite3.Connection, where: str = "", params: Sequence[Any] = (), limit: int | None = None
) -> list[SessionSummary]:
    from_view = _has(conn, "session_overview")
    query = _SUMMARY_SQL.format(title=_VIEW_TITLE if from_view else _FIRST_USER)
    query += f" {where} ORDER BY s.updated_at DESC, s.session_id DESC"
    if limit is not None:
        query += f" LIMIT {int(limit)}"
    return [_summary(row, from_view=from_view) for row in conn.execute(query, tuple(params))]


async def list_sessions(target: Target, *, cwd: str | None = None, limit: int | None = None) -> list[SessionSummary]:
    """Stored sessions, newest first (``updated_at``), optionally for one ``cwd``."""

    def work() -> list[SessionSummary]:
        with _reading(target) as conn:
            where, params = ("WHERE s.cwd = ?", [cwd]) if cwd is not None else ("", [])
            return _summaries(conn, where, params, limit)

    return await _run(work)


_LEGACY_CODEC = JsonCodec()


def legacy_description(type_name: str, payload: str) -> Description:
    """The role and text of an event stored without them (a file before revision 0003, a version 1 export).

    Only sessionstore's own event types existed then, so its codec describes them.
    """
    return _LEGACY_CODEC.describe(_LEGACY_CODEC.decode(type_name, payload))


def _described(conn: sqlite3.Connection) -> bool:
    """Whether the file stores each event's role and text (revision 0003 on)."""
    return "role" in {str(row[1]) for row in conn.execute("PRAGMA table_info(events)")}


def _events(conn: sqlite3.Connection, sid: str) -> list[StoredEvent]:
    described = _described(conn)
    columns = f"e.role, {EVENT_TEXT.format(e='e')}, e.text_path" if described else "NULL, NULL, NULL"
    rows = conn.execute(
        f"SELECT e.position, e.type, e.payload, e.created_at, {columns}"
        " FROM events AS e JOIN sessions AS s ON s.id = e.session WHERE s.session_id = ? ORDER BY e.position",
        (sid,),
    )
    events = []
    for position, type_name, payload, created, role, text, path in rows:
        if not described:
            role, text, path = legacy_description(str(type_name), str(payload))
        events.append(
            StoredEvent(int(position), str(type_name), str(payload), _parse_stamp(str(created)), role, text, path)
        )
    return events


async def read_session(target: Target, prefix: str) -> tuple[SessionSummary, list[StoredEvent]]:
    """A session (by id or unique prefix) and its events in order, as stored."""

    def work() -> tuple[SessionSummary, list[StoredEvent]]:
        with _reading(target) as conn:
            conn.execute("BEGIN")  # the record and its events from one snapshot
            sid = _resolve(conn, prefix)
            (summary,) = _summaries(conn, "WHERE s.session_id = ?", [sid])
            return summary, _events(conn, sid)

    return await _run(work)


# -- export / import -----------------------------------------------------------------------------


def _export_lines(conn: sqlite3.Connection, ids: Sequence[str] | None, progress: Progress | None) -> Iterator[str]:
    def dump(obj: dict[str, Any]) -> str:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"

    if ids is None:
        ids = [str(r[0]) for r in conn.execute("SELECT session_id FROM sessions ORDER BY id")]
    yield dump({"format": EXPORT_FORMAT, "version": EXPORT_VERSION})
    for done, sid in enumerate(ids, 1):
        row = conn.execute(
            "SELECT session_id, cwd, additional_directories, mcp_servers, meta, title, created_at, updated_at,"
            " released FROM sessions WHERE session_id = ?",
            (sid,),
        ).fetchone()
        yield dump(
            {
                "kind": "session",
                "session_id": row[0],
                "cwd": row[1],
                "additional_directories": _loads(row[2], []),
                "mcp_servers": _loads(row[3], []),
                "meta": _loads(row[4], {}),
                "title": row[5],
                "created_at": _parse_stamp(str(row[6])).isoformat(),
                "updated_at": _parse_stamp(str(row[7])).isoformat(),
                "released": bool(row[8]),
            }
        )
        for event in _events(conn, sid):
            yield dump(
                {
                    "kind": "event",
                    "session_id": sid,
                    "position": event.position,
                    "type": event.type,
                    "payload": event.payload,
                    "role": event.role,
                    "text": None if event.text_path is not None else event.text,
                    "text_path": event.text_path,
                    "created_at": event.created_at.isoformat(),
                }
            )
        if progress is not None:
            progress(done, len(ids))


async def export_jsonl(
    target: Target,
    out: str | os.PathLike[str] | IO[str],
    prefixes: Sequence[str] | None = None,
    *,
    progress: Progress | None = None,
) -> int:
    """Write the sessions (all when ``prefixes`` is None) as JSON Lines; returns how many.

    Read from one snapshot, so an export taken while an agent writes is
    consistent. A path is written whole or not at all (a temporary file renamed
    into place).
    """

    def work() -> int:
        with _reading(target) as conn:
            conn.execute("BEGIN")
            ids = _resolve_all(conn, prefixes) if prefixes is not None else None
            count = len(ids) if ids is not None else int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
            lines = _export_lines(conn, ids, progress)
            if not isinstance(out, (str, os.PathLike)):
                out.writelines(lines)
                out.flush()
                return count
            dest = Path(out)
            fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                    handle.writelines(lines)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, dest)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            return count

    return await _run(work)


@dataclass(slots=True)
class _ImportSession:
    line: int
    row: tuple[Any, ...]
    events: list[tuple[int, str, str, str | None, str | None, str | None, str]] = field(default_factory=list)


_SESSION_FIELDS = {"kind", "session_id", "created_at", "updated_at", "title"}
# Fields that may be left out of a hand-written file, with the type each must have and its default.
_SESSION_DEFAULTS: tuple[tuple[str, type, Any], ...] = (
    ("cwd", str, "."),
    ("additional_directories", list, []),
    ("mcp_servers", list, []),
    ("meta", dict, {}),
    ("released", bool, False),
)
_EVENT_FIELDS = {"kind", "session_id", "position", "type", "payload", "created_at", "role", "text", "text_path"}


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _BadLine(Exception):
    pass


def _stamp(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if isinstance(value, str):
        try:
            return utc_text(_parse_stamp(value))
        except ValueError:
            pass
    raise _BadLine(f"{key} must be an ISO 8601 timestamp, got {value!r}")


def _session_line(obj: dict[str, Any], seen: set[str]) -> tuple[Any, ...]:
    extra = set(obj) - _SESSION_FIELDS - {key for key, _, _ in _SESSION_DEFAULTS}
    if extra:
        raise _BadLine(f"unknown session fields {sorted(extra)}")
    sid = obj.get("session_id")
    if not isinstance(sid, str) or re.fullmatch(r"[0-9a-f]{32}", sid) is None:
        raise _BadLine(f"session_id must be 32 lowercase hex digits, got {sid!r}")
    if sid in seen:
        raise _BadLine(f"session {sid} appears twice")
    values: dict[str, Any] = {}
    for key, kind, default in _SESSION_DEFAULTS:
        value = obj.get(key, default)
        if not isinstance(value, kind):
            raise _BadLine(f"{key} must be a {kind.__name__}, got {value!r}")
        values[key] = value
    title = obj.get("title")
    if title is not None and not isinstance(title, str):
        raise _BadLine(f"title must be a string or null, got {title!r}")
    return (
        sid,
        values["cwd"],
        _compact(values["additional_directories"]),
        _compact(values["mcp_servers"]),
        _compact(values["meta"]),
        title,
        _stamp(obj, "created_at"),
        _stamp(obj, "updated_at"),
        int(values["released"]),
    )


def _event_line(
    obj: dict[str, Any], session: _ImportSession | None, version: int
) -> tuple[int, str, str, str | None, str | None, str | None, str]:
    extra = set(obj) - _EVENT_FIELDS
    if extra:
        raise _BadLine(f"unknown event fields {sorted(extra)}")
    if session is None or obj.get("session_id") != session.row[0]:
        raise _BadLine("an event must follow the line of its session")
    after = session.events[-1][0] if session.events else -1
    position, type_name, payload = obj.get("position"), obj.get("type"), obj.get("payload")
    if not isinstance(position, int) or isinstance(position, bool) or position <= after:
        raise _BadLine(f"position must be an integer above {after}, got {position!r}")
    if not isinstance(type_name, str) or not type_name:
        raise _BadLine(f"type must be a non-empty string, got {type_name!r}")
    if not isinstance(payload, str):
        raise _BadLine("payload must be the event's JSON text, as a string")
    try:
        json.loads(payload)
    except ValueError:
        raise _BadLine("payload is not valid JSON text") from None
    if version == 1:
        role, text, path = legacy_description(type_name, payload)
        text = None if path is not None else text  # stored once, in the payload
    else:
        role, text, path = obj.get("role"), obj.get("text"), obj.get("text_path")
        if role is not None and role not in ROLES:
            raise _BadLine(f"role must be one of {', '.join(ROLES)} or null, got {role!r}")
        if text is not None and not isinstance(text, str):
            raise _BadLine(f"text must be a string or null, got {text!r}")
        if path is not None and (not isinstance(path, str) or not path.startswith("$") or text is not None):
            raise _BadLine(f"text_path must be a JSON path ($...) given instead of text, or null, got {path!r}")
    return position, type_name, payload, role, text, path, _stamp(obj, "created_at")


def _read_export(path: Path) -> Iterator[_ImportSession]:
    """The sessions of an export file, each with its events; :class:`ImportFileError` at the first flaw."""
    try:
        handle = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise ImportFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ImportFileError(f"{path} is a folder, not an export file") from None
    except OSError as exc:
        raise ImportFileError(f"{path}: cannot read it ({exc.strerror})") from None
    seen: set[str] = set()
    current: _ImportSession | None = None
    version = 0
    number = 0
    with handle:
        try:
            for number, text in enumerate(handle, 1):
                if not text.strip():
                    continue
                try:
                    obj = json.loads(text)
                except ValueError:
                    raise _BadLine("not a JSON object") from None
                if not isinstance(obj, dict):
                    raise _BadLine("not a JSON object")
                if not version:
                    if obj.get("format") != EXPORT_FORMAT:
                        raise _BadLine(f"not a sessionstore export (it must start with the {EXPORT_FORMAT} header)")
                    if obj.get("version") not in _READABLE_VERSIONS:
                        raise _BadLine(
                            f"format version {obj.get('version')!r}; this sessionstore reads versions"
                            f" {', '.join(map(str, _READABLE_VERSIONS))}"
                        )
                    version = int(obj["version"])
                elif obj.get("kind") == "session":
                    row = _session_line(obj, seen)
                    if current is not None:
                        yield current
                    seen.add(row[0])
                    current = _ImportSession(number, row)
                elif obj.get("kind") == "event":
                    event = _event_line(obj, current, version)
                    assert current is not None
                    current.events.append(event)
                else:
                    raise _BadLine(f"kind must be 'session' or 'event', got {obj.get('kind')!r}")
        except UnicodeDecodeError:
            raise ImportFileError(f"{path} is not UTF-8 text; nothing was imported") from None
        except _BadLine as exc:
            raise ImportFileError(f"{path} line {number}: {exc}; nothing was imported") from None
    if not version:
        raise ImportFileError(f"{path} is empty, not a sessionstore export; nothing was imported")
    if current is not None:
        yield current


_INSERT_SESSION = (
    "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, title, created_at, updated_at,"
    " released, revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
)


def _import_one(conn: sqlite3.Connection, item: _ImportSession, replace: bool) -> str:
    sid = item.row[0]
    existing = conn.execute("SELECT id FROM sessions WHERE session_id = ?", (sid,)).fetchone()
    outcome = "added"
    if existing is not None:
        stored = conn.execute(
            "SELECT position, type, payload FROM events WHERE session = ? ORDER BY position", (existing[0],)
        ).fetchall()
        if [tuple(r) for r in stored] == [e[:3] for e in item.events]:
            return "unchanged"
        if not replace:
            raise ImportConflictError(
                f"session {sid} is already stored with different events (line {item.line});"
                " nothing was imported (--replace overwrites stored sessions with the file's)"
            )
        conn.execute("DELETE FROM sessions WHERE id = ?", (existing[0],))
        outcome = "replaced"
    row_id = conn.execute(_INSERT_SESSION + " RETURNING id", item.row).fetchone()[0]
    conn.executemany(
        "INSERT INTO events (session, position, type, payload, role, text, text_path, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(row_id, *event) for event in item.events],
    )
    return outcome


async def import_jsonl(
    target: Target,
    source: str | os.PathLike[str],
    *,
    replace: bool = False,
    progress: Progress | None = None,
) -> ImportSummary:
    """Read an export back, ids, records and event order preserved, in one transaction.

    Idempotent: a session already stored with the same events is left as it is.
    One stored with different events is a :class:`ImportConflictError` (nothing
    imported) unless ``replace``, which replaces it with the file's. The file is
    checked whole before the database is touched; a missing database is
    created (as :class:`SQLiteStorage` creates one) only then.
    """
    source_path = Path(source).expanduser()  # noqa: ASYNC240 (no I/O)
    total = await _run(lambda: sum(1 for _ in _read_export(source_path)))
    path = _path_of(target)
    created = False
    if isinstance(target, SQLiteStorage):
        await target.open()
    elif not await _run(path.exists):
        created = True
        async with SQLiteStorage(path):
            pass

    def work() -> ImportSummary:
        counts = {"added": 0, "replaced": 0, "unchanged": 0}
        events = 0
        with _writing(target) as conn:
            for done, item in enumerate(_read_export(source_path), 1):
                outcome = _import_one(conn, item, replace)
                counts[outcome] += 1
                if outcome != "unchanged":
                    events += len(item.events)
                if progress is not None:
                    progress(done, total)
        return ImportSummary(events=events, **counts)

    try:
        return await _run(work)
    except BaseException:
        if created:  # a database this call created and could not fill is not left behind
            for suffix in ("", "-wal", "-shm"):
                await _run(Path(f"{path}{suffix}").unlink, missing_ok=True)
        raise


# -- deleting ---------------------------------------------------------------------------------------


async def delete_sessions(target: Target, prefixes: Sequence[str]) -> list[str]:
    """Delete the sessions (ids or unique prefixes) and their events, all or none; returns the full ids."""

    def work() -> list[str]:
        with _writing(target) as conn:
            ids = _resolve_all(conn, prefixes)
            conn.executemany("DELETE FROM sessions WHERE session_id = ?", [(sid,) for sid in ids])
            return ids

    return await _run(work)


async def prune(
    target: Target,
    older_than: timedelta,
    *,
    dry_run: bool = True,
    progress: Progress | None = None,
) -> list[SessionSummary]:
    """Released sessions not updated for ``older_than``: listed, and deleted unless ``dry_run``.

    A session still held by a registry (not released) is never pruned, however old.
    """
    cutoff = utc_text(datetime.now(UTC) - older_than)
    where = "WHERE s.released = 1 AND s.updated_at < ?"

    def work() -> list[SessionSummary]:
        if dry_run:
            with _reading(target) as conn:
                return _summaries(conn, where, [cutoff])
        with _writing(target) as conn:
            doomed = _summaries(conn, where, [cutoff])
            for done, summary in enumerate(doomed, 1):
                conn.execute("DELETE FROM sessions WHERE session_id = ?", (summary.session_id,))
                if progress is not None:
                    progress(done, len(doomed))
            return doomed

    return await _run(work)


async def set_title(target: Target, prefix: str, title: str | None) -> str:
    """Set (or with ``None`` clear) a stored session's title; returns its full id."""

    def work() -> str:
        with _writing(target) as conn:
            sid = _resolve(conn, prefix)
            conn.execute("UPDATE sessions SET title = ? WHERE session_id = ?", (title, sid))
            return sid

    return await _run(work)


# -- search, stats, check ------------------------------------------------------------------------------


def fts_query(text: str) -> str:
    """Plain words to an FTS5 query matching events that hold all of them.

    Each word becomes one quoted term, so punctuation (``-``, ``:``, quotes) is
    never read as query syntax; words are cut where the index's tokenizer cuts
    them (letters, digits and ``_``), because the index (``detail=none``) has no
    phrase queries.
    """
    return " ".join(f'"{word}"' for word in re.findall(r"\w+", text))


async def search(target: Target, text: str, *, raw: bool = False, limit: int = 20) -> list[SearchHit]:
    """Events whose text matches, best first. ``raw`` takes FTS5 query syntax as it is."""
    query = text if raw else fts_query(text)
    if not query.strip():
        raise ValueError(f"nothing to search for in {text!r} (words are letters, digits and _)")

    def work() -> list[SearchHit]:
        with _reading(target) as conn:
            if not _has(conn, "events_fts"):
                raise SchemaError(
                    f"{_path_of(target)} has no full-text index (schema revision {_revision(conn)!r});"
                    " run `sessionstore db upgrade`"
                )
            overview = _has(conn, "session_overview")
            title = "o.title" if overview else "s.title"
            join = "LEFT JOIN session_overview AS o ON o.session_id = s.session_id" if overview else ""
            try:
                rows = conn.execute(
                    f"SELECT s.session_id, {title}, e.position, e.type, {'e.role' if _described(conn) else 'NULL'},"
                    " snippet(events_fts, -1, '[', ']', '…', 12)"
                    " FROM events_fts JOIN events AS e ON e.id = events_fts.rowid"
                    f" JOIN sessions AS s ON s.id = e.session {join}"
                    " WHERE events_fts MATCH ? ORDER BY events_fts.rank LIMIT ?",
                    (query, limit),
                ).fetchall()
            except sqlite3.OperationalError as exc:
                if "fts5" in str(exc).lower() or "syntax" in str(exc).lower():
                    raise ValueError(f"not a valid full-text query: {text!r} ({exc})") from None
                raise
            return [SearchHit(str(s), t, int(p), str(ty), str(snip), role) for s, t, p, ty, role, snip in rows]

    return await _run(work)


async def stats(target: Target) -> Stats:
    """Counts, file size and schema revision."""

    def work() -> Stats:
        path = _path_of(target)
        with _reading(target) as conn:
            conn.execute("BEGIN")
            sessions, released = conn.execute("SELECT count(*), coalesce(sum(released), 0) FROM sessions").fetchone()
            types = dict(conn.execute("SELECT type, count(*) FROM events GROUP BY type ORDER BY count(*) DESC"))
            revision = _revision(conn)
        wal = Path(f"{path}-wal")
        return Stats(
            path=str(path),
            sessions=int(sessions),
            released=int(released),
            events=sum(int(n) for n in types.values()),
            event_types={str(k): int(v) for k, v in types.items()},
            file_size=path.stat().st_size,
            wal_size=wal.stat().st_size if wal.exists() else 0,
            revision=revision,
            head=_head(),
        )

    return await _run(work)


async def check(target: Target) -> CheckReport:
    """SQLite's integrity and foreign-key checks, and the schema revision against this version's head."""

    def work() -> CheckReport:
        with _reading(target) as conn:
            integrity = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
            foreign = [
                f"{table} row {rowid} points at a missing {parent} row"
                for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check")
            ]
            return CheckReport(integrity, foreign, _revision(conn), _head())

    return await _run(work)
