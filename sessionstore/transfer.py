"""Export and import: sessions as JSON Lines, out of one database and into another.

The format: a header ``{"format": "sessionstore-export", "version": 3}``, then
per session a ``{"kind": "session", ...}`` line followed by one
``{"kind": "event", ...}`` line per event, the payload as the stored JSON text
verbatim (lossless, even for event types this version cannot decode), with
the role and text its codec gave it. A subagent's session line names the
session it was opened from (``parent_id``, ``null`` for a session of its own)
and comes after that session's lines: exporting a session exports its
subagents with it. So do its earlier branches (revision 0012: the events a rewrite
replaced), each line naming the live session (``branch_of``, written only for a
branch) and each with its whole history, as a fork is exported whole too (its
shared events are its lines): an import makes them sessions that share nothing.
Version 2 files (no ``parent_id``: every session one of its own) and version 1
files (no role and text either) are read too: version 1's events are
sessionstore's own, described as its codec does.

An export is read from one snapshot, so one taken while an agent writes is
consistent. An import checks the whole file before it touches the database:
a bad line anywhere imports nothing and names the line.

Both take a SQLite path, a PostgreSQL URL or a backend
(:func:`~sessionstore.backend.command`) and write the same lines for the same sessions, so a database moves to the other
kind and back byte for byte. PostgreSQL's text cannot hold U+0000, which a
SQLite file's can: an import into PostgreSQL refuses such a file whole, naming
the line, before it writes anything.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, BinaryIO, TypeAlias, cast

from . import scratch
from .admin import refuse_held
from .backend import Backend, Database, command, open_backend
from .codec import ROLES, TOKEN_COLUMNS, is_text_path, legacy_description
from .durable import DELETE_SESSION
from .errors import EventEncodeError, ImportConflictError, ImportFileError, StorageError, UsageError
from .events import Tokens
from .reads import Connection, events_of, load_session, resolve_all
from .schema import queries
from .schema.revisions import FORKS_SINCE, SUBAGENTS_SINCE, reaches
from .storage import SessionRecord, record_row, storable_text, utc_text

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "ImportSummary", "Progress", "export_sessions", "import_sessions"]

Progress: TypeAlias = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while a long operation runs."""

EXPORT_FORMAT = "sessionstore-export"
EXPORT_VERSION = 3
# Versions import reads: 1 had no role and text per event, 2 no parent_id per session.
_READABLE_VERSIONS = (1, 2, 3)


@dataclass(frozen=True, slots=True)
class ImportSummary:
    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    events: int = 0


# -- export -----------------------------------------------------------------------------------------


def _with_subagents(conn: Connection, ids: Sequence[str], revision: str | None) -> list[str]:
    """The sessions named and all their subagents, each after the session it was opened from (so an import,
    which reads in order, finds every parent before its subagents); otherwise in the order named."""
    found: list[str] = []
    seen: set[str] = set()
    pending = list(reversed(ids))
    while pending:
        sid = pending.pop()
        if sid in seen:
            continue
        seen.add(sid)
        found.append(sid)
        if reaches(revision, FORKS_SINCE):
            pending += reversed([str(row[0]) for row in conn.execute(queries.BRANCHES, {"sid": sid})])
        if reaches(revision, SUBAGENTS_SINCE):
            pending += reversed([str(row[0]) for row in conn.execute(queries.SUBAGENTS, {"sid": sid})])
    parents = {sid: _parent_of(conn, sid, revision) for sid in found}
    children: dict[str | None, list[str]] = {}
    for sid in found:
        children.setdefault(parents[sid] if parents[sid] in seen else None, []).append(sid)
    ordered: list[str] = []
    pending = list(reversed(children.get(None, [])))
    while pending:
        sid = pending.pop()
        ordered.append(sid)
        pending += reversed(children.get(sid, []))
    return ordered


def _parent_of(conn: Connection, sid: str, revision: str | None) -> str | None:
    record = load_session(conn, sid, revision=revision)
    return None if record is None else record.parent_id


