"""Administration: deleting, pruning and naming sessions, and checking a file.

One function per command, each one ``BEGIN IMMEDIATE`` transaction on the
file (:func:`writing`), so a failed call (an unknown id, say) leaves the file
exactly as it was, and other processes queue for the lock as they do with the
storage. Every user mistake is found before anything is written. Writes need
the file at the schema revision this version expects; an older file is
refused with the command that upgrades it, rather than upgraded as a side
effect of, say, deleting a session.

On a PostgreSQL URL the same functions run the same statements
(:func:`pgdatabase.either`); what differs is said where it does: a long
command is one transaction there (MVCC: an agent writing other sessions never
waits for it), and ``check`` checks what a server's database has.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from . import pgdatabase, queries, records, scratch
from .database import (
    BUSY_TIMEOUT,
    HEAD,
    check_private,
    connect,
    deleted_mark,
    mark_deleted,
    read_revision,
    scrub_log,
    transaction,
)
from .errors import NotADatabaseError, NotOnPostgreSQLError, SchemaError, SessionHeldError, UsageError, from_sqlite
from .storage import SessionRecord, storable_text, utc_text

__all__ = [
    "BATCH_SECONDS",
    "LEFT_IN_LOG",
    "CheckReport",
    "check",
    "delete_sessions",
    "deleted_text_left",
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
    """What ``sessionstore check`` found; every list is empty (``integrity`` is ``["ok"]``) on a healthy file.

    ``schema_objects``: views and triggers missing or not as this version
    defines them; ``search_index``: events the full-text index cannot find, or
    its errors. Both are what ``check --repair`` mends; ``repaired`` says what it did.
    ``unindexed``: how many of the newest events the index does not hold yet (not a
    problem: writers index in batches, and search reads those events directly).
    ``leftovers``: scratch files beside the file that a killed command left (:mod:`scratch`), one line each;
    they hold conversation text, so they are not ok, and ``check --repair`` (or the next import) removes them.
    ``deleted_text_left``: deleted text may still be in the file's pages and its
    write-ahead log, because another process held an older snapshot when it was
    deleted (:data:`LEFT_IN_LOG`; not damage: it goes once that process lets go).
    """

    integrity: list[str]
    foreign_keys: list[str]
    revision: str | None
    head: str = HEAD
    schema_objects: list[str] = field(default_factory=list)
    search_index: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    unindexed: int = 0
    leftovers: list[str] = field(default_factory=list)
    deleted_text_left: bool = False

    @property
    def ok(self) -> bool:
        return (
            self.integrity in (["ok"], [])  # [] on PostgreSQL: no file of pages to check
            and not self.foreign_keys
            and self.revision == self.head
            and not self.schema_objects
            and not self.search_index
            and not self.leftovers
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "integrity": self.integrity,
            "foreign_keys": self.foreign_keys,
            "revision": self.revision,
            "head": self.head,
            "schema_objects": self.schema_objects,
            "search_index": self.search_index,
            "repaired": self.repaired,
            "unindexed": self.unindexed,
            "leftovers": self.leftovers,
            "deleted_text_left": self.deleted_text_left,
        }


@contextlib.contextmanager
def writable(db: str | Path, *, busy_timeout: float = BUSY_TIMEOUT) -> Iterator[sqlite3.Connection]:
    """A connection to an existing file at the expected schema revision, the user's own, to write to."""
    if pgdatabase.is_url(db):
        with pgdatabase.connected(str(db), write=True) as pg:
            revision = pg.revision()
            if revision is None:
                raise NotADatabaseError(f"{records.where(db)} is not a sessionstore database (no schema revision)")
            if revision != HEAD:
                command = pgdatabase.UPGRADE_COMMAND.format(url=records.where(db))
                raise SchemaError(
                    f"{records.where(db)} is at schema revision {revision!r}, this sessionstore writes {HEAD!r};"
                    f" run `{command}` first"
                )
            yield cast(sqlite3.Connection, pg)  # it speaks the part of sqlite3.Connection used here
        return
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
    conn: sqlite3.Connection,
    path: Path,
    items: Iterable[T],
    apply: Callable[[sqlite3.Connection, T], R],
    *,
    finish: Callable[[sqlite3.Connection], object] | None = None,
) -> Iterator[R]:
    """``apply`` each item in turn, in as many short transactions as it takes, each of whole items.

    Maintenance never starves an agent: no transaction holds the lock past
    :data:`BATCH_SECONDS`, and between two the lock is free. An interrupted run
    has applied whole items only. ``finish`` ends each transaction, within its
    time (an import indexes the events it wrote).
    """
    remaining = iter(items)
    # PostgreSQL: one transaction, all or nothing. Its row locks hold up only the writers of the sessions it
    # changes, so nobody is starved, and a failed command leaves the database as it was.
    batch = float("inf") if records.is_postgres(conn) else BATCH_SECONDS
    done = False
    finishing = 0.0
    while not done:
        results: list[R] = []
        with transaction(conn, path):
            started = time.monotonic()
            # The last finish's time is kept free for this one's.
            while time.monotonic() - started < batch - finishing:
                item = next(remaining, _END)
                if item is _END:
                    done = True
                    break
                results.append(apply(conn, cast(T, item)))
            if finish is not None:
                finished = time.monotonic()
                finish(conn)
                finishing = min(time.monotonic() - finished, BATCH_SECONDS / 2)
        yield from results
        if not done:
            time.sleep(PAUSE_SECONDS)


