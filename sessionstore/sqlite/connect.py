"""The one place a SQLite database file is opened: its path, its connection settings, its creation.

Everything that touches a sessionstore file (the storage's writer and readers,
the migration runner, Alembic's ``env.py``, the command line's backend) connects through
:func:`connect`, so the settings that keep a file safe are written once:

* a path is a file name, never a URL: ``?``, ``%``, ``#``, spaces and newlines
  are characters of the name (SQLite sees either the plain name or, to open
  without creating, a ``file:`` URI with every byte percent-encoded);
* ``busy_timeout`` (how long a writer waits for another process's lock),
  ``foreign_keys`` (events go with their session), ``synchronous``;
* new files and the folders made for them are private (0600, 0700) from their
  first byte, whatever the umask; and every file is in WAL mode.

Only :mod:`sqlite3` is imported here: reading a file must not pay for SQLAlchemy.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
import time
from pathlib import Path
from typing import Literal

from ..errors import (
    DatabaseBusyError,
    DatabaseNotFoundError,
    DatabaseReadOnlyError,
    NotADatabaseError,
    StorageError,
    UnsafeFileError,
    from_sqlite,
)
from ..schema import queries
from ..schema.revisions import judge_revision, not_ours
from ..storage import BUSY_TIMEOUT

__all__ = [
    "BUSY_TIMEOUT",
    "Synchronous",
    "SCRUB_WAIT",
    "check_private",
    "connect",
    "create_file",
    "deleted_mark",
    "ensure_wal",
    "mark_deleted",
    "read_revision",
    "replicated",
    "scrub_log",
    "transaction",
]

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
SYNCHRONOUS: tuple[Synchronous, ...] = ("OFF", "NORMAL", "FULL", "EXTRA")


def connect(
    path: Path,
    *,
    busy_timeout: float = BUSY_TIMEOUT,
    write: bool = True,
    create: bool = False,
    synchronous: Synchronous = "FULL",
    max_pages: int | None = None,
    check_tables: bool = False,
) -> sqlite3.Connection:
    """A connection to the file at ``path``, in autocommit mode (transactions are begun explicitly).

    Usable from any thread (``check_same_thread=False``): the storage hands its
    connections between worker threads, one user at a time.

    ``create=False`` never creates a file: a missing one is
    :class:`DatabaseNotFoundError`. ``write=False`` makes the connection
    ``query_only``. ``check_tables`` refuses a database that has no sessions
    and events tables (a file the command line was pointed at by mistake).
    """
    if not create:
        if not path.exists():
            raise DatabaseNotFoundError(f"{path}: no such database file")
        if path.is_dir():
            raise NotADatabaseError(f"{path} is a folder, not a database file")
    try:
        if create:
            conn = sqlite3.connect(os.fspath(path), timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        else:
            # mode=rw opens an existing file only, and still opens a write-protected one (read-only).
            uri = path.resolve().as_uri() + "?mode=rw"
            conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise from_sqlite(exc, path) from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        if max_pages is not None:
            conn.execute(f"PRAGMA max_page_count = {int(max_pages)}")
        if write:
            # Deleted means gone: a deleted row's bytes are overwritten, not left in free space.
            conn.execute("PRAGMA secure_delete = ON")
        else:
            conn.execute("PRAGMA query_only = ON")
        if check_tables:
            names = {str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"sessions", "events"} <= names:
                raise not_ours(path, populated=bool(names - {"alembic_version", "sqlite_sequence"}))
    except BaseException as exc:
        conn.close()
        if isinstance(exc, sqlite3.Error):
            raise from_sqlite(exc, path) from exc
        raise
    return conn


class transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``: whole or not at all, and two processes queue for the lock.

    Immediate, because a read transaction that later tries to write fails with
    "database is locked" at once instead of waiting for the other writer. A class, not a generator: it is
    entered once per append, and a generator's context manager cost a microsecond more.
    """

    __slots__ = ("conn", "path")

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise from_sqlite(exc, self.path) from exc
        return self.conn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        conn = self.conn
        try:
            if kind is None:
                try:
                    conn.execute("COMMIT")
                finally:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
            elif conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error as error:
            raise from_sqlite(error, self.path) from (exc or error)
        if isinstance(exc, sqlite3.Error):  # raised inside the block: rolled back, told in sessionstore's words
            raise from_sqlite(exc, self.path) from exc