def _export_lines(
    conn: Connection, ids: Sequence[str] | None, revision: str | None, progress: Progress | None, events_sql: str
) -> Iterator[str]:
    def dump(obj: dict[str, Any]) -> str:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"

    # Every session: in the order the rows were made, in which a session comes before the subagents opened
    # from it (their rows are made under its).
    if ids is None:
        ids = [str(r[0]) for r in conn.execute(queries.SESSION_IDS)]
    yield dump({"format": EXPORT_FORMAT, "version": EXPORT_VERSION})
    for done, sid in enumerate(ids, 1):
        record = load_session(conn, sid, revision=revision)
        assert record is not None  # read inside the snapshot the ids came from
        yield dump(
            {
                "kind": "session",
                "session_id": record.session_id,
                "cwd": record.cwd,
                "additional_directories": record.additional_directories,
                "mcp_servers": record.mcp_servers,
                "meta": record.meta,
                "title": record.title,
                "created_at": record.created_at.isoformat(),
                "updated_at": record.updated_at.isoformat(),
                "released": record.released,
                "parent_id": record.parent_id,
                **({} if record.branch_of is None else {"branch_of": record.branch_of}),
            }
        )
        for event in events_of(conn, sid, revision=revision, sql=events_sql):
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
                    # Only a usage event's line has its tokens (revision 0010): the others are as they were.
                    **({} if event.tokens is None else {"tokens": event.tokens._asdict()}),
                }
            )
        if progress is not None:
            progress(done, len(ids))


@command
def export_sessions(
    backend: Backend,
    out: str | os.PathLike[str] | IO[str],
    prefixes: Sequence[str] | None = None,
    *,
    progress: Progress | None = None,
) -> int:
    """``sessionstore export``: the sessions (all when ``prefixes`` is None) and their subagents as JSON Lines;
    returns how many.

    Written where the caller points: a regular file (or a new one) is replaced
    whole or not at all (a temporary file beside it, renamed into place); a
    device, a FIFO or a terminal is written in place; the database itself and
    its companion files are refused before anything is read.
    """
    named = Path(out).expanduser() if isinstance(out, (str, os.PathLike)) else None
    target = _destination(named, backend) if named is not None else None
    with backend.reading(snapshot=True) as conn:
        revision = backend.revision(conn)
        ids = resolve_all(conn, prefixes) if prefixes is not None else None
        if ids is not None:
            ids = _with_subagents(conn, ids, revision)
        count = len(ids) if ids is not None else int(conn.execute(queries.SESSION_COUNT).fetchone()[0])
        lines = _export_lines(conn, ids, revision, progress, backend.events_of)
        if named is not None and target is not None:
            _write(named, target, lines)
        elif not isinstance(out, (str, os.PathLike)):
            out.writelines(lines)
            out.flush()
        return count


def _destination(out: Path, backend: Backend) -> Path:
    """Where an export to ``out`` is written: the file a link points at; never the database or its companions."""
    target = Path(os.path.realpath(out))
    for companion in backend.files:
        if target.exists() and companion.exists() and os.path.samefile(target, companion):
            raise UsageError(
                f"{out} is {'the database' if companion == backend.files[0] else 'a file of the database'}"
                f" {backend.name};"
                " export to another file"
            )
    if target.is_dir():
        raise UsageError(f"{out} is a folder; name a file to export to")
    if not target.parent.is_dir():
        raise UsageError(f"{out}: the folder {target.parent} does not exist")
    return target


def _write(out: Path, target: Path, lines: Iterator[str]) -> None:
    """A regular file (or a new one) whole or not at all; anything else (a device, a FIFO) in place."""
    try:
        if target.exists() and not target.is_file():
            with open(target, "w", encoding="utf-8", newline="\n") as handle:
                handle.writelines(lines)
            return
        scratch.sweep(target)  # what an export killed outright left
        tmp = scratch.new(target, "export", ".tmp")
        try:
            with scratch.open_new(tmp) as handle:
                handle.writelines(lines)
                handle.flush()
                os.fsync(handle.fileno())
            if target.exists():
                os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))  # replaced, not re-permissioned
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror}") from None


# -- import -----------------------------------------------------------------------------------------

# The order of a session line's and an event line's values, as the statements name them.
_SESSION_COLUMNS = (
    "sid",
    "cwd",
    "additional_directories",
    "mcp_servers",
    "meta",
    "title",
    "created_at",
    "updated_at",
    "released",
)
_EVENT_COLUMNS = ("position", "type", "payload", "role", "text", "text_path", "now", *TOKEN_COLUMNS)


@dataclass(slots=True)
class _ImportSession:
    line: int
    row: tuple[Any, ...]
    events: list[tuple[Any, ...]] = field(default_factory=list)  # _EVENT_COLUMNS' values
    # The session it is a subagent of, and whether that one's lines come before its own in the file.
    parent: str | None = None
    parent_earlier: bool = False
    # The live session whose earlier branch it is (revision 0012), when it is one.
    branch_of: str | None = None


