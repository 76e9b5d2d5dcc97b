"""a session is held by one live process at a time, and the file says which

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02

Two agent processes on one file (two editor windows on the default database) could both adopt one session: the
second "repaired" a turn the first was still running, and the transcript got two results for one tool call. A
registry now holds each session it has live; the hold itself is a lock that dies with its process (on SQLite an
open-file-description lock on the database file, ``sessionstore/sqlite/holds.py``; on PostgreSQL an advisory lock on the
holder's connection), and ``sessions.held_by`` says, for people, who holds it: ``pid 4242 on laptop (example.py,
storage 1) since 2026-12-02 10:11:12 UTC``. The lock alone says whether that holder still lives: a storage clears
the marks of holders that died when it opens the file, and the commands say "held" only when the lock is held.

Added in place (``ALTER TABLE``), NULL for every session already in the file: nothing held them across processes.
The partial index finds the few held sessions without reading every row.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("held_by", sa.Text(), nullable=True))
    op.create_index(
        op.f("ix_sessions_held_by"),
        "sessions",
        ["held_by"],
        sqlite_where=sa.text("held_by IS NOT NULL"),
        postgresql_where=sa.text("held_by IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_sessions_held_by"), table_name="sessions")
    op.execute("ALTER TABLE sessions DROP COLUMN held_by")
