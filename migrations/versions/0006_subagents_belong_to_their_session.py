"""subagents belong to the session they were opened from

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

AG2's subagents (``run_task``, ``subagent_tool``, ``background_agent_tool``) write their events to the storage
of the session that started them, under a stream id of their own. Until 0005 each became a session of its
own, listed beside the conversation it was part of, with nothing to tell where it came from. From here
``sessions.parent`` names the session a stream was opened from (NULL for a session a client made):

* set when the row is made (the storage's first write of the stream, or an import), never changed after;
* ``ON DELETE CASCADE``: deleting a session (``drop_history``, ``sessionstore delete``, ``prune``) deletes
  its subagents, theirs, and all their events, in the same statement;
* indexed, for the subagents of one session (``show``, ``export``, and the cascade itself).

``session_overview`` shows it as the parent's id (``parent_id``, the 32-hex id a person reads elsewhere), so
``SELECT * FROM session_overview WHERE parent_id IS NULL`` is what ``session/list`` lists. The transcript
stays one session's events: a subagent's are its own session's, and the overview names its parent.

The column is added in place (``ALTER TABLE``, as 0003 adds its columns: a rebuild of ``sessions`` would have
to take down every view and trigger that reads it). Rows already in a file are sessions of their own, as they
were: nothing recorded which stream started which. The same SQL on PostgreSQL, its view in its own words.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sessionstore.migrations.sqlobjects import ExtendedView

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# SQLite adds a foreign key only with its column, written inline; the models' table constraint, named alike.
PARENT = (
    "ALTER TABLE sessions ADD COLUMN parent INTEGER"
    " CONSTRAINT fk_sessions_parent_sessions REFERENCES sessions (id) ON DELETE CASCADE"
)

_PARENT_ID = "(SELECT p.session_id FROM sessions AS p WHERE p.id = s.parent) AS parent_id"
SESSION_OVERVIEW = ExtendedView("0003.SESSION_OVERVIEW", _PARENT_ID)
PG_SESSION_OVERVIEW = ExtendedView("0003.PG_SESSION_OVERVIEW", _PARENT_ID)


def upgrade() -> None:
    postgresql = op.get_context().dialect.name == "postgresql"
    op.execute(PARENT)
    op.create_index(op.f("ix_sessions_parent"), "sessions", ["parent"])
    if postgresql:
        op.replace_object(PG_SESSION_OVERVIEW, replaces="0003.PG_SESSION_OVERVIEW")
    else:
        op.replace_object(SESSION_OVERVIEW, replaces="0003.SESSION_OVERVIEW")


def downgrade() -> None:
    # What was a subagent is a session of its own again, as it was before this revision.
    if op.get_context().dialect.name == "postgresql":
        op.replace_object(PG_SESSION_OVERVIEW, replace_with="0003.PG_SESSION_OVERVIEW")
    else:
        op.replace_object(SESSION_OVERVIEW, replace_with="0003.SESSION_OVERVIEW")
    op.drop_index(op.f("ix_sessions_parent"), table_name="sessions")
    op.execute("ALTER TABLE sessions DROP COLUMN parent")
