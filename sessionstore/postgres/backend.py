"""The PostgreSQL backend: a database on a server, for the commands (:class:`~sessionstore.backend.Backend`).

Every command runs inside :func:`~sessionstore.postgres.connect.blocking` (``streamed`` for one that yields:
SQLAlchemy's synchronous API over asyncpg, in a greenlet), on :class:`~sessionstore.postgres.connect.PgConnection`.
What differs from a file: a read is one ``REPEATABLE READ READ ONLY`` snapshot; a long command is one transaction
(MVCC: an agent writing other sessions never waits for it, and a failed command leaves the database as it was);
holds are advisory locks ``pg_locks`` shows; search answers as FTS5 would (:mod:`sessionstore.postgres.search`);
``check`` checks what a server's database has, and ``--repair`` is refused; deleted rows go at the next vacuum,
with no log of old pages for a reader to hold; the schema moves under an advisory lock, with no backup (DDL is
transactional).
"""

from __future__ import annotations

import contextlib
import inspect
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, cast

from ..batches import in_batches
from ..errors import NotOnPostgreSQLError
from ..reads import CheckReport, Connection, SearchHit, Stats
from ..schema import queries
from ..schema.revisions import HEAD, Direction, behind, not_ours, objects_at_head
from . import migrate, search
from .connect import PG_LOCK_CLASS, PgConnection, blocking, connected, pg_lock_key, redacted, streamed

__all__ = ["PostgresBackend"]

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")

# Every function, trigger, view and index of the current schema, by kind and name.
_OBJECTS = (
    "SELECT 'FUNCTION', p.proname FROM pg_proc AS p WHERE p.pronamespace = current_schema()::regnamespace"
    " UNION ALL SELECT 'TRIGGER', t.tgname FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid"
    " WHERE NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace"
    " UNION ALL SELECT CASE c.relkind WHEN 'v' THEN 'VIEW' ELSE 'INDEX' END, c.relname FROM pg_class AS c"
    " WHERE c.relkind IN ('v', 'i') AND c.relnamespace = current_schema()::regnamespace"
    " UNION ALL SELECT 'POLICY', p.policyname FROM pg_policies AS p WHERE p.schemaname = current_schema()"
    " UNION ALL SELECT 'TABLE', c.relname FROM pg_class AS c"
    " WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace"
)
# What the policies need besides themselves (revision 0011): row-level security on for the tables (0015's words and
# queue too), and views that run as the role reading them (a view left running as its owner shows every role's
# sessions).
_UNGUARDED = (
    "SELECT c.relname, c.relkind = 'v' FROM pg_class AS c WHERE c.relnamespace = current_schema()::regnamespace AND"
    " ((c.relname IN ('sessions', 'events', 'events_words', 'events_unindexed') AND c.relkind = 'r'"
    " AND NOT c.relrowsecurity)"
    " OR (c.relname IN ('session_overview', 'transcript', 'usage') AND c.relkind = 'v'"
    " AND NOT coalesce('security_invoker=true' = ANY(c.reloptions), false)))"
)
_INDEX_VALID = (
    "SELECT i.indisvalid AND i.indisready FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
    " WHERE c.relname = 'events_fts' AND c.relnamespace = current_schema()::regnamespace"
)