_SESSION_FIELDS = {"kind", "session_id", "created_at", "updated_at", "title", "parent_id", "branch_of"}
# Fields that may be left out of a hand-written file, with the type each must have and its default.
_SESSION_DEFAULTS: tuple[tuple[str, type, Any], ...] = (
    ("cwd", str, "."),
    ("additional_directories", list, []),
    ("mcp_servers", list, []),
    ("meta", dict, {}),
    ("released", bool, False),
)
_EVENT_FIELDS = {
    "kind",
    "session_id",
    "position",
    "type",
    "payload",
    "created_at",
    "role",
    "text",
    "text_path",
    "tokens",
}


# Positions are counted from 0 by whoever wrote the file; far beyond any history, they would stop appends.
_MAX_POSITION = 2**31 - 1
# A line is read at most this long (64 Mi characters: an event of tens of megabytes): memory stays bounded.
MAX_LINE = 64 * 1024 * 1024


class _BadLine(Exception):
    """A flaw in the line being read (or, with ``line``, in that line)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def _when(obj: dict[str, Any], key: str) -> datetime:
    value = obj.get(key)
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        when = None
    if when is None or when.utcoffset() is None:
        raise _BadLine(f"{key} must be an ISO 8601 timestamp with its UTC offset, got {value!r}")
    return when


def _stamp(obj: dict[str, Any], key: str) -> str:
    try:
        return utc_text(_when(obj, key))
    except EventEncodeError as exc:
        raise _BadLine(f"{key}: {exc}") from None


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
    record = SessionRecord(
        session_id=sid,
        title=title,
        created_at=_when(obj, "created_at"),
        updated_at=_when(obj, "updated_at"),
        **values,
    )
    try:
        row = record_row(record)  # exactly what the storage would write, or refused as it would refuse it
    except StorageError as exc:
        raise _BadLine(str(exc)) from None
    return tuple(row[column] for column in _SESSION_COLUMNS)


def _parent_line(obj: dict[str, Any]) -> str | None:
    """A session line's ``parent_id``: the 32-hex id of another session, or null (also when left out)."""
    parent = obj.get("parent_id")
    if parent is not None and (not isinstance(parent, str) or re.fullmatch(r"[0-9a-f]{32}", parent) is None):
        raise _BadLine(f"parent_id must be 32 lowercase hex digits or null, got {parent!r}")
    if parent is not None and parent == obj.get("session_id"):
        raise _BadLine("parent_id names the session itself")
    return parent


def _event_line(obj: dict[str, Any], session: _ImportSession | None, version: int) -> tuple[Any, ...]:
    extra = set(obj) - _EVENT_FIELDS
    if extra:
        raise _BadLine(f"unknown event fields {sorted(extra)}")
    if session is None or obj.get("session_id") != session.row[0]:
        raise _BadLine("an event must follow the line of its session")
    after = session.events[-1][0] if session.events else -1
    position, type_name, payload = obj.get("position"), obj.get("type"), obj.get("payload")
    if not isinstance(position, int) or isinstance(position, bool) or not after < position <= _MAX_POSITION:
        raise _BadLine(f"position must be an integer above {after} and below 2**31, got {position!r}")
    if not isinstance(type_name, str) or not type_name:
        raise _BadLine(f"type must be a non-empty string, got {type_name!r}")
    if not isinstance(payload, str):
        raise _BadLine("payload must be the event's JSON text, as a string")
    _loads(payload, "payload")
    for key, value in (("type", type_name), ("payload", payload), ("text", obj.get("text"))):
        if isinstance(value, str):
            try:
                storable_text(value, key)
            except StorageError as exc:
                raise _BadLine(str(exc).replace("the session's", "the event's")) from None
    if version == 1:
        role, text, path = legacy_description(type_name, payload)
        text = None if path is not None else text  # stored once, in the payload
    else:
        role, text, path = obj.get("role"), obj.get("text"), obj.get("text_path")
        if role is not None and role not in ROLES:
            raise _BadLine(f"role must be one of {', '.join(ROLES)} or null, got {role!r}")
        if text is not None and not isinstance(text, str):
            raise _BadLine(f"text must be a string or null, got {text!r}")
        if path is not None and (not is_text_path(path) or text is not None):
            raise _BadLine(f"text_path must be a JSON path ($...) given instead of text, or null, got {path!r}")
    return position, type_name, payload, role, text, path, _stamp(obj, "created_at"), *_tokens(obj.get("tokens"))


