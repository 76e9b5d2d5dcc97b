"""The statements on the tables, built from the models and compiled for each database: what writes ``queries.py``.

``python -m sessionstore.schema.statements --write`` rewrites :mod:`sessionstore.schema.queries` after a model
or a statement here changed; ``--check`` (and ``tests/test_statements.py``) fails while that file is not what
this module would write. Only that command and the tests import this module: the storages and the commands run
the compiled text (plain ``sqlite3``; asyncpg on PostgreSQL, its ``:named`` parameters numbered ``$n`` by
``postgres.connect.numbered``), so an append pays nothing for it and neither ``import sessionstore`` nor a storage
at head loads SQLAlchemy.

A statement here is SQLAlchemy Core over the models' tables (:class:`Schema`), compiled for SQLite and for
PostgreSQL with ``:named`` parameters, which ``sqlite3`` takes and ``numbered`` turns into asyncpg's ``$n``. A
parameter is a ``bindparam`` and keeps its name (``:sid``); a value written in the statement (``-1``, ``LIMIT 6``,
a column's default) is rendered as SQL by its column's type, in each database's words (``released`` is ``0`` on
SQLite, ``false`` on PostgreSQL). Where PostgreSQL's text differs from SQLite's, ``queries.py`` has both,
PostgreSQL's named ``..._POSTGRESQL`` and run by ``postgres/`` alone (a test checks); a statement one database
alone runs is compiled for that one. The compilers' differences that are not SQL's are smoothed out: whitespace is
one space, ``RETURNING`` names its columns unqualified (as SQLite requires), and a ``LIMIT`` gets no ``OFFSET 0``.
So the statements the commands run through one function on either database are one text.

The views (``session_overview``, ``transcript``), the full-text index (``events_fts``) and its mark
(``events_fts_progress``) are not models: each revision that makes one writes its SQL (``migrations/``), as
SQLAlchemy's metadata has no views. The statements over them are Core too, over ``table()``/``column()``
declarations of their columns (:data:`OVERVIEW_VIEW`, :data:`TRANSCRIPT`, :data:`FTS`, :data:`PROGRESS`), which
the tests compare with the columns a database at head has (SQLite and PostgreSQL): a statement names a view's
column only as the migrations made it, and a column of a table only as its model names it.

Text, and why:

* ``MERGE_INDEX``: an FTS5 command (the index's own name as a column, ``'merge'`` as its value), not a row.
* ``REVISION``: Alembic's table, which Alembic defines.
* ``ADVISORY_HOLDS_POSTGRESQL``: PostgreSQL's lock catalogue, no table of ours.
* ``TOP_LEVEL_POSTGRESQL``: a condition correlated to the listing's view, which Core writes only inside a statement
  over it (compiled in one and cut out).
* ``list_sessions`` and ``search_in``, at the end of ``queries.py``, written by hand: one of sixteen shapes of the
  listing, assembled per call after :data:`OVERVIEW`, and :data:`SEARCH` over a scratch index named at run time.
* Elsewhere, none on the two tables: PRAGMAs and ``sqlite_master`` (``sqlite/``), the FTS5 index's own checks
  (``sqlite/backend.py``), PostgreSQL's catalogue (``postgres/``).
* On the tables, still text: ``PostgresStorage``'s one-statement appends and holds (``postgres/storage.py``),
  statements written for asyncpg in its ``$n`` parameters around ``xmin``, ``pg_locks`` and ``unnest``,
  which the PostgreSQL tests run. Not generated yet: compiled with asyncpg's ``numeric_dollar`` paramstyle they
  could come from here too, once the rework of that file (issue 21) has settled.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    and_,
    bindparam,
    case,
    cast,
    column,
    delete,
    func,
    insert,
    literal,
    literal_column,
    null,
    or_,
    select,
    table,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import TSQUERY, TSVECTOR
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.dialects.sqlite.base import SQLiteDialect
from sqlalchemy.engine import Dialect
from sqlalchemy.engine.interfaces import BindTyping
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.expression import BindParameter, FromClause, Select

from ..codec import TOKEN_COLUMNS
from .models import Base

__all__ = ["QUERIES", "STATEMENTS", "USAGE_PAGE", "Schema", "Statement", "main", "render"]

QUERIES = Path(__file__).with_name("queries.py")
"""The file this module writes."""

HAND_WRITTEN = "# -- written by hand: what follows is kept as it is by --write " + "-" * 54
"""The line of ``queries.py`` after which the file is not generated."""

# -- the databases ----------------------------------------------------------------------------------------------


def _dialect(cls: type[Dialect]) -> Dialect:
    """``cls`` compiling ``:named`` parameters, with a value written in a statement rendered as SQL."""

    class Quiet(cls):  # type: ignore[valid-type,misc]
        bind_typing = BindTyping.NONE  # no casts after parameters (":meta::JSON"): the text stays one for both

    dialect = Quiet(paramstyle="named")

    class Compiler(dialect.statement_compiler):  # type: ignore[name-defined,misc]
        def visit_bindparam(self, bindparam: BindParameter[Any], **kw: Any) -> str:
            # A Python value in a statement (1, '.', a column's default) becomes an anonymous, unique
            # parameter: it is part of the statement's text. A parameter the caller passes has a name.
            if bindparam.unique:
                kw["literal_binds"] = True
                if bindparam.type._isnull:  # a function's argument: typed by its Python value
                    bindparam = literal(bindparam.value)
            return str(super().visit_bindparam(bindparam, **kw))

        def returning_clause(self, stmt: Any, returning_cols: Any, **kw: Any) -> str:
            # RETURNING's columns unqualified, as SQLite's compiler writes them and PostgreSQL takes them too.
            kw["include_table"] = False
            return str(super().returning_clause(stmt, returning_cols, **kw))

        def limit_clause(self, select: Select[Any], **kw: Any) -> str:
            # SQLite's compiler adds "OFFSET 0" to every LIMIT: left out, as in PostgreSQL's.
            text = str(super().limit_clause(select, **kw))
            return text.removesuffix(" OFFSET 0") if select._offset_clause is None else text

    dialect.statement_compiler = Compiler
    return dialect


DIALECTS = {"sqlite": _dialect(SQLiteDialect), "postgresql": _dialect(PGDialect)}
# Each database's INSERT: ON CONFLICT is a construct of each dialect's own.
INSERTS: dict[str, Callable[[Any], Any]] = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}
BOTH = ("sqlite", "postgresql")


@dataclass(frozen=True)
class Schema:
    """What a statement is built from: the models' two tables (of any metadata: the tests build from a copy with
    a column renamed), and the database's ``INSERT``."""

    sessions: Table
    events: Table
    insert: Callable[[Any], Any]
    settings: Table


@dataclass(frozen=True)
class Statement:
    """One constant of ``queries.py``: its name, the comment above it, how it is built, and which databases run
    it (PostgreSQL alone: the name ends in ``_POSTGRESQL``). ``build`` returns Core, or text (see the module's
    docstring for which and why)."""

    name: str
    why: str
    build: Callable[[Schema], ClauseElement | str]
    databases: tuple[str, ...] = BOTH


@dataclass(frozen=True)
class Alias:
    """A second name for a statement's text, written once."""

    name: str
    why: str
    of: str


@dataclass(frozen=True)
class Section:
    """A heading in ``queries.py``."""

    title: str


TOKENS = TOKEN_COLUMNS  # an event's token columns (revision 0010), as describe_row names its values


# -- what is not a model ----------------------------------------------------------------------------------------