class PostgresBackend:
    """The PostgreSQL database at ``url``, as the commands use it (the password never shown)."""

    files: tuple[Path, ...] = ()
    refuses_nul = True
    top_level = queries.TOP_LEVEL_POSTGRESQL
    events_of = queries.EVENTS_OF_POSTGRESQL

    def __init__(self, url: str) -> None:
        self.url = url
        self.name = redacted(url)
        # Scratch files are found again by the next import; a server's database has no folder of ours.
        self.scratch_folder = Path(tempfile.gettempdir()) / "sessionstore-postgresql"

    def __repr__(self) -> str:
        return f"PostgresBackend({self.name!r})"

    def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """In a greenlet; a generator's items are handed over as it makes them (:func:`streamed`), its
        connection open until the last one is taken."""
        if inspect.isgeneratorfunction(fn):
            return cast(T, streamed(fn, *args, **kwargs))
        result: T = blocking(fn, *args, **kwargs)
        return result

    # -- connections ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self, *, snapshot: bool = False) -> Iterator[Connection]:
        """One read-only snapshot whatever ``snapshot`` says, refused unless the database is a sessionstore one at
        this version's revision (PostgreSQL databases start at it; the command that upgrades one is named)."""
        with connected(self.url) as conn:
            self._usable(conn, "reads")
            yield conn

    @contextlib.contextmanager
    def writable(self) -> Iterator[Connection]:
        with connected(self.url, write=True) as conn:
            self._usable(conn, "writes")
            yield conn

    def _usable(self, conn: PgConnection, does: str) -> None:
        revision, populated = conn.revision_and_tables()
        if revision is None:
            raise not_ours(self.name, populated)
        if revision != HEAD:
            raise behind(self.name, revision, does)

    def transaction(self, conn: Connection) -> contextlib.AbstractContextManager[Connection]:
        assert isinstance(conn, PgConnection)
        return conn.transaction()

    def in_batches(
        self,
        conn: Connection,
        items: Iterable[T],
        apply: Callable[[Connection, T], R],
        *,
        finish: Callable[[Connection], object] | None = None,
    ) -> Iterator[R]:
        """One transaction, all or nothing: its row locks hold up only the writers of the sessions it changes."""
        return in_batches(
            lambda: self.transaction(conn),
            items,
            lambda item: apply(conn, item),
            seconds=float("inf"),
            finish=None if finish is None else lambda: finish(conn),
        )

    def revision(self, conn: Connection) -> str | None:
        assert isinstance(conn, PgConnection)
        return conn.revision()

    # -- what a server does its own way ----------------------------------------------------------

    def live_holders(self, conn: Connection) -> dict[str, str]:
        """A hold is an advisory lock on its holder's connection: ``pg_locks`` shows the live ones, on every host."""
        marked = conn.execute(queries.MARKED_HOLDERS).fetchall()
        if not marked:
            return {}
        locked = {int(r[0]) for r in conn.execute(queries.ADVISORY_HOLDS_POSTGRESQL, {"class": PG_LOCK_CLASS})}
        return {str(sid): str(who) for row_id, sid, who in marked if pg_lock_key(int(row_id)) in locked}

    def search(self, conn: Connection, text: str, *, raw: bool, limit: int) -> list[SearchHit]:
        return search.search(conn, text, raw=raw, limit=limit)

    def stats(self) -> Stats:
        """``file_size`` is the database's size (``pg_database_size``), ``tables_size`` that of sessionstore's tables
        with their indexes."""
        with self.reading() as conn:
            sessions, released = conn.execute(queries.SESSION_COUNT).fetchone()
            types = dict(conn.execute(queries.EVENT_TYPES).fetchall())
            revision = self.revision(conn)
            sizes = conn.execute(queries.DATABASE_SIZE_POSTGRESQL).fetchone()
        return Stats(
            path=self.name,
            sessions=int(sessions),
            released=int(released),
            events=sum(int(n) for n in types.values()),
            event_types={str(k): int(v) for k, v in types.items()},
            revision=revision,
            file_size=int(sizes[0]),
            tables_size=int(sizes[1]),
            database="postgresql",
        )

    def check(self, *, repair: bool) -> CheckReport:
        """The revision, the functions, triggers, views, policies and the search words' tables and index against this
        version's (row-level security on, the views run as their reader), orphaned events, and that the index is
        valid. The server keeps
        its own pages whole (and amcheck checks them): no integrity check of a file here."""
        if repair:
            raise NotOnPostgreSQLError(
                f"check --repair mends a SQLite file's views, triggers and FTS5 index; on PostgreSQL run"
                f" `sessionstore check --db {self.name}` and restore what it names from a backup"
                " (or rebuild the index with REINDEX INDEX events_fts)"
            )
        with self.reading() as conn:
            revision = self.revision(conn)
            foreign = [
                f"events row {event} points at a missing sessions row {session}"
                for event, session in conn.execute(queries.ORPHAN_EVENTS_POSTGRESQL)
            ]
            stored = {f"{kind} {name}" for kind, name in conn.execute(_OBJECTS)}
            wanted = objects_at_head(postgresql=True)
            altered = [f"{name.split()[1]} is missing" for name in wanted if name not in stored]
            for name, view in conn.execute(_UNGUARDED):
                altered.append(
                    f"view {name} runs as its owner (security_invoker is off): it shows every role's sessions"
                    if view
                    else f"row-level security is off on {name}: every role sees every session"
                )
            for view in ("transcript", "session_overview"):
                if f"VIEW {view}" in stored:
                    conn.execute(f"SELECT * FROM {view} LIMIT 1").fetchall()  # an error here is the check's answer
            valid = conn.execute(_INDEX_VALID).fetchone()
            index = [] if valid is None or valid[0] else ["the full-text index events_fts is not valid (REINDEX it)"]
        return CheckReport([], foreign, revision, schema_objects=altered, search_index=index)

    def note_deleted(self, conn: Connection) -> None:
        """Nothing to note: PostgreSQL keeps no log of old pages a reader could hold."""

    def forget_deleted(self, conn: Connection) -> bool:
        """Deleted rows go at the next vacuum, which autovacuum runs."""
        return True

    def deleted_text_left(self) -> bool:
        return False

    def written(self, conn: Connection) -> None:
        """Index the events written, in the writing transaction (the command's one: all or nothing), a batch at a
        time until none is left; search reads those not indexed yet directly meanwhile."""
        while search.index_new_events(conn):
            pass

    def build(self, work: Callable[[PostgresBackend], T]) -> T:
        """The database must exist; an empty one gets the schema, under the migration lock (a populated one
        without it is refused untouched)."""
        if self.current() is None:
            migrate.migrate(self.url)
        return work(self)

    # -- the schema ------------------------------------------------------------------------------

    def current(self) -> str | None:
        def revision() -> str | None:
            with connected(self.url) as conn:
                return conn.revision()

        found: str | None = blocking(revision)
        return found

    @property
    def alembic_url(self) -> str:
        return self.url

    def run_alembic(
        self, run: Callable[[Any], None], destination: Callable[[], Any], scripts: Any, *, force: bool = False
    ) -> None:
        """Under the migration lock, in one transaction; no backup (DDL is transactional), so a move to base of a
        database holding sessions is refused unless ``force``d (:func:`~.migrate.refuse_dropping_sessions`)."""

        def checked(conn: Any) -> None:
            try:
                target = destination()
            except KeyError:  # a command that moves nothing (current)
                target = ""
            migrate.refuse_dropping_sessions(conn, redacted(self.url), target, force=force, again="-x force=1")
            run(conn)

        migrate.run_locked(self.url, checked)

    def migrate(self, revision: str, direction: Direction, *, force: bool = False) -> str | None:
        """Under the migration lock, in one transaction (a failed one leaves the database as it was: no backup;
        a move to base of a database holding sessions refused unless ``force``d)."""
        migrate.migrate(self.url, revision, direction, force=force)
        return None
