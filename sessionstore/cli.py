"""``sessionstore``: inspect and operate a database from the shell.

A thin layer over the operations in :mod:`sessionstore.records` (reading),
:mod:`sessionstore.transfer` (export and import), :mod:`sessionstore.admin`
and :mod:`sessionstore.migrate`: argparse, printing, nothing else. A command
imports only what it uses (reading never loads SQLAlchemy). Every mistake a
person can make (an unknown or ambiguous id, a missing file, a file that is
not a database, a bad export) ends in one line on stderr and exit code 1;
usage errors exit 2, as argparse does. Never imported by ``import sessionstore``.

``--db`` is a file's path or a PostgreSQL URL (``postgresql://...``), turned
into its backend once (:func:`sessionstore.backend.open_backend`): the same
commands, on the same functions. A URL's password is never printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, TextIO

from . import datasette, records
from .backend import Backend, open_backend
from .durable import RETENTION_EVERY
from .errors import DatabaseNotFoundError, StorageError, UsageError
from .events import Tokens
from .reads import SHORTEST_RETENTION, Forecast, SearchHit, StoredEvent, StoredSession, age_text, usage_json
from .schema.revisions import upgrade_command
from .storage import SessionRecord, shown_time

PROG = "sessionstore"
SHORT_ID = 12


def default_db_path() -> str | Path:
    """``$SESSIONSTORE_DB`` (a path or a PostgreSQL URL, as ``--db`` takes them), else ``sessionstore/sessions.db``
    in the platform's user data folder."""
    return os.environ.get("SESSIONSTORE_DB") or platform_db_path()


# Said when the database nobody named is missing: most likely the agent keeps its file elsewhere.
NO_DEFAULT_DATABASE = (
    " (the default database, which nothing has written yet: name your agent's file with --db PATH or"
    " $SESSIONSTORE_DB, or make one with `python -m sessionstore.demo write FILE`)"
)


def _database(text: str) -> Backend:
    """``--db``: the database's backend, chosen once here (a PostgreSQL URL, else a file's path)."""
    return open_backend(text)


def platform_db_path() -> Path:
    """``sessionstore/sessions.db`` in the user data folder (XDG on Linux); no platformdirs needed for one path."""
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "sessionstore" / "sessions.db"


# -- output helpers -------------------------------------------------------------------------------


