"""Bring a SQLite file to the schema this code expects, and move it between revisions.

The schema is versioned by Alembic (the scripts are ``migrations/`` in the
repository, ``sessionstore/migrations/`` in the wheel). Opening a file:

* at ``HEAD``: one query on ``alembic_version`` and nothing else; Alembic is
  not imported (desktop apps pay for every import at start-up);
* new (empty): built by running every revision, the same path as an upgrade,
  so the test that compares migrated files with the models covers new files too;
* older: upgraded before first use, in one ``BEGIN IMMEDIATE`` transaction on
  the file itself. That transaction is the cross-process lock (a second
  process waits for it, then finds the file at ``HEAD`` and does nothing), and
  SQLite's DDL is transactional, so a failed migration rolls back whole. A
  backup is taken first, under the same lock, beside the file (mode 0600);
* at a revision this code does not know (a newer sessionstore wrote it):
  refused with :class:`SchemaTooNewError`, after a read and nothing else.

Migrations run on a plain synchronous connection: this runs on a worker thread
(``SQLiteStorage`` opens its file on its first reader thread), and SQLite's backup
API, the lock and the migration must all share one connection, which a
second event loop inside that thread would only complicate.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..errors import MigrationError, StorageError, from_sqlite
from ..schema.revisions import (
    HEAD,
    Direction,
    check_direction,
    head_of,
    not_upgraded,
    refuse_unknown,
    resolve,
    run_revisions,
    script_directory,
)
from .connect import BUSY_TIMEOUT, check_private, connect, create_file, ensure_wal, read_revision

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory
    from sqlalchemy.engine import Connection

__all__ = [
    "backup_before_alembic",
    "current",
    "downgrade",
    "locked",
    "run_alembic",
    "prepare",
    "prepare_database",
    "upgrade",
]


def _existing(path: str | os.PathLike[str]) -> Path:
    file = Path(path).expanduser()
    if not file.is_file():
        raise StorageError(f"{file} does not exist (or is not a file)")
    return file


def _wal(path: Path, busy_timeout: float) -> None:
    with contextlib.closing(connect(path, busy_timeout=busy_timeout)) as conn:
        ensure_wal(conn, path, busy_timeout)


@contextlib.contextmanager
def locked(path: Path, busy_timeout: float) -> Iterator[Connection]:
    """A connection inside ``BEGIN IMMEDIATE``: the migration lock, held until the block ends.

    The caller commits; leaving the block any other way rolls back.
    """
    from sqlalchemy import create_engine, event
    from sqlalchemy.pool import NullPool

    def _connection() -> sqlite3.Connection:
        conn = connect(path, busy_timeout=busy_timeout)
        # Off: batch mode rebuilds tables by drop-and-rename, and with it on,
        # dropping ``sessions`` would cascade-delete every event.
        conn.execute("PRAGMA foreign_keys = OFF")
        return conn

    # The path goes to SQLite as a file name, never through a URL (where ? and % mean something).
    engine = create_engine("sqlite://", creator=_connection, poolclass=NullPool)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    try:
        with engine.connect() as conn:
            conn.begin()
            try:
                yield conn
            finally:
                if conn.in_transaction():
                    conn.rollback()
    finally:
        engine.dispose()


def _backup(path: Path, revision: str, busy_timeout: float) -> Path:
    """Copy the database beside itself, consistent (taken under the write lock) and private (0600).

    Written under a hidden name and renamed once complete and on disk: a backup
    is a database or it is absent. A copy left by a process killed mid-way is
    removed here, the next time a backup is taken.
    """
    for stale in path.parent.glob(f".{glob.escape(path.name)}.backing-up-*"):
        stale.unlink(missing_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = path.with_name(f"{path.name}.bak-{revision}-{stamp}")
    target, number = base, 1
    while target.exists():
        number += 1
        target = base.with_name(f"{base.name}-{number}")
    partial = path.with_name(f".{path.name}.backing-up-{os.getpid()}")
    try:
        os.close(os.open(partial, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, stat.S_IRUSR | stat.S_IWUSR))
        # Read through a second connection: SQLite's backup API cannot read from
        # the connection that holds the write transaction. Nothing has been
        # written yet, so what it reads is what was committed.
        with contextlib.closing(connect(path, busy_timeout=busy_timeout, write=False)) as source:
            with contextlib.closing(connect(partial, busy_timeout=busy_timeout, create=True)) as copy:
                source.backup(copy)
        with open(partial, "rb") as handle:
            os.fsync(handle.fileno())
        os.link(partial, target)  # never over an existing file
        partial.unlink()
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except (sqlite3.Error, OSError) as exc:
        partial.unlink(missing_ok=True)
        raise from_sqlite(exc, target) from exc
    except BaseException:
        # Ctrl-C, or SIGTERM/SIGHUP as the command line turns them into it: the copy holds conversation text.
        partial.unlink(missing_ok=True)
        raise
    return target


def _movable(conn: Connection, path: Path, scripts: ScriptDirectory) -> str | None:
    """The revision of the file ``conn`` holds the lock on, once it is known to be one these scripts can move."""
    found, populated = read_revision(cast(sqlite3.Connection, conn.connection.driver_connection), path)
    refuse_unknown(scripts, path, found, populated)
    return found


def backup_before_alembic(
    conn: Connection,
    path: Path,
    destination: str | Sequence[str] | None,
    scripts: ScriptDirectory,
    *,
    busy_timeout: float = BUSY_TIMEOUT,
) -> Path | None:
    """For the ``alembic`` command (``migrations/env.py``), under the lock ``conn`` holds: the backup
    ``sessionstore db upgrade`` and ``db downgrade`` take before they move a file, taken the same way.

    ``downgrade base`` drops every session, so no command that moves a file
    with a schema goes without one. ``destination`` is where the command goes
    (``upgrade``, ``downgrade``, ``stamp``), as Alembic resolved it: ``None``
    is base, a relative one (``-1``) is taken to move the file. A file these
    scripts cannot move is refused untouched first, as :func:`upgrade` refuses
    it. The backup's path, or None when the file is empty or already there.
    """
    found = _movable(conn, path, scripts)
    if isinstance(destination, (tuple, list)):  # `heads`, resolved to the heads' ids
        destination = destination[0] if len(destination) == 1 else None
    if found is None or destination == found:
        return None
    return _backup(path, found, busy_timeout)


def _migrate(
    path: Path, revision: str, direction: Direction, *, busy_timeout: float, scripts: ScriptDirectory
) -> Path | None:
    """Move ``path`` to ``revision`` under the lock, after a backup; the backup's path, if one was made."""
    target = resolve(scripts, revision)
    try:
        with locked(path, busy_timeout) as conn:
            found = _movable(conn, path, scripts)
            if found == target:
                return None  # already there (perhaps another process just migrated it)
            check_direction(scripts, path, found, target, direction)
            backup = _backup(path, found, busy_timeout) if found is not None else None
            try:
                run_revisions(conn, scripts, target, direction)
                broken = conn.exec_driver_sql("PRAGMA foreign_key_check").first()
                if broken is not None:
                    raise MigrationError(f"the migration left a row that breaks a foreign key: {tuple(broken)}")
                conn.commit()
            except Exception as exc:
                conn.rollback()
                where = f"; a backup taken before it is at {backup}" if backup else ""
                raise MigrationError(
                    f"{direction} of {path} from {found or 'base'} to {target or 'base'} failed and was rolled "
                    f"back: the file is as it was{where} ({type(exc).__name__}: {exc})"
                ) from exc
            return backup
    except StorageError:
        raise
    except sqlite3.Error as exc:
        raise from_sqlite(exc, path) from exc
    except Exception as exc:
        orig = getattr(exc, "orig", None)
        if isinstance(orig, sqlite3.Error):
            raise from_sqlite(orig, path) from exc
        raise