# The views as revisions 0003, 0006 and 0008 define them: every column (the tests compare them with a database's),
# the overview's in the order record_of reads them.
OVERVIEW_VIEW = table(
    "session_overview",
    *map(
        column,
        (
            "session_id",
            "title",
            "title_set",
            "cwd",
            "additional_directories",
            "mcp_servers",
            "meta",
            "created_at",
            "updated_at",
            "released",
            "events",
            "parent_id",
            "forked_from_id",
            "forked_at",
            "branch_of_id",
        ),
    ),
)
TRANSCRIPT = table(
    "transcript",
    *map(column, ("session_id", "position", "type", "role", "text", "created_at", "event_id", "rowid", "cwd")),
)
# One row per session and turn that spent tokens (revision 0010).
USAGE_VIEW = table(
    "usage",
    *map(column, ("session_id", "turn", "usage_events", *TOKENS, "total_tokens", "first_at", "last_at")),
)
# SQLite's FTS5 index over the transcript (revisions 0002, 0008), with its hidden columns rowid (the event's id) and
# rank.
FTS = table("events_fts", column("text"), column("rowid"), column("rank"))
# The event id up to which the index holds the events (revision 0005): one row.
PROGRESS = table("events_fts_progress", column("id"), column("indexed_through"))
# PostgreSQL's search words (revision 0015): each transcript event's words, which the GIN index events_fts is over,
# and the events whose words are missing or stale.
WORDS = table("events_words", column("event"), column("words", TSVECTOR))
UNINDEXED = table("events_unindexed", column("event"))


# -- what the statements share ----------------------------------------------------------------------------------


def _sid(sessions: FromClause) -> ColumnElement[bool]:
    return sessions.c.session_id == bindparam("sid")


def _params(table: Table, *keys: str) -> dict[str, BindParameter[Any]]:
    """Each column's value as a parameter named after the column."""
    return {key: bindparam(key, type_=table.c[key].type) for key in keys}


def _defaults(table: Table) -> dict[str, Any]:
    """The columns' defaults from the models (``'.'``, ``'[]'``, ``false``, ``0``), written in the statement."""
    values = {}
    for col in table.columns:
        if col.default is not None and col.default.is_scalar:
            values[col.key] = literal(col.default.arg, col.type)  # type: ignore[attr-defined]
        elif col.default is not None and col.default.is_callable:
            values[col.key] = literal(col.default.arg(None), col.type)  # type: ignore[attr-defined]
    return values


_EVENT_FIELDS = ("type", "payload", "role", "text", "text_path", *TOKENS)


def _mark() -> ColumnElement[Any]:
    return select(PROGRESS.c.indexed_through).scalar_subquery()


def _overview(source: FromClause) -> Select[Any]:
    return select(*(source.c[c.name] for c in OVERVIEW_VIEW.c))


def _hit(sid: ColumnElement[Any], *columns: ColumnElement[Any]) -> list[ColumnElement[Any]]:
    """A search hit's first columns: the session, its title and its parent as the overview gives them, then
    ``columns`` (the event's position, type and role)."""
    o = OVERVIEW_VIEW.alias("o")
    title = select(o.c.title).where(o.c.session_id == sid).scalar_subquery()
    parent = select(o.c.parent_id).where(o.c.session_id == sid).scalar_subquery()
    return [sid, title, parent, *columns]


def _next_mark(t: Schema) -> Any:
    e = t.events
    batch = select(e.c.id).where(e.c.id > _mark()).order_by(e.c.id).limit(bindparam("batch")).subquery()
    return select(func.max(batch.c.id))


def _new_session(t: Schema) -> Any:
    s = t.sessions
    return (
        t.insert(s)
        .values(
            {
                **_defaults(s),
                "session_id": bindparam("sid"),
                "parent": bindparam("parent"),
                "title": None,
                "created_at": bindparam("now"),
                "updated_at": bindparam("now"),
            }
        )
        .returning(s.c.id)
    )


def _upsert_session(t: Schema) -> Any:
    s = t.sessions
    changed = ("cwd", "additional_directories", "mcp_servers", "meta", "title", "updated_at", "released")
    given = {"session_id": bindparam("sid"), **_params(s, *changed, "created_at")}
    stmt = t.insert(s).values({**_defaults(s), **given})
    return stmt.on_conflict_do_update(
        index_elements=[s.c.session_id], set_={s.c[key]: stmt.excluded[key] for key in changed}
    ).returning(s.c.id)


def _append_event(t: Schema) -> Any:
    e, s = t.events, t.sessions
    # After the session's own last row; a fork with none yet starts at its forked_at (NULL elsewhere: 0).
    start = select(func.coalesce(s.c.forked_at, 0)).where(s.c.id == bindparam("id")).scalar_subquery()
    next_position = func.coalesce(func.max(e.c.position) + 1, start)
    fields = [e.c[key] for key in _EVENT_FIELDS]
    return insert(e).from_select(
        [e.c.session, e.c.position, *fields, e.c.created_at],
        select(bindparam("id"), next_position, *(bindparam(c.key) for c in fields), bindparam("now")).where(
            e.c.session == bindparam("id")
        ),
    )


def _session_state(t: Schema) -> Any:
    e, s = t.events, t.sessions
    # The position the session's next event takes: after its own last row, or a fork's forked_at, or 0. It is also
    # its history's length, which tells an append apart (revision 0014: appends no longer count in the revision).
    after = select(func.max(e.c.position) + 1).where(e.c.session == s.c.id).scalar_subquery()
    length = func.coalesce(after, s.c.forked_at, 0).label("length")
    return select(s.c.id, s.c.revision, s.c.updated_at, s.c.forked_from, length, s.c.held_by).where(_sid(s))


def _insert_event(t: Schema) -> Any:
    e = t.events
    # inline(): no RETURNING of the new row's id, which PostgreSQL's compiler would add.
    return (
        insert(e)
        .values(session=bindparam("id"), **_params(e, "position", *_EVENT_FIELDS), created_at=bindparam("now"))
        .inline()
    )


def _usage(t: Schema, *keys: ColumnElement[Any]) -> Any:
    """Tokens summed over usage events alone (the partial index ix_events_usage): ``keys`` (to group by), how many
    usage events, then each kind."""
    e = t.events
    sums = (func.coalesce(func.sum(e.c[name]), 0) for name in TOKENS)
    return select(*keys, func.count(e.c.input_tokens), *sums).where(e.c.input_tokens.is_not(None))


USAGE_PAGE = 256
"""How many sessions one ``PAGE_USAGE`` reads: a listing's page (ACP's are 50) in one statement, a listing of every
session in one per this many rows (its parameters past a page's end are NULL)."""


def _page_usage(t: Schema) -> Any:
    e, s = t.events, t.sessions
    listed = [bindparam(f"sid{n}", type_=s.c.session_id.type) for n in range(USAGE_PAGE)]
    return (
        _usage(t, s.c.session_id)
        .select_from(e.join(s, e.c.session == s.c.id))
        .where(s.c.session_id.in_(listed))
        .group_by(s.c.session_id)
    )


def _turn_usage(t: Schema) -> Any:
    e = t.events
    turn = func.sum(case((e.c.role == "user", 1), else_=0)).over(order_by=e.c.position)
    numbered = (
        select(*(e.c[name] for name in TOKENS), turn.label("turn"))
        .where(e.c.session == select(t.sessions.c.id).where(_sid(t.sessions)).scalar_subquery())
        .subquery("u")
    )
    return (
        select(numbered.c.turn, func.count(), *(func.sum(numbered.c[name]) for name in TOKENS))
        .where(numbered.c.input_tokens.is_not(None))
        .group_by(numbered.c.turn)
        .order_by(numbered.c.turn)
    )


