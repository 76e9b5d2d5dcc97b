"""The migration runner: move any database between schema revisions through its backend.

What ``sessionstore db`` calls (the ``alembic`` command reaches the same runners through ``env.py`` and
:meth:`~sessionstore.backend.Backend.run_alembic`). A SQLite file is moved
under its write lock after a backup beside it (:mod:`sessionstore.sqlite.migrate`);
a PostgreSQL database under an advisory lock, in one transaction
(:mod:`sessionstore.postgres.migrate`). The revisions themselves, and which is
newest, are :mod:`sessionstore.schema.revisions`'. Alembic is imported only
when a database must change.
"""

from __future__ import annotations

from .backend import Database, open_backend
from .schema.revisions import HEAD, head, history

__all__ = ["HEAD", "current", "downgrade", "head", "history", "upgrade"]


def upgrade(db: Database, revision: str = "head") -> str | None:
    """Upgrade (or create) the database to ``revision``; the backup's path, if one was taken (a file's)."""
    return open_backend(db).migrate(revision, "upgrade")


def downgrade(db: Database, revision: str, *, force: bool = False) -> str | None:
    """Downgrade the database to ``revision`` (``base`` drops everything); the backup's path, if one was taken.

    A file is backed up first; a PostgreSQL database holding sessions is not moved to base unless ``force``
    (:class:`~sessionstore.DowngradeRefusedError`: take a ``pg_dump`` first).
    """
    return open_backend(db).migrate(revision, "downgrade", force=force)


def current(db: Database) -> str | None:
    """The database's recorded revision (``None`` for one with none); reads only."""
    return open_backend(db).current()
