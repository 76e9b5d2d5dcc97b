"""On PostgreSQL, each database role sees and changes only its own sessions and their events

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05

Everyone who could connect to a team's database read every conversation in it. From here a session has an owner,
``sessions.owner``, the role that made it (``DEFAULT current_user``, so no statement of sessionstore names it),
and PostgreSQL's row-level security shows a role only the sessions it owns and their events, whatever reads them:
the library, the command line, the views and a person's own SQL alike. A role cannot make a session for another,
give its own away, or write an event into another's session (``WITH CHECK``).

* ``events`` has no owner of its own: its policy asks ``sessions`` (the event's session, by its primary key:
  one index probe per row a statement reads or writes). An owner copied onto every event would cost each row its
  bytes, could disagree with its session's (an event an administrator wrote into someone's session), and still
  needs the check through ``sessions`` to stop a role writing into another's session; the probe costs an append
  and a history read the figures in docs/postgresql.md (``bench/pg_rls.py``).
* The views (``session_overview``, ``transcript``, 0010's ``usage``) run as the role reading them
  (``security_invoker``, PostgreSQL 15): a view runs as its owner otherwise, and its owner is not held to the
  policies.
* The administrator is the role that owns the tables (the one that ran the migrations) and every role granted
  it, with superusers and ``BYPASSRLS`` roles: row-level security is enabled, not forced, so the owner sees
  everything. The revision-counting triggers run as the role writing, on its own session's row.
* Sessions already stored belong to the role that runs this upgrade (the default, taken once); the
  administrator hands them out with ``UPDATE sessions SET owner = ...``.
* Advisory locks (holds) are not rows: a role can see that a session id is held, and take the lock of a session
  it cannot read, which stands in its owner's way (a hold) but reads or changes none of its rows.

SQLite is unchanged: a file belongs to its owner. The downgrade drops the column, the policies and the views'
option, and every role sees every session again.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sessionstore.migrations.sqlobjects import Column, Group, Policy, RowSecurity, ViewOptions

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_MINE = "owner = current_user"
_MY_SESSION = "EXISTS (SELECT FROM sessions WHERE sessions.id = events.session AND sessions.owner = current_user)"
PG_OWNERS = Group(
    Column("sessions", "owner", "text NOT NULL DEFAULT CURRENT_USER"),
    Policy("sessions_owner", "sessions", f"USING ({_MINE}) WITH CHECK ({_MINE})"),
    Policy("events_owner", "events", f"USING ({_MY_SESSION}) WITH CHECK ({_MY_SESSION})"),
    RowSecurity("sessions"),
    RowSecurity("events"),
    ViewOptions("session_overview", "security_invoker = true"),
    ViewOptions("transcript", "security_invoker = true"),
    ViewOptions("usage", "security_invoker = true"),
)


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.create_object(PG_OWNERS)


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.drop_object(PG_OWNERS)
