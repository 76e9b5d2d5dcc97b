"""indexes for listing sessions in the order they were made

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

A paged listing (``session/list``) walks sessions newest first by *creation*:
``created_at`` never changes, so a session updated while a client pages
through the list neither jumps to a page already read (and is missed) nor
shows twice. These two indexes serve that walk, for all sessions and for one
``cwd``; the ``updated_at`` ones still serve the command line's listing of
what was active last.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(op.f("ix_sessions_created_at_session_id"), "sessions", ["created_at", "session_id"])
    op.create_index(op.f("ix_sessions_cwd_created_at"), "sessions", ["cwd", "created_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_sessions_cwd_created_at"), table_name="sessions")
    op.drop_index(op.f("ix_sessions_created_at_session_id"), table_name="sessions")