# What a terminal would act on rather than show: C0 and C1 controls (escape sequences that clear the screen, write
# the clipboard, make links) and the bidirectional overrides that reorder what is shown. Tab and newline stay.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` with each control character shown as an escape (``\\x1b``): stored data cannot drive the terminal."""
    return _CONTROLS.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class _Visible:
    """A text stream that writes :func:`visible` text: everything a command prints goes through it."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(visible(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _json_text(value: Any, indent: int | None = None) -> str:
    # JSON already escapes C0 controls; the others are valid in JSON strings, so they become \u escapes.
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    return _CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _print_json(value: Any) -> None:
    sys.stdout.write(_json_text(value, indent=2) + "\n")


def _table(rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        print("  ".join(cells).rstrip())


def _size(n: int) -> str:
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


class Progress:
    """``verb done/total`` on one line of a terminal; silent when stderr is not one (pipes, logs, tests)."""

    def __init__(self, verb: str, stream: TextIO | None = None) -> None:
        self.verb = verb
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self._last = 0.0
        self._shown = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return  # a terminal line per session would cost more than the work
        self._last = now
        self._shown = True
        self.stream.write(f"\r{self.verb} {done}/{total} sessions")
        self.stream.flush()

    def finish(self) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()


# -- rendering a transcript ---------------------------------------------------------------------------


# How each role is shown: who said it, or which half of a tool call it is.
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "tool_call": "tool call", "tool": "tool result"}


def render_event(event: StoredEvent) -> tuple[str, str]:
    """(who, what) for one stored event: its role and text, as its codec described it when it was written.

    An event with no role (bookkeeping, or a type the writer did not describe) shows its type name and payload.
    """
    if event.role is not None:
        return _ROLES.get(event.role, event.role), event.text or ""
    return event.type, event.payload


SUBAGENT_INDENT = "    "
"""How far a subagent's transcript is indented under its session's (and a nested one under its own)."""


class _Lines:
    """Printed lines, and a blank one between blocks: one, however many blocks end there, and none at the end."""

    def __init__(self) -> None:
        self.started = False
        self.gapped = False

    def line(self, text: str) -> None:
        if self.gapped and self.started:
            print()
        print(text.rstrip())
        self.started, self.gapped = True, False

    def gap(self) -> None:
        self.gapped = True


def print_transcript(stored: StoredSession, held: dict[str, str], *, everything: bool = False) -> None:
    """A session's header and transcript, with each subagent's transcript nested where it started."""
    summary = stored.record
    who = held.get(summary.session_id)
    state = f"held by {who}" if who else "released" if summary.released else "not held (no live process has it)"
    if summary.parent_id is not None:
        state = "a subagent: kept and deleted with its session"
    out = _Lines()
    out.line(f"session  {summary.session_id}")
    if summary.parent_id is not None:
        out.line(f"parent   {summary.parent_id} (this session is one of its subagents)")
    if summary.forked_from is not None:
        out.line(f"forked   from {summary.forked_from} at event {summary.forked_at} (its first events are shared)")
    if summary.branch_of is not None:
        out.line(f"branch   an earlier branch of {summary.branch_of}: the events a rewrite replaced")
    out.line(f"title    {summary.title or '(none)'}")
    out.line(f"cwd      {summary.cwd}")
    out.line(f"created  {shown_time(summary.created_at)}   updated {shown_time(summary.updated_at)}   {state}")
    out.line(f"events   {summary.events}")
    if stored.usage.events:
        out.line(f"tokens   {_tokens_text(stored.usage.tokens)}")
        for turn, _, tokens in stored.usage.turns:
            out.line(f"  turn {turn:<4} {_tokens_text(tokens)}")
    if stored.subagents:
        out.line(f"subagents {_subagent_count(stored)} (each shown where it started, indented)")
    out.gap()
    _print_events(out, stored, everything, "")
    _print_branches(out, stored, everything)


def _print_branches(out: _Lines, stored: StoredSession, everything: bool) -> None:
    """A session's earlier branches (what rewrites replaced, kept), each whole, after its transcript; with
    ``everything`` only (``show --all``), else one line that says they are there."""
    if not stored.branches:
        return
    out.gap()
    if not everything:
        count = len(stored.branches)
        out.line(f"({count} earlier branch{'es' * (count != 1)} not shown: what rewrites replaced; --all shows them)")
        return
    for branch in stored.branches:
        record = branch.record
        replaced = shown_time(record.created_at)
        out.line(f"earlier branch {record.session_id}  ({record.events} events, replaced {replaced})")
        out.gap()
        _print_events(out, branch, everything, SUBAGENT_INDENT)
        out.gap()


def _subagent_count(stored: StoredSession) -> int:
    return sum(1 + _subagent_count(subagent) for subagent in stored.subagents)


def _print_events(out: _Lines, stored: StoredSession, everything: bool, margin: str) -> None:
    """The session's events, and before the first event after each subagent started, that subagent's."""
    events = stored.events
    shown = events if everything else [event for event in events if event.role is not None]
    rendered = [(event, *render_event(event)) for event in shown]
    width = max((len(who) for _, who, _ in rendered), default=0)
    indent = margin + " " * (19 + 2 + width + 2)
    waiting = sorted(stored.subagents, key=lambda s: (s.record.created_at, s.record.session_id))
    for event, who, what in rendered:
        while waiting and waiting[0].record.created_at < event.created_at:
            _print_subagent(out, waiting.pop(0), everything, margin)
        lines = what.splitlines() or [""]
        out.line(f"{margin}{shown_time(event.created_at)}  {who.ljust(width)}  {lines[0]}")
        for line in lines[1:]:
            out.line(f"{indent}{line}")
    for subagent in waiting:
        _print_subagent(out, subagent, everything, margin)
    hidden = Counter(event.type for event in events if event.role is None) if not everything else Counter()
    if hidden:
        kinds = ", ".join(name if count == 1 else f"{name} x{count}" for name, count in hidden.most_common())
        total = sum(hidden.values())
        what = "1 event that is not a message" if total == 1 else f"{total} events that are not messages"
        out.gap()
        out.line(f"{margin}({what} not shown: {kinds}; --all shows {'it' if total == 1 else 'them'})")


def _print_subagent(out: _Lines, stored: StoredSession, everything: bool, margin: str) -> None:
    record, inner = stored.record, margin + SUBAGENT_INDENT
    events = f"{record.events} event{'s' * (record.events != 1)}"
    out.gap()
    out.line(f"{inner}subagent {record.session_id[:SHORT_ID]}  {record.title or '(untitled)'}  ({events})")
    _print_events(out, stored, everything, inner)
    out.gap()


def _tokens_text(tokens: Tokens) -> str:
    """Tokens for people: the total, then each kind that is not 0."""
    kinds = [(tokens.input, "in"), (tokens.output, "out"), (tokens.cache_read, "cache read")]
    kinds += [(tokens.cache_write, "cache write"), (tokens.reasoning, "reasoning")]
    return f"{tokens.total:,} ({', '.join(f'{n:,} {what}' for n, what in kinds if n)})" if tokens.total else "0"


def _forecast_text(coming: Forecast) -> list[str]:
    """What the retention policy removes next, in lines."""
    age = age_text(coming.max_age)
    lines = [f"retention {age}: sessions not updated for {age} that no live process holds are removed"]
    if coming.due:
        oldest = shown_time(coming.oldest_due, seconds=False) if coming.oldest_due else "?"
        noun = f"{coming.due} session{'s' * (coming.due != 1)}"
        lines.append(
            f"  next pass (within {RETENTION_EVERY:.0f}s of an open storage): {noun}, the oldest updated {oldest}"
        )
    else:
        lines.append("  nothing is due now")
    if coming.held:
        noun = f"{coming.held} session{'s' * (coming.held != 1)} as old {'are' if coming.held != 1 else 'is'}"
        lines.append(f"  {noun} kept: a live process holds {'them' if coming.held != 1 else 'it'}")
    if coming.next_at is not None:
        lines.append(f"  the next comes due {shown_time(coming.next_at)}")
    return lines


# -- commands -----------------------------------------------------------------------------------------


def _record_json(record: SessionRecord, held: dict[str, str]) -> dict[str, Any]:
    return {
        "session_id": record.session_id,
        "title": record.title,
        "stored_title": None if record.derived_title else record.title,
        "cwd": record.cwd,
        "additional_directories": record.additional_directories,
        "mcp_servers": record.mcp_servers,
        "meta": record.meta,
        "created_at": record.created_at.isoformat(),
        "updated_at": record.updated_at.isoformat(),
        "released": record.released,
        "held_by": held.get(record.session_id),
        "parent_id": record.parent_id,
        "forked_from": record.forked_from,
        "forked_at": record.forked_at,
        "branch_of": record.branch_of,
        "events": record.events,
        "usage": None if record.usage is None else usage_json(record.usage),
    }


def _session_json(stored: StoredSession, held: dict[str, str]) -> dict[str, Any]:
    """``show --json``: the session, its events, and its subagents in the same shape, oldest first."""
    return {
        "session": _record_json(stored.record, held),
        "usage": stored.usage.to_json(),
        "events": [e.to_json() for e in stored.events],
        "subagents": [_session_json(subagent, held) for subagent in stored.subagents],
        "branches": [_session_json(branch, held) for branch in stored.branches],
    }


def _titled(record: SessionRecord) -> str:
    """A listed session's title, and where a fork came from: ``(fork of 76a09e666125 at 2)``."""
    title = record.title or ""
    if record.forked_from is None:
        return title
    return f"{title}  (fork of {record.forked_from[:SHORT_ID]} at {record.forked_at})".lstrip()


