"""The SQLite backend: a sessionstore file, for the commands (:class:`~sessionstore.backend.Backend`).

What only a file has is here: the reader that never creates or changes it, the
``BEGIN IMMEDIATE`` transactions kept short so agents writing meanwhile are not
held up (:mod:`sessionstore.batches`), the holds' lock bytes, FTS5 search, the
integrity check and its repair, the mark of deleted text left in the pages and
the write-ahead log, and an import that builds a new file beside its path.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from .. import scratch
from ..batches import BATCH_SECONDS, in_batches
from ..errors import DatabaseNotFoundError, ImportConflictError, from_sqlite
from ..reads import CheckReport, Connection, SearchHit, Stats
from ..schema import queries
from ..schema.revisions import HEAD, HOLDS_SINCE, Direction, behind, objects_at_head, reaches
from ..storage import BUSY_TIMEOUT
from . import migrate, search
from .connect import check_private, connect, deleted_mark, mark_deleted, read_revision, scrub_log, transaction
from .holds import Holds

__all__ = ["SAMPLES", "SQLiteBackend"]

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")

SAMPLES = 200
"""How many events with text the search check looks up in the full-text index."""


class SQLiteBackend:
    """A sessionstore file at ``path``, as the commands use it."""

    refuses_nul = False
    top_level = queries.TOP_LEVEL
    events_of = queries.EVENTS_OF

    def __init__(self, path: Path, *, busy_timeout: float = BUSY_TIMEOUT) -> None:
        self.path = path
        self.name = str(path)
        self.files = (path, *(Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal")))
        self.scratch_folder = path
        self.busy_timeout = busy_timeout

    def __repr__(self) -> str:
        return f"SQLiteBackend({self.name!r})"

    def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return fn(*args, **kwargs)  # a generator streams: the file stays open while it is iterated

    # -- connections ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self, *, snapshot: bool = False) -> Iterator[Connection]:
        """Never creates or changes the file (``query_only``); SQLite's errors as :class:`StorageError`."""
        conn = connect(self.path, busy_timeout=self.busy_timeout, write=False, check_tables=True)
        try:
            if snapshot:
                conn.execute("BEGIN")
            yield conn
        except sqlite3.Error as exc:
            raise from_sqlite(exc, self.path) from exc
        finally:
            conn.close()

    @contextlib.contextmanager
    def writable(self) -> Iterator[Connection]:
        """The user's own file (:func:`check_private`), at this version's revision: an older one is refused with the
        command that upgrades it, rather than upgraded as a side effect of, say, deleting a session."""
        conn = connect(self.path, busy_timeout=self.busy_timeout, check_tables=True)
        try:
            check_private(self.path)
            revision = read_revision(conn, self.path)[0]
            if revision != HEAD:
                raise behind(self.name, revision)
            yield conn
        except sqlite3.Error as exc:
            raise from_sqlite(exc, self.path) from exc
        finally:
            conn.close()

    def transaction(self, conn: Connection) -> contextlib.AbstractContextManager[Connection]:
        assert isinstance(conn, sqlite3.Connection)
        return transaction(conn, self.path)

    def in_batches(
        self,
        conn: Connection,
        items: Iterable[T],
        apply: Callable[[Connection, T], R],
        *,
        finish: Callable[[Connection], object] | None = None,
    ) -> Iterator[R]:
        """Transactions of :data:`~sessionstore.batches.BATCH_SECONDS` at most: maintenance never starves an agent
        waiting for the file's one write lock."""
        return in_batches(
            lambda: self.transaction(conn),
            items,
            lambda item: apply(conn, item),
            seconds=BATCH_SECONDS,
            finish=None if finish is None else lambda: finish(conn),
        )

    def revision(self, conn: Connection) -> str | None:
        assert isinstance(conn, sqlite3.Connection)
        return read_revision(conn, self.path)[0]

    # -- what a file does its own way ------------------------------------------------------------

    def live_holders(self, conn: Connection) -> dict[str, str]:
        """A mark in ``sessions.held_by`` alone says nothing (its process may have ended without letting go, a
        ``kill -9``): the hold's lock byte on the file (:mod:`sessionstore.sqlite.holds`), which dies with its
        holder, is asked for each marked session. A file from before revision 0007 has no holds."""
        if not reaches(self.revision(conn), HOLDS_SINCE):
            return {}
        marked = conn.execute(queries.MARKED_HOLDERS).fetchall()
        if not marked:
            return {}
        holds = Holds(self.path)
        try:
            return {str(sid): str(who) for row_id, sid, who in marked if holds.held_elsewhere(int(row_id))}
        finally:
            holds.close()

    def search(self, conn: Connection, text: str, *, raw: bool, limit: int) -> list[SearchHit]:
        revision = self.revision(conn)
        if revision != HEAD:
            raise behind(self.name, revision, "searches")
        return search.search(conn, text, raw=raw, limit=limit)

    def stats(self) -> Stats:
        with self.reading(snapshot=True) as conn:
            sessions, released = conn.execute(queries.SESSION_COUNT).fetchone()
            types = dict(conn.execute(queries.EVENT_TYPES).fetchall())
            revision = self.revision(conn)
        wal = Path(f"{self.path}-wal")
        return Stats(
            path=self.name,
            sessions=int(sessions),
            released=int(released),
            events=sum(int(n) for n in types.values()),
            event_types={str(k): int(v) for k, v in types.items()},
            revision=revision,
            file_size=self.path.stat().st_size,
            wal_size=wal.stat().st_size if wal.exists() else 0,
        )

    def check(self, *, repair: bool) -> CheckReport:
        """SQLite's integrity and foreign-key checks; the schema revision; the views and triggers against this
        version's definitions; the full-text index, by looking up :data:`SAMPLES` events spread over the file by
        a word of their own (an index whose pages were damaged no longer finds them, though SQLite's checks
        pass); scratch files a killed command left beside the file; and the file's mark of deleted text
        (:func:`~sessionstore.sqlite.connect.deleted_mark`, one read of its header). Reads only: an agent writing
        meanwhile is not held up.

        With ``repair``, puts back what is missing or altered (views and triggers, from this version's
        definitions) and rebuilds the index, in one transaction, removes the leftovers, finishes removing
        deleted text if no other process holds an older snapshot any more, then checks again.
        """
        with self.reading() as conn:
            assert isinstance(conn, sqlite3.Connection)
            integrity = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
            foreign = [
                f"{table} row {rowid} points at a missing {parent} row"
                for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check")
            ]
            revision = self.revision(conn)
            current = revision == HEAD
            altered = _altered_objects(conn) if current else []
            index = _index_problems(conn) if current and not any("events_fts" in name for name in altered) else []
            trails = conn.execute(queries.UNINDEXED_EVENTS).fetchone() if current and not altered else None
            left = bool(deleted_mark(conn))
        unindexed = int(trails[0]) if trails is not None else 0
        leftovers = [leftover.describe() for leftover in scratch.leftovers(self.path)]
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
        repaired = _repair(self, altered) if altered or index else []
        repaired += [f"removed {leftover.path}" for leftover in scratch.sweep(self.path)]
        if left:
            with self.writable() as conn:
                if self.forget_deleted(conn):
                    repaired.append("removed the deleted text left in the file and its write-ahead log")
        return replace(self.check(repair=False), repaired=repaired)

    def note_deleted(self, conn: Connection) -> None:
        """The file's mark (:func:`~sessionstore.sqlite.connect.mark_deleted`), in the delete's transaction."""
        assert isinstance(conn, sqlite3.Connection)
        mark_deleted(conn)

    def forget_deleted(self, conn: Connection) -> bool:
        """Rows are overwritten as they are deleted (``secure_delete``), but a deleted event's words stay in the
        full-text index's older segments until they are merged, and earlier versions of pages stay in the
        write-ahead log until it is emptied. So: merge the index, a step per short transaction (an agent writing
        meanwhile keeps its pace), then empty the log (:func:`~sessionstore.sqlite.connect.scrub_log`), waiting
        for another process's older snapshot for at most :data:`~sessionstore.sqlite.connect.SCRUB_WAIT`: if it
        is still held, the file stays marked, and the next storage to open it (or one open on it) finishes once
        that process lets go."""
        assert isinstance(conn, sqlite3.Connection)
        mark = deleted_mark(conn)  # before the merge: a delete after this keeps its own mark

        def merge(conn: Connection, step: int) -> bool:
            assert isinstance(conn, sqlite3.Connection)
            return search.merge_index(conn)

        for merged in self.in_batches(conn, range(2**62), merge):
            if not merged:
                break
        return scrub_log(self.path, mark)

    def deleted_text_left(self) -> bool:
        with self.reading() as conn:
            assert isinstance(conn, sqlite3.Connection)
            return bool(deleted_mark(conn))

    def written(self, conn: Connection) -> None:
        """Index the events written (a batch at a time; search reads those not indexed yet directly)."""
        assert isinstance(conn, sqlite3.Connection)
        search.index_new_events(conn)

    def build(self, work: Callable[[SQLiteBackend], T]) -> T:
        """A new file is built beside its final path and linked there only once it is complete, so nobody (an
        agent started meanwhile) ever sees it half-made, and a failure removes only this call's own file."""
        if self.path.exists():
            return work(self)
        building = scratch.new(self.path, "import")
        try:
            migrate.prepare(building)
            done = work(SQLiteBackend(building, busy_timeout=self.busy_timeout))
            try:
                os.link(building, self.path)
            except FileExistsError:
                raise ImportConflictError(
                    f"{self.path} was created by someone else while the import ran; nothing was imported into it"
                ) from None
            return done
        finally:
            for suffix in ("-wal", "-shm", ""):
                Path(f"{building}{suffix}").unlink(missing_ok=True)

    # -- the schema ------------------------------------------------------------------------------

    def current(self) -> str | None:
        if not self.path.exists():
            raise DatabaseNotFoundError(f"{self.path}: no such database file")
        return migrate.current(self.path, busy_timeout=self.busy_timeout)

    alembic_url = "sqlite://"

    def run_alembic(
        self, run: Callable[[Any], None], destination: Callable[[], Any], scripts: Any, *, force: bool = False
    ) -> None:
        """After the backup a move takes (so ``force`` changes nothing for a file)."""
        migrate.run_alembic(self.path, run, destination, scripts)

    def migrate(self, revision: str, direction: Direction, *, force: bool = False) -> str | None:
        """Under the file's write lock, after a backup beside it (``downgrade base`` drops every session, so a
        file is never moved without one, and ``force`` changes nothing)."""
        move = migrate.upgrade if direction == "upgrade" else migrate.downgrade
        return move(self.path, revision, busy_timeout=self.busy_timeout)


def _altered_objects(conn: sqlite3.Connection) -> list[str]:
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
    low, high = conn.execute(queries.EVENT_ID_RANGE).fetchone()
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


def _repair(backend: SQLiteBackend, altered: list[str]) -> list[str]:
    objects = objects_at_head()
    names = [problem.split()[0] for problem in altered]
    done = []
    with backend.writable() as conn, backend.transaction(conn):
        for name in names:
            kind = "TABLE" if name == "events_fts" else objects[name].split()[1]
            conn.execute(f"DROP {kind} IF EXISTS {name}")
            conn.execute(objects[name])
            done.append(f"made {name} again")
        conn.execute("INSERT INTO events_fts (events_fts) VALUES ('rebuild')")
        conn.execute(queries.RESET_MARK)
        done.append("rebuilt the full-text index")
    return done