_END: Any = object()


def _delete(conn: sqlite3.Connection, sid: str) -> tuple[str, int]:
    """Delete a session (its subagents go with it); its id and how many subagents went."""
    # -1 for a session already gone (named after its parent, which took it along)
    subagents = max(0, int(conn.execute(queries.SUBAGENT_COUNT, {"sid": sid}).fetchone()[0]))
    conn.execute(queries.DELETE_SESSION, {"sid": sid})
    note_deleted(conn)
    return sid, subagents


def note_deleted(conn: sqlite3.Connection) -> None:
    """In a delete's transaction: mark the file as holding deleted text until :func:`forget_deleted` is done
    (:func:`database.mark_deleted`). PostgreSQL keeps no log of old pages a reader could hold: nothing to mark."""
    if not records.is_postgres(conn):
        mark_deleted(conn)


INDEX_BATCH = 256
"""At most this many events are indexed in one transaction (about a millisecond): a file left far behind, by a
crash or a large ``set_history``, is caught up without holding up the writes that come meanwhile."""


def index_new_events(conn: sqlite3.Connection, batch: int = INDEX_BATCH) -> bool:
    """Index up to ``batch`` events past the full-text index's mark, inside the caller's write transaction, and
    move the mark past them (revision 0005); whether more are left.

    Writers call it every few hundred events and when they finish; until then
    ``search`` finds the newer events through a scratch index of its own.
    """
    through = conn.execute(queries.NEXT_MARK, {"batch": batch}).fetchone()[0]
    if through is None:
        return False
    conn.execute(queries.INDEX_NEW_EVENTS, {"through": through})
    conn.execute(queries.MARK_INDEXED, {"through": through})
    return bool(conn.execute(queries.NEXT_MARK, {"batch": 1}).fetchone()[0])


LEFT_IN_LOG = (
    "remains in {db} and its write-ahead log for now: another process (a sqlite3 shell, a backup, a replicator)"
    " holds an older snapshot of the file; sessionstore removes it once that process lets go"
)
"""What a delete says of the deleted text, in one line, when it could not make it unrecoverable yet (``db``: the
file)."""


def forget_deleted(conn: sqlite3.Connection, path: Path) -> bool:
    """Make what was deleted unrecoverable from the file: deleted means gone. Whether it is (already).

    Rows are overwritten as they are deleted (``secure_delete``), but a deleted
    event's words stay in the full-text index's older segments until they are
    merged, and earlier versions of pages stay in the write-ahead log until it is
    emptied. So: merge the index, a step per short transaction (an agent writing
    meanwhile keeps its pace), then empty the log (:func:`database.scrub_log`),
    waiting for another process's older snapshot for at most
    :data:`database.SCRUB_WAIT`: if it is still held, the file stays marked, and
    the next sessionstore storage to open it (or one open on it) finishes once
    that process lets go. (PostgreSQL has neither: its deleted rows go at the
    next vacuum, which its autovacuum runs.)
    """
    if records.is_postgres(conn):
        return True
    mark = deleted_mark(conn)  # before the merge: a delete after this keeps its own mark

    def merge(conn: sqlite3.Connection, step: int) -> bool:
        before = conn.total_changes
        conn.execute(queries.MERGE_INDEX)
        return conn.total_changes - before > 1

    steps = itertools.count()
    for merged in in_batches(conn, path, steps, merge):
        if not merged:
            break
    return scrub_log(path, mark)


