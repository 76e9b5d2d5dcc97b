"""Bring a database file to the schema this code expects, and the commands that move it between revisions.

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

Migrations run on a plain synchronous connection: this runs in a worker thread
(``SQLiteStorage`` calls it through ``asyncio.to_thread``), and SQLite's backup
API, the lock and the migration must all share one connection, which a
second event loop inside that thread would only complicate.
"""

from __future__ import annotations

import contextlib
import glob
import importlib
import os
import sqlite3
import stat
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

from .database import BUSY_TIMEOUT, HEAD, connect, create_file, ensure_wal, read_revision
from .errors import MigrationError, SchemaError, SchemaOutOfDateError, SchemaTooNewError, StorageError, from_sqlite

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory

__all__ = [
    "HEAD",
    "backup_before_alembic",
    "current",
    "downgrade",
    "head",
    "history",
    "locked",
    "objects_at_head",
    "prepare_database",
    "script_location",
    "upgrade",
]

UPGRADE_COMMAND = "sessionstore db upgrade --db {path}"

OBJECTS_AT_HEAD = (
    "0001.COUNTING",
    "0003.TRANSCRIPT",
    "0006.SESSION_OVERVIEW",
    "0002.EVENTS_FTS",
    "0005.INDEXING",
)
"""The views, triggers and full-text index a file at :data:`HEAD` has, named as their revisions define them
(``migrations/sqlobjects.py``). A revision that replaces one names its new definition here."""
OBJECTS_AT_HEAD_POSTGRESQL = (
    "0001.PG_COUNTING",
    "0002.PG_FUNCTIONS",
    "0003.PG_TRANSCRIPT",
    "0006.PG_SESSION_OVERVIEW",
    "0003.PG_SEARCH",
)
"""The same for a PostgreSQL database (functions, triggers, views, the search index)."""

# Alembic's ``context`` and ``op`` are process-wide proxies, swapped in and out
# around each run: two threads migrating two databases at once (of either kind)
# would tear them. (Two processes are kept apart by SQLite's lock, see locked,
# or PostgreSQL's advisory lock.)
_ALEMBIC = threading.Lock()

Direction = Literal["upgrade", "downgrade"]


def script_location() -> Path:
    """The Alembic script directory: inside the installed package, else the repository's ``migrations/``."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "migrations", here.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise SchemaError(f"the migration scripts are missing from this installation (looked in {here})")


def _existing(path: str | os.PathLike[str]) -> Path:
    file = Path(path).expanduser()
    if not file.is_file():
        raise StorageError(f"{file} does not exist (or is not a file)")
    return file


def _wal(path: Path, busy_timeout: float) -> None:
    with contextlib.closing(connect(path, busy_timeout=busy_timeout)) as conn:
        ensure_wal(conn, path, busy_timeout)


# -- Alembic (imported only from here down, and only when a file must change) -------------


def _scripts(location: Path | None) -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(location or script_location()))


def _known(scripts: ScriptDirectory, revision: str) -> bool:
    """Whether ``revision`` is one of the scripts' ids, exactly (``get_revision`` would take a prefix or ``x@head``)."""
    return any(script.revision == revision for script in scripts.walk_revisions())


def _resolve(scripts: ScriptDirectory, revision: str) -> str | None:
    """A revision argument, ``head``, ``base`` or an id, as an id; ``None`` for base.

    Not Alembic's relative forms: ``-1`` would count from the scripts' head, not from the file.
    """
    if revision == "base":
        return None
    if revision == "head":
        return _head_of(scripts)
    if not _known(scripts, revision):
        known = ", ".join(reversed([script.revision for script in scripts.walk_revisions()]))
        raise SchemaError(f"no schema revision {revision!r}; known: base, {known}, head")
    return revision


def _head_of(scripts: ScriptDirectory) -> str:
    heads = scripts.get_heads()
    if len(heads) != 1:
        raise SchemaError(f"the migration scripts have {len(heads)} heads ({', '.join(heads)}); expected one")
    return heads[0]


def _lineage(scripts: ScriptDirectory, revision: str | None) -> set[str | None]:
    """``revision`` and every revision it was built on, down to base (``None``)."""
    return {None, *(script.revision for script in scripts.iterate_revisions(revision, "base"))}


def _refuse_unknown(scripts: ScriptDirectory, path: Path, revision: str | None, populated: bool) -> None:
    """Refuse, untouched, a file these scripts cannot move: written by a newer version, or not a sessionstore one."""
    if revision is not None and not _known(scripts, revision):
        raise SchemaTooNewError(
            f"{path} is at schema revision {revision!r}, which this sessionstore does not know (it was probably "
            "written by a newer version); it is refused and left untouched. Upgrade sessionstore to open it."
        )
    if revision is None and populated:
        raise SchemaError(
            f"{path} has tables but no sessionstore schema revision: it is not a sessionstore database "
            "(or its alembic_version table was emptied); it was left untouched"
        )


@contextlib.contextmanager
def locked(path: Path, busy_timeout: float) -> Iterator[Connection]:
    """A connection inside ``BEGIN IMMEDIATE``: the migration lock, held until the block ends.

    The caller commits; leaving the block any other way rolls back.
    """

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
    return target


