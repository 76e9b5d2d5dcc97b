"""The commands that change a database: deleting, pruning and naming sessions, and checking it.

One function per command over a :class:`~sessionstore.backend.Backend`, so a
failed call (an unknown id, say) leaves the database exactly as it was. Every
user mistake is found before anything is written. Writes need the database at
the schema revision this version expects; an older one is refused with the
command that upgrades it. A long command (``delete``, ``prune``) writes in the
backend's batches (:meth:`~sessionstore.backend.Backend.in_batches`): short
transactions on a file, so an agent writing meanwhile keeps its pace; one
transaction on PostgreSQL, where only the writers of the sessions it changes wait.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from .backend import Backend, command
from .durable import DELETE_SESSION, fork_steps, run_steps
from .errors import SessionHeldError, SettingError
from .reads import (
    AGE_UNITS,
    ANY_AGE,
    RETENTION,
    CheckReport,
    Connection,
    checked_age,
    cutoff_of,
    iter_sessions,
    not_an_age,
    parent_of,
    resolve,
    resolve_all,
    retention_of,
    retention_setting,
)
from .schema import queries
from .schema.revisions import USAGE_SINCE, reaches
from .storage import SessionRecord, storable_text, utc_text

__all__ = [
    "LEFT_IN_LOG",
    "CheckReport",
    "check",
    "delete_sessions",
    "deleted_text_left",
    "parse_age",
    "prune",
    "refuse_held",
    "set_retention",
    "set_title",
]


def _deleter(backend: Backend) -> Callable[[Connection, str], tuple[str, int]]:
    def delete(conn: Connection, sid: str) -> tuple[str, int]:
        """Delete a session (its subagents go with it); its id and how many subagents went."""
        # -1 for a session already gone (named after its parent, which took it along)
        subagents = max(0, int(conn.execute(queries.SUBAGENT_COUNT, {"sid": sid}).fetchone()[0]))
        for sql in DELETE_SESSION:
            conn.execute(sql, {"sid": sid})
        backend.note_deleted(conn)
        return sid, subagents

    return delete


LEFT_IN_LOG = (
    "remains in {db} and its write-ahead log for now: another process (a sqlite3 shell, a backup, a replicator)"
    " holds an older snapshot of the file; sessionstore removes it once that process lets go"
)
"""What a delete says of the deleted text, in one line, when it could not make it unrecoverable yet (``db``: the
file)."""


@command
def deleted_text_left(backend: Backend) -> bool:
    """Whether deleted text may remain in the database (:data:`LEFT_IN_LOG`): one read of a file's header."""
    return backend.deleted_text_left()


@command
def delete_sessions(backend: Backend, prefixes: Sequence[str]) -> list[tuple[str, int]]:
    """``sessionstore delete``: the sessions (ids or unique prefixes), their events and their subagents; each
    full id, and how many subagents went with it (a session named after its parent was deleted with it: 0).

    Every prefix is resolved before anything is deleted (one that matches none
    or several deletes nothing); then whole sessions go, each with its
    subagents in one statement, in the backend's batches, and what was deleted is made unrecoverable.
    """
    with backend.writable() as conn:
        ids = resolve_all(conn, prefixes)
        refuse_held(backend, conn, ids, "deleted")
        deleted = list(backend.in_batches(conn, ids, _deleter(backend)))
        backend.forget_deleted(conn)
        return deleted


_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_age(text: str, shortest: timedelta = ANY_AGE) -> timedelta:
    """``"30d"`` -> 30 days: a number (whole, or with decimals: ``1.5d``) and a unit, ``s``, ``m`` (minutes),
    ``h``, ``d`` or ``w``, in either case, spaces around and between them allowed (``"12 H"``), and at least
    ``shortest`` (:data:`~sessionstore.reads.SHORTEST_RETENTION` for a retention policy). Anything else is
    :class:`~sessionstore.errors.UsageError`, with the one message every refused age gets, naming ``text`` as
    written."""
    match = _AGE.match(text.lower())
    if match is None:
        raise not_an_age(repr(text), shortest)
    try:
        age = timedelta(seconds=float(match.group(1)) * AGE_UNITS[match.group(2)])
    except OverflowError:  # longer than any calendar
        raise not_an_age(repr(text), shortest) from None
    return checked_age(age, shortest, repr(text))