def cmd_list(args: argparse.Namespace) -> int:
    sessions = records.list_sessions(args.db, cwd=args.cwd, limit=args.limit)
    if args.json:
        held = records.held_now(args.db)
        # Streamed, one session at a time: listing every session never holds them all.
        separator = "[\n  "
        for record in sessions:
            sys.stdout.write(separator + _json_text(_record_json(record, held)))
            separator = ",\n  "
        sys.stdout.write("[]\n" if separator.startswith("[") else "\n]\n")
        return 0
    rows = [["ID", "UPDATED", "EVENTS", "TOKENS", "CWD", "TITLE"]]
    rows += [
        [
            s.session_id[:SHORT_ID],
            shown_time(s.updated_at, seconds=False),
            str(s.events),
            f"{s.usage.total:,}" if s.usage else "",
            s.cwd,
            _titled(s),
        ]
        for s in sessions
    ]
    if len(rows) == 1:
        print("no sessions" + (f" in {args.cwd}" if args.cwd else ""), file=sys.stderr)
        return 0
    _table(rows, right=(2, 3))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    stored = records.read_session(args.db, args.id)
    held = records.held_now(args.db)
    if args.json:
        _print_json(_session_json(stored, held))
    else:
        print_transcript(stored, held, everything=args.all)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    if bool(args.ids) == args.all:
        raise UsageError("give session ids to export, or --all")
    from . import transfer

    progress = Progress("exporting")
    out: Any = args.output if args.output not in (None, "-") else sys.stdout
    try:
        count = transfer.export_sessions(args.db, out, None if args.all else args.ids, progress=progress)
    finally:
        progress.finish()
    if out is not sys.stdout:
        print(f"exported {count} session{'s' * (count != 1)} to {args.output}", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from . import transfer

    progress = Progress("importing")
    try:
        result = transfer.import_sessions(args.db, args.file, replace=args.replace, progress=progress)
    finally:
        progress.finish()
    print(
        f"imported {result.added} new, {result.replaced} replaced, {result.unchanged} already present"
        f" ({result.events} events) into {args.db.name}"
    )
    if result.replaced:
        _deleted_text_left(args.db)  # the replaced copies were deleted
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    from . import admin

    for sid, subagents in admin.delete_sessions(args.db, args.ids):
        print(f"deleted {sid}" + (f" and its {subagents} subagent{'s' * (subagents != 1)}" if subagents else ""))
    _deleted_text_left(args.db)
    return 0


def _deleted_text_left(db: Backend) -> None:
    """One line, when another process's older snapshot keeps the deleted text in the file for now."""
    from . import admin

    if admin.deleted_text_left(db):
        left = admin.LEFT_IN_LOG.format(db=db.name)
        print(visible(f"{PROG}: the deleted text {left}"), file=sys.stderr)


def cmd_prune(args: argparse.Namespace) -> int:
    from . import admin

    older_than = admin.parse_age(args.older_than)
    written = age_text(older_than)
    progress = Progress("pruning")
    try:
        doomed = admin.prune(args.db, older_than, dry_run=not args.yes, progress=progress)
    finally:
        progress.finish()
    verb = "deleted" if args.yes else "would delete"
    noun = f"{len(doomed)} session{'s' * (len(doomed) != 1)}"
    if not doomed:
        print(f"nothing to prune: no session older than {written} that no live process holds")
        return 0
    print(f"{verb} {noun} not updated for {written}:")
    for s in doomed:
        when = shown_time(s.updated_at, seconds=False)
        print(f"  {s.session_id[:SHORT_ID]}  {when}  {s.events:>5} events  {s.title or ''}".rstrip())
    if not args.yes:
        print("run again with --yes to delete them")
    else:
        _deleted_text_left(args.db)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    text = " ".join(args.text)
    hits = records.search(args.db, text, raw=args.fts, limit=args.limit)
    if args.json:
        _print_json([h.to_json() for h in hits])
        return 0 if hits else 1
    if not hits:
        print(f"{PROG}: nothing matches {text!r}", file=sys.stderr)
        return 1
    by_session: dict[str, list[SearchHit]] = {}
    for hit in hits:  # best hit first; a session's hits together under it
        by_session.setdefault(hit.session_id, []).append(hit)
    for sid, group in by_session.items():
        parent, live = group[0].parent_id, group[0].branch_of
        of = f"  (subagent of {parent[:SHORT_ID]})" if parent is not None else ""
        of += f"  (an earlier branch of {live[:SHORT_ID]}: what a rewrite replaced)" if live is not None else ""
        print(f"{sid[:SHORT_ID]}  {group[0].title or '(untitled)'}{of}")
        for hit in group:
            snippet = " ".join(hit.snippet.split())
            print(f"    #{hit.position} {_ROLES.get(hit.role or '', hit.type)}: {snippet}")
    return 0


def cmd_datasette(args: argparse.Namespace) -> int:
    options = args.options[1:] if args.options[:1] == ["--"] else args.options
    datasette.serve(args.db, options)


def cmd_title(args: argparse.Namespace) -> int:
    if args.clear == (args.text is not None):
        raise UsageError("give the new title, or --clear")
    title = None if args.clear else " ".join(args.text.split())
    if title == "":
        raise UsageError("a title cannot be empty (use --clear to remove it)")
    from . import admin

    sid = admin.set_title(args.db, args.id, title)
    print(f"{sid}: {'title cleared' if title is None else f'title set to {title!r}'}")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    from . import admin

    new = admin.fork(args.db, args.id, args.at)
    if args.json:
        _print_json(_record_json(records.read_session(args.db, new).record, {}))
    else:
        print(new)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    result = records.stats(args.db)
    if args.json:
        _print_json(result.to_json())
        return 0
    if result.database == "postgresql":
        print(f"database  {result.path}")
        print(f"size      {_size(result.file_size)} (sessionstore's tables and indexes: {_size(result.tables_size)})")
    else:
        print(f"file      {result.path}")
        wal = f" (+ {_size(result.wal_size)} write-ahead log)" if result.wal_size else ""
        print(f"size      {_size(result.file_size)}{wal}")
    print(f"revision  {result.revision} (this sessionstore: {result.head})")
    print(f"sessions  {result.sessions} ({result.released} released)")
    print(f"events    {result.events}")
    for name, count in result.event_types.items():
        print(f"  {name:<20} {count:>8}")
    print(f"tokens    {_tokens_text(result.usage.tokens)}")
    for line in _forecast_text(result.retention) if result.retention is not None else ["retention off"]:
        print(line)
    return 0


def cmd_retention(args: argparse.Namespace) -> int:
    from . import admin

    if args.action == "set":
        admin.set_retention(args.db, admin.parse_age(args.age, SHORTEST_RETENTION))
    elif args.action == "off":
        admin.set_retention(args.db, None)
    coming = records.retention(args.db)
    if args.json:
        _print_json(None if coming is None else coming.to_json())
    else:
        print("\n".join(_forecast_text(coming)) if coming is not None else "retention off")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from . import admin

    report = admin.check(args.db, repair=args.repair)
    if args.json:
        _print_json(report.to_json())
        return 0 if report.ok else 1
    for done in report.repaired:
        print(f"repaired      {done}")
    integrity = "ok" if report.integrity == ["ok"] else "; ".join(report.integrity[:10])
    if not report.integrity:
        integrity = "not a file's check: the PostgreSQL server keeps its own pages"
    print(f"integrity     {integrity}")
    print(f"foreign keys  {'ok' if not report.foreign_keys else '; '.join(report.foreign_keys[:10])}")
    behind = (
        "ok" if report.revision == report.head else f"expected {report.head}: run `{upgrade_command(args.db.name)}`"
    )
    print(f"revision      {report.revision} ({behind})")
    print(f"views         {'ok' if not report.schema_objects else '; '.join(report.schema_objects)}")
    events = f"{report.unindexed} newest event{'s' * (report.unindexed != 1)}"
    trailing = f" ({events} to index; search reads them directly)" if report.unindexed else ""
    print(f"search index  {'ok' + trailing if not report.search_index else '; '.join(report.search_index)}")
    for leftover in report.leftovers:
        print(f"leftover      {leftover}")
    for setting in report.settings:
        print(f"setting       {setting}")
    if report.deleted_text_left:
        print(f"deleted text  {admin.LEFT_IN_LOG.format(db=args.db.name)}")
    if report.ok:
        print("ok")
        return 0
    mend = [
        *(["put the views back and rebuild the index"] if report.schema_objects or report.search_index else []),
        *(["remove the leftovers"] if report.leftovers else []),
    ]
    hint = f": run `{PROG} check --repair` to {' and '.join(mend)}" if mend and not report.repaired else ""
    print(f"NOT OK{hint}")
    return 1


def cmd_db(args: argparse.Namespace) -> int:
    # Alembic is loaded by these functions only when they need it: no other command pays for it.
    from . import migrate

    action = args.db_command
    if action == "history":
        head = migrate.head()
        for revision, down, description in migrate.history():
            marker = " (head)" if revision == head else ""
            print(f"{down or 'base'} -> {revision}{marker}: {description}")
        return 0
    backend: Backend = args.db
    before = migrate.current(backend) or "base"
    if action == "current":
        head = migrate.head()
        print(f"{before} ({'head' if before == head else f'head is {head}: run `{upgrade_command(backend.name)}`'})")
        return 0
    if action == "upgrade":
        backup = migrate.upgrade(backend, args.revision)
    else:
        backup = migrate.downgrade(backend, args.revision, force=args.force)
    after = migrate.current(backend) or "base"
    if after == before:
        print(f"{backend.name} is already at {after}")
    else:
        print(f"{action}d {backend.name} from {before} to {after}" + (f"; backup at {backup}" if backup else ""))
    return 0


# -- argument parsing ---------------------------------------------------------------------------------


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


AGE_HELP = "e.g. 30d, 12h, 1.5w (a number, decimals too, and a unit: s, m, h, d or w)"


class _Parser(argparse.ArgumentParser):
    """argparse, except that an argument such as ``-3d`` is a value, as ``-3`` is, not an unknown option: a negative
    age then gets the one message every refused age gets (:func:`~sessionstore.admin.parse_age`), not argparse's
    "the following arguments are required". No option of this command begins with a digit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\d")


def build_parser() -> argparse.ArgumentParser:
    db_help = f"the database file, or a postgresql:// URL (default: $SESSIONSTORE_DB, else {platform_db_path()})"
    parser = _Parser(
        prog=PROG,
        description="Inspect and operate a sessionstore database. Ids may be given as any unique prefix.",
    )
    parser.add_argument("--db", type=_database, metavar="PATH|URL", help=db_help)
    # --db is accepted after the command too (`sessionstore list --db x.db`), as people type it.
    common = _Parser(add_help=False)
    common.add_argument("--db", type=_database, metavar="PATH|URL", default=argparse.SUPPRESS, help=db_help)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, handler: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help, description=help)
        p.set_defaults(handler=handler)
        return p

    p = command("list", cmd_list, "list sessions, newest first (subagents are shown with their session)")
    p.add_argument("--cwd", help="only sessions with this working directory")
    p.add_argument("-n", "--limit", type=_positive, help="at most this many")
    p.add_argument("--json", action="store_true", help="JSON output")

    p = command("show", cmd_show, "show a session's transcript, its subagents' nested where they started")
    p.add_argument("id", help="session id or unique prefix")
    p.add_argument("--all", action="store_true", help="also events that are not messages (usage, bookkeeping)")
    p.add_argument("--json", action="store_true", help="JSON output (payloads as objects)")

    p = command("export", cmd_export, "export sessions as JSON Lines (lossless)")
    p.add_argument("ids", nargs="*", metavar="ID", help="session ids or unique prefixes")
    p.add_argument("--all", action="store_true", help="every session")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (whole or not at all); default stdout")

    p = command("import", cmd_import, "import a JSON Lines export (checked whole first; idempotent)")
    p.add_argument("file", help="the export: a file, a pipe or FIFO, or - for standard input (read once)")
    p.add_argument("--replace", action="store_true", help="replace stored sessions whose events differ")

    p = command("delete", cmd_delete, "delete sessions, their events and their subagents")
    p.add_argument("ids", nargs="+", metavar="ID", help="session ids or unique prefixes")

    p = command("prune", cmd_prune, "delete sessions not updated for a while that no live process holds")
    p.add_argument("--older-than", required=True, metavar="AGE", help=AGE_HELP)
    p.add_argument("--yes", action="store_true", help="delete (without it, only show what would go)")

    p = command("search", cmd_search, "full-text search over message text")
    p.add_argument("text", nargs="+", help="words to find (all of them)")
    p.add_argument("--fts", action="store_true", help="TEXT is FTS5 syntax (AND, OR, NOT, prefix*)")
    p.add_argument("-n", "--limit", type=_positive, default=20, help="at most this many hits (default 20)")
    p.add_argument("--json", action="store_true", help="JSON output")

    p = command("datasette", cmd_datasette, "serve the file with Datasette: FTS5 search, hits by session id")
    p.add_argument("options", nargs=argparse.REMAINDER, metavar="-- OPTION", help="Datasette's own, after --")

    p = command("title", cmd_title, "set or clear a session's title")
    p.add_argument("id", help="session id or unique prefix")
    p.add_argument("text", nargs="?", help="the new title")
    p.add_argument("--clear", action="store_true", help="remove the stored title (a derived one shows instead)")

    p = command("fork", cmd_fork, "fork a session: a new one sharing its first N events; prints the new id")
    p.add_argument("id", help="session id or unique prefix")
    p.add_argument("--at", type=int, metavar="N", help="share the first N events (default: all of them)")
    p.add_argument("--json", action="store_true", help="JSON output (the new session's record)")

    p = command("stats", cmd_stats, "counts, file size and schema revision")
    p.add_argument("--json", action="store_true", help="JSON output")

    p = command("retention", cmd_retention, "the age past which storages remove unheld sessions on their own")
    action = p.add_subparsers(dest="action", metavar="ACTION")  # none: show
    setting = action.add_parser("set", parents=[common], help="set it: " + AGE_HELP)
    setting.add_argument("age", metavar="AGE")
    for name, what in (("show", "the policy and what it removes next"), ("off", "remove the policy")):
        action.add_parser(name, parents=[common], help=what)
    for parser_ in (p, *action.choices.values()):
        parser_.add_argument("--json", action="store_true", help="JSON output", default=argparse.SUPPRESS)
    p.set_defaults(json=False, action="show")

    p = command("check", cmd_check, "integrity, foreign keys, schema revision, views and the search index")
    p.add_argument("--repair", action="store_true", help="put back altered views and triggers, rebuild the index")
    p.add_argument("--json", action="store_true", help="JSON output")

    p = command("db", cmd_db, "schema migrations")
    db = p.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    up = db.add_parser("upgrade", parents=[common], help="upgrade the schema (a backup is kept beside the file)")
    up.add_argument("revision", nargs="?", default="head", help="target revision (default: head)")
    down = db.add_parser("downgrade", parents=[common], help="downgrade the schema to REVISION")
    down.add_argument("revision", help="target revision")
    down.add_argument(
        "--force", action="store_true", help="PostgreSQL: go to base though it drops every session (pg_dump first)"
    )
    db.add_parser("current", parents=[common], help="the file's schema revision")
    db.add_parser("history", parents=[common], help="every revision this sessionstore knows")
    return parser


def _fail(message: str) -> NoReturn:
    print(visible(f"{PROG}: error: {message}"), file=sys.stderr)
    raise SystemExit(1)


@contextlib.contextmanager
def _signals_as_ctrl_c() -> Iterator[list[int]]:
    """While a command runs, SIGTERM and SIGHUP end it as Ctrl-C does; the signals received, in order.

    ``kill``, ``timeout`` and systemd send SIGTERM, a closed terminal SIGHUP;
    by default either ends Python at once, leaving scratch files (a new
    database, a copy of an input, an export's next file) that hold
    conversation text. Ctrl-C raises KeyboardInterrupt, whose unwinding
    removes them: these signals do what SIGINT's handler does (asyncio's, while
    a PostgreSQL command runs one, which cancels its task first). A signal
    ignored when the command started (``nohup``) stays ignored.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield received
        return

    def as_ctrl_c(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        handler = signal.getsignal(signal.SIGINT)
        if not callable(handler):  # SIGINT ignored (a background job): these signals still end the command
            raise KeyboardInterrupt
        handler(signal.SIGINT, frame)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):  # no SIGHUP on Windows
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) == signal.SIG_DFL:
            previous[number] = signal.signal(number, as_ctrl_c)
    try:
        yield received
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def main(argv: Sequence[str] | None = None) -> int:
    with _signals_as_ctrl_c() as signals:
        try:
            return _run(argv)
        except KeyboardInterrupt:
            # Ctrl-C, SIGTERM or SIGHUP: the scratch files went on the way here. 128 + the signal, as shells say.
            number = signals[-1] if signals else signal.SIGINT
            by = f" by {signal.Signals(number).name}" if signals else ""
            print(f"{PROG}: interrupted{by}; nothing half-written was kept", file=sys.stderr)
            return 128 + number


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    defaulted = args.db is None and not os.environ.get("SESSIONSTORE_DB")
    args.db = args.db or open_backend(default_db_path())
    stdout = sys.stdout
    sys.stdout = _Visible(stdout)
    try:
        code: int = args.handler(args)
    except DatabaseNotFoundError as exc:
        _fail(str(exc) + (NO_DEFAULT_DATABASE if defaulted else ""))
    except (StorageError, UsageError) as exc:
        _fail(str(exc))
    except BrokenPipeError:
        # `sessionstore list | head`: the reader left, which is no error. Point stdout
        # at devnull so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        _fail(f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc))
    except UnicodeEncodeError as exc:
        # An argument made from bytes that are not UTF-8 (os.fsdecode keeps them as lone surrogates):
        # nothing stored can match it, and nothing can be stored from it.
        _fail(f"{exc.object[exc.start : exc.end + 20]!r}... is not valid text: it holds bytes that are not UTF-8")
    finally:
        sys.stdout = stdout
    return code


if __name__ == "__main__":
    raise SystemExit(main())