def _movable(conn: Connection, path: Path, scripts: ScriptDirectory) -> str | None:
    """The revision of the file ``conn`` holds the lock on, once it is known to be one these scripts can move."""
    found, populated = read_revision(cast(sqlite3.Connection, conn.connection.driver_connection), path)
    _refuse_unknown(scripts, path, found, populated)
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


def check_direction(
    scripts: ScriptDirectory, where: object, found: str | None, target: str | None, direction: Direction
) -> None:
    """Refuse a move the wrong way (an upgrade to a revision the database is already past, or the reverse)."""
    ahead = target in _lineage(scripts, found)  # the database is past the target
    if ahead != (direction == "downgrade"):
        hint = "downgrade" if ahead else "upgrade"
        raise SchemaError(f"{where} is at {found or 'base'}; to reach {target or 'base'}, {hint} it")


def run_revisions(conn: Connection, scripts: ScriptDirectory, target: str | None, direction: Direction) -> None:
    """Alembic's upgrade or downgrade to ``target`` on ``conn``, inside the caller's transaction and lock.

    One run at a time in this process: Alembic's ``context`` and ``op`` are process-wide (see ``_ALEMBIC``).
    """
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", scripts.dir)
    config.attributes["connection"] = conn
    config.attributes["configure_logger"] = False
    with _ALEMBIC:
        if direction == "upgrade":
            command.upgrade(config, target or "base")
        else:
            command.downgrade(config, target or "base")


def _migrate(
    path: Path, revision: str, direction: Direction, *, busy_timeout: float, scripts: ScriptDirectory
) -> Path | None:
    """Move ``path`` to ``revision`` under the lock, after a backup; the backup's path, if one was made."""
    target = _resolve(scripts, revision)
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
    directory = _scripts(scripts)
    head_revision = _head_of(directory)
    _refuse_unknown(directory, path, revision, populated)
    if revision is not None and revision != head_revision and not auto_upgrade:
        raise SchemaOutOfDateError(
            f"{path} is at schema revision {revision}, older than this sessionstore's {head_revision}, and "
            f"auto-upgrade is off; upgrade it with: {UPGRADE_COMMAND.format(path=path)}"
        )
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
    backup = _migrate(file, revision, "upgrade", busy_timeout=busy_timeout, scripts=_scripts(scripts))
    _wal(file, busy_timeout)
    return None if backup is None else str(backup)


def downgrade(
    path: str | os.PathLike[str], revision: str, *, busy_timeout: float = BUSY_TIMEOUT, scripts: Path | None = None
) -> str | None:
    """Downgrade the file to ``revision`` (``base`` drops everything); returns the backup's path."""
    backup = _migrate(_existing(path), revision, "downgrade", busy_timeout=busy_timeout, scripts=_scripts(scripts))
    return None if backup is None else str(backup)


def current(path: str | os.PathLike[str], *, busy_timeout: float = BUSY_TIMEOUT) -> str | None:
    """The file's recorded revision (``None`` for a file with none); reads only."""
    file = _existing(path)
    with contextlib.closing(connect(file, busy_timeout=busy_timeout, write=False)) as conn:
        try:
            return read_revision(conn, file)[0]
        except sqlite3.Error as exc:
            raise from_sqlite(exc, file) from exc


def objects_at_head(*, scripts: Path | None = None, postgresql: bool = False) -> dict[str, str]:
    """Each object a file at head has (view, trigger, full-text table), by name: the statement that makes it.

    What ``sessionstore check`` compares a file with, and what ``check --repair`` runs to put one back. With
    ``postgresql``, a PostgreSQL database's (functions, triggers, views, the search index), keyed
    ``"KIND name"``: a function and its trigger share a name.
    """
    # The revisions' own module (shipped as sessionstore.migrations, a package the type checker is not given).
    sqlobjects: Any = importlib.import_module("sessionstore.migrations.sqlobjects")
    directory = _scripts(scripts)
    objects: dict[str, str] = {}
    for name in OBJECTS_AT_HEAD_POSTGRESQL if postgresql else OBJECTS_AT_HEAD:
        for statement in sqlobjects.find(directory, name, sqlobjects.SQLObject).create(directory):
            words = statement.split(None, 4)
            if postgresql:
                if words[0] == "CREATE":  # CREATE FUNCTION f(...) / TRIGGER t / VIEW v / INDEX i
                    objects[f"{words[1]} {words[2].split('(')[0]}"] = statement
                continue
            if words[0] == "CREATE":  # CREATE VIEW x / CREATE TRIGGER x / CREATE VIRTUAL TABLE x (not its 'rebuild')
                objects[words[3] if words[1] == "VIRTUAL" else words[2]] = statement
    return objects


def history(*, scripts: Path | None = None) -> list[tuple[str, str | None, str]]:
    """Every revision, newest first: ``(revision, down_revision, message)``."""
    out: list[tuple[str, str | None, str]] = []
    for script in _scripts(scripts).walk_revisions():
        down = script.down_revision
        if isinstance(down, Sequence) and not isinstance(down, str):
            down = ",".join(down)
        out.append((script.revision, down, script.doc))
    return out


def head(*, scripts: Path | None = None) -> str:
    """The newest revision the scripts know."""
    return _head_of(_scripts(scripts))