def refuse_held(backend: Backend, conn: Connection, ids: Sequence[str], what: str) -> None:
    """:class:`SessionHeldError` if a live process holds one of the sessions (or the session it is a subagent of):
    only that process may write it. Asked before anything is written, so a refused command writes nothing."""
    holders = backend.live_holders(conn)
    if not holders:
        return
    for sid in ids:
        held = sid if sid in holders else parent_of(conn, sid)
        if held is not None and held in holders:
            whose = "" if held == sid else f" (a subagent of {held})"
            raise SessionHeldError(
                f"session {sid}{whose} is held by {holders[held]}: close it there (or end that process) first;"
                f" nothing was {what}"
            )


# A subagent goes with its session, never on its own (the backend's top_level); a session a live process holds is
# never a candidate.
_STALE = "updated_at < :cutoff"


@command
def prune(
    backend: Backend,
    older_than: timedelta,
    *,
    dry_run: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> list[SessionRecord]:
    """``sessionstore prune``: sessions not updated for ``older_than`` that no live process holds; deleted unless
    ``dry_run``.

    A session a live process holds (a registry has it live) is never pruned, however old; one that no process holds
    is, whether a registry let it go (released) or it was written without one, or its process ended. Whole sessions
    go in the backend's batches (:meth:`~sessionstore.backend.Backend.in_batches`), so an agent writing meanwhile
    is never starved. Subagents and earlier branches are not candidates of their own: each goes with its session
    (whose ``updated_at`` is what is judged).
    """
    cutoff = cutoff_of(checked_age(older_than, ANY_AGE), datetime.now(UTC))
    prunable = f"{backend.top_level} AND {_STALE}"
    if dry_run:
        with backend.reading() as conn:
            revision = backend.revision(conn)
            held = backend.live_holders(conn)
            found = iter_sessions(conn, where=prunable, cutoff=cutoff, revision=revision)
            return [r for r in found if r.session_id not in held]
    with backend.writable() as conn:
        held = backend.live_holders(conn)
        doomed = [r for r in iter_sessions(conn, where=prunable, cutoff=cutoff) if r.session_id not in held]
        ids = [r.session_id for r in doomed]
        for done, _ in enumerate(backend.in_batches(conn, ids, _deleter(backend)), 1):
            if progress is not None:
                progress(done, len(doomed))
        if doomed:
            backend.forget_deleted(conn)
        return doomed


@command
def set_title(backend: Backend, prefix: str, title: str | None) -> str:
    """``sessionstore title``: set (or with ``None`` clear) a stored session's title; returns its full id."""
    if title is not None:
        storable_text(title, "title")  # refused before the file is opened, as the storage refuses it
    with backend.writable() as conn, backend.transaction(conn):
        sid = resolve(conn, prefix)
        conn.execute(queries.SET_TITLE, {"sid": sid, "title": title})
        return sid


@command
def set_retention(backend: Backend, max_age: timedelta | None) -> None:
    """``sessionstore retention set AGE`` (``off``: ``None``): the policy every storage open on the database
    applies in the background, removing what ``prune --older-than AGE --yes`` would (sessions of their own not
    updated for ``max_age`` that no live process holds)."""
    params = {"name": RETENTION} if max_age is None else retention_setting(max_age)
    with backend.writable() as conn, backend.transaction(conn):
        conn.execute(queries.DROP_SETTING if max_age is None else queries.PUT_SETTING, params)


@command
def fork(backend: Backend, prefix: str, at: int | None = None) -> str:
    """``sessionstore fork``: a new session sharing the first ``at`` events (all when ``None``) of a stored one
    (revision 0012: shared, not copied); the new session's id. Forking writes nothing of the session forked, so
    a session a live process holds can be forked."""
    new = uuid.uuid4().hex
    with backend.writable() as conn, backend.transaction(conn):
        sid = resolve(conn, prefix)
        run_steps(fork_steps(sid, at, utc_text(datetime.now(UTC)), new), conn.execute)
    return new


@command
def check(backend: Backend, *, repair: bool = False) -> CheckReport:
    """``sessionstore check``: is the database whole, and does everything ``search`` and the views depend on work?
    With ``repair``, puts back what a file is missing (see the backends' ``check``). A setting edited by hand into
    something unreadable is reported (``settings``), not mended: which policy to set is the user's choice."""
    report = backend.check(repair=repair)
    if not reaches(report.revision, USAGE_SINCE):  # no settings before revision 0010
        return report
    with backend.reading() as conn:
        try:
            retention_of(conn)
        except SettingError as exc:
            return replace(report, settings=[str(exc)])
    return report