def deleted_text_left(db: str | Path) -> bool:
    """Whether deleted text may remain in the file's pages or its write-ahead log, because another process held an
    older snapshot when it was deleted (:data:`LEFT_IN_LOG`); one read of the file's header. Never on PostgreSQL."""
    if pgdatabase.is_url(db):
        return False
    with records.reading(db) as conn:
        return bool(deleted_mark(conn))


@pgdatabase.either
def delete_sessions(db: str | Path, prefixes: Sequence[str]) -> list[tuple[str, int]]:
    """``sessionstore delete``: the sessions (ids or unique prefixes), their events and their subagents; each
    full id, and how many subagents went with it (a session named after its parent was deleted with it: 0).

    Every prefix is resolved before anything is deleted (one that matches none
    or several deletes nothing); then whole sessions go, each with its
    subagents in one statement, in short transactions.
    """
    with writable(db) as conn:
        ids = records.resolve_all(conn, prefixes)
        refuse_held(conn, db, ids, "deleted")
        deleted = list(in_batches(conn, Path(db), ids, _delete))
        forget_deleted(conn, Path(db))
        return deleted


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


def refuse_held(conn: sqlite3.Connection, db: str | Path, ids: Sequence[str], what: str) -> None:
    """:class:`SessionHeldError` if a live process holds one of the sessions (or the session it is a subagent of):
    only that process may write it. Asked before anything is written, so a refused command writes nothing."""
    holders = records.live_holders(conn, db)
    if not holders:
        return
    for sid in ids:
        held = sid if sid in holders else records.parent_of(conn, sid)
        if held is not None and held in holders:
            whose = "" if held == sid else f" (a subagent of {held})"
            raise SessionHeldError(
                f"session {sid}{whose} is held by {holders[held]}: close it there (or end that process) first;"
                f" nothing was {what}"
            )


# A subagent goes with its session, never on its own; a session a live process holds is never a candidate.
_PRUNABLE = f"{queries.TOP_LEVEL} AND updated_at < :cutoff"


