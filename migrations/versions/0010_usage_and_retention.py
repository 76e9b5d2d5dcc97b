"""token usage per event, a usage view, and the settings table that holds the retention policy

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02

Why: no one could see what a session cost, and a desktop agent's database grew until someone ran ``prune``.

What changes:

* ``events`` gains five nullable integer columns, ``input_tokens``, ``output_tokens``, ``cache_read_tokens``,
  ``cache_write_tokens`` and ``reasoning_tokens``: what the codec says an event spent when it is written
  (``Codec.tokens``: AG2's ``UsageEvent``, sessionstore's ``TokenUsage``), NULL on every other event. So ``SUM()``
  adds them up on either database with no JSON function. Added in place (``ALTER TABLE``), NULL for every event
  already stored: nothing said their tokens when they were written.
* ``ix_events_usage``, a partial index on ``events(session)`` where ``input_tokens IS NOT NULL``: a session's
  usage is read from its usage events alone.
* ``usage``, a view for ``sqlite3`` and Datasette users: one row per session and turn that spent tokens (a turn
  begins at a user message, numbered by a window function; turn 0 is what came before the first), with the sums
  and ``total_tokens`` (input + output).
* ``settings`` (``name`` primary key, ``value`` text): the database's own settings; ``retention`` is the age in
  seconds after which any storage open on the database removes a session that no live process holds.

What it costs: an event row gains five NULLs (one byte each in SQLite's record header, a bit each in PostgreSQL's
null bitmap), and an append evaluates the partial index's condition. Adding the columns rewrites nothing on either
database (a nullable column without a default). The downgrade drops the view, the index, the columns and the
table, and with them the stored token counts and the policy.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sessionstore.migrations.sqlobjects import View

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")

# Numbered over every event of the session (the window sees the user messages), then only the usage events kept.
USAGE = View(
    "usage",
    "SELECT s.session_id AS session_id, u.turn AS turn, count(*) AS usage_events,\n"
    + "".join(f"    sum(u.{name}) AS {name},\n" for name in TOKENS)
    + "    sum(u.input_tokens + u.output_tokens) AS total_tokens,\n"
    "    min(u.created_at) AS first_at, max(u.created_at) AS last_at\n"
    "FROM (SELECT e.session, e.created_at, " + ", ".join(f"e.{name}" for name in TOKENS) + ",\n"
    "    sum(CASE WHEN e.role = 'user' THEN 1 ELSE 0 END) OVER (PARTITION BY e.session ORDER BY e.position) AS turn\n"
    "    FROM events AS e) AS u\n"
    "JOIN sessions AS s ON s.id = u.session\n"
    "WHERE u.input_tokens IS NOT NULL\n"
    "GROUP BY s.session_id, u.turn",
)


def upgrade() -> None:
    for name in TOKENS:
        op.add_column("events", sa.Column(name, sa.Integer(), nullable=True))
    op.create_index(
        "ix_events_usage",
        "events",
        ["session"],
        sqlite_where=sa.text("input_tokens IS NOT NULL"),
        postgresql_where=sa.text("input_tokens IS NOT NULL"),
    )
    op.create_table(
        "settings",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_settings")),
    )
    op.create_object(USAGE)


def downgrade() -> None:
    op.drop_object(USAGE)
    op.drop_table("settings")
    op.drop_index("ix_events_usage", table_name="events")
    for name in reversed(TOKENS):
        op.execute(f"ALTER TABLE events DROP COLUMN {name}")
