"""Bring a PostgreSQL database to the schema this code expects, and move it between revisions.

The schema is brought to :data:`~sessionstore.schema.revisions.HEAD` before first use, under a transaction-scoped
advisory lock that every sessionstore process on every host takes (:data:`MIGRATION_LOCK`), so two processes
opening an old database migrate it once; PostgreSQL's DDL is transactional, so a failed migration leaves it
as it was (no backup is taken), and a database at a revision this code does not know is refused untouched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..errors import DowngradeRefusedError, MigrationError, StorageError
from ..schema.revisions import (
    HEAD,
    Direction,
    check_direction,
    not_upgraded,
    refuse_unknown,
    resolve,
    run_revisions,
    script_directory,
)
from .connect import connector, engine, from_postgres, read_revision, redacted, revision_of

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["MIGRATION_LOCK", "migrate", "prepare", "refuse_dropping_sessions", "run_locked"]

MIGRATION_LOCK = 0x5E55_0000_0000_0001
"""The advisory lock key a migration holds for its whole transaction (``pg_advisory_xact_lock``): one number,
the same in every process on every host, that nothing else in sessionstore takes."""


async def prepare(url: str, *, auto_upgrade: bool = True, conn: Any = None) -> None:
    """Make the database at ``url`` a sessionstore database at :data:`HEAD` before first use.

    At head: two queries on a bare asyncpg connection (SQLAlchemy and Alembic are not even imported). Anything
    else is :func:`migrate`'s, in a worker thread (Alembic runs its own loop there), which builds, upgrades or
    refuses it under the migration lock. ``conn``: an asyncpg connection to ask on (a storage's first, which it
    keeps); else one is made for the question.
    """
    try:
        if conn is not None:
            revision, _ = await revision_of(conn)
        else:
            conn = await connector(url, patience=0)()
            try:
                revision, _ = await revision_of(conn)
            finally:
                await conn.close(timeout=5)
    except StorageError:
        raise
    except Exception as exc:
        raise from_postgres(exc, url) from exc
    if revision == HEAD:
        return
    await asyncio.to_thread(migrate, url, "head", "upgrade", auto_upgrade=auto_upgrade)


def run_locked(url: str, work: Callable[[Connection], Any]) -> Any:
    """Run ``work`` (on a sync connection) inside one transaction holding the migration lock; commit if it returns.

    For Alembic's ``env.py`` (the ``alembic`` command) and :func:`migrate`. It blocks: called where an event loop
    runs, it runs in a thread of its own (Alembic is synchronous, asyncpg is not).
    """

    async def run() -> Any:
        from sqlalchemy import text

        eng = engine(url)
        try:
            async with eng.connect() as conn:
                await conn.begin()
                await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
                result = await conn.run_sync(work)
                await conn.commit()
                return result
        finally:
            await eng.dispose()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run())
    with ThreadPoolExecutor(1, thread_name_prefix="sessionstore-migrate") as thread:
        return thread.submit(asyncio.run, run()).result()


def refuse_dropping_sessions(conn: Connection, where: str, target: str | None, *, force: bool, again: str) -> None:
    """Refuse a move to base (it drops every session) of a database that holds sessions, unless ``force``d.

    A file is copied aside before any downgrade; a server's database cannot be from here, and a transaction
    does not help once the user's own command commits it. So the user takes the dump (``pg_dump``) and says
    so: ``again`` is how to run the command again, forced. Nothing is changed when refused.
    """
    if target is not None or force:
        return
    if conn.exec_driver_sql("SELECT to_regclass('sessions') IS NULL").scalar():
        return
    if conn.exec_driver_sql("SELECT EXISTS (SELECT 1 FROM sessions)").scalar():
        raise DowngradeRefusedError(
            f"downgrade of {where} to base drops every session, and no backup of a PostgreSQL database is taken:"
            f" pg_dump it first, then run again with {again}"
        )


def migrate(
    url: str,
    revision: str = "head",
    direction: Direction = "upgrade",
    *,
    auto_upgrade: bool = True,
    scripts: Any = None,
    force: bool = False,
) -> str | None:
    """Move the database at ``url`` to ``revision`` under the migration lock, in one transaction.

    Returns the revision it was at. A database at a revision these scripts do not know, or with tables but no
    revision, is refused untouched; one at an older revision with ``auto_upgrade`` off raises
    :class:`SchemaOutOfDateError` naming the command that upgrades it. A downgrade to base of a database
    holding sessions is refused unless ``force`` (:func:`refuse_dropping_sessions`).
    """
    directory = script_directory(scripts)
    target = resolve(directory, revision)
    where = redacted(url)

    def work(conn: Connection) -> str | None:
        found, populated = read_revision(lambda sql: conn.exec_driver_sql(sql).all())
        refuse_unknown(directory, where, found, populated)
        if found == target:
            return found
        if found is not None and not auto_upgrade:
            raise not_upgraded(where, found, str(target))
        check_direction(directory, where, found, target, direction)
        refuse_dropping_sessions(conn, where, target, force=force, again="--force")
        try:
            run_revisions(conn, directory, target, direction)
        except Exception as exc:
            raise MigrationError(
                f"{direction} of {where} from {found or 'base'} to {target or 'base'} failed and was rolled back:"
                f" the database is as it was ({type(exc).__name__}: {exc})"
            ) from exc
        return found

    try:
        found: str | None = run_locked(url, work)
    except StorageError:
        raise
    except Exception as exc:
        raise from_postgres(exc, url) from exc
    return found
