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


class NotADatabaseError(StorageError):
    """The file exists but is not a SQLite database (or is encrypted); it was not changed."""


class DatabaseCorruptError(StorageError):
    """SQLite reports the file as damaged; it was not changed. Restore from a backup."""


class DatabaseReadOnlyError(StorageError):
    """The file or its folder cannot be written (permissions, read-only mount)."""


class DatabaseFullError(StorageError):
    """The disk (or the configured page limit) is full; the write was rolled back whole."""


class DatabaseBusyError(StorageError):
    """Another process held the write lock for longer than the busy timeout."""


class SchemaError(StorageError):
    """The file's schema revision does not match this version of sessionstore."""


class SchemaTooNewError(SchemaError):
    """The file was written by a newer sessionstore; it is refused and left untouched."""


class SchemaOutOfDateError(SchemaError):
    """The file is at an older revision and auto-upgrade is off; the message names the command."""


class MigrationError(SchemaError):
    """A migration failed; the file is as it was, and a backup sits beside it."""


def from_sqlite(exc: BaseException, path: object) -> StorageError:
    """The :class:`StorageError` for an error SQLite reported on the file at ``path``.

    SQLite reports most conditions only through its message text (Python's
    ``sqlite3`` exposes ``sqlite_errorname`` on some errors, not all), so the
    message is what is matched. The original error is kept as ``__cause__``.
    """
    message = str(getattr(exc, "orig", None) or exc)
    text = message.lower()
    kind: type[StorageError]
    if "file is not a database" in text or "file is encrypted" in text:
        kind, hint = NotADatabaseError, "is not a SQLite database"
    elif "malformed" in text or "corrupt" in text:
        kind, hint = DatabaseCorruptError, "is damaged; restore it from a backup (sessionstore check says more)"
    elif "readonly" in text or "read-only" in text or "unable to open database file" in text:
        kind, hint = DatabaseReadOnlyError, "cannot be written here; check the permissions of the file and its folder"
    elif "disk is full" in text or "database or disk is full" in text:
        kind, hint = DatabaseFullError, "is out of space; the write was rolled back: free some disk space and retry"
    elif "database is locked" in text or "database is busy" in text or "busy" in text:
        kind, hint = DatabaseBusyError, "stayed locked by another process for longer than the busy timeout"
    else:
        kind, hint = StorageError, "failed"
    error = kind(f"{path} {hint} ({message})")
    error.__cause__ = exc if isinstance(exc, Exception) else None
    return error
