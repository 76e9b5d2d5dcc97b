"""forks share their parent's events; a rewrite keeps what it replaced as an earlier branch

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05

Why: a session could not be forked (ACP's ``session/fork``, OpenAI's and LangGraph's branches), and AG2's
compaction, which rewrites a history through ``set_history``, deleted the words it replaced. Copying a prefix to
fork would double a long session's rows (10,000 events: the file's size again); so a fork shares it.

What changes, on ``sessions``, three columns added in place (``ALTER TABLE``, as 0006 and 0007 add theirs), NULL
for every session already there (nothing shared, nothing kept):

* ``forked_from`` and ``forked_at``: a fork reads ``forked_from``'s history below position ``forked_at`` as its
  own first events, and stores its own rows from ``forked_at`` on. A history is then a short chain of segments,
  read in one statement over the (session, position) index. A storage gives a fork the shared rows before their
  owner is deleted (``ON DELETE SET NULL`` only clears the pointer of an earlier branch deleted with it);
* ``branch_of``: the live session an earlier branch belongs to (the rows a rewrite replaced, moved there rather
  than deleted), hidden from every listing and deleted with it (``ON DELETE CASCADE``);
* a partial index on each (the few rows that have one): a session's forks and branches are found when it is
  rewritten or deleted.

``session_overview`` counts a fork's shared events (``forked_at`` plus its own rows: a fork's rows are the
positions from ``forked_at`` on) and shows ``forked_from_id``, ``forked_at`` and ``branch_of_id``. The
``transcript`` stays one row per stored event: it is the full-text index's content, keyed by the event's id,
which a shared event has once. On PostgreSQL the new view runs as its reader (``security_invoker``, as 0011 made
the old one), and so does 0011's, made again by the downgrade; a view made anew has no grants, so the ``GRANT``
lines are run again after the upgrade (docs/postgresql.md). A fork or branch row gets the default owner: the role
that made it.

What it costs: nothing for a session that is never forked nor rewritten (NULL columns, rows in no partial
index); an append still computes its position from its own rows, and a fork's first from ``forked_at``. A
downgrade gives every fork and earlier branch its shared rows (a copy, token counts included: each a session of its
own again, the branches listed beside their sessions), deletes nothing, then drops the columns.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sessionstore.migrations.sqlobjects import EditedView, ViewOptions

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# SQLite adds a foreign key only with its column, written inline; the models' constraints, named alike.
FORKED_FROM = (
    "ALTER TABLE sessions ADD COLUMN forked_from INTEGER CONSTRAINT fk_sessions_forked_from_sessions"
    " REFERENCES sessions (id) ON DELETE SET NULL"
)
BRANCH_OF = (
    "ALTER TABLE sessions ADD COLUMN branch_of INTEGER CONSTRAINT fk_sessions_branch_of_sessions"
    " REFERENCES sessions (id) ON DELETE CASCADE"
)

_COUNT = "(SELECT count(*) FROM events AS c WHERE c.session = s.id) AS events"
_EDITS = ((_COUNT, "COALESCE(s.forked_at, 0) + " + _COUNT),)
_COLUMNS = (
    "(SELECT f.session_id FROM sessions AS f WHERE f.id = s.forked_from) AS forked_from_id,\n"
    "    s.forked_at AS forked_at,\n"
    "    (SELECT b.session_id FROM sessions AS b WHERE b.id = s.branch_of) AS branch_of_id"
)
SESSION_OVERVIEW = EditedView("0006.SESSION_OVERVIEW", _EDITS, _COLUMNS)
PG_SESSION_OVERVIEW = EditedView("0006.PG_SESSION_OVERVIEW", _EDITS, _COLUMNS)
# A view made anew runs as its owner: 0011 had it run as its reader (row-level security), and so must its
# successor, and the view 0011 finds again after a downgrade.
PG_AS_READER = ViewOptions("session_overview", "security_invoker = true")

# A downgrade: every session that shares rows (a fork, an earlier branch) gets them copied into its own, each
# segment of its chain, with their token counts (0010's columns), so that it is whole as a session of its own at
# 0011; nothing is deleted.
COPY_SHARED = """
INSERT INTO events (session, position, type, payload, created_at, role, text, text_path, {tokens})
WITH RECURSIVE chain(owner, session, below) AS (
    SELECT id, forked_from, forked_at FROM sessions WHERE forked_from IS NOT NULL
    UNION ALL
    SELECT chain.owner, s.forked_from, s.forked_at FROM sessions AS s JOIN chain ON s.id = chain.session
    WHERE s.forked_from IS NOT NULL
)
SELECT chain.owner, e.position, e.type, e.payload, e.created_at, e.role, e.text, e.text_path, {e_tokens}
FROM chain JOIN events AS e ON e.session = chain.session AND e.position < chain.below
"""


def upgrade() -> None:
    postgresql = op.get_context().dialect.name == "postgresql"
    op.execute(FORKED_FROM)
    op.add_column("sessions", sa.Column("forked_at", sa.Integer(), nullable=True))
    op.execute(BRANCH_OF)
    for column in ("forked_from", "branch_of"):
        op.create_index(
            op.f(f"ix_sessions_{column}"),
            "sessions",
            [column],
            sqlite_where=sa.text(f"{column} IS NOT NULL"),
            postgresql_where=sa.text(f"{column} IS NOT NULL"),
        )
    if postgresql:
        op.replace_object(PG_SESSION_OVERVIEW, replaces="0006.PG_SESSION_OVERVIEW")
        op.create_object(PG_AS_READER)
    else:
        op.replace_object(SESSION_OVERVIEW, replaces="0006.SESSION_OVERVIEW")


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.replace_object(PG_SESSION_OVERVIEW, replace_with="0006.PG_SESSION_OVERVIEW")
        op.create_object(PG_AS_READER)
    else:
        op.replace_object(SESSION_OVERVIEW, replace_with="0006.SESSION_OVERVIEW")
    # Each fork and earlier branch a session of its own again, its whole history its own rows (an earlier branch
    # is then listed beside its session: 0011 has no way to hide it).
    scripts = op.get_context().script
    assert scripts is not None  # Alembic runs revisions from their script directory
    tokens: Sequence[str] = scripts.get_revision("0010").module.TOKENS  # type: ignore[union-attr]
    op.execute(COPY_SHARED.format(tokens=", ".join(tokens), e_tokens=", ".join(f"e.{name}" for name in tokens)))
    for column in ("forked_from", "branch_of"):
        op.drop_index(op.f(f"ix_sessions_{column}"), table_name="sessions")
    for column in ("branch_of", "forked_at", "forked_from"):
        op.execute(f"ALTER TABLE sessions DROP COLUMN {column}")
