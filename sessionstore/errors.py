"""Every exception sessionstore raises on purpose, in one place.

Two families. The registry's errors (unknown id, cap reached, queue full,
connection overloaded) are about live sessions and subclass the built-in types
callers already catch (``KeyError``, ``RuntimeError``). Everything that goes wrong
with the file on disk is a :class:`StorageError`, so an application can catch one
type around any storage call and show its message to a person as it is.
"""

from __future__ import annotations


class UnknownSessionError(KeyError):
    """A session id this registry never issued, or has since let go."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.session_id = session_id

    def __str__(self) -> str:
        return f"unknown session id: {self.session_id!r}"


class SessionLimitError(RuntimeError):
    """The registry is at ``max_sessions`` and every session in it is busy.

    Refusing admission is what keeps the cap a real bound: stretching it while
    turns run would let a client grow the registry just by staying busy.
    """

    def __init__(self, max_sessions: int) -> None:
        super().__init__(max_sessions)
        self.max_sessions = max_sessions

    def __str__(self) -> str:
        return (
            f"at the {self.max_sessions}-session limit and every session is busy; "
            "retry once a turn finishes, or close a session"
        )


class SessionBusyError(RuntimeError):
    """A session already has ``max_queued`` prompts waiting behind its running turn."""

    def __init__(self, session_id: str, max_queued: int) -> None:
        super().__init__(session_id, max_queued)
        self.session_id = session_id
        self.max_queued = max_queued

    def __str__(self) -> str:
        return f"session {self.session_id!r} already has {self.max_queued} prompts queued"


class ConnectionOverloadedError(RuntimeError):
    """The connection already has ``max_active_prompts`` prompts admitted.

    Per-session bounds cannot see each other; this is the bound on their sum.
    """

    def __init__(self, max_active_prompts: int) -> None:
        super().__init__(max_active_prompts)
        self.max_active_prompts = max_active_prompts

    def __str__(self) -> str:
        return f"this connection already has {self.max_active_prompts} prompts in flight; retry once one finishes"


class StorageError(Exception):
    """Base of every error about the database file or what is written to it."""


class EventEncodeError(StorageError, ValueError):
    """An event, or a session's context or title, holds a value that cannot be stored faithfully.

    Raised before anything is written.
    """


class InvalidSessionIdError(StorageError, ValueError):
    """A session or stream id that is not a UUID (32 hex digits); nothing was read or written."""


class SessionHeldError(StorageError):
    """Another live process (or another storage of this one) holds the session: it has it open, and only its holder
    may repair, append to, rewrite, close or delete it. The message names the holder (pid, host, program, since
    when); the hold ends when the holder lets the session go or ends, a ``kill -9`` included."""


class InvalidCursorError(StorageError, ValueError):
    """A session-list cursor this store never issued (cursors are opaque: pass back only ``next_cursor``)."""


class InvalidWindowError(StorageError, ValueError):
    """A ``last`` (how many of a history's newest events to read) that is not a whole number of zero or more;
    nothing was read."""


class InvalidForkPositionError(StorageError, ValueError):
    """A position to fork a session at that is not a whole number from 0 to the session's length; nothing was
    written."""


class NotADatabaseError(StorageError):
    """The file exists but is not a SQLite database (or is encrypted); it was not changed."""


class DatabaseCorruptError(StorageError):
    """SQLite reports the file as damaged; it was not changed. Restore from a backup."""


class DatabaseReadOnlyError(StorageError):
    """The file or its folder cannot be written (permissions, read-only mount)."""


class DatabaseFullError(StorageError):
    """The disk (or the configured page limit) is full; the write was rolled back whole."""


class UnsafeFileError(StorageError):
    """The file (or its ``-wal``/``-shm``) belongs to another user or others may write it; it was not used.

    Conversations are private: a file someone else planted, or can change,
    could be read or rewritten behind the agent's back (ssh refuses keys so).
    """


class DatabaseBusyError(StorageError):
    """Another process held the write lock for longer than the busy timeout."""


class DatabaseUnavailableError(StorageError):
    """The database server cannot be reached, or the connection was lost (PostgreSQL).

    A write that raised this may or may not have committed, whole: the connection was lost before its answer
    came. Nothing that returned is lost; the next call connects again.
    """


class AccessDeniedError(StorageError):
    """The database refused this role (PostgreSQL): a privilege it was not granted, or a session another role owns
    (row-level security: a role reads and writes only the sessions it made); nothing was written."""


class ForkedByAnotherRoleError(AccessDeniedError):
    """A delete refused, its transaction rolled back whole (PostgreSQL, revision 0013): another role made a fork of
    the session, which this role cannot see (row-level security) to give it the events it shares, and the delete
    would cut it short. The administrator's delete gives the fork its events. A retention pass keeps the session."""


class SettingError(StorageError):
    """A row of the database's ``settings`` table holds a value this version cannot read (edited by hand): the
    message names the setting and the command that sets it again; nothing was changed."""


class SchemaError(StorageError):
    """The file's schema revision does not match this version of sessionstore."""


class SchemaTooNewError(SchemaError):
    """The file was written by a newer sessionstore; it is refused and left untouched."""


class SchemaOutOfDateError(SchemaError):
    """The file is at an older revision and auto-upgrade is off; the message names the command."""


class MigrationError(SchemaError):
    """A migration failed; the file is as it was, and a backup sits beside it."""


class DowngradeRefusedError(SchemaError):
    """A downgrade to base would drop every session of a database no backup is taken of (PostgreSQL's: a file
    is copied aside first); the message names the dump to take and how to force it. Nothing was changed."""


class DatabaseNotFoundError(StorageError):
    """There is no database file at the path; nothing was created."""


class NoSuchSessionError(StorageError, LookupError):
    """No stored session's id starts with the given prefix."""


class AmbiguousSessionIdError(StorageError, LookupError):
    """More than one stored session's id starts with the given prefix."""


class ImportFileError(StorageError, ValueError):
    """The file to import is not a valid export; nothing was imported."""


class ImportConflictError(StorageError):
    """A session in the file is already stored with different events, or is a subagent of a session that is
    neither before it in the file nor stored; nothing was imported."""


class ParentSessionMissingError(StorageError, LookupError):
    """A stream opened from inside a session (an AG2 subagent's) was first written after that session was
    deleted (or before it was ever stored); nothing was written. A subagent belongs to its session and goes
    with it: left to write on, it would come back as a conversation of its own."""


class NotOnPostgreSQLError(StorageError):
    """What was asked is a SQLite file's alone (FTS5 query syntax, repairing FTS5's index, a file's size) and has
    no counterpart on a PostgreSQL database; nothing was read or written. The message says what does apply."""


class UsageError(ValueError):
    """A command was given arguments that cannot work (the command line prints it as one line)."""


# SQLite's primary result codes (the low byte of an extended code) and what each means for the file.
_SQLITE_CODES: dict[int, tuple[type[StorageError], str]] = {
    5: (DatabaseBusyError, "stayed locked by another process for longer than the busy timeout"),  # SQLITE_BUSY
    6: (DatabaseBusyError, "stayed locked by another process for longer than the busy timeout"),  # SQLITE_LOCKED
    8: (DatabaseReadOnlyError, "cannot be written here; check the permissions of the file and its folder"),
    11: (DatabaseCorruptError, "is damaged; restore it from a backup (sessionstore check says more)"),  # CORRUPT
    13: (DatabaseFullError, "is out of space; the write was rolled back: free some disk space and retry"),  # FULL
    14: (DatabaseReadOnlyError, "cannot be opened or written here; check the permissions of the file and its folder"),
    26: (NotADatabaseError, "is not a SQLite database"),  # SQLITE_NOTADB
}


def from_sqlite(exc: BaseException, path: object) -> StorageError:
    """The :class:`StorageError` for an error SQLite reported on the file at ``path``.

    Chosen by the error's SQLite result code (``sqlite_errorcode``); an error
    that carries none is a plain :class:`StorageError` with SQLite's message.
    The original error is kept as ``__cause__``.
    """
    if isinstance(exc, StorageError):
        return exc
    cause = getattr(exc, "orig", None) or exc
    code = getattr(cause, "sqlite_errorcode", None)
    unknown = (StorageError, "failed")
    kind, hint = _SQLITE_CODES.get(code & 0xFF, unknown) if isinstance(code, int) else unknown
    error = kind(f"{path} {hint} ({cause})")
    error.__cause__ = cause if isinstance(cause, Exception) else None
    return error


def install_hint(extra: str) -> str:
    """How to install what an extra of sessionstore brings, as a command that works where sessionstore came from
    a checkout or a git URL: the extra's own requirements (read from the installed metadata, so the pins are
    written once, in pyproject.toml), which pip finds on PyPI."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        wanted = [r.split(";")[0].strip() for r in requires("sessionstore") or () if f'extra == "{extra}"' in r]
    except PackageNotFoundError:  # run from a source tree that was never installed
        wanted = []
    packages = " ".join(f"'{w}'" for w in wanted) if wanted else f"'.[{extra}]' (in sessionstore's checkout)"
    return f"install sessionstore's {extra} extra: pip install {packages}"
