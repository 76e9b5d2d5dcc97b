"""an append no longer counts in sessions.revision: the session's length tells appends apart

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07

Why: every append updated its session's row (0001's insert trigger), so every commit of one event wrote the
session's page besides the event's, and on PostgreSQL a new version of the row. What the revision is for (this
process's read cache, on SQLite; a one-statement append's check that its snapshot is current, on PostgreSQL)
needs no count of appends: an append only ever adds a row after the session's last, so the session's length
(the position its next event takes) tells one apart, and every other change (a rewrite, a delete, an edit by
hand) still counts, through the update and delete triggers. The cache is checked against the revision and the
length read in one snapshot; PostgreSQL's append finds a position another writer took meanwhile through the
unique key on (session, position), and then takes the long way.

What changes: the insert trigger (on PostgreSQL, the insert trigger and its function) is dropped. The downgrade
makes it again; from then on appends count again (the revision is only ever compared for equality, so the
counts it missed meanwhile change nothing).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sessionstore.migrations import sqlobjects  # noqa: F401  (adds op.create_object and op.drop_object)

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _inserts() -> str:
    return "0001.PG_COUNT_INSERTS" if op.get_context().dialect.name == "postgresql" else "0001.COUNT_INSERTS"


def upgrade() -> None:
    op.drop_object(_inserts())


def downgrade() -> None:
    op.create_object(_inserts())
