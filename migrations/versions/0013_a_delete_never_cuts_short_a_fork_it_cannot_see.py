"""on PostgreSQL, a delete that would cut short a fork its role cannot see is refused

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06

Why: a delete (``drop_history``, ``delete``, ``prune``, a retention pass) first gives each fork of the session the
events it shares (``durable.DELETE_SESSION``), but under row-level security (0011) it sees only its role's forks.
A fork another role made (an administrator's fork of a person's session) was then cut short without a word when
that person deleted the session: 0012's ``ON DELETE SET NULL``, which PostgreSQL applies whatever the policies
say, cleared the fork's reference, and its first ``forked_at`` events were gone.

What changes, on PostgreSQL: the foreign key of ``sessions.forked_from`` has no ``ON DELETE`` action and is
checked at commit (``DEFERRABLE INITIALLY DEFERRED``). A delete that leaves a fork pointing at a session it
deleted is refused at its commit, whole (``ForkedByAnotherRoleError``). At commit, not at the end of the
statement: the same delete removes the session's earlier branches, which point at it too, through their own
key's cascade, and PostgreSQL ran an immediate check before that cascade (tried: every delete of a session with an
earlier branch was refused). Every fork the deleter sees is given its events and let go first, as before; the
administrator sees every fork, so its delete of anyone's session goes through.

SQLite is unchanged (``SET NULL``, as the models say): a file has no roles, so a storage sees every fork, and
SQLite cannot change a foreign key without copying the table. The downgrade puts 0012's key back.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sessionstore.migrations.sqlobjects import ForeignKey

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_REFERENCE = "FOREIGN KEY (forked_from) REFERENCES sessions (id)"
PG_FORK_KEY = ForeignKey(
    "sessions",
    "fk_sessions_forked_from_sessions",
    f"{_REFERENCE} DEFERRABLE INITIALLY DEFERRED",
    f"{_REFERENCE} ON DELETE SET NULL",
)


def upgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.create_object(PG_FORK_KEY)


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.drop_object(PG_FORK_KEY)