def _parent_of(t: Schema) -> Any:
    s, p = t.sessions.alias("s"), t.sessions.alias("p")
    return select(p.c.session_id).select_from(s.join(p, p.c.id == s.c.parent)).where(_sid(s))


def _history(t: Schema) -> Any:
    s, e = t.sessions.alias("s"), t.events.alias("e")
    return (
        select(s.c.id, s.c.revision, e.c.type, e.c.payload, s.c.forked_from)
        .select_from(s.outerjoin(e, e.c.session == s.c.id))
        .where(_sid(s))
        .order_by(e.c.position)
    )


def _fork_origin(t: Schema) -> Any:
    """What forking a session at a position needs of it: its row id, what it was forked from and where, and its
    length (its own last position + 1, or its ``forked_at`` while it has no row of its own)."""
    s, e = t.sessions, t.events
    last = select(func.max(e.c.position) + 1).where(e.c.session == s.c.id).scalar_subquery()
    return select(s.c.id, s.c.forked_from, s.c.forked_at, func.coalesce(last, s.c.forked_at, 0)).where(_sid(s))


def _fork_session(t: Schema) -> Any:
    """A new session sharing ``:id``'s history (a fork, or with ``:branch_of`` an earlier branch): the parent's
    client context, its title as the overview shows it (a fork reads on from the same conversation), the chain
    pointer ``(:forked_from, :forked_at)``."""
    s, p = t.sessions, t.sessions.alias("p")
    o = OVERVIEW_VIEW.alias("o")
    title = select(o.c.title).where(o.c.session_id == p.c.session_id).scalar_subquery()
    copied = ("cwd", "additional_directories", "mcp_servers", "meta")
    values = select(
        bindparam("sid"),
        *(p.c[name] for name in copied),
        title,
        bindparam("now", type_=s.c.created_at.type),
        bindparam("now", type_=s.c.updated_at.type),
        # A new session is not released: CAST(0 AS BOOLEAN), one text for both databases (false on PostgreSQL).
        cast(literal_column("0"), Boolean).label("released"),
        literal(0, s.c.revision.type),
        bindparam("forked_from"),
        bindparam("forked_at"),
        bindparam("branch_of"),
    ).where(p.c.id == bindparam("id"))
    names = ("session_id", *copied, "title", "created_at", "updated_at", "released", "revision")
    target = [s.c[name] for name in (*names, "forked_from", "forked_at", "branch_of")]
    return insert(s).from_select(target, values).returning(s.c.id)


def _branches(t: Schema) -> Any:
    b, live = t.sessions.alias("b"), t.sessions.alias("l")
    return (
        select(b.c.session_id)
        .where(b.c.branch_of == select(live.c.id).where(_sid(live)).scalar_subquery())
        .order_by(b.c.id)
    )


def _doomed_heirs(t: Schema) -> tuple[Any, Any]:
    """The sessions deleting ``:sid`` deletes (it, its subagents and earlier branches, theirs...), and its heirs:
    the other sessions forked from one of them, which must first be given the rows they share."""
    s, x = t.sessions, t.sessions.alias("x")
    doomed = select(s.c.id).where(_sid(s)).cte("doomed", recursive=True)
    doomed = doomed.union(select(x.c.id).join(doomed, or_(x.c.parent == doomed.c.id, x.c.branch_of == doomed.c.id)))
    h = t.sessions.alias("h")
    heirs = (
        select(h.c.id, h.c.forked_from, h.c.forked_at)
        .where(h.c.forked_from.in_(select(doomed.c.id)), h.c.id.not_in(select(doomed.c.id)))
        .cte("heirs")
    )
    return doomed, heirs


def _give_shared_rows(t: Schema) -> Any:
    """Before ``:sid`` is deleted: each heir's shared rows (every segment of its chain) copied into it."""
    _, heirs = _doomed_heirs(t)
    y, e = t.sessions.alias("y"), t.events.alias("e")
    first = select(heirs.c.id.label("owner"), heirs.c.forked_from.label("session"), heirs.c.forked_at.label("below"))
    chain = first.cte("shared", recursive=True)
    chain = chain.union_all(
        select(chain.c.owner, y.c.forked_from, y.c.forked_at).where(
            y.c.id == chain.c.session, y.c.forked_from.is_not(None)
        )
    )
    fields = ("position", "created_at", *_EVENT_FIELDS)  # every column of a row but its id: the tokens too
    rows = select(chain.c.owner, *(e.c[name] for name in fields)).select_from(
        chain.join(e, and_(e.c.session == chain.c.session, e.c.position < chain.c.below))
    )
    target = [t.events.c.session, *(t.events.c[name] for name in fields)]
    return insert(t.events).from_select(target, rows)


def _detach_heirs(t: Schema) -> Any:
    _, heirs = _doomed_heirs(t)
    s = t.sessions
    return update(s).values(forked_from=None, forked_at=None).where(s.c.id.in_(select(heirs.c.id)))


def _recent(t: Schema, *, raw: bool = False, positioned: bool = False) -> Any:
    """A session's newest ``:last`` events, oldest of them first: the session's row id found once (a scalar
    subquery, so both databases walk the unique index on (session, position) backwards from its end and stop
    after ``:last`` rows, whatever the history's length), then put back in order. ``raw``: as bytes."""
    s, e = t.sessions, t.events
    row_id = select(s.c.id).where(_sid(s)).scalar_subquery()
    columns = (e.c.type, e.c.payload)
    window = (
        select(e.c.position, *((cast(c, LargeBinary) if raw else c).label(c.name) for c in columns))
        .where(e.c.session == row_id)
        .order_by(e.c.position.desc())
        .limit(bindparam("last"))
        .subquery("w")
    )
    shown = (window.c[e.c.position.name],) if positioned else ()
    return select(*shown, *(window.c[c.name] for c in columns)).order_by(window.c[e.c.position.name])


def _chain(t: Schema, start: Any) -> Any:
    """The segments of the history of the session whose row id is ``start``: ``(session, below)`` rows, the
    session itself (``below`` NULL: all its rows), then the session it was forked from below its ``forked_at``,
    and so on (revision 0012). A session that shares nothing is one segment."""
    s, x = t.sessions, t.sessions.alias("x")
    first = select(
        s.c.id.label("session"),
        cast(null(), Integer).label("below"),
        s.c.forked_from.label("up"),
        s.c.forked_at.label("at"),
    ).where(s.c.id == start)
    chain = first.cte("chain", recursive=True)
    return chain.union_all(select(x.c.id, chain.c.at, x.c.forked_from, x.c.forked_at).where(x.c.id == chain.c.up))


def _in_chain(chain: Any, e: Any) -> Any:
    """The events rows of ``chain``'s segments: each segment's session's rows below its bound."""
    return chain.join(
        e, and_(e.c.session == chain.c.session, or_(chain.c.below.is_(None), e.c.position < chain.c.below))
    )


def _in_chain_postgresql(t: Schema, chain: Any, *columns: str) -> tuple[Any, Any]:
    """:func:`_in_chain` on PostgreSQL: each segment's rows through a LATERAL subquery, one range of the index on
    (session, position) per segment. Joined plainly, PostgreSQL guesses a recursive chain at a hundred segments
    and reads every event once (a hash join) rather than a few ranges. The rows, and their ``position``."""
    e = t.events
    rows = (
        select(e.c.position, *(e.c[name] for name in columns if name != "position"))
        .where(e.c.session == chain.c.session, or_(chain.c.below.is_(None), e.c.position < chain.c.below))
        .offset(0)  # a fence: PostgreSQL pulls a plain subquery up into the join, and reads every event again
        .lateral("e")
    )
    return chain.join(rows, literal_column("true")), rows


