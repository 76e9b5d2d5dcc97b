"""baseline: sessions, events and the triggers that count each session's changes

Revision ID: 0001
Revises:
Create Date: 2026-11-29

The schema as ``sessionstore`` 0.1.0 first wrote it (files made before the
migrations existed were created from the same models and stamped ``0001``).
Frozen: it names every column, constraint and trigger itself rather than
reading them from the models, which move on.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sessionstore.migrations.sqlobjects import Group, Trigger

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Count every change to a session's events, hand edits in sqlite3 included.
COUNTING = Group(
    Trigger(
        "events_revision_insert",
        "AFTER INSERT ON events BEGIN UPDATE sessions SET revision = revision + 1 WHERE id = NEW.session; END",
    ),
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


def upgrade() -> None:
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
        sa.CheckConstraint(
            "length(session_id) = 32 AND session_id NOT GLOB '*[^0-9a-f]*'", name=op.f("ck_sessions_session_id_hex")
        ),
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
    op.create_object(COUNTING)


def downgrade() -> None:
    op.drop_object(COUNTING)
    op.drop_table("events")
    op.drop_index(op.f("ix_sessions_cwd_updated_at"), table_name="sessions")
    op.drop_index(op.f("ix_sessions_updated_at_session_id"), table_name="sessions")
    op.drop_table("sessions")
