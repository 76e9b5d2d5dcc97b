"""baseline: sessions, events and the triggers that count each session's changes

Revision ID: 0001
Revises:
Create Date: 2026-11-29

The schema as ``sessionstore`` 0.1.0 first wrote it (files made before the
migrations existed were created from the same models and stamped ``0001``).
Frozen: it names every column, constraint and trigger itself rather than
reading them from the models, which move on.

On PostgreSQL the same tables (``SERIAL`` keys: a sequence never reuses an id,
as SQLite's ``AUTOINCREMENT``), the id check as a regular expression, and the
counting done by one function per kind of change, run once per statement over
its transition table: a ``set_history`` of 10,000 rows updates its session
once, by 10,000, where a trigger per row would update it 10,000 times.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sessionstore.migrations.sqlobjects import Function, Group, TableTrigger, Trigger

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Count every change to a session's events, hand edits in sqlite3 included. (From 0014 an append is counted by the
# session's length instead, and the insert trigger is gone: each is its own constant so that 0014 can name it.)
COUNT_INSERTS = Trigger(
    "events_revision_insert",
    "AFTER INSERT ON events BEGIN UPDATE sessions SET revision = revision + 1 WHERE id = NEW.session; END",
)
COUNT_CHANGES = Group(
    Trigger(
        "events_revision_update",
        "AFTER UPDATE ON events BEGIN "
        "UPDATE sessions SET revision = revision + 1 WHERE id IN (OLD.session, NEW.session); END",
    ),
    Trigger(
        "events_revision_delete",
        "AFTER DELETE ON events BEGIN UPDATE sessions SET revision = revision + 1 WHERE id = OLD.session; END",
    ),
)
COUNTING = Group(COUNT_INSERTS, COUNT_CHANGES)


def _counting(change: str, tables: str, rows: str) -> Group:
    """PostgreSQL: after an INSERT, UPDATE or DELETE on events, each session touched counts the rows it had
    changed (an updated row once per session it was in before or after, as SQLite's row triggers count it)."""
    function = f"events_revision_{change.lower()}"
    return Group(
        Function(
            function,
            "",
            "RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " UPDATE sessions AS s SET revision = s.revision + c.n"
            f" FROM (SELECT r.session, count(*) AS n FROM ({rows}) AS r GROUP BY r.session) AS c"
            " WHERE s.id = c.session; RETURN NULL; END $$",
        ),
        TableTrigger(
            function,
            "events",
            f"AFTER {change} ON events REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
        ),
    )


PG_COUNT_INSERTS = _counting("INSERT", "NEW TABLE AS new_rows", "SELECT id, session FROM new_rows")
PG_COUNT_CHANGES = Group(
    _counting(
        "UPDATE",
        "OLD TABLE AS old_rows NEW TABLE AS new_rows",
        "SELECT id, session FROM old_rows UNION SELECT id, session FROM new_rows",
    ),
    _counting("DELETE", "OLD TABLE AS old_rows", "SELECT id, session FROM old_rows"),
)
PG_COUNTING = Group(PG_COUNT_INSERTS, PG_COUNT_CHANGES)

# A session id is 32 lowercase hex digits.
SESSION_ID_HEX = {
    "sqlite": "length(session_id) = 32 AND session_id NOT GLOB '*[^0-9a-f]*'",
    "postgresql": "length(session_id) = 32 AND session_id !~ '[^0-9a-f]'",
}


def upgrade() -> None:
    dialect = op.get_context().dialect.name
    op.create_table(
        "sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.String(length=32), nullable=False),
        sa.Column("cwd", sa.Text(), nullable=False),
        sa.Column("additional_directories", sa.JSON(), nullable=False),
        sa.Column("mcp_servers", sa.JSON(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("released", sa.Boolean(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.CheckConstraint(SESSION_ID_HEX[dialect], name=op.f("ck_sessions_session_id_hex")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
        sa.UniqueConstraint("session_id", name=op.f("uq_sessions_session_id")),
        # A deleted session's integer id is never reused.
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_sessions_updated_at_session_id"), "sessions", ["updated_at", "session_id"])
    op.create_index(op.f("ix_sessions_cwd_updated_at"), "sessions", ["cwd", "updated_at"])
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint("session", "position", name=op.f("uq_events_session_position")),
        sa.ForeignKeyConstraint(
            ["session"], ["sessions.id"], name=op.f("fk_events_session_sessions"), ondelete="CASCADE"
        ),
    )
    op.create_object(PG_COUNTING if dialect == "postgresql" else COUNTING)


def downgrade() -> None:
    op.drop_object(PG_COUNTING if op.get_context().dialect.name == "postgresql" else COUNTING)
    op.drop_table("events")
    op.drop_index(op.f("ix_sessions_cwd_updated_at"), table_name="sessions")
    op.drop_index(op.f("ix_sessions_updated_at_session_id"), table_name="sessions")
    op.drop_table("sessions")