def _fork_events(t: Schema, *, raw: bool = False) -> Any:
    """A fork's history by its row id, in order: its segments' rows (``raw``: as bytes)."""
    e = t.events.alias("e")
    chain = _chain(t, bindparam("id"))
    columns = (e.c.type, e.c.payload)
    return (
        select(*((cast(c, LargeBinary) if raw else c) for c in columns))
        .select_from(_in_chain(chain, e))
        .order_by(e.c.position)
    )


# The columns show and export read of each event.
_SHOWN = ("position", "type", "payload", "created_at", "role", "text", "text_path")


def _fork_events_postgresql(t: Schema) -> Any:
    chain = _chain(t, bindparam("id"))
    joined, rows = _in_chain_postgresql(t, chain, "type", "payload")
    return select(rows.c.type, rows.c.payload).select_from(joined).order_by(rows.c.position)


def _events_of_postgresql(t: Schema, *columns: str) -> Any:
    s = t.sessions
    chain = _chain(t, select(s.c.id).where(_sid(s)).scalar_subquery())
    joined, rows = _in_chain_postgresql(t, chain, *columns)
    return select(*(rows.c[name] for name in columns)).select_from(joined).order_by(rows.c.position)


def _fork_recent(t: Schema, *, raw: bool = False) -> Any:
    """A fork's newest ``:last`` events by its row id, oldest of them first (``raw``: as bytes), in time that does
    not grow with its history: the positions from its last one down (at most ``:last`` of them, a recursive
    count), each looked up in the segment that holds it (one probe of the index on (session, position))."""
    s, e = t.sessions, t.events.alias("e")
    chain = _chain(t, bindparam("id"))
    own = select(func.max(e.c.position) + 1).where(e.c.session == bindparam("id")).scalar_subquery()
    start = select(s.c.forked_at).where(s.c.id == bindparam("id")).scalar_subquery()
    length = func.coalesce(own, start, 0)
    first = select((length - 1).label("pos"), (length - bindparam("last")).label("stop"))
    walk = first.cte("walk", recursive=True)
    walk = walk.union_all(select(walk.c.pos - 1, walk.c.stop).where(walk.c.pos > walk.c.stop, walk.c.pos > 0))
    holds = and_(walk.c.pos >= func.coalesce(chain.c.at, 0), or_(chain.c.below.is_(None), walk.c.pos < chain.c.below))
    # Each position's segment, then its row by a correlated probe of (session, position): never a join the
    # planner could turn around into a scan of every event for a position.
    slot = select(walk.c.pos, chain.c.session).select_from(walk.join(chain, holds)).where(walk.c.pos >= 0).subquery()

    def probe(c: Any) -> Any:
        at = and_(e.c.session == slot.c.session, e.c.position == slot.c.pos)
        return select(cast(c, LargeBinary) if raw else c).where(at).scalar_subquery().label(c.name)

    kind, payload = (e.c.type.name, e.c.payload.name)
    window = select(slot.c.pos, probe(e.c.type), probe(e.c.payload)).subquery("w")
    return select(window.c[kind], window.c[payload]).where(window.c[kind].is_not(None)).order_by(window.c.pos)


def _events_of(t: Schema, *columns: str) -> Any:
    """A session's whole history by its id (a fork's shared events included), each row's ``columns``."""
    s, e = t.sessions, t.events.alias("e")
    chain = _chain(t, select(s.c.id).where(_sid(s)).scalar_subquery())
    return select(*(e.c[name] for name in columns)).select_from(_in_chain(chain, e)).order_by(e.c.position)


def _legacy_events_of(t: Schema, *columns: str) -> Any:
    s, e = t.sessions.alias("s"), t.events.alias("e")
    return (
        select(*(e.c[name] for name in columns))
        .select_from(e.join(s, s.c.id == e.c.session))
        .where(_sid(s))
        .order_by(e.c.position)
    )


def _top_level_postgresql(t: Schema) -> str:
    """TOP_LEVEL through the column rather than the view's ``parent_id``. Core writes a condition correlated to
    the listing's view only inside a statement over that view: it is compiled in one, and cut out of it."""
    c = t.sessions.alias("c")
    condition = (
        select(literal_column("1"))
        .where(c.c.session_id == OVERVIEW_VIEW.c.session_id, c.c.parent.is_(None), c.c.branch_of.is_(None))
        .correlate(OVERVIEW_VIEW)
        .exists()
    )
    whole: Select[Any] = select(literal_column("1")).select_from(OVERVIEW_VIEW).where(condition)
    return _one_line(str(whole.compile(dialect=DIALECTS["postgresql"]))).split(" WHERE ", 1)[1]


def _legacy_overview(t: Schema) -> Any:
    s, c = t.sessions, t.events.alias("c")
    events = select(func.count()).where(c.c.session == s.c.id).scalar_subquery()
    source = select(
        s.c.session_id,
        s.c.title,
        s.c.title.is_not(None).label("title_set"),
        s.c.cwd,
        s.c.additional_directories,
        s.c.mcp_servers,
        s.c.meta,
        s.c.created_at,
        s.c.updated_at,
        s.c.released,
        events.label("events"),
        null().label("parent_id"),
        null().label("forked_from_id"),
        null().label("forked_at"),
        null().label("branch_of_id"),
    ).subquery("session_overview")
    return _overview(source)


def _subagents(t: Schema) -> Any:
    c, p = t.sessions.alias("c"), t.sessions.alias("p")
    return select(c.c.session_id).select_from(c.join(p, p.c.id == c.c.parent)).where(_sid(p)).order_by(c.c.id)


def _subagent_count(t: Schema) -> Any:
    s = t.sessions.alias("s")
    tree = select(t.sessions.c.id).where(_sid(t.sessions)).cte("tree", recursive=True)
    tree = tree.union(select(s.c.id).join(tree, s.c.parent == tree.c.id))
    return select(func.count() - 1).select_from(tree)


def _resolve_prefix(t: Schema) -> Any:
    s = t.sessions
    return (
        select(s.c.session_id)
        .where(s.c.session_id >= bindparam("low"), s.c.session_id < bindparam("high"))
        .order_by(s.c.session_id)
        .limit(6)
    )


def _search(t: Schema) -> Any:
    s, e = t.sessions.alias("s"), t.events.alias("e")
    # FTS5: the index's own name stands for its row in MATCH and snippet().
    index: ColumnElement[Any] = literal_column(FTS.name)
    return (
        select(
            *_hit(s.c.session_id, e.c.position, e.c.type, e.c.role),
            func.snippet(index, -1, "[", "]", "…", 12),
            FTS.c.rank,
        )
        .select_from(FTS.join(e, e.c.id == FTS.c.rowid).join(s, s.c.id == e.c.session))
        .where(index.op("MATCH")(bindparam("query")))
        .order_by(FTS.c.rank)
        .limit(bindparam("limit"))
    )


def _search_postgresql(t: Schema) -> Any:
    tr, inner = TRANSCRIPT.alias("t"), TRANSCRIPT.alias("m")
    # The candidates: the events whose words (revision 0015) match, through the GIN index events_fts, and the
    # queued events (words missing or stale), whose words are computed here from their text, as the batch that
    # indexes them will: so search is exact however far the words trail. The query is a tsquery's text as it is
    # (no parser: its lexemes are spelled as the words are). The matches are found first (MATERIALIZED):
    # ordered and limited in one query, the planner could walk the events newest first and look each one's
    # words up until enough matched. Newest first, not by rank: a rank would need every match's words again.
    query = cast(bindparam("query"), TSQUERY)
    indexed = select(WORDS.c.event.label("event_id")).where(WORDS.c.words.op("@@")(query))
    queued = (
        select(inner.c.event_id)
        .join_from(inner, UNINDEXED, UNINDEXED.c.event == inner.c.event_id)
        .where(func.sessionstore_search_words(inner.c.text).op("@@")(query))
    )
    found = indexed.union(queued).cte("found").prefix_with("MATERIALIZED")
    return (
        select(*_hit(tr.c.session_id, tr.c.position, tr.c.type, tr.c.role), tr.c.text)
        .join_from(tr, found, found.c.event_id == tr.c.event_id)
        .order_by(tr.c.event_id.desc())
        .limit(bindparam("limit"))
        .offset(bindparam("offset"))
    )


