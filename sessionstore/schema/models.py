"""The schema: one SQLAlchemy model per table.

``sessions``
    One row per session. ``id`` is an integer key for the events to point at
    (small rows, small indexes); ``session_id`` is the 32-hex id clients hold.
    ``parent`` is the session a subagent's stream was opened from (NULL for a
    session of its own): deleting a session deletes its subagents.
``events``
    One row per event, ``position`` 0, 1, 2... within its session. ``type`` is
    the event's stable type name and ``payload`` its JSON text, so
    ``json_extract(payload, '$.content')`` works in the ``sqlite3`` shell.
    ``role`` and ``text`` (or ``text_path``) are what the codec said of the
    event when it was written: who said it and what a person reads; the
    ``*_tokens`` columns what it said the event spent (usage events only).
``settings``
    The database's own settings by name: the retention policy.

Timestamps are UTC, stored as ``YYYY-MM-DD HH:MM:SS.ffffff`` text: readable and
sortable in ``sqlite3`` as they are. The column types say how a value is bound
(:class:`UtcDateTime`, :class:`JsonText`), by the storages' own rules: the
storages run the statements compiled from these models
(:mod:`sessionstore.schema.statements`) with plain ``sqlite3``, binding what
those rules make, and ``tests/test_statements.py`` checks that the two agree.

Triggers keep ``sessions.revision`` counting every change to a session's
events, including edits made by hand in ``sqlite3``; a storage uses it to know
whether what it last read is still what is on disk. Triggers, views and virtual
tables are not part of SQLAlchemy's metadata: the revisions that make them
define them (``migrations/sqlobjects.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from ..storage import json_text, stamp, utc_text

__all__ = ["Base", "Event", "JsonText", "Session", "Setting", "UtcDateTime"]

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(TypeDecorator[datetime]):
    """Every timestamp column: naive UTC on disk (``timestamp without time zone``; text on SQLite), an aware
    datetime in Python. Bound by the storages' rule (:func:`~sessionstore.storage.utc_text`: a naive datetime is
    refused), read back as :func:`~sessionstore.storage.stamp` reads it."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else datetime.fromisoformat(utc_text(value))

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else stamp(value)


class JsonText(TypeDecorator[Any]):
    """Every JSON column, bound as the storages write it (:func:`~sessionstore.storage.json_text`: compact UTF-8
    text, no NaN) where SQLAlchemy's ``JSON`` would write ``json.dumps``' spaced ASCII."""

    impl = JSON
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], str | None]:
        return lambda value: None if value is None else json_text(value, "JSON column")

    def literal_processor(self, dialect: Dialect) -> Callable[[Any], str]:
        quote = String().literal_processor(dialect)  # type: ignore[no-untyped-call]
        assert quote is not None  # every dialect quotes a string
        return lambda value: quote(json_text(value, "JSON column"))

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any]:
        return lambda value: json.loads(value) if isinstance(value, str | bytes) else value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UtcDateTime(),
        dict[str, Any]: JsonText(),
        list[Any]: JsonText(),
    }


