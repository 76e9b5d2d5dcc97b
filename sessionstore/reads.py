"""The reads every database answers with the shared statements: a connection in, records out.

The storages (for their catalogue) and the commands (through their backend) call
these on an open connection: a ``Connection``, or the PostgreSQL
backend's :class:`~sessionstore.postgres.connect.PgConnection`, both of which
are a :class:`Connection`. Nothing here knows which database it reads; where the
two differ, the backend answers (:mod:`sessionstore.backend`).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from .errors import AmbiguousSessionIdError, NoSuchSessionError, SettingError, UsageError
from .events import Tokens
from .schema import queries
from .schema.revisions import FORKS_SINCE, HEAD, ROLES_SINCE, SUBAGENTS_SINCE, USAGE_SINCE, reaches
from .storage import SessionPage, SessionRecord, check_limit, decode_cursor, page_of, stamp, utc_text

__all__ = [
    "CheckReport",
    "Connection",
    "SearchHit",
    "Stats",
    "StoredEvent",
    "StoredSession",
    "branch_owners",
    "events_of",
    "iter_sessions",
    "load_session",
    "parent_of",
    "record_of",
    "resolve",
    "resolve_all",
    "session_page",
    "stored_session",
    "text_at",
]


class Connection(Protocol):
    """What the reads and the commands use of a connection: ``execute`` with ``:named`` parameters, rows back as
    tuples (iterable, ``fetchone``, ``fetchall``). ``Connection`` is one as it is."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Any, /) -> Any: ...

    @property
    def in_transaction(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event row as stored: the payload is its JSON text, undecoded; ``text`` is what a person reads."""

    position: int
    type: str
    payload: str
    created_at: datetime
    role: str | None = None
    text: str | None = None
    # Where the text sits in the payload, when it is not stored on its own.
    text_path: str | None = None
    # What a usage event says it spent (revision 0010); None for every other event.
    tokens: Tokens | None = None

    def to_json(self) -> dict[str, Any]:
        try:
            payload: Any = json.loads(self.payload)
        except ValueError:
            payload = self.payload  # edited by hand into something that is not JSON: shown as it is
        return {
            "position": self.position,
            "type": self.type,
            "payload": payload,
            "role": self.role,
            "text": self.text,
            "created_at": self.created_at.isoformat(),
            **({} if self.tokens is None else {"tokens": usage_json(self.tokens)}),
        }


def usage_json(tokens: Tokens, events: int | None = None) -> dict[str, int]:
    """Tokens as ``--json`` and ACP's ``_meta`` give them: each kind, and the total (input and output)."""
    counted = {} if events is None else {"usage_events": events}
    return {**counted, **tokens._asdict(), "total": tokens.total}


@dataclass(frozen=True, slots=True)
class Usage:
    """What a session (or a database) spent, summed in SQL over its usage events: ``tokens``, how many usage
    ``events`` said so, and per turn (``turns``: the turn's number, as the ``usage`` view counts turns from the
    first user message, its usage events and its tokens; ``show`` alone reads them)."""

    tokens: Tokens = field(default_factory=Tokens)
    events: int = 0
    turns: list[tuple[int, int, Tokens]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = usage_json(self.tokens, self.events)
        if self.turns:
            out["turns"] = [{"turn": turn, **usage_json(tokens, events)} for turn, events, tokens in self.turns]
        return out


NO_USAGE = Usage()
"""The usage of a database before revision 0010 (nothing was counted) and of a session that spent nothing."""


def session_usage(conn: Connection, sid: str, *, turns: bool = False) -> Usage:
    """A session's usage (its own usage events: a subagent's is in its own session), and with ``turns`` turn by
    turn."""
    events, *counts = conn.execute(queries.SESSION_USAGE, {"sid": sid}).fetchone()
    if not events:
        return NO_USAGE
    by_turn = []
    if turns:
        for turn, calls, *kinds in conn.execute(queries.TURN_USAGE, {"sid": sid}):
            by_turn.append((int(turn), int(calls), Tokens(*(int(n or 0) for n in kinds))))
    return Usage(Tokens(*(int(n) for n in counts)), int(events), by_turn)


def total_usage(conn: Connection) -> Usage:
    """Every session's usage together (``stats``)."""
    events, *counts = conn.execute(queries.TOTAL_USAGE).fetchone()
    return Usage(Tokens(*(int(n) for n in counts)), int(events)) if events else NO_USAGE


@dataclass(frozen=True, slots=True)
class Forecast:
    """What the retention policy removes next (``stats``): sessions of their own not updated for ``max_age`` that
    no live process holds. ``due`` of them would go at the next pass (the oldest last updated ``oldest_due``);
    ``held``: as old, but kept because a live process holds them; ``next_at`` is when the next of the others comes
    due (None: there is none)."""

    max_age: timedelta
    due: int
    oldest_due: datetime | None
    next_at: datetime | None
    held: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "max_age_seconds": int(self.max_age.total_seconds()),
            "due": self.due,
            "held": self.held,
            "oldest_due": None if self.oldest_due is None else self.oldest_due.isoformat(),
            "next_at": None if self.next_at is None else self.next_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A session as ``show`` reads it: its record, its events, and its subagents, each a ``StoredSession``,
    oldest first."""

    record: SessionRecord
    events: list[StoredEvent]
    subagents: list[StoredSession] = field(default_factory=list)
    usage: Usage = NO_USAGE
    # Its earlier branches (revision 0012): the events rewrites replaced, each its whole history then, oldest first.
    branches: list[StoredSession] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SearchHit:
    session_id: str
    title: str | None
    position: int
    type: str
    snippet: str
    role: str | None = None
    # The session this hit's session is a subagent of (None: a session of its own).
    parent_id: str | None = None
    # The live session whose earlier branch (events a rewrite replaced, revision 0012) the hit is in.
    branch_of: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "title": self.title,
            "parent_id": self.parent_id,
            "branch_of": self.branch_of,
            "position": self.position,
            "type": self.type,
            "role": self.role,
            "snippet": self.snippet,
        }


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts and sizes. On PostgreSQL ``path`` is the URL (password hidden), ``file_size`` the database's size
    (``pg_database_size``) and ``tables_size`` that of sessionstore's tables with their indexes."""

    path: str
    sessions: int
    released: int
    events: int
    event_types: dict[str, int] = field(default_factory=dict)
    file_size: int = 0
    wal_size: int = 0
    revision: str | None = None
    head: str = HEAD
    database: str = "sqlite"
    tables_size: int = 0
    usage: Usage = NO_USAGE
    retention: Forecast | None = None

    def to_json(self) -> dict[str, Any]:
        extra = {"database": self.database, "tables_size": self.tables_size} if self.database != "sqlite" else {}
        return {
            "usage": self.usage.to_json(),
            "retention": None if self.retention is None else self.retention.to_json(),
            **extra,
            "path": self.path,
            "sessions": self.sessions,
            "released": self.released,
            "events": self.events,
            "event_types": self.event_types,
            "file_size": self.file_size,
            "wal_size": self.wal_size,
            "revision": self.revision,
            "head": self.head,
        }


@dataclass(frozen=True, slots=True)
class CheckReport:
    """What ``sessionstore check`` found; every list is empty (``integrity`` is ``["ok"]``) on a healthy file.

    ``schema_objects``: views and triggers missing or not as this version
    defines them; ``search_index``: events the full-text index cannot find, or
    its errors. Both are what ``check --repair`` mends; ``repaired`` says what it did.
    ``unindexed``: how many of the newest events the index does not hold yet (not a
    problem: writers index in batches, and search reads those events directly).
    ``leftovers``: scratch files beside the file that a killed command left (:mod:`scratch`), one line each;
    they hold conversation text, so they are not ok, and ``check --repair`` (or the next import) removes them.
    ``settings``: rows of the ``settings`` table that hold what this version cannot read (edited by hand), one line
    each; not ok, and the line says how to set it again (``check --repair`` leaves the choice to you).
    ``deleted_text_left``: deleted text may still be in the file's pages and its
    write-ahead log, because another process held an older snapshot when it was
    deleted (:data:`LEFT_IN_LOG`; not damage: it goes once that process lets go).
    """

    integrity: list[str]
    foreign_keys: list[str]
    revision: str | None
    head: str = HEAD
    schema_objects: list[str] = field(default_factory=list)
    search_index: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    unindexed: int = 0
    leftovers: list[str] = field(default_factory=list)
    deleted_text_left: bool = False
    settings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.integrity in (["ok"], [])  # [] on PostgreSQL: no file of pages to check
            and not self.foreign_keys
            and self.revision == self.head
            and not self.schema_objects
            and not self.search_index
            and not self.leftovers
            and not self.settings
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "integrity": self.integrity,
            "foreign_keys": self.foreign_keys,
            "revision": self.revision,
            "head": self.head,
            "schema_objects": self.schema_objects,
            "search_index": self.search_index,
            "repaired": self.repaired,
            "unindexed": self.unindexed,
            "leftovers": self.leftovers,
            "deleted_text_left": self.deleted_text_left,
            "settings": self.settings,
        }


# A limit past what SQLite's integers hold means "all of them".
_SQL_INT_MAX = 2**63 - 1


def parent_of(conn: Connection, sid: str) -> str | None:
    """The id of the session ``sid`` is a subagent of, or None."""
    row = conn.execute(queries.PARENT_OF, {"sid": sid}).fetchone()
    return None if row is None else str(row[0])


# -- session records ------------------------------------------------------------------------------

_UNREADABLE = "sessionstore.unreadable"


def record_of(row: Sequence[Any]) -> SessionRecord:
    """A :data:`queries.OVERVIEW` row as a record.

    The one policy for a JSON column edited by hand into something else: the
    record is still listed, the column reads as empty, and its raw text is kept
    under ``meta["sessionstore.unreadable"][column]``, so nothing is silently lost.
    """
    sid, title, title_set, cwd, dirs, servers, meta, created, updated, released, events, parent = row[:12]
    forked_from, forked_at, branch_of = row[12:15]
    unreadable: dict[str, str] = {}
    directories = _json_column(dirs, list, "additional_directories", unreadable)
    mcp_servers = _json_column(servers, list, "mcp_servers", unreadable)
    meta_value = _json_column(meta, dict, "meta", unreadable)
    if unreadable:
        meta_value = {**meta_value, _UNREADABLE: unreadable}
    return SessionRecord(
        session_id=str(sid),
        cwd=str(cwd),
        additional_directories=directories,
        mcp_servers=mcp_servers,
        meta=meta_value,
        title=title,
        created_at=stamp(created),
        updated_at=stamp(updated),
        released=bool(released),
        parent_id=None if parent is None else str(parent),
        events=int(events),
        derived_title=title is not None and not title_set,
        forked_from=None if forked_from is None else str(forked_from),
        forked_at=None if forked_at is None else int(forked_at),
        branch_of=None if branch_of is None else str(branch_of),
    )


def _json_column(text: object, kind: type, name: str, unreadable: dict[str, str]) -> Any:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    if isinstance(value, kind):
        return value
    if text is not None:
        unreadable[name] = str(text)
    return kind()


# Before 0012, session_overview had no fork columns: the same view with them NULL (nothing was shared), under its
# own name, so that what follows OVERVIEW in a statement reads it as it is.
_OVERVIEW_BEFORE_FORKS = queries.OVERVIEW.replace(
    " FROM session_overview",
    " FROM (SELECT session_overview.*, NULL AS forked_from_id, NULL AS forked_at, NULL AS branch_of_id"
    " FROM session_overview) AS session_overview",
)
# A session's own rows, as EVENTS_OF gives them (before 0012 no session shared another's).
_EVENTS_BEFORE_FORKS = queries.LEGACY_EVENTS_OF.replace(
    "e.created_at FROM", "e.created_at, e.role, e.text, e.text_path FROM"
)


def _overview(sql: str, revision: str | None) -> str:
    """``sql``, a statement that begins with :data:`queries.OVERVIEW`, over the sessions of a file at ``revision``
    (before 0006, session_overview lacked columns OVERVIEW reads; before 0012, the fork columns)."""
    if reaches(revision, FORKS_SINCE):
        return sql
    legacy = queries.LEGACY_OVERVIEW if not reaches(revision, SUBAGENTS_SINCE) else _OVERVIEW_BEFORE_FORKS
    return legacy + sql.removeprefix(queries.OVERVIEW)


def iter_sessions(
    conn: Connection,
    *,
    cwd: str | None = None,
    limit: int | None = None,
    where: str = "",
    revision: str | None = HEAD,
    **params: Any,
) -> Iterator[SessionRecord]:
    """Sessions most recently active first, one at a time (a listing of every session never holds them all), of a
    database at ``revision``."""
    sql = queries.list_sessions(cwd=cwd is not None, after=False, limit=limit is not None, where=where)
    bound = None if limit is None else min(limit, _SQL_INT_MAX)
    found = map(record_of, conn.execute(_overview(sql, revision), {"cwd": cwd, "limit": bound, **params}))
    yield from with_usage(conn, found) if reaches(revision, USAGE_SINCE) else found


# The ids queries.PAGE_USAGE takes, :sid0, :sid1, ...: as many as the generator wrote.
_PAGE_IDS = [f"sid{n}" for n in range(len(re.findall(r":sid\d+\b", queries.PAGE_USAGE)))]


def with_usage(conn: Connection, records: Iterable[SessionRecord]) -> Iterator[SessionRecord]:
    """``records``, each with its usage (its own usage events, summed in SQL), read for a page of them at a time
    in one statement (:data:`queries.PAGE_USAGE`) and handed on as they come (a listing stays streamed)."""
    it = iter(records)
    while page := list(itertools.islice(it, len(_PAGE_IDS))):
        ids = dict(zip(_PAGE_IDS, itertools.chain((r.session_id for r in page), itertools.repeat(None)), strict=False))
        rows = conn.execute(queries.PAGE_USAGE, ids)
        spent = {str(sid): Tokens(*(int(n) for n in counts)) for sid, _, *counts in rows}
        yield from (replace(r, usage=spent.get(r.session_id, NO_USAGE.tokens)) for r in page)


def session_page(
    conn: Connection,
    *,
    cwd: str | None = None,
    cursor: str | None = None,
    limit: int | None = None,
    top_level: str,
) -> SessionPage:
    """One page of sessions, newest first by creation, after ``cursor`` (see :class:`~sessionstore.SessionCatalog`).

    By creation, not last activity: ``created_at`` never changes, so a walk
    through the pages lists every session that exists for the whole walk
    exactly once, however sessions are written meanwhile. Subagents are not
    listed: they belong to their session (:func:`read_session`); ``top_level``
    is how the database's storage says so.
    """
    check_limit(limit)
    params: dict[str, Any] = {"cwd": cwd, "limit": None if limit is None else min(limit + 1, _SQL_INT_MAX)}
    if cursor is not None:
        when, after = decode_cursor(cursor)
        params.update(before=utc_text(when), before_id=after)
    sql = queries.list_sessions(
        cwd=cwd is not None,
        after=cursor is not None,
        limit=limit is not None,
        where=top_level,
        order="created_at",
    )
    return page_of(list(with_usage(conn, map(record_of, conn.execute(sql, params).fetchall()))), limit)


def load_session(conn: Connection, sid: str, *, revision: str | None = HEAD) -> SessionRecord | None:
    """The stored record of one session (its title only if one was set), or ``None``."""
    sql = _overview(queries.OVERVIEW + " WHERE session_id = :sid", revision)
    rows = conn.execute(sql, {"sid": sid}).fetchall()
    if not rows:
        return None
    record = record_of(rows[0])
    return replace(record, title=None, derived_title=False) if record.derived_title else record


# -- ids ------------------------------------------------------------------------------------------


def resolve(conn: Connection, prefix: str) -> str:
    """The full id of the one stored session whose id starts with ``prefix`` (dashes and case ignored)."""
    cleaned = prefix.strip().lower().replace("-", "")
    if not cleaned or len(cleaned) > 32 or re.fullmatch(r"[0-9a-f]+", cleaned) is None:
        raise NoSuchSessionError(f"not a session id: {prefix!r} (ids are hex digits; any unique prefix works)")
    rows = conn.execute(queries.RESOLVE_PREFIX, {"low": cleaned, "high": cleaned + "g"}).fetchall()
    if not rows:
        raise NoSuchSessionError(f"no session matches {prefix!r}")
    if len(rows) > 1:
        ids = [str(r[0]) for r in rows]
        # As many digits as it takes to tell the candidates apart (git does the same).
        width = max(8, 1 + max(_common(a, b) for a, b in itertools.pairwise(ids)))
        shown = ", ".join(sid[:width] for sid in ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise AmbiguousSessionIdError(f"{prefix!r} is ambiguous: it matches {shown}; give more digits")
    return str(rows[0][0])


def _common(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def resolve_all(conn: Connection, prefixes: Sequence[str]) -> list[str]:
    """Each prefix's full id, in order, each once; the first that matches none or several fails them all."""
    ids: list[str] = []
    for prefix in prefixes:
        sid = resolve(conn, prefix)
        if sid not in ids:
            ids.append(sid)
    return ids


# -- events ------------------------------------------------------------------------------------------


def text_at(payload: str, path: str) -> str | None:
    """The text at a simple JSON path (``$.a.b``, ``$.a[0]``, ``$."$key"``) of a payload; ``None`` if not there.

    A string is returned as it is; a list or an object as its compact JSON (as
    SQLite's ``json_extract`` gives them); anything else as its JSON text.
    """
    try:
        value: Any = json.loads(payload)
    except ValueError:
        return None
    for quoted, plain, index in re.findall(r'\.(?:"([^"]*)"|([^.\[]+))|\[(\d+)\]', path.removeprefix("$")):
        name = quoted or plain
        if name and isinstance(value, dict) and name in value:
            value = value[name]
        elif index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return None
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def events_of(conn: Connection, sid: str, *, sql: str, revision: str | None = HEAD) -> list[StoredEvent]:
    """A session's events as stored, each with its role and text, in order (a fork's shared ones included;
    ``sql``: the database's statement for it, its backend's ``events_of``, for a database at :data:`HEAD`)."""
    if not reaches(revision, ROLES_SINCE):
        return _legacy_events(conn, sid)
    if not reaches(revision, FORKS_SINCE):  # nothing shared before 0012: the session's own rows
        sql = _EVENTS_BEFORE_FORKS
    tokens = {}
    if reaches(revision, USAGE_SINCE):  # a file before revision 0010 counted no tokens
        for position, *counts in conn.execute(queries.EVENT_TOKENS, {"sid": sid}):
            tokens[int(position)] = Tokens(*(int(n or 0) for n in counts))
    events = []
    for position, kind, payload, created, role, text, path in conn.execute(sql, {"sid": sid}):
        shown = text_at(payload, path) if path is not None else text
        event = StoredEvent(int(position), str(kind), str(payload), stamp(created), role, shown, path)
        events.append(replace(event, tokens=tokens[event.position]) if event.position in tokens else event)
    return events


def _legacy_events(conn: Connection, sid: str) -> list[StoredEvent]:
    # A file from before revision 0003 stores no role or text: only sessionstore's own
    # event types existed then, and its codec describes them.
    from .codec import legacy_description

    rows = conn.execute(queries.LEGACY_EVENTS_OF, {"sid": sid})
    events = []
    for position, kind, payload, created in rows:
        role, text, path = legacy_description(str(kind), str(payload))
        events.append(StoredEvent(int(position), str(kind), str(payload), stamp(created), role, text, path))
    return events


def stored_session(conn: Connection, sid: str, revision: str | None, seen: set[str], sql: str) -> StoredSession:
    seen.add(sid)  # a loop of parents made by hand ends here
    (record,) = iter_sessions(conn, where="session_id = :sid", sid=sid, revision=revision)
    linked = reaches(revision, SUBAGENTS_SINCE)
    children = [str(row[0]) for row in conn.execute(queries.SUBAGENTS, {"sid": sid})] if linked else []
    subagents = [stored_session(conn, child, revision, seen, sql) for child in children if child not in seen]
    forked = reaches(revision, FORKS_SINCE)
    branched = [str(row[0]) for row in conn.execute(queries.BRANCHES, {"sid": sid})] if forked else []
    branches = [stored_session(conn, branch, revision, seen, sql) for branch in branched if branch not in seen]
    usage = session_usage(conn, sid, turns=True) if reaches(revision, USAGE_SINCE) else NO_USAGE
    events = events_of(conn, sid, revision=revision, sql=sql)
    return StoredSession(record, events, subagents, usage, branches)


def branch_owners(conn: Connection, hits: list[SearchHit]) -> list[SearchHit]:
    """``hits``, each in an earlier branch naming the live session it belongs to (:attr:`SearchHit.branch_of`)."""
    owners: dict[str, str | None] = {}
    for sid in {hit.session_id for hit in hits}:
        record = next(iter_sessions(conn, where="session_id = :sid", sid=sid), None)
        owners[sid] = None if record is None else record.branch_of
    return [replace(hit, branch_of=owners[hit.session_id]) if owners[hit.session_id] else hit for hit in hits]


# -- retention (revision 0010) ---------------------------------------------------------------------------------------

RETENTION = "retention"
"""The setting that holds the retention policy: the age, in whole seconds, past which a session is removed."""


AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
"""The units an age is written in (``30d``): seconds, minutes, hours, days, weeks."""

ANY_AGE = timedelta(0)
"""The shortest age ``prune`` takes: ``--older-than 0s`` is every session no live process holds."""

SHORTEST_RETENTION = timedelta(seconds=1)
"""The shortest retention policy: one of 0 would remove every session no live process holds at every pass (what
``retention set 0`` may have meant, ``retention off`` does)."""


def age_text(age: timedelta) -> str:
    """An age as a person writes it: ``30d``, ``36h``, ``90s`` (whole seconds, in the largest unit that divides it)."""
    seconds = int(age.total_seconds())
    sign, seconds = "-" * (seconds < 0), abs(seconds)
    for unit, size in sorted(AGE_UNITS.items(), key=lambda item: -item[1]):
        if seconds % size == 0 and seconds >= size:
            return f"{sign}{seconds // size}{unit}"
    return f"{sign}{seconds}s"


def not_an_age(shown: str, shortest: timedelta) -> UsageError:
    """The one message for every age refused (``shown``: as the user wrote it, or as :func:`age_text` writes it)."""
    return UsageError(
        f"not an age: {shown} (a number and a unit, s, m, h, d or w, such as 30d or 1.5h,"
        f" from {age_text(shortest)} to {timedelta.max.days:,}d)"
    )


def checked_age(age: timedelta, shortest: timedelta, shown: str | None = None) -> timedelta:
    """``age`` if it is at least ``shortest`` (:data:`ANY_AGE` for ``prune``, :data:`SHORTEST_RETENTION` for a
    policy), else :func:`not_an_age`: the one rule, for the command line and the library alike."""
    if age < shortest:
        raise not_an_age(shown or age_text(age), shortest)
    return age


def retention_of(conn: Connection) -> timedelta | None:
    """The database's retention policy (None: off, or a database before revision 0010); :class:`SettingError` for
    a value edited by hand into something that is not one."""
    row = conn.execute(queries.SETTING, {"name": RETENTION}).fetchone()
    if row is None:
        return None
    try:
        return checked_age(timedelta(seconds=int(row[0])), SHORTEST_RETENTION)
    except (TypeError, ValueError, OverflowError):
        raise SettingError(
            f"the setting {RETENTION!r} (the retention policy) holds {row[0]!r}, not a number of seconds from 1:"
            " set it again with `sessionstore retention set 30d` (any age), or remove it with"
            " `sessionstore retention off`"
        ) from None


def retention_setting(max_age: timedelta) -> dict[str, Any]:
    """:data:`queries.PUT_SETTING`'s parameters for a policy (:func:`checked_age`: :class:`UsageError` for an age
    below a second)."""
    return {"name": RETENTION, "value": str(int(checked_age(max_age, SHORTEST_RETENTION).total_seconds()))}


def cutoff_of(max_age: timedelta, now: datetime) -> str:
    """The last update before which a session is stale, as statements bind it (an age past the calendar: none)."""
    try:
        return utc_text(now - max_age)
    except OverflowError:
        return utc_text(datetime.min.replace(tzinfo=UTC))


def stale_sessions(conn: Connection, cutoff: str, limit: int = _SQL_INT_MAX) -> list[tuple[int, str, datetime]]:
    """Sessions of their own last updated before ``cutoff``, oldest first: (row id, session id, updated_at). The
    caller leaves out those a live process holds (prune and retention: the same rule)."""
    rows = conn.execute(queries.STALE_SESSIONS, {"cutoff": cutoff, "limit": limit}).fetchall()
    return [(int(row_id), str(sid), stamp(updated)) for row_id, sid, updated in rows]


def forecast(conn: Connection, max_age: timedelta, held: Iterable[str], now: datetime) -> Forecast:
    """What the policy removes next: the stale sessions no live process (``held``) holds, and when the next of the
    others comes due."""
    cutoff = cutoff_of(max_age, now)
    busy = set(held)
    stale = stale_sessions(conn, cutoff)
    due = [updated for _, sid, updated in stale if sid not in busy]
    (newest,) = conn.execute(queries.NEXT_STALE, {"cutoff": cutoff}).fetchone()
    try:
        next_at = None if newest is None else stamp(newest) + max_age
    except OverflowError:
        next_at = None
    return Forecast(max_age, len(due), due[0] if due else None, next_at, held=len(stale) - len(due))