def _take_unindexed(t: Schema) -> Any:
    # Deleted in the statement that takes them, so the trigger's ON CONFLICT DO UPDATE of an event edited
    # meanwhile waits for this transaction and queues it anew; SKIP LOCKED: two indexers never wait for each
    # other nor take the same event.
    taking = select(UNINDEXED.c.event).order_by(UNINDEXED.c.event).limit(bindparam("batch"))
    taking = taking.with_for_update(skip_locked=True)
    return delete(UNINDEXED).where(UNINDEXED.c.event.in_(taking.scalar_subquery())).returning(UNINDEXED.c.event)


def _write_words(t: Schema) -> Any:
    # Run after the take, in its transaction: its own snapshot sees every change the taken rows stood for.
    text = select(TRANSCRIPT.c.event_id, func.sessionstore_search_words(TRANSCRIPT.c.text).label("words"))
    fresh = text.where(TRANSCRIPT.c.event_id == func.any(bindparam("events"))).cte("fresh")
    words = select(fresh.c.event_id, fresh.c.words).where(fresh.c.words.is_not(None))
    # An event that left the transcript (its role, or its text, edited away) leaves no words behind.
    gone = (
        delete(WORDS)
        .where(
            WORDS.c.event == func.any(bindparam("events")),
            WORDS.c.event.not_in(words.with_only_columns(fresh.c.event_id)),
        )
        .cte("gone")
    )
    upsert = postgresql.insert(WORDS).from_select(["event", "words"], words)
    upsert = upsert.on_conflict_do_update(index_elements=[WORDS.c.event], set_={"words": upsert.excluded.words})
    return upsert.add_cte(gone)


def _orphans(t: Schema) -> Any:
    s, e = t.sessions.alias("s"), t.events.alias("e")
    return (
        select(e.c.id, e.c.session)
        .select_from(e.outerjoin(s, s.c.id == e.c.session))
        .where(s.c.id.is_(None))
        .order_by(e.c.id)
        .limit(10)
    )


def _held(t: Schema, *columns: str) -> Any:
    s = t.sessions
    return select(*(s.c[name] for name in columns)).where(s.c.held_by.is_not(None))


def _let_go(t: Schema) -> Any:
    s = t.sessions
    return update(s).values(held_by=None).where(s.c.id == bindparam("id"), s.c.held_by == bindparam("who"))


def _set(t: Schema, key: str, parameter: str, by: str = "id") -> Any:
    """``UPDATE sessions SET key = :parameter`` for the session by its row id (``:id``) or its id (``:sid``)."""
    s = t.sessions
    where = s.c.id == bindparam("id") if by == "id" else _sid(s)
    return update(s).values({key: bindparam(parameter)}).where(where)


# -- the statements, in queries.py's order -------------------------------------------------------------------------