def read_revision(conn: sqlite3.Connection, path: object = "the database") -> tuple[str | None, bool]:
    """``(revision, has_other_tables)``: the file's recorded schema revision, and whether it holds tables at all.

    A file recording several revisions (a branched history this code never
    writes) is refused as too new.
    """
    tables = [str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return judge_revision(tables, lambda: conn.execute(queries.REVISION).fetchall(), path)


def check_private(path: Path) -> None:
    """Refuse a database whose file or companions belong to another user, or that others may write.

    Run before a file is used for writing. A companion that is a symbolic link
    is refused too: SQLite would write the conversation wherever it points.
    """
    me = os.geteuid()
    for file in (path, *(Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal"))):
        try:
            info = os.stat(file) if file == path else os.lstat(file)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(info.st_mode):
            raise UnsafeFileError(f"{file} is a symbolic link; remove it (a database's companion files are its own)")
        if info.st_uid != me:
            raise UnsafeFileError(
                f"{file} belongs to another user (uid {info.st_uid}): it could be read or changed behind your back;"
                " move it aside, or open it with allow_shared_file=True if that is intended"
            )
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UnsafeFileError(
                f"{file} can be written by other users (mode {stat.S_IMODE(info.st_mode):04o}): chmod 600 it,"
                " or open it with allow_shared_file=True if that is intended"
            )


SCRUB_WAIT = 1.0
"""Seconds a delete waits for other processes to let go of older snapshots of the file, so that it can empty the
write-ahead log, before it returns and leaves that to later (:func:`scrub_log`). A reader in the middle of a query
lets go within it; one that holds a snapshot open (a ``sqlite3`` shell inside ``BEGIN``, a backup, a replicator)
may not for hours, and a delete must not wait for it (it waited 20 times 30 s)."""

_MARKS = 2**31 - 1
"""``PRAGMA user_version`` is a signed 32-bit integer: the marks go 1, 2, ... this, 1, ..."""


def mark_deleted(conn: sqlite3.Connection) -> int:
    """Inside a delete's write transaction: note in the file that deleted text may be left in its pages; the mark.

    The note is ``PRAGMA user_version`` (in the file's header, read without
    touching a table; nothing else of sessionstore's uses it): non-zero, a new
    value at every delete, written in the same transaction as the delete, so no
    crash can lose it. :func:`scrub_log` clears it once the deleted text is
    gone; ``sessionstore check`` reports it meanwhile.
    """
    mark = deleted_mark(conn) % _MARKS + 1
    conn.execute(f"PRAGMA user_version = {mark}")
    return mark


def deleted_mark(conn: sqlite3.Connection) -> int:
    """The file's mark (:func:`mark_deleted`): 0 when no deleted text is left in its pages or its write-ahead log."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def scrub_log(path: Path, mark: int, wait: float = SCRUB_WAIT) -> bool:
    """Make sure no earlier version of a page stays in the write-ahead log or the file; then clear the file's mark
    if it is still ``mark``. Whether that is done.

    Call it after the full-text index was merged, with the mark read before the
    merge began: a delete that comes meanwhile sets a new mark, and keeps it
    until a scrub that began after it.

    On a file a replicator copies (:func:`replicated`), sessionstore never
    empties the log, nor waits for anyone: checkpoints are the replicator's job,
    and it keeps a read transaction open for good, so emptying the log would
    mean holding the write lock while waiting for it (every agent's write
    stalled behind that wait, 1 s at each delete). Instead :func:`_past_restart`
    clears the mark once the log has restarted since the delete. Elsewhere the log is copied into the file and emptied
    (``wal_checkpoint(TRUNCATE)``), which needs a moment when no other process
    holds a snapshot older than the log's end: this waits ``wait`` seconds at
    most for that (and for the write lock), then returns False and leaves the
    mark set: while another process reads an older snapshot, the pages it may
    read (where the deleted text still is, in the log and in the file) cannot
    be overwritten.
    """
    conn = connect(path, busy_timeout=wait)
    try:
        if replicated(conn):
            return not mark or _past_restart(conn, path, mark)
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            return False
        if mark:
            with transaction(conn, path):
                _clear_mark(conn, mark)
        return True
    except DatabaseBusyError:  # the write lock, taken meanwhile: the mark stays, for the next try
        return False
    except sqlite3.Error as exc:
        raise from_sqlite(exc, path) from exc
    finally:
        conn.close()


def _clear_mark(conn: sqlite3.Connection, mark: int) -> None:
    if deleted_mark(conn) == mark:
        conn.execute("PRAGMA user_version = 0")


REPLICATOR_TABLES = ("_litestream_seq", "_litestream_lock")
"""The tables Litestream creates in a file it replicates (to force a write into an empty log, and to take the
write lock while it copies the log)."""


def replicated(conn: sqlite3.Connection) -> bool:
    """Whether Litestream replicates this file, or did: its tables are in it (they stay after it stops).

    Litestream asks applications to leave checkpoints to it: it copies each
    generation of the log to its replicas before it lets the log restart, and a
    log emptied behind its back can cost it a new snapshot of the whole file.
    """
    marks = ", ".join("?" * len(REPLICATOR_TABLES))
    found = conn.execute(f"SELECT 1 FROM sqlite_master WHERE type = 'table' AND name IN ({marks})", REPLICATOR_TABLES)
    return found.fetchone() is not None


_generations_seen: dict[tuple[int, int, int], bytes] = {}
"""(device, inode, mark) -> the salts of the log's generation first seen after that mark was set (by this process);
guarded by :data:`_generations_lock` (scrubs run on worker threads)."""
_generations_lock = threading.Lock()


def _past_restart(conn: sqlite3.Connection, path: Path, mark: int) -> bool:
    """On a replicated file: clear ``mark`` once the log has restarted since the delete; whether it is clear.

    SQLite restarts the log (writes it again from its start, under new salts in
    its header) only once every frame in it was copied into the file, so a
    generation of the log begun after the delete committed means the file holds
    only the pages as the delete left them, and so do the frames of that
    generation. A restart writes over the earlier frames only as far as it
    writes; the rest of them stay in the file past its end, with the deleted
    text, so they are cut off (:func:`_cut_earlier_generations`), as SQLite
    itself cuts them when ``journal_size_limit`` is set on the connection that
    restarts the log (the replicator's, here). The first look after the delete
    only notes the generation: it may have begun before the delete committed.

    Litestream restarts the log at its checkpoints. Where nothing holds the log
    back (Litestream stopped, and its tables stay; a file restored from its
    replica), a passive checkpoint copies all of it into the file (it waits for
    no one, and never restarts the log itself) and a write of the file's own
    mark restarts it here; while Litestream runs, its read transaction keeps
    the passive checkpoint from copying the frames written since its last one.
    """
    wal = Path(f"{path}-wal")
    info = os.stat(path)
    key = (info.st_dev, info.st_ino, mark)
    with transaction(conn, path):
        if _scrubbed(conn, wal, key, mark):
            return True
    busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    if busy or frames != copied:
        return False  # held back: the replicator's next checkpoint restarts the log
    with transaction(conn, path):
        conn.execute(f"PRAGMA user_version = {deleted_mark(conn)}")  # a frame: the log starts again with it
    with transaction(conn, path):
        return _scrubbed(conn, wal, key, mark)


def _scrubbed(conn: sqlite3.Connection, wal: Path, key: tuple[int, int, int], mark: int) -> bool:
    """Inside a write transaction (no frame is written, and the log cannot restart, meanwhile): if the log has
    restarted since the generation first seen for ``key``, or is empty, cut off the earlier generations and clear
    ``mark``; whether it did. Otherwise note the generation seen (the first look for ``key``)."""
    salts = _log_salts(wal)
    with _generations_lock:
        if salts is not None and _generations_seen.setdefault(key, salts) == salts:
            for other in [k for k in _generations_seen if k[:2] == key[:2] and k != key]:
                del _generations_seen[other]  # an older mark's, superseded by this one
            return False  # the first look since the delete, or no restart since
        _generations_seen.pop(key, None)
    if salts is not None:
        _cut_earlier_generations(wal, salts)
    _clear_mark(conn, mark)
    return True


WAL_HEADER = 32
"""Bytes of the write-ahead log's header: magic, format, page size, checkpoint count, the two salts, a checksum."""
WAL_FRAME_HEADER = 24
"""Bytes before each page in the log: page number, size after commit, the two salts, a checksum."""


def _log_salts(wal: Path) -> bytes | None:
    """The salts of the log's current generation (from its header); None when the log is empty (absent, or
    emptied by a ``TRUNCATE`` checkpoint): then every frame written was copied into the file, and none is left."""
    try:
        with open(wal, "rb") as log:
            header = log.read(WAL_HEADER)
    except FileNotFoundError:
        return None
    return header[16:24] if len(header) == WAL_HEADER else None


def _cut_earlier_generations(wal: Path, salts: bytes) -> None:
    """Cut the log off after the frames of its current generation (``salts``): what follows them is frames of
    earlier generations, which SQLite never reads again. Only with the write lock held (as SQLite does it)."""
    with open(wal, "r+b") as log:
        header = log.read(WAL_HEADER)
        page_size = int.from_bytes(header[8:12], "big")
        frame = WAL_FRAME_HEADER + (65536 if page_size == 1 else page_size)
        size = os.fstat(log.fileno()).st_size
        end = WAL_HEADER
        while end + frame <= size and os.pread(log.fileno(), 8, end + 8) == salts:
            end += frame
        if end < size:
            log.truncate(end)


def create_file(path: Path) -> bool:
    """Create ``path`` empty at mode 0600 (and missing folders at 0700) if it does not exist; whether it did.

    SQLite would give a new file the umask's mode; it gives the ``-wal`` and
    ``-shm`` files the mode of the database, so they are private too.
    """
    if path.exists():
        if path.is_dir():
            raise StorageError(f"{path} is a folder, not a database file")
        return False
    try:
        _make_private_folders(path.parent)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, stat.S_IRUSR | stat.S_IWUSR))
    except OSError as exc:
        raise DatabaseReadOnlyError(
            f"{path} cannot be created here ({exc.strerror}); check the permissions of its folder"
        ) from exc
    return True


def _make_private_folders(folder: Path) -> None:
    # One by one: Path.mkdir(parents=True) gives the parents it creates the
    # default mode (0777 less the umask), not the mode asked for.
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir(mode=0o700, exist_ok=True)


def ensure_wal(conn: sqlite3.Connection, path: Path, busy_timeout: float = BUSY_TIMEOUT) -> None:
    """Switch the file to WAL if it is not already (files built by the ``alembic`` command start without).

    The switch needs the file to itself, and SQLite answers "database is locked"
    at once, without waiting in its busy handler, while another process has it
    open in rollback mode (several processes creating one new file at the same
    moment): so wait here, up to the busy timeout, until one of them has switched it.
    """
    deadline = time.monotonic() + busy_timeout
    pause = 0.001
    try:
        while str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
            try:
                conn.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF not in (5, 6) or time.monotonic() > deadline:  # BUSY, LOCKED
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
    except sqlite3.Error as exc:
        raise from_sqlite(exc, path) from exc