# -- the entry points -----------------------------------------------------------------------


def prepare_database(
    path: Path, *, auto_upgrade: bool = True, busy_timeout: float = BUSY_TIMEOUT, scripts: Path | None = None
) -> None:
    """Make ``path`` a database at the head revision before first use (see the module docstring).

    ``scripts`` points at another Alembic script directory (tests use it to add
    a revision); the fast path is for this package's own ``HEAD`` only.
    """
    path = Path(path).expanduser()
    create_file(path)
    with contextlib.closing(connect(path, busy_timeout=busy_timeout, create=True)) as conn:
        revision, populated = read_revision(conn, path)
    directory = script_directory(scripts)
    head_revision = head_of(directory)
    refuse_unknown(directory, path, revision, populated)
    if revision is not None and revision != head_revision and not auto_upgrade:
        raise not_upgraded(path, revision, head_revision)
    if revision != head_revision:
        _migrate(path, "head", "upgrade", busy_timeout=busy_timeout, scripts=directory)
    _wal(path, busy_timeout)


def upgrade(
    path: str | os.PathLike[str],
    revision: str = "head",
    *,
    busy_timeout: float = BUSY_TIMEOUT,
    scripts: Path | None = None,
) -> str | None:
    """Upgrade (or create) the file to ``revision``; returns the backup's path if a backup was made."""
    file = Path(path).expanduser()
    create_file(file)
    backup = _migrate(file, revision, "upgrade", busy_timeout=busy_timeout, scripts=script_directory(scripts))
    _wal(file, busy_timeout)
    return None if backup is None else str(backup)