STATEMENTS: list[Statement | Alias | Section] = [
    Section("writes"),
    Statement(
        "FIND_SESSION",
        "",
        lambda t: select(
            t.sessions.c.id, t.sessions.c.revision, t.sessions.c.updated_at, t.sessions.c.forked_from
        ).where(_sid(t.sessions)),
    ),
    Statement(
        "SESSION_STATE",
        "FIND_SESSION and the session's length: what a write on SQLite checks its read cache against (the revision"
        " counts every change but an append, the length every append); and its holder's mark.",
        _session_state,
        ("sqlite",),
    ),
    Statement(
        "NEW_SESSION",
        "A session written to before it was ever saved (a storage used without the registry, a subagent's stream)"
        " gets a bare row, with the models' defaults; ``:parent`` is the row id of the session its stream was"
        " opened from, or NULL.",
        _new_session,
        ("sqlite",),
    ),
    Statement(
        "NEW_SESSION_POSTGRESQL",
        "The same on PostgreSQL, where another writer may have made the row meanwhile (no write lock on the"
        " database): then nothing is made and nothing returned.",
        lambda t: _new_session(t).on_conflict_do_nothing(index_elements=[t.sessions.c.session_id]),
        ("postgresql",),
    ),
    Statement(
        "SET_PARENT",
        "An imported subagent's row, made a moment before in the same transaction, under its session's row.",
        lambda t: _set(t, "parent", "parent"),
    ),
    Statement("STAMP_SESSION", "", lambda t: _set(t, "updated_at", "now")),
    Statement(
        "APPEND_EVENT",
        "The next position is computed in the statement, inside the write transaction, so two writers (two"
        " processes) can never take the same one.",
        _append_event,
    ),
    Statement("INSERT_EVENT", "", _insert_event),
    Statement(
        "DELETE_EVENTS_FROM",
        "",
        lambda t: delete(t.events).where(
            t.events.c.session == bindparam("id"), t.events.c.position >= bindparam("position")
        ),
    ),
    Statement(
        "DELETE_SESSION",
        "Its events and its subagents (theirs too, with their events) go with it (ON DELETE CASCADE).",
        lambda t: delete(t.sessions).where(_sid(t.sessions)),
    ),
    Statement(
        "FORK_ORIGIN",
        "Forks and earlier branches (revision 0012): a fork shares its parent's events below its ``forked_at``;"
        " rows a fork shares never change in place.",
        _fork_origin,
    ),
    Statement("FORK_SESSION", "", _fork_session),
    Statement(
        "FORKS_ABOVE",
        "Whether a fork reads the session's rows at ``:position`` or later (a rewrite from there must keep them).",
        lambda t: (
            select(t.sessions.c.id)
            .where(t.sessions.c.forked_from == bindparam("id"), t.sessions.c.forked_at > bindparam("position"))
            .limit(1)
        ),
    ),
    Statement(
        "MOVE_EVENTS",
        "A rewrite from ``:position`` moves the rows there and after to the earlier branch ``:branch``, and the"
        " forks that read them follow.",
        lambda t: (
            update(t.events)
            .values(session=bindparam("branch"))
            .where(t.events.c.session == bindparam("id"), t.events.c.position >= bindparam("position"))
        ),
    ),
    Statement(
        "REPOINT_FORKS",
        "",
        lambda t: (
            update(t.sessions)
            .values(forked_from=bindparam("branch"))
            .where(
                t.sessions.c.forked_from == bindparam("id"),
                t.sessions.c.forked_at > bindparam("position"),
                t.sessions.c.id != bindparam("branch"),
            )
        ),
    ),
    Statement("SET_FORKED_AT", "", lambda t: _set(t, "forked_at", "position")),
    Statement(
        "SET_BRANCH_OF",
        "An imported earlier branch, under its live session's row.",
        lambda t: _set(t, "branch_of", "branch_of"),
    ),
    Statement(
        "GIVE_SHARED_ROWS",
        "Before a session is deleted, a fork of it (or of its subagents or earlier branches) gets the rows it"
        " shared copied into its own, and then shares nothing: it stays whole.",
        _give_shared_rows,
    ),
    Statement("DETACH_HEIRS", "", _detach_heirs),
    Statement(
        "BRANCHES",
        "A session's earlier branches, oldest first (show --all, export).",
        _branches,
    ),
    Statement(
        "HOLDER",
        "Holding (revision 0007): who holds a session, written for people; its lock says whether that holder lives.",
        lambda t: select(t.sessions.c.id, t.sessions.c.held_by).where(_sid(t.sessions)),
    ),
    Statement("HOLD_SESSION", "", lambda t: _set(t, "held_by", "who"), ("sqlite",)),
    Statement("LET_GO_SESSION", "", _let_go, ("sqlite",)),
    Alias("CLEAR_HOLDER", "A dead holder's mark cleared: the same statement.", "LET_GO_SESSION"),
    Statement("MARKED_HELD", "", lambda t: _held(t, "id", "held_by"), ("sqlite",)),
    Statement("MARKED_HOLDERS", "", lambda t: _held(t, "id", "session_id", "held_by")),
    Statement("PARENT_OF", "", _parent_of),
    Statement(
        "ADVISORY_HOLDS_POSTGRESQL",
        "The advisory locks held now on PostgreSQL (postgres/connect.PG_LOCK_CLASS; a two-key lock's objsubid is 2).",
        lambda t: (
            "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND classid = :class AND objsubid = 2 AND granted"
        ),
        ("postgresql",),
    ),
    Statement(
        "UPSERT_SESSION",
        "A record written again keeps its creation time; its events are untouched.",
        _upsert_session,
    ),
    Statement(
        "TOUCH_SESSION",
        "",
        lambda t: (
            update(t.sessions)
            .values(updated_at=bindparam("now"), released=func.coalesce(bindparam("released"), t.sessions.c.released))
            .where(_sid(t.sessions))
        ),
    ),
    Statement("SET_TITLE", "", lambda t: _set(t, "title", "title", by="sid")),
    Statement(
        "MERGE_INDEX",
        "One step of merging the full-text index's segments (a negative page count merges whatever is there,"
        " however few): a deleted event's words stay in the index's older segments until they are merged away. A"
        " step that found nothing left to merge changes one row (the command itself). SQLite's FTS5 only.",
        lambda t: "INSERT INTO events_fts (events_fts, rank) VALUES ('merge', -64)",
        ("sqlite",),
    ),
    Statement(
        "NEXT_MARK",
        "Bringing the full-text index up to date (revision 0005), a batch at a time: NEXT_MARK is the id of the"
        " ``:batch``-th event past the mark (or the newest); the events up to it are indexed and the mark moves"
        " there, in one write transaction. A writer runs it every few hundred events and when it closes; what is"
        " not indexed meanwhile, search reads through SEARCH_NEW_EVENTS. The mark never moves back: an id at or"
        " below it handed out again is indexed by the insert trigger.",
        _next_mark,
        ("sqlite",),
    ),
    Statement(
        "INDEX_NEW_EVENTS",
        "",
        lambda t: insert(FTS).from_select(
            [FTS.c.rowid, FTS.c.text],
            select(TRANSCRIPT.c.event_id, TRANSCRIPT.c.text).where(
                TRANSCRIPT.c.event_id > _mark(), TRANSCRIPT.c.event_id <= bindparam("through")
            ),
        ),
        ("sqlite",),
    ),
    Statement(
        "MARK_INDEXED",
        "",
        lambda t: update(PROGRESS).values(indexed_through=func.max(PROGRESS.c.indexed_through, bindparam("through"))),
        ("sqlite",),
    ),
    Statement(
        "RESET_MARK",
        "After a rebuild (which indexes every event): the mark at the newest event, its row made again if it was lost.",
        lambda t: (
            insert(PROGRESS)
            .prefix_with("OR REPLACE")
            .from_select(
                [PROGRESS.c.id, PROGRESS.c.indexed_through],
                select(literal(1), func.coalesce(func.max(t.events.c.id), 0)),
            )
        ),
        ("sqlite",),
    ),
    Statement(
        "UNINDEXED_EVENTS",
        "How many events the full-text index does not hold yet (those past the mark).",
        lambda t: select(func.count()).select_from(t.events).where(t.events.c.id > _mark()),
        ("sqlite",),
    ),
    Section("reads"),
    Statement(
        "HISTORY",
        "A session's events in order, with the session's row id and revision (one row with NULL events for a"
        " session that has none): one round trip, for PostgreSQL.",
        _history,
    ),
    Statement(
        "STORED_EVENTS",
        "A session's events in order, by its row id; and the same for a history holding text that is not UTF-8"
        " (edited by hand): bytes come back as they are and are decoded row by row.",
        lambda t: (
            select(t.events.c.type, t.events.c.payload)
            .where(t.events.c.session == bindparam("id"))
            .order_by(t.events.c.position)
        ),
    ),
    Statement(
        "STORED_EVENTS_BYTES",
        "",
        lambda t: (
            select(cast(t.events.c.type, LargeBinary), cast(t.events.c.payload, LargeBinary))
            .where(t.events.c.session == bindparam("id"))
            .order_by(t.events.c.position)
        ),
        ("sqlite",),
    ),
    Statement(
        "RECENT_EVENTS",
        "A session's newest events, oldest of them first, by its session id: a range of the index on (session,"
        " position) read from its end, whatever the history's length (get_history(..., last=N)); and the same as"
        " bytes, for a window holding text that is not UTF-8.",
        _recent,
    ),
    Statement("RECENT_EVENTS_BYTES", "", lambda t: _recent(t, raw=True), ("sqlite",)),
    Statement(
        "RECENT_EVENTS_POSTGRESQL",
        "The same with each row's position, on PostgreSQL: a window shorter than asked that does not start at 0"
        " is a fork's, read again with FORK_RECENT.",
        lambda t: _recent(t, positioned=True),
        ("postgresql",),
    ),
    Statement(
        "FORK_EVENTS",
        "A fork's history by its row id: its segments' rows in one statement (each a range of the index on"
        " (session, position)); and as bytes. A session that shares nothing reads STORED_EVENTS.",
        _fork_events,
        ("sqlite",),
    ),
    Statement("FORK_EVENTS_BYTES", "", lambda t: _fork_events(t, raw=True), ("sqlite",)),
    Statement(
        "FORK_EVENTS_POSTGRESQL",
        "The same on PostgreSQL, each segment through LATERAL (its planner would read every event otherwise).",
        _fork_events_postgresql,
        ("postgresql",),
    ),
    Statement("FORK_RECENT", "A fork's newest events, oldest of them first; and as bytes.", _fork_recent),
    Statement("FORK_RECENT_BYTES", "", lambda t: _fork_recent(t, raw=True), ("sqlite",)),
    Statement(
        "EVENT_ROWS",
        "What import compares a stored session's events with.",
        lambda t: (
            select(t.events.c.position, t.events.c.type, t.events.c.payload)
            .where(t.events.c.session == bindparam("id"))
            .order_by(t.events.c.position)
        ),
    ),
    Statement(
        "EVENTS_OF",
        "What a person reads of each event: its role and text (or where in the payload the text is); a fork's"
        " shared events included. PostgreSQL's through LATERAL (as FORK_EVENTS_POSTGRESQL), which its backend names.",
        lambda t: _events_of(t, *_SHOWN),
        ("sqlite",),
    ),
    Statement("EVENTS_OF_POSTGRESQL", "", lambda t: _events_of_postgresql(t, *_SHOWN), ("postgresql",)),
    Statement(
        "LEGACY_EVENTS_OF",
        "The same of a file from before revision 0003, which stores no role or text (the codec describes them).",
        lambda t: _legacy_events_of(t, "position", "type", "payload", "created_at"),
    ),
    Statement(
        "OVERVIEW",
        "One row per session, as session_overview shows it (the title rule and the event count live in the view).",
        lambda t: _overview(OVERVIEW_VIEW),
    ),
    Statement(
        "LEGACY_OVERVIEW",
        "The same of a file from before session_overview had every column it lists (revision 0006): stored titles"
        " only, counts included, no subagents (nothing linked them before 0006). It ends where OVERVIEW ends, so"
        " what follows OVERVIEW in a statement follows it as well.",
        _legacy_overview,
    ),
    Statement(
        "TOP_LEVEL",
        "The sessions a client made, not their subagents nor earlier branches: what session/list, `sessionstore list`"
        " and prune walk.",
        lambda t: and_(OVERVIEW_VIEW.c.parent_id.is_(None), OVERVIEW_VIEW.c.branch_of_id.is_(None)),
    ),
    Statement(
        "TOP_LEVEL_POSTGRESQL",
        "The same on PostgreSQL (its session/list, `sessionstore list`, prune), whose pages must walk an index:"
        " PostgreSQL cannot estimate how many rows pass a condition on the view's parent_id (a subquery; it guesses"
        " 1 in 200), so for a page it read and sorted every session; on the column its statistics say most do, and"
        " it walks the index, looking each row up by its key (tests/postgres/test_pg_access_paths.py). The same"
        " rows: a parent, once set, has its row (a foreign key).",
        _top_level_postgresql,
        ("postgresql",),
    ),
    Statement("SUBAGENTS", "A session's subagents, oldest first (through the index on sessions.parent).", _subagents),
    Statement(
        "SUBAGENT_COUNT",
        "How many sessions deleting this one deletes with it: its subagents, theirs, and so on (UNION: a loop made"
        " by hand ends).",
        _subagent_count,
    ),
    Statement(
        "RESOLVE_PREFIX",
        "Ids starting with a prefix: a range scan over the unique index (LIKE could not use it).",
        _resolve_prefix,
    ),
    Statement(
        "SEARCH",
        "Full-text search, best first, over ``events_fts`` (search_in: over the scratch index records.search makes"
        " of the events the index does not hold yet). A hit: the session, its title and its parent (as the"
        " overview gives them), the event, and what shows where the words are; its rank last, so the two can be"
        " merged.",
        _search,
        ("sqlite",),
    ),
    Statement(
        "SEARCH_NEW_EVENTS",
        "The events the full-text index does not hold yet (ids past the mark), with their text.",
        lambda t: select(TRANSCRIPT.c.event_id, TRANSCRIPT.c.text).where(
            TRANSCRIPT.c.event_id > _mark(), TRANSCRIPT.c.text.is_not(None)
        ),
        ("sqlite",),
    ),
    Statement(
        "SEARCH_POSTGRESQL",
        "PostgreSQL: the words (the transcript's text cut as FTS5 cuts words, revisions 0009 and 0015) find"
        " candidates for a tsquery, through the GIN index events_fts and, for the events not indexed yet, computed"
        " from their text; records.search keeps those whose words match as FTS5's tokenizer has it, and cuts the"
        " snippet from the text. Paged: a page may keep fewer hits than it read.",
        _search_postgresql,
        ("postgresql",),
    ),
    Statement(
        "TAKE_UNINDEXED_POSTGRESQL",
        "PostgreSQL: up to :batch queued events (revision 0015), taken off the queue for this transaction to index"
        " (rows another transaction holds are skipped); their ids.",
        _take_unindexed,
        ("postgresql",),
    ),
    Statement(
        "WRITE_WORDS_POSTGRESQL",
        "PostgreSQL: the words of the events taken (:events), computed from their text as it is now; an event out"
        " of the transcript has none.",
        _write_words,
        ("postgresql",),
    ),
    Statement(
        "ANY_UNINDEXED_POSTGRESQL",
        "PostgreSQL: whether any event this role sees is queued for indexing (a storage opening indexes them).",
        lambda t: select(UNINDEXED.c.event).limit(1),
        ("postgresql",),
    ),
    Statement(
        "SESSION_COUNT",
        "How many sessions, and how many released: the column as each database reads a boolean (an integer in"
        " SQLite, where any but 0 is true, as records read it), one text for both.",
        lambda t: select(func.count(), func.count(case((t.sessions.c.released, 1)))),
    ),
    Statement(
        "LIVE_SESSION_COUNT",
        "SESSION_COUNT at revision 0012 on: an earlier branch is part of its session, not one more (stats).",
        lambda t: select(func.count(), func.count(case((t.sessions.c.released, 1)))).where(
            t.sessions.c.branch_of.is_(None)
        ),
    ),
    Statement("SESSION_IDS", "", lambda t: select(t.sessions.c.session_id).order_by(t.sessions.c.id)),
    Statement(
        "EVENT_TYPES",
        "",
        lambda t: (
            select(t.events.c.type, func.count())
            .group_by(t.events.c.type)
            .order_by(func.count().desc(), t.events.c.type)
        ),
    ),
    Statement(
        "EVENT_ID_RANGE",
        "The lowest and highest event ids (check samples events between them).",
        lambda t: select(func.min(t.events.c.id), func.max(t.events.c.id)),
        ("sqlite",),
    ),
    Statement(
        "DATABASE_SIZE_POSTGRESQL",
        "What stats shows for a server's database where a file has its size.",
        lambda t: select(
            func.pg_database_size(func.current_database()),
            func.pg_total_relation_size(str(t.sessions.name)) + func.pg_total_relation_size(str(t.events.name)),
        ),
        ("postgresql",),
    ),
    Statement(
        "ORPHAN_EVENTS_POSTGRESQL",
        "Events whose session row is gone (the foreign key stops it, unless it was dropped or triggers disabled).",
        _orphans,
        ("postgresql",),
    ),
    Statement("REVISION", "", lambda t: "SELECT version_num FROM alembic_version"),
    Section("usage and retention (revision 0010)"),
    Statement(
        "SESSION_USAGE",
        "A session's tokens, summed over its usage events alone (the partial index ix_events_usage): how many, then"
        " each kind. Its subagents' are not added: AG2 reports what a subagent spent in its session too (a subtask"
        " rollup), and it is counted there.",
        lambda t: _usage(t).where(
            t.events.c.session == select(t.sessions.c.id).where(_sid(t.sessions)).scalar_subquery()
        ),
    ),
    Statement(
        "PAGE_USAGE",
        "SESSION_USAGE of every session of a listing's page in one statement, not one per session: their ids as"
        " ``:sid0``, ``:sid1``, ... (USAGE_PAGE of them in statements.py; NULL past the page's end); a row for each"
        " that spent tokens, counted as SESSION_USAGE counts.",
        _page_usage,
    ),
    Statement(
        "TOTAL_USAGE",
        "The database's tokens (stats), each counted once: the sessions of their own alone, since AG2 reports what a"
        " subagent spent in the subagent's session and again in its parent's (a subtask rollup).",
        lambda t: _usage(t).where(t.events.c.session.in_(select(t.sessions.c.id).where(t.sessions.c.parent.is_(None)))),
    ),
    Statement(
        "TURN_USAGE",
        "A session's tokens turn by turn, turns numbered as the usage view numbers them (a turn begins at a user"
        " message; 0 is what came before the first), over this session's events alone (the view numbers every"
        " session's).",
        _turn_usage,
    ),
    Statement(
        "SETTING",
        "A setting of the database (the retention policy: its age in seconds).",
        lambda t: select(t.settings.c.value).where(t.settings.c.name == bindparam("name")),
    ),
    Statement(
        "PUT_SETTING",
        "",
        lambda t: (
            stmt := t.insert(t.settings).values(name=bindparam("name"), value=bindparam("value"))
        ).on_conflict_do_update(index_elements=[t.settings.c.name], set_={"value": stmt.excluded.value}),
    ),
    Statement("DROP_SETTING", "", lambda t: delete(t.settings).where(t.settings.c.name == bindparam("name"))),
    Statement(
        "STALE_SESSIONS",
        "What retention removes (prune judges by the same rule over the listing's records, admin.prune): sessions"
        " of their own (a subagent or an earlier branch goes with its session, never alone) not updated"
        " since ``:cutoff``, oldest first, with their row ids (a storage asks their holds' locks); the caller leaves"
        " out those a live process holds.",
        lambda t: (
            select(t.sessions.c.id, t.sessions.c.session_id, t.sessions.c.updated_at)
            .where(
                t.sessions.c.parent.is_(None),
                t.sessions.c.branch_of.is_(None),
                t.sessions.c.updated_at < bindparam("cutoff"),
            )
            .order_by(t.sessions.c.updated_at, t.sessions.c.id)
            .limit(bindparam("limit"))
        ),
    ),
    Statement(
        "NEXT_STALE",
        "When retention finds something next: the last update of the oldest session of its own not stale yet.",
        lambda t: select(func.min(t.sessions.c.updated_at)).where(
            t.sessions.c.parent.is_(None),
            t.sessions.c.branch_of.is_(None),
            t.sessions.c.updated_at >= bindparam("cutoff"),
        ),
    ),
    Statement(
        "EVENT_TOKENS",
        "The usage events of a session, by position, with their tokens (show, export).",
        lambda t: (
            select(t.events.c.position, *(t.events.c[name] for name in TOKENS))
            .where(
                t.events.c.input_tokens.is_not(None),
                t.events.c.session == select(t.sessions.c.id).where(_sid(t.sessions)).scalar_subquery(),
            )
            .order_by(t.events.c.position)
        ),
    ),
]


