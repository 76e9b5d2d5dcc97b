"""The commands that read: ``list``, ``show``, ``search``, ``stats``, and who holds what.

One function per command, each taking a database (a path, a URL or a
:class:`~sessionstore.backend.Backend`) and answering through its backend, which
opens it without ever creating or changing it. Nothing here imports SQLAlchemy
for a file: a command that only reads answers as fast as ``sqlite3`` can.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

from .backend import Backend, command
from .reads import (
    NO_USAGE,
    Forecast,
    SearchHit,
    Stats,
    StoredSession,
    branch_owners,
    forecast,
    iter_sessions,
    resolve,
    retention_of,
    stored_session,
    total_usage,
)
from .schema import queries
from .schema.revisions import FORKS_SINCE, USAGE_SINCE, reaches
from .storage import SessionRecord, check_limit

__all__ = [
    "NO_USAGE",
    "Forecast",
    "SearchHit",
    "Stats",
    "StoredSession",
    "held_now",
    "list_sessions",
    "read_session",
    "retention",
    "search",
    "stats",
]

# A limit past what SQLite's integers hold means "all of them".
_SQL_INT_MAX = 2**63 - 1


@command
def held_now(backend: Backend) -> dict[str, str]:
    """``sessionstore list``/``show``: the sessions a live process holds now, and who holds each."""
    with backend.reading() as conn:
        return backend.live_holders(conn)


@command
def list_sessions(backend: Backend, *, cwd: str | None = None, limit: int | None = None) -> Iterator[SessionRecord]:
    """``sessionstore list``: stored sessions newest first, streamed (a file stays open while iterated);
    subagents are shown with their session (:func:`read_session`), not listed beside it."""
    check_limit(limit)
    with backend.reading() as conn:
        revision = backend.revision(conn)  # an older file is read too, with less in it
        yield from iter_sessions(conn, cwd=cwd, limit=limit, where=backend.top_level, revision=revision)


@command
def read_session(backend: Backend, prefix: str) -> StoredSession:
    """``sessionstore show``: a session (by id or unique prefix), its events and its subagents', from one
    snapshot."""
    with backend.reading(snapshot=True) as conn:
        return stored_session(conn, resolve(conn, prefix), backend.revision(conn), set(), backend.events_of)


@command
def search(backend: Backend, text: str, *, raw: bool = False, limit: int = 20) -> list[SearchHit]:
    """``sessionstore search``: events whose text holds every word, best first, exact however far a file's index
    trails. ``raw`` takes FTS5 query syntax as it is (on PostgreSQL, the part of it that has a meaning there)."""
    with backend.reading() as conn:
        hits = backend.search(conn, text, raw=raw, limit=min(limit, _SQL_INT_MAX))
        # A hit in an earlier branch (revision 0012) is reported as its live session's.
        return branch_owners(conn, hits) if hits and reaches(backend.revision(conn), FORKS_SINCE) else hits


@command
def stats(backend: Backend) -> Stats:
    """``sessionstore stats``: counts, sizes and schema revision, the tokens every session spent, and what the
    retention policy removes next."""
    counted = backend.stats()
    with backend.reading() as conn:
        if not reaches(backend.revision(conn), USAGE_SINCE):  # no tokens, no policy
            return counted
        usage, max_age = total_usage(conn), retention_of(conn)
        coming = None if max_age is None else forecast(conn, max_age, backend.live_holders(conn), datetime.now(UTC))
        sessions, released = conn.execute(queries.LIVE_SESSION_COUNT).fetchone()  # earlier branches not counted
    return replace(counted, sessions=int(sessions), released=int(released), usage=usage, retention=coming)


@command
def retention(backend: Backend) -> Forecast | None:
    """``sessionstore retention show``: the policy and what it removes next (None: no policy)."""
    with backend.reading() as conn:
        if not reaches(backend.revision(conn), USAGE_SINCE):
            return None
        max_age = retention_of(conn)
        if max_age is None:
            return None
        return forecast(conn, max_age, backend.live_holders(conn), datetime.now(UTC))
