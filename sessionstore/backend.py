"""One object per database behind one protocol, chosen once from a ``--db`` path or URL.

Every difference between SQLite and PostgreSQL that the commands meet lives in
a backend (:class:`sessionstore.sqlite.backend.SQLiteBackend`,
:class:`sessionstore.postgres.backend.PostgresBackend`); the commands
(:mod:`sessionstore.records`, :mod:`sessionstore.admin`,
:mod:`sessionstore.transfer`, :mod:`sessionstore.migrate`) call only what
:class:`Backend` offers, and :func:`open_backend` is the one place that looks
at a path or URL to choose. The PostgreSQL backend is imported only for a URL:
a command on a file loads no asyncpg and no SQLAlchemy.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

if TYPE_CHECKING:
    from .reads import CheckReport, Connection, SearchHit, Stats
    from .schema.revisions import Direction

__all__ = ["Backend", "Database", "command", "open_backend"]

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")


class Backend(Protocol):
    """A database the commands work on: how to read and write it, and what each database does its own way."""

    name: str
    """How messages name the database: its path, or its URL with the password hidden."""
    files: tuple[Path, ...]
    """The files that make up the database (an export never overwrites one); none for a server."""
    scratch_folder: Path
    """Where an import keeps its scratch files, found again (and removed) by the next import."""
    refuses_nul: bool
    """Whether text holding U+0000 cannot be stored (an import checks for it before writing anything)."""
    top_level: str
    """How a listing leaves subagents out, in this database's words (the statements' ``TOP_LEVEL``, or PostgreSQL's
    ``TOP_LEVEL_POSTGRESQL``, whose selectivity its planner can estimate)."""
    events_of: str
    """How ``show`` and ``export`` read a session's whole history, a fork's shared events included, in this
    database's words (the statements' ``EVENTS_OF``, or PostgreSQL's ``EVENTS_OF_POSTGRESQL``, through LATERAL)."""

    def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a command's function, synchronous code using this backend's connections, to its end (a generator's
        items may be gathered first)."""
        ...

    def reading(self, *, snapshot: bool = False) -> contextlib.AbstractContextManager[Connection]:
        """A read-only connection to an existing sessionstore database; ``snapshot``: every read in the block sees
        one committed state."""
        ...

    def writable(self) -> contextlib.AbstractContextManager[Connection]:
        """A connection to write to an existing database at :data:`~sessionstore.schema.revisions.HEAD`."""
        ...

    def transaction(self, conn: Connection) -> contextlib.AbstractContextManager[Connection]:
        """One write transaction on ``conn``: whole or not at all."""
        ...

    def in_batches(
        self,
        conn: Connection,
        items: Iterable[T],
        apply: Callable[[Connection, T], R],
        *,
        finish: Callable[[Connection], object] | None = None,
    ) -> Iterator[R]:
        """``apply`` each item in transactions of whole items (:func:`sessionstore.batches.in_batches`), as short
        as this database needs to keep its writers going."""
        ...

    def revision(self, conn: Connection) -> str | None:
        """The schema revision the database records."""
        ...

    def live_holders(self, conn: Connection) -> dict[str, str]:
        """The sessions a live process holds now: session id -> who holds it."""
        ...

    def search(self, conn: Connection, text: str, *, raw: bool, limit: int) -> list[SearchHit]:
        """Events whose text holds the words (or matches an FTS5 query, ``raw``), best first."""
        ...

    def stats(self) -> Stats:
        """Counts, sizes and the schema revision."""
        ...

    def check(self, *, repair: bool) -> CheckReport:
        """Whether the database is whole and everything search and the views depend on works."""
        ...

    def note_deleted(self, conn: Connection) -> None:
        """Inside a delete's transaction: note that deleted text may be left until :meth:`forget_deleted`."""
        ...

    def forget_deleted(self, conn: Connection) -> bool:
        """Make what was deleted unrecoverable; whether it is (already)."""
        ...

    def deleted_text_left(self) -> bool:
        """Whether deleted text may remain, because another process held an older snapshot when it was deleted."""
        ...

    def written(self, conn: Connection) -> None:
        """Inside a transaction that wrote events: what the database needs done then (index them)."""
        ...

    def build(self, work: Callable[[Backend], T]) -> T:
        """``work`` on this database, made first if it does not exist (an import)."""
        ...

    def current(self) -> str | None:
        """The recorded schema revision (``None``: none); reads only."""
        ...

    @property
    def alembic_url(self) -> str:
        """The URL Alembic's offline mode renders SQL for."""
        ...

    def run_alembic(
        self, run: Callable[[Any], None], destination: Callable[[], Any], scripts: Any, *, force: bool = False
    ) -> None:
        """The ``alembic`` command's migration (``migrations/env.py``): ``run(connection)`` under this database's
        migration lock (after a file's backup, when ``destination()`` says the command moves it). ``force``
        (``-x force=1``): go to base where no backup is taken, dropping every session (PostgreSQL)."""
        ...

    def migrate(self, revision: str, direction: Direction, *, force: bool = False) -> str | None:
        """Move the schema to ``revision``; the path of the backup taken first, if one was. ``force``: go to base
        where no backup is taken, dropping every session (PostgreSQL refuses it otherwise)."""
        ...


Database = Backend | str | os.PathLike[str]
"""What a command takes: a backend, a SQLite file's path, or a PostgreSQL URL."""


def open_backend(db: Database) -> Backend:
    """The backend for ``db``: a URL (``postgresql://``, ``postgresql+asyncpg://``, ``postgres://``) is a PostgreSQL
    database, anything else a SQLite file's path (``~`` expanded). A backend is returned as it is."""
    if not isinstance(db, str | os.PathLike):
        return db
    from .postgres.connect import SCHEMES

    if isinstance(db, str) and db.startswith(SCHEMES):
        from .postgres.backend import PostgresBackend

        return PostgresBackend(db)
    from .sqlite.backend import SQLiteBackend

    return SQLiteBackend(Path(db).expanduser())


def command(fn: Callable[Concatenate[Backend, P], T]) -> Callable[Concatenate[Database, P], T]:
    """A command's function written over a :class:`Backend`, called with anything :func:`open_backend` takes, and
    run by the backend (:meth:`Backend.run`)."""

    @functools.wraps(fn)
    def run(db: Database, /, *args: P.args, **kwargs: P.kwargs) -> T:
        backend = open_backend(db)
        return backend.run(fn, backend, *args, **kwargs)

    return run