# -- compiling ----------------------------------------------------------------------------------------------------

_QUOTED = re.compile(r"('(?:[^']|'')*')")


def _one_line(sql: str) -> str:
    """``sql`` with its whitespace one space (outside quoted strings, which are kept as they are)."""
    parts = _QUOTED.split(sql)
    return "".join(part if i % 2 else re.sub(r"\s+", " ", part) for i, part in enumerate(parts)).strip()


def compiled(statement: Statement, metadata: MetaData, database: str) -> str:
    """``statement``'s text for ``database``, built over ``metadata``'s ``sessions`` and ``events``."""
    schema = Schema(
        metadata.tables["sessions"], metadata.tables["events"], INSERTS[database], metadata.tables["settings"]
    )
    built = statement.build(schema)
    if isinstance(built, str):
        return built
    return _one_line(str(built.compile(dialect=DIALECTS[database])))


def constants(entry: Statement, metadata: MetaData) -> list[tuple[str, str]]:
    """The constants ``entry`` writes: its text for the first database that runs it under its name, and
    PostgreSQL's as ``..._POSTGRESQL`` where it differs."""
    if entry.name.endswith("_POSTGRESQL") != (entry.databases == ("postgresql",)):
        raise ValueError(f"{entry.name}: a name ends in _POSTGRESQL exactly when PostgreSQL alone runs it")
    first, *others = [compiled(entry, metadata, database) for database in entry.databases]
    return [(entry.name, first), *((f"{entry.name}_POSTGRESQL", o) for o in others if o != first)]