def downgrade(
    path: str | os.PathLike[str], revision: str, *, busy_timeout: float = BUSY_TIMEOUT, scripts: Path | None = None
) -> str | None:
    """Downgrade the file to ``revision`` (``base`` drops everything); returns the backup's path."""
    backup = _migrate(
        _existing(path), revision, "downgrade", busy_timeout=busy_timeout, scripts=script_directory(scripts)
    )
    return None if backup is None else str(backup)


def current(path: str | os.PathLike[str], *, busy_timeout: float = BUSY_TIMEOUT) -> str | None:
    """The file's recorded revision (``None`` for a file with none); reads only."""
    file = _existing(path)
    with contextlib.closing(connect(file, busy_timeout=busy_timeout, write=False)) as conn:
        try:
            return read_revision(conn, file)[0]
        except sqlite3.Error as exc:
            raise from_sqlite(exc, file) from exc


def prepare(
    path: Path, *, auto_upgrade: bool = True, busy_timeout: float = BUSY_TIMEOUT, allow_shared_file: bool = False
) -> None:
    """Make ``path`` a sessionstore database at :data:`HEAD` before first use.

    Creates it (private) if missing. A file already at head costs one query and
    imports nothing more; anything else is the migration runner's
    (:func:`prepare_database`), which builds, upgrades or
    refuses it.
    """
    created = create_file(path)
    if not allow_shared_file:
        check_private(path)
    conn = connect(path, busy_timeout=busy_timeout, create=True)
    try:
        revision, _ = read_revision(conn, path)
        if revision == HEAD:
            ensure_wal(conn, path, busy_timeout)
            return
    except sqlite3.Error as exc:
        raise from_sqlite(exc, path) from exc
    finally:
        conn.close()
    try:
        prepare_database(path, auto_upgrade=auto_upgrade, busy_timeout=busy_timeout)
    except BaseException:
        if created and path.stat().st_size == 0:  # a failed first build leaves nothing behind
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        raise


def run_alembic(
    path: Path, run: Callable[[Connection], None], destination: Callable[[], Any], scripts: ScriptDirectory
) -> None:
    """The ``alembic`` command on the file at ``path`` (``migrations/env.py``): ``run`` under the lock sessionstore's
    own runner takes, after the backup it takes when the command may move the file (``destination()`` raises
    KeyError for one that goes nowhere); committed only when every revision ran and no row lost its parent."""
    create_file(path)
    with locked(path, BUSY_TIMEOUT) as connection:
        try:
            backup = backup_before_alembic(connection, path, destination(), scripts)
        except KeyError:  # current, check: the command goes nowhere
            backup = None
        if backup is not None:
            logging.getLogger("alembic.env").info("Backed up %s to %s", path, backup)
        run(connection)
        if connection.exec_driver_sql("PRAGMA foreign_key_check").first() is not None:
            raise MigrationError("the migration left rows that break a foreign key; rolled back")
        connection.commit()