def _tokens(given: object) -> tuple[int | None, ...]:
    """An event line's ``tokens`` (``{"input": n, ...}``, as :class:`~sessionstore.Tokens` names them), as its
    columns; all ``None`` when it has none."""
    if given is None:
        return (None,) * len(TOKEN_COLUMNS)
    names = Tokens._fields
    if not isinstance(given, dict) or not set(given) <= set(names):
        raise _BadLine(f"tokens must be an object with some of {', '.join(names)}, got {given!r}")
    counts = tuple(given.get(name, 0) for name in names)
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**31 for n in counts):
        raise _BadLine(f"tokens must be whole numbers from 0 to 2**31 - 1, got {given!r}")
    return counts


class _NotFinite(ValueError):
    """A number JSON text can spell but a JSON value cannot hold: NaN, Infinity, or one past a double (1e999)."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


def _loads(text: str, what: str) -> Any:
    """JSON as SQLite's JSON functions read it: finite numbers only (no NaN, Infinity or 1e999), nesting within
    reason."""
    try:
        return json.loads(text, parse_constant=_finite, parse_float=_finite)
    except RecursionError:
        raise _BadLine(f"the {what} nests too deeply") from None
    except _NotFinite as exc:
        raise _BadLine(f"the {what} holds {exc}, which is not a finite number (JSON has no NaN or infinity)") from None
    except ValueError:
        raise _BadLine(f"the {what} is not valid JSON" if what != "line" else "not a JSON object") from None


def _lines(handle: IO[str] | _Tee) -> Iterator[tuple[int, str]]:
    """The input's numbered lines, each read at most :data:`MAX_LINE` long: a huge line fails, not the machine."""
    number = 0
    while True:
        line = handle.readline(MAX_LINE + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE:
            raise _BadLine(f"the line is longer than {MAX_LINE:,} characters", number)
        yield number, line


class _Input:
    """The input of an import, opened once; each pass (checked, then written) reads it from its start.

    A regular file is read again from where it started, through the one open
    file (the same file, even if its path is replaced meanwhile). Anything else
    (standard input, a pipe, ``<(...)``, a FIFO) can be read only once: the first
    pass keeps a private copy beside the database, a line at a time (memory
    stays bounded), and the later passes read the copy. ``name`` is the input as
    the user gave it, for messages.
    """

    def __init__(self, raw: IO[bytes], name: str, beside: Path) -> None:
        self.name = name
        self._raw = raw
        self._start = raw.tell() if _regular(raw) else None
        self._beside = beside
        self._copy: Path | None = None
        self._copied = False

    @contextlib.contextmanager
    def text(self) -> Iterator[IO[str] | _Tee]:
        """The input from its start, as text (newlines as :func:`open` reads them)."""
        if self._copy is not None:
            assert self._copied, "a pass over a stream's copy before the first pass read it whole"
            with open(self._copy, encoding="utf-8", newline="") as handle:
                yield handle
            return
        if self._start is not None:
            self._raw.seek(self._start)
        wrapper = io.TextIOWrapper(cast(BinaryIO, self._raw), encoding="utf-8")
        try:
            if self._start is not None:
                yield wrapper
                return
            self._copy = scratch.new(self._beside, "import", ".jsonl")
            with scratch.open_new(self._copy) as copy:
                tee = _Tee(wrapper, copy)
                yield tee
            self._copied = tee.ended
        finally:
            if not self._raw.closed:  # a pass left unfinished by an interruption ends after the input closed
                wrapper.detach()  # the input stays open (standard input is not this import's to close)

    def close(self) -> None:
        if self._copy is not None:
            self._copy.unlink(missing_ok=True)


class _Tee:
    """A stream read once, written to a copy as it is read."""

    def __init__(self, source: IO[str], copy: IO[str]) -> None:
        self._source, self._copy = source, copy
        self.ended = False

    def readline(self, limit: int) -> str:
        line = self._source.readline(limit)
        self._copy.write(line)
        self.ended |= not line
        return line


def _regular(raw: IO[bytes]) -> bool:
    try:
        return stat.S_ISREG(os.fstat(raw.fileno()).st_mode)
    except (OSError, ValueError):  # no file descriptor (io.UnsupportedOperation is both): a stream
        return False


@contextlib.contextmanager
def _opened(source: str | os.PathLike[str], beside: Path) -> Iterator[_Input]:
    """``source`` (``-``: standard input) opened once, for :class:`_Input`; errors name it as given."""
    name = "<stdin>" if str(source) == "-" else str(source)
    if str(source) == "-":
        raw: IO[bytes] = sys.stdin.buffer
    else:
        try:
            raw = open(Path(source).expanduser(), "rb")  # closed below, after every pass
        except FileNotFoundError:
            raise ImportFileError(f"{name}: no such file") from None
        except IsADirectoryError:
            raise ImportFileError(f"{name} is a folder, not an export file") from None
        except OSError as exc:
            raise ImportFileError(f"{name}: cannot read it ({exc.strerror})") from None
    opened = _Input(raw, name, beside)
    try:
        yield opened
    finally:
        opened.close()
        if raw is not sys.stdin.buffer:
            raw.close()


def _no_nul(values: dict[str, Any], whose: str) -> None:
    for key, value in values.items():
        if isinstance(value, str) and "\x00" in value:
            raise _BadLine(f"the {whose} {key} holds a NUL character (U+0000), which PostgreSQL cannot store in text")


def _read_export(source: _Input, *, refuse_nul: bool = False) -> Iterator[_ImportSession]:
    """The sessions of an export, each with its events, read from the input's start; :class:`ImportFileError` at
    the first flaw.

    ``refuse_nul``: refuse text PostgreSQL cannot store (U+0000; JSON columns and payloads hold it escaped, so
    only the plain text columns can).
    """
    name = source.name
    seen: set[str] = set()
    current: _ImportSession | None = None
    version = 0
    number = 0
    with source.text() as handle:
        try:
            for number, text in _lines(handle):
                if not text.strip():
                    continue
                obj = _loads(text, "line")
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
                    parent = _parent_line(obj)
                    if refuse_nul:
                        _no_nul({"cwd": row[1], "title": row[5]}, "session's")
                    if current is not None:
                        yield current
                    seen.add(row[0])
                    current = _ImportSession(number, row, parent=parent, parent_earlier=parent in seen)
                    branch_of = obj.get("branch_of")
                    if branch_of is not None and (not isinstance(branch_of, str) or branch_of not in seen):
                        raise _BadLine(f"branch_of must name a session whose lines come before, got {branch_of!r}")
                    current.branch_of = branch_of
                elif obj.get("kind") == "event":
                    event = _event_line(obj, current, version)
                    if refuse_nul:
                        _no_nul(
                            {"type": event[1], "role": event[3], "text": event[4], "text_path": event[5]}, "event's"
                        )
                    assert current is not None
                    current.events.append(event)
                else:
                    raise _BadLine(f"kind must be 'session' or 'event', got {obj.get('kind')!r}")
        except UnicodeDecodeError:
            raise ImportFileError(f"{name} is not UTF-8 text; nothing was imported") from None
        except _BadLine as exc:
            raise ImportFileError(f"{name} line {exc.line or number}: {exc}; nothing was imported") from None
    if not version:
        raise ImportFileError(f"{name} is empty, not a sessionstore export; nothing was imported")
    if current is not None:
        yield current


def _outcome(conn: Connection, item: _ImportSession, replace: bool) -> str:
    """What importing ``item`` will do: add it, leave it (stored with the same events), or replace it."""
    sid = item.row[0]
    existing = conn.execute(queries.FIND_SESSION, {"sid": sid}).fetchone()
    if existing is None:
        return "added"
    stored = conn.execute(queries.EVENT_ROWS, {"id": existing[0]}).fetchall()
    if [tuple(r) for r in stored] == [e[:3] for e in item.events]:
        return "unchanged"
    if not replace:
        raise ImportConflictError(
            f"session {sid} is already stored with different events (line {item.line});"
            " nothing was imported (--replace overwrites stored sessions with the file's)"
        )
    return "replaced"


def _parent_row(conn: Connection, item: _ImportSession) -> int | None:
    """The row id of the session ``item`` is a subagent of (None: one of its own), which must be stored by now:
    checked for every session before anything is written, and again as each is written."""
    if item.parent is None:
        return None
    found = conn.execute(queries.FIND_SESSION, {"sid": item.parent}).fetchone()
    if found is not None:
        return int(found[0])
    what = f"session {item.row[0]} (line {item.line}) is a subagent of session {item.parent}, which"
    if not item.parent_earlier:
        raise ImportConflictError(f"{what} is neither earlier in the file nor stored; nothing was imported")
    raise ImportConflictError(
        f"{what} was no longer stored when it was written (deleted meanwhile, or replaced along with its own"
        " session); the import stopped at that line"
    )


def _import_one(backend: Backend, conn: Connection, item: _ImportSession, replace: bool) -> str:
    outcome = _outcome(conn, item, replace)
    if outcome == "unchanged":
        return outcome
    if outcome == "replaced":
        # Replaced with the file's copy: its subagents too (those the file has come after it, and are added again).
        for sql in DELETE_SESSION:  # a fork of it keeps its shared rows
            conn.execute(sql, {"sid": item.row[0]})
        backend.note_deleted(conn)
    parent = _parent_row(conn, item)
    row_id = conn.execute(queries.UPSERT_SESSION, dict(zip(_SESSION_COLUMNS, item.row, strict=True))).fetchone()[0]
    if parent is not None:
        conn.execute(queries.SET_PARENT, {"id": row_id, "parent": parent})
    if item.branch_of is not None:
        live = conn.execute(queries.FIND_SESSION, {"sid": item.branch_of}).fetchone()
        if live is not None:
            conn.execute(queries.SET_BRANCH_OF, {"id": row_id, "branch_of": live[0]})
    conn.executemany(
        queries.INSERT_EVENT,
        [{"id": row_id, **dict(zip(_EVENT_COLUMNS, event, strict=True))} for event in item.events],
    )
    return outcome


def import_sessions(
    db: Database, source: str | os.PathLike[str], *, replace: bool = False, progress: Progress | None = None
) -> ImportSummary:
    """``sessionstore import``: read an export back, ids, records and event order preserved.

    Idempotent: a session already stored with the same events is left as it is.
    One stored with different events is a :class:`ImportConflictError` (nothing
    imported) unless ``replace``, which replaces it with the file's. The file is
    checked whole (and against what is stored) before the database is touched;
    then whole sessions are written in the backend's batches (short transactions
    on a file, so an agent writing to it meanwhile is never starved, and an
    interrupted import has imported whole sessions only; one transaction on
    PostgreSQL, so a failed or interrupted import leaves it as it was). A missing
    file is built beside its path (as :class:`SQLiteStorage` creates one) and
    appears at the path only once it is complete; a failed or interrupted import
    removes only what it made, and removes what an import killed outright left
    for the same database (:mod:`scratch`). A PostgreSQL database must exist (an
    empty one gets the schema). ``source`` is opened once and may be anything
    readable: a file, ``"-"`` (standard input), a pipe, ``/dev/fd/N``, a FIFO
    (see :class:`_Input`: what can be read only once is copied beside the database
    as it is checked).
    """
    backend = open_backend(db)
    scratch.sweep(backend.scratch_folder)
    with _opened(source, backend.scratch_folder) as opened:
        # The whole input checked (and a stream copied) before the database is opened: outside PostgreSQL's
        # event loop, so Ctrl-C ends an import still waiting for its input at once.
        total = sum(1 for _ in _read_export(opened, refuse_nul=backend.refuses_nul))
        return _import(backend, opened, replace, total, progress)


@command
def _import(backend: Backend, source: _Input, replace: bool, total: int, progress: Progress | None) -> ImportSummary:
    return backend.build(lambda built: _import_into(built, source, replace, total, progress))


def _import_into(
    backend: Backend, source: _Input, replace: bool, total: int, progress: Progress | None
) -> ImportSummary:
    counts = {"added": 0, "replaced": 0, "unchanged": 0}
    events = 0
    with backend.writable() as conn:
        # A conflict anywhere is found before anything is written: different events (unless replacing), or a
        # subagent whose session is neither earlier in the file nor stored.
        replacing: list[str] = []
        for item in _read_export(source):
            outcome = _outcome(conn, item, replace)
            if outcome != "unchanged" and not item.parent_earlier:
                _parent_row(conn, item)
            if outcome == "replaced":
                replacing.append(item.row[0])
        refuse_held(backend, conn, replacing, "imported")  # a session a live process holds is its own to write

        def apply(conn: Connection, item: _ImportSession) -> tuple[str, int]:
            return _import_one(backend, conn, item, replace), len(item.events)

        items = _read_export(source)
        for done, (outcome, count) in enumerate(backend.in_batches(conn, items, apply, finish=backend.written), 1):
            counts[outcome] += 1
            if outcome != "unchanged":
                events += count
            if progress is not None:
                progress(done, total)
        if counts["replaced"]:
            backend.forget_deleted(conn)  # the sessions replaced are gone, not merely unlisted
    return ImportSummary(events=events, **counts)