def texts(metadata: MetaData = Base.metadata) -> dict[str, str]:
    """Every constant of ``queries.py`` and its text."""
    out: dict[str, str] = {}
    for entry in STATEMENTS:
        if isinstance(entry, Statement):
            out.update(constants(entry, metadata))
        elif isinstance(entry, Alias):
            out[entry.name] = out[entry.of]
    return out


# -- writing queries.py -----------------------------------------------------------------------------------------

_DOCSTRING = '''"""The statements on the tables, each written once: generated from the models, edit the generator.

Written by ``python -m sessionstore.schema.statements --write`` from the models
(:mod:`sessionstore.schema.models`) and the statements built over them in
:mod:`sessionstore.schema.statements` (SQLAlchemy Core, compiled for each
database): change those and run it again; a test fails while this file differs
from what it writes. Only the part after the line that says so is written by hand.

The storages' writers and readers and the commands behind the command line run
these: plain SQL with ``:named`` parameters, which ``sqlite3`` runs as it is and
asyncpg runs on PostgreSQL, numbered ``$n`` (:func:`sessionstore.postgres.connect.numbered`). Where PostgreSQL's text
differs, its own is beside SQLite's as ``..._POSTGRESQL``, which names too what
PostgreSQL alone runs. Which statements stay text, and why, is said in
:mod:`sessionstore.schema.statements`.
"""'''

_WIDTH = 120


def _python_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _pieces(sql: str, width: int) -> Iterator[str]:
    """``sql`` cut after spaces into pieces whose Python literals fit in ``width``."""
    piece = ""
    for word in re.findall(r"\S+\s*|\s+", sql):
        if piece and len(_python_string(piece + word)) > width:
            yield piece
            piece = ""
        piece += word
    yield piece


def _assignment(name: str, value: str) -> str:
    one_line = f"{name} = {_python_string(value)}"
    if len(one_line) <= _WIDTH:
        return one_line
    body = "\n".join(f"    {_python_string(piece)}" for piece in _pieces(value, _WIDTH - 4))
    return f"{name} = (\n{body}\n)"


def _comment(why: str) -> Iterable[str]:
    return (f"# {line}" for line in textwrap.wrap(why, _WIDTH - 2))


def _defined(source: str) -> list[str]:
    """The public names the hand-written part defines."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
            names.append(node.name)
    return names


def render(metadata: MetaData = Base.metadata, current: str | None = None) -> str:
    """``queries.py`` as this module writes it, keeping the hand-written part of ``current`` (the file's text)."""
    current = QUERIES.read_text() if current is None else current
    if HAND_WRITTEN not in current:
        raise SystemExit(f"{QUERIES} has lost its line {HAND_WRITTEN!r}: put it back above the hand-written part")
    hand_written = current.split(HAND_WRITTEN, 1)[1]
    names = sorted([*texts(metadata), *_defined(hand_written)])
    lines = [_DOCSTRING, "", "from __future__ import annotations", "", "__all__ = ["]
    lines += [f'    "{name}",' for name in names]
    lines += ["]"]
    for entry in STATEMENTS:
        if isinstance(entry, Section):
            lines += ["", f"# -- {entry.title} " + "-" * (_WIDTH - 6 - len(entry.title))]
            continue
        lines.append("")
        lines += _comment(entry.why)
        if isinstance(entry, Alias):
            lines.append(f"{entry.name} = {entry.of}")
            continue
        for i, (name, text) in enumerate(constants(entry, metadata)):
            lines += ["# PostgreSQL's own:"] if i else []
            lines.append(_assignment(name, text))
    return "\n".join(lines) + "\n\n\n" + HAND_WRITTEN + hand_written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sessionstore.schema.statements", description="Write (or check) sessionstore/schema/queries.py."
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="rewrite queries.py from the models and the statements")
    action.add_argument("--check", action="store_true", help="exit 1 if queries.py is not what --write would write")
    args = parser.parse_args(argv)
    current = QUERIES.read_text()
    wanted = render(current=current)
    if args.write:
        if wanted != current:
            # Whole or not at all: a file written halfway is no module.
            scratch = QUERIES.with_name(f".{QUERIES.name}.{os.getpid()}")
            scratch.write_text(wanted)
            os.replace(scratch, QUERIES)
        return 0
    if wanted != current:
        print(f"{QUERIES} is out of date: run python -m sessionstore.schema.statements --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