@pgdatabase.either
def prune(
    db: str | Path,
    older_than: timedelta,
    *,
    dry_run: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> list[SessionRecord]:
    """``sessionstore prune``: sessions not updated for ``older_than`` that no live process holds; deleted unless
    ``dry_run``.

    A session a live process holds (a registry has it live) is never pruned, however old; one that no process holds
    is, whether a registry let it go (released) or it was written without one, or its process ended. Whole sessions
    go in short transactions (:func:`in_batches`), so an agent writing meanwhile is never starved. Subagents
    are not candidates of their own: each goes with its session (whose ``updated_at`` is what is judged).
    """
    try:
        cutoff = utc_text(datetime.now(UTC) - older_than)
    except OverflowError:  # older than the calendar goes back: nothing is that old
        cutoff = utc_text(datetime.min.replace(tzinfo=UTC))
    if dry_run:
        with records.reading(db) as conn:
            current = records.is_current(conn)
            held = records.live_holders(conn, db)
            found = records.iter_sessions(conn, where=_PRUNABLE, cutoff=cutoff, current=current)
            return [r for r in found if r.session_id not in held]
    with writable(db) as conn:
        held = records.live_holders(conn, db)
        doomed = [r for r in records.iter_sessions(conn, where=_PRUNABLE, cutoff=cutoff) if r.session_id not in held]
        for done, _ in enumerate(in_batches(conn, Path(db), [r.session_id for r in doomed], _delete), 1):
            if progress is not None:
                progress(done, len(doomed))
        if doomed:
            forget_deleted(conn, Path(db))
        return doomed


@pgdatabase.either
def set_title(db: str | Path, prefix: str, title: str | None) -> str:
    """``sessionstore title``: set (or with ``None`` clear) a stored session's title; returns its full id."""
    if title is not None:
        storable_text(title, "title")  # refused before the file is opened, as the storage refuses it
    with writing(db) as conn:
        sid = records.resolve(conn, prefix)
        conn.execute(queries.SET_TITLE, {"sid": sid, "title": title})
        return sid


SAMPLES = 200
"""How many events with text the search check looks up in the full-text index."""


@pgdatabase.either
def check(db: str | Path, *, repair: bool = False) -> CheckReport:
    """``sessionstore check``: is the file whole, and does everything ``search`` and the views depend on work?

    SQLite's integrity and foreign-key checks; the schema revision; the views
    and triggers against this version's definitions; the full-text index,
    by looking up :data:`SAMPLES` events spread over the file by a word of
    their own (an index whose pages were damaged no longer finds them, though
    SQLite's checks pass); and scratch files a killed command left beside the
    file. Reads only: an agent writing meanwhile is not held up.

    Says too whether deleted text may be left in the file and its write-ahead
    log (another process held an older snapshot when it was deleted: the file's
    mark, :func:`database.mark_deleted`, one read of its header).

    With ``repair``, puts back what is missing or altered (views and triggers,
    from this version's definitions) and rebuilds the index, in one
    transaction, removes the leftovers, finishes removing deleted text if no
    other process holds an older snapshot any more, then checks again.

    On PostgreSQL (the server checks its own pages): the revision, the functions, triggers, views and search
    index against this version's, orphaned events, and that the index is valid; ``repair`` is refused.
    """
    if pgdatabase.is_url(db):
        return _check_postgresql(db, repair)
    with records.reading(db) as conn:
        integrity = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
        foreign = [
            f"{table} row {rowid} points at a missing {parent} row"
            for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check")
        ]
        revision = read_revision(conn)[0]
        current = revision == HEAD
        altered = _altered_objects(conn) if current else []
        index = _index_problems(conn) if current and not any("events_fts" in name for name in altered) else []
        trails = conn.execute(queries.UNINDEXED_EVENTS).fetchone() if current and not altered else None
        left = bool(deleted_mark(conn))
    unindexed = int(trails[0]) if trails is not None else 0
    leftovers = [leftover.describe() for leftover in scratch.leftovers(Path(db))]
    report = CheckReport(
        integrity,
        foreign,
        revision,
        schema_objects=altered,
        search_index=index,
        unindexed=unindexed,
        leftovers=leftovers,
        deleted_text_left=left,
    )
    if not repair or not (altered or index or leftovers or left):
        return report
    repaired = _repair(Path(db), altered) if altered or index else []
    repaired += [f"removed {leftover.path}" for leftover in scratch.sweep(Path(db))]
    if left:
        with writable(db) as conn:
            if forget_deleted(conn, Path(db)):
                repaired.append("removed the deleted text left in the file and its write-ahead log")
    return replace(check(db), repaired=repaired)


def _altered_objects(conn: sqlite3.Connection) -> list[str]:
    from .migrate import objects_at_head  # loads Alembic: check is not a command that must answer at once

    stored = {str(name): str(sql) for name, sql in conn.execute("SELECT name, sql FROM sqlite_master")}
    problems = []
    for name, statement in objects_at_head().items():
        if name not in stored:
            problems.append(f"{name} is missing")
        elif " ".join(stored[name].split()) != " ".join(statement.split()):
            problems.append(f"{name} is not as this sessionstore defines it")
    for view in ("transcript", "session_overview"):
        if view in stored:
            try:
                conn.execute(f"SELECT * FROM {view} LIMIT 1").fetchall()
            except sqlite3.Error as exc:
                problems.append(f"{view} cannot be read ({exc})")
    return problems


# The first indexed event with text from a random id on: samples spread over the whole file, each one index lookup.
_SAMPLE = (
    "SELECT event_id, text FROM transcript WHERE event_id >= ? AND text IS NOT NULL"
    " AND event_id <= (SELECT indexed_through FROM events_fts_progress) ORDER BY event_id LIMIT 1"
)


def _index_problems(conn: sqlite3.Connection) -> list[str]:
    """Events the full-text index should find by a word of theirs and does not (or its errors)."""
    if conn.execute("SELECT count(*) FROM events_fts_progress").fetchone()[0] != 1:
        return ["the full-text index has lost its mark (events_fts_progress has no row)"]
    low, high = conn.execute("SELECT min(id), max(id) FROM events").fetchone()
    if low is None:
        return []
    rng = random.Random(low * 31 + high)  # the same events each time for the same file
    missing: list[int] = []
    try:
        for _ in range(SAMPLES):
            row = conn.execute(_SAMPLE, (rng.randint(low, high),)).fetchone()
            words = re.findall(r"\w+", row[1]) if row is not None else []
            if not words:
                continue
            query = f'"{max(words, key=len)}"'
            found = conn.execute("SELECT 1 FROM events_fts WHERE events_fts MATCH ? AND rowid = ?", (query, row[0]))
            if found.fetchone() is None:
                missing.append(int(row[0]))
    except sqlite3.Error as exc:
        return [f"the full-text index cannot be searched ({exc})"]
    if not missing:
        return []
    shown = ", ".join(map(str, sorted(set(missing))[:5]))
    return [f"the full-text index does not find {len(set(missing))} of the events checked (events.id {shown}...)"]


def _repair(path: Path, altered: list[str]) -> list[str]:
    from .migrate import objects_at_head

    objects = objects_at_head()
    names = [problem.split()[0] for problem in altered]
    done = []
    with writing(path) as conn:
        for name in names:
            kind = "TABLE" if name == "events_fts" else objects[name].split()[1]
            conn.execute(f"DROP {kind} IF EXISTS {name}")
            conn.execute(objects[name])
            done.append(f"made {name} again")
        conn.execute("INSERT INTO events_fts (events_fts) VALUES ('rebuild')")
        conn.execute(queries.RESET_MARK)
        done.append("rebuilt the full-text index")
    return done


# -- check on PostgreSQL ---------------------------------------------------------------------------------

# Every function, trigger, view and index of the current schema, by kind and name.
_PG_OBJECTS = (
    "SELECT 'FUNCTION', p.proname FROM pg_proc AS p WHERE p.pronamespace = current_schema()::regnamespace"
    " UNION ALL SELECT 'TRIGGER', t.tgname FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid"
    " WHERE NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace"
    " UNION ALL SELECT CASE c.relkind WHEN 'v' THEN 'VIEW' ELSE 'INDEX' END, c.relname FROM pg_class AS c"
    " WHERE c.relkind IN ('v', 'i') AND c.relnamespace = current_schema()::regnamespace"
)
_PG_INDEX_VALID = (
    "SELECT i.indisvalid AND i.indisready FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
    " WHERE c.relname = 'events_fts' AND c.relnamespace = current_schema()::regnamespace"
)
# Events whose session row is gone (the foreign key stops it, unless it was dropped or triggers disabled).
_PG_ORPHANS = (
    "SELECT e.id, e.session FROM events AS e LEFT JOIN sessions AS s ON s.id = e.session WHERE s.id IS NULL"
    " ORDER BY e.id LIMIT 10"
)


def _check_postgresql(db: str | Path, repair: bool) -> CheckReport:
    if repair:
        raise NotOnPostgreSQLError(
            f"check --repair mends a SQLite file's views, triggers and FTS5 index; on PostgreSQL run"
            f" `sessionstore check --db {records.where(db)}` and restore what it names from a backup"
            " (or rebuild the index with REINDEX INDEX events_fts)"
        )
    from .migrate import objects_at_head

    with records.reading(db) as conn:
        revision = records.revision_of(conn)
        foreign = [
            f"events row {event} points at a missing sessions row {session}"
            for event, session in conn.execute(_PG_ORPHANS)
        ]
        stored = {f"{kind} {name}" for kind, name in conn.execute(_PG_OBJECTS)}
        altered = [f"{name.split()[1]} is missing" for name in objects_at_head(postgresql=True) if name not in stored]
        for view in ("transcript", "session_overview"):
            if f"VIEW {view}" in stored:
                conn.execute(f"SELECT * FROM {view} LIMIT 1").fetchall()  # an error here is the check's answer
        valid = conn.execute(_PG_INDEX_VALID).fetchone()
        index = [] if valid is None or valid[0] else ["the full-text index events_fts is not valid (REINDEX it)"]
    # The server keeps its own pages whole (and amcheck checks them): no integrity check of a file here.
    return CheckReport([], foreign, revision, schema_objects=altered, search_index=index)
