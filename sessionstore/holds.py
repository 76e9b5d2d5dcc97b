"""Which process holds a session of a SQLite file: a lock that dies with its holder, on the database file itself.

A registry holds the sessions it has live, and only the holder may repair, append to, rewrite or close one: two
agent processes on one file (two editor windows) must never both write a session. SQLite has no row locks, so a
hold is an open-file-description lock (Linux's ``F_OFD_SETLK``) on one byte of the database file, at ``BASE`` plus
the session's integer id: far past the bytes SQLite locks itself (its lock bytes sit at 1 GiB), and never data
SQLite reads. The kernel drops the lock when the holder's file is closed, and so when the holder exits, SIGKILL
included: a dead holder is seen at once, with no lease to wait out. An open-file-description lock belongs to this
storage's own descriptor, so closing it never touches the locks SQLite keeps on the same file (a POSIX ``fcntl``
lock would: those belong to the process, and any close drops them all).

Who holds a session is written beside, in ``sessions.held_by``, for people (``sqlite3``, ``sessionstore list``);
the lock alone says whether that holder still lives.
"""

from __future__ import annotations

import errno
import itertools
import os
import socket
import struct
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from .errors import SessionHeldError

try:
    import fcntl
except ImportError:  # Windows: no fcntl, and so no locks other processes see (see SUPPORTED)
    fcntl = None  # type: ignore[assignment]

__all__ = ["BASE", "PG_LOCK_CLASS", "SUPPORTED", "Holds", "held_error", "holder", "pg_lock_key"]

BASE = 1 << 50
"""Byte offset of session id 0's lock: beyond any real file, and beyond SQLite's own lock bytes (1 GiB + 512)."""

_SPAN = 1 << 50  # ids wrap here (never reached: ids are allocated one by one)

PG_LOCK_CLASS = 0x5E55_0007
"""On PostgreSQL a hold is the advisory lock ``(PG_LOCK_CLASS, pg_lock_key(id))`` on the holder's connection: it dies
with the connection, whichever host that is on, and ``pg_locks`` shows it (the first of its two keys, a constant of
sessionstore's, keeps it apart from other applications' advisory locks)."""


def pg_lock_key(session: int) -> int:
    """The second key of a session's advisory lock (int4; ids wrap at 2**31, never reached in practice)."""
    return session % (1 << 31)


SUPPORTED = fcntl is not None and hasattr(fcntl, "F_OFD_SETLK")
"""Open-file-description locks exist here (Linux). Elsewhere a hold is this storage's own bookkeeping only."""

# struct flock: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid (native alignment).
_FLOCK = "hhqqi"


def _flock(kind: int, offset: int) -> bytes:
    return struct.pack(_FLOCK, kind, os.SEEK_SET, offset, 1, 0)


class Holds:
    """This storage's holds on the sessions of one file: one lock byte per session id, on its own descriptor."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None
        self._held: set[int] = set()
        self._lock = threading.Lock()

    def _descriptor(self) -> int:
        if self._fd is None:
            # Writable because a write lock needs it; nothing is ever written through it. A file this process may
            # only read can still be asked who holds what.
            try:
                self._fd = os.open(self._path, os.O_RDWR | os.O_CLOEXEC)
            except PermissionError:
                self._fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
        return self._fd

    @property
    def held(self) -> frozenset[int]:
        return frozenset(self._held)

    def take(self, session: int) -> bool:
        """Hold ``session``; False when another storage (in this process or another) holds it."""
        with self._lock:
            if session in self._held:
                return True
            if SUPPORTED:
                try:
                    fcntl.fcntl(self._descriptor(), fcntl.F_OFD_SETLK, _flock(fcntl.F_WRLCK, _offset(session)))
                except OSError as exc:
                    if exc.errno in (errno.EAGAIN, errno.EACCES):
                        return False
                    raise
            self._held.add(session)
            return True

    def release(self, session: int) -> None:
        with self._lock:
            if session not in self._held:
                return
            self._held.discard(session)
            if SUPPORTED and self._fd is not None:
                fcntl.fcntl(self._fd, fcntl.F_OFD_SETLK, _flock(fcntl.F_UNLCK, _offset(session)))

    def holds(self, session: int) -> bool:
        return session in self._held

    def held_elsewhere(self, session: int) -> bool:
        """Whether another storage, in any process, holds ``session`` now."""
        if session in self._held or not SUPPORTED:
            return False
        with self._lock:
            answer = fcntl.fcntl(self._descriptor(), fcntl.F_OFD_GETLK, _flock(fcntl.F_WRLCK, _offset(session)))
        kind: int = struct.unpack(_FLOCK, answer)[0]
        return kind != fcntl.F_UNLCK

    def close(self) -> None:
        """Let every hold go (closing the descriptor drops its locks)."""
        with self._lock:
            self._held.clear()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def holder() -> str:
    """A storage of this process as ``sessions.held_by`` names a holder:
    ``pid 4242 on laptop (example.py, storage 1) since 2026-12-02 10:11:12 UTC``.

    The program is its file's name only (a command line may carry secrets); the storage's number tells apart two
    storages of one process, which hold apart too.
    """
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    since = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
    storage = next(_storages)
    return f"pid {os.getpid()} on {socket.gethostname()} ({program or 'python'}, storage {storage}) since {since} UTC"


_storages = itertools.count(1)


def held_error(sid: str, marked: str | None) -> SessionHeldError:
    """The one message for a session another storage holds, naming the holder as its mark says."""
    who = marked or "another storage of this database (it has not marked who yet)"
    return SessionHeldError(f"session {sid} is held by {who}: only its holder may write it until it lets it go")


def _offset(session: int) -> int:
    return BASE + session % _SPAN