class Session(Base):
    __tablename__ = "sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[str] = mapped_column(String(32), unique=True)
    cwd: Mapped[str] = mapped_column(Text, default=".")
    additional_directories: Mapped[list[Any]] = mapped_column(default=list)
    mcp_servers: Mapped[list[Any]] = mapped_column(default=list)
    meta: Mapped[dict[str, Any]] = mapped_column(default=dict)
    title: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    # 1 once the registry let the session go with its history retained.
    released: Mapped[bool] = mapped_column(default=False)
    # Bumped by trigger on every insert, update or delete of this session's events.
    revision: Mapped[int] = mapped_column(default=0)
    # The session this one's stream was opened from (an AG2 subagent's), set when the row is made and never
    # changed; its subagents go with it (revision 0006).
    parent: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    # Who holds the session (a registry has it live), for people: "pid 4242 on laptop (example.py, storage 1)
    # since ...". Whether that holder still lives is its lock's to say (sqlite/holds.py; revision 0007).
    held_by: Mapped[str | None] = mapped_column(Text)
    # A fork (revision 0012) reads the events of ``forked_from`` below position ``forked_at`` as its own first
    # ``forked_at`` events, and stores its own from ``forked_at`` on: a shared prefix, never copied. Both NULL for a
    # session that shares nothing. A storage gives a fork its shared rows before their owner goes (SET NULL: an
    # earlier branch's pointer at the session it is deleted with). On PostgreSQL, revision 0013 makes the key
    # NO ACTION checked at commit instead: a delete that would cut short a fork its role cannot see is refused.
    forked_from: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"))
    forked_at: Mapped[int | None]
    # An earlier branch (revision 0012): the events a rewrite (set_history, AG2's compaction) replaced, kept as a
    # hidden session of the live one's, listed nowhere and deleted with it.
    branch_of: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))

    __table_args__ = (
        # AUTOINCREMENT: a deleted session's integer id is never reused, so a
        # cached (id, revision) pair can never match a different conversation.
        # A session id is 32 lowercase hex digits, in each database's words (revision 0001 writes the same).
        CheckConstraint("length(session_id) = 32 AND session_id NOT GLOB '*[^0-9a-f]*'", name="session_id_hex").ddl_if(
            dialect="sqlite"
        ),
        CheckConstraint("length(session_id) = 32 AND session_id !~ '[^0-9a-f]'", name="session_id_hex").ddl_if(
            dialect="postgresql"
        ),
        # The command line's list: last active first, optionally for one cwd.
        Index(None, "updated_at", "session_id"),
        Index(None, "cwd", "updated_at"),
        # session/list: pages newest first by creation, which never moves a session between pages.
        Index(None, "created_at", "session_id"),
        Index(None, "cwd", "created_at"),
        # A session's subagents (show, export), and the cascade that deletes them with it.
        Index(None, "parent"),
        # A session's forks and earlier branches: re-pointed when it is rewritten, given their rows before it is
        # deleted, and the cascade that deletes its branches with it.
        Index(
            None,
            "forked_from",
            sqlite_where=text("forked_from IS NOT NULL"),
            postgresql_where=text("forked_from IS NOT NULL"),
        ),
        Index(
            None,
            "branch_of",
            sqlite_where=text("branch_of IS NOT NULL"),
            postgresql_where=text("branch_of IS NOT NULL"),
        ),
        # The few held sessions, found without reading every row (a storage clears dead holders' marks at open).
        Index(None, "held_by", sqlite_where=text("held_by IS NOT NULL"), postgresql_where=text("held_by IS NOT NULL")),
        {"sqlite_autoincrement": True},
    )


_HAS_USAGE = text("input_tokens IS NOT NULL")  # out of Event's body, where ``text`` is a column


class Event(Base):
    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session: Mapped[int] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    position: Mapped[int]
    type: Mapped[str] = mapped_column(Text)
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime]
    # What the event's codec said of it when it was written (Codec.describe):
    # the views and the full-text index read these, never a codec's JSON.
    # The text is kept here, or, when it is a string in the payload, where
    # (text_path, a JSON path), so it is not stored twice; the transcript view reads whichever is there.
    role: Mapped[str | None] = mapped_column(Text)
    text: Mapped[str | None] = mapped_column(Text)
    text_path: Mapped[str | None] = mapped_column(Text)
    # The tokens the event says were spent (Codec.tokens, revision 0010), NULL on every event that reports none:
    # SUM() adds them up in either database with no JSON function, and a plain event pays five NULLs.
    input_tokens: Mapped[int | None]
    output_tokens: Mapped[int | None]
    cache_read_tokens: Mapped[int | None]
    cache_write_tokens: Mapped[int | None]
    reasoning_tokens: Mapped[int | None]

    __table_args__ = (
        # The unique index doubles as the index get_history reads through.
        UniqueConstraint("session", "position"),
        # A session's usage events, found without reading its other events (an event with usage always has
        # input_tokens, 0 if none were reported); an event without usage adds nothing to it.
        Index(
            "ix_events_usage",
            "session",
            sqlite_where=_HAS_USAGE,
            postgresql_where=_HAS_USAGE,
        ),
    )


class Setting(Base):
    """A setting of the whole database, by name (revision 0010): ``retention``, the age in seconds after which a
    session no live process holds is removed by any storage open on the database."""

    __tablename__ = "settings"

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str] = mapped_column(Text)
