"""PostgreSQL appends leave the search words for later: a queue, and a words table indexed in batches

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-08

Why: 0009's GIN index over ``sessionstore_search_words(<the transcript's text>)`` was computed and inserted in every
append's own statement: a third of an append's time (one event appended at a time, fsync off: 665 us with it,
438 us without; the words' expression ~65 us of it, the GIN insert the rest). SQLite took its index off the
append's path in 0005; this does the same on PostgreSQL.

From here:

* ``events_words`` holds each transcript event's words (``event`` the event's id, ``words`` the tsvector 0009's
  function makes of its text); the GIN index ``events_fts`` is over it. Rows go with their event
  (``ON DELETE CASCADE``). The upgrade fills it for every event already there, and drops 0009's index.
* ``events_unindexed`` holds the ids of the events whose words are missing or stale: a row trigger adds the event
  in the transaction that inserts it (with a role: the transcript's) or that changes what its text is made of
  (``payload``, ``role``, ``text``, ``text_path``: an edit by hand is found by its new words, never its old). A
  queue, not a mark as SQLite's: ids from a sequence do not commit in id order here, so "every id up to N" is no
  promise. One row per event (its key): the trigger's ``ON CONFLICT DO UPDATE`` takes the row's lock, so an edit
  made while a batch holds the row waits for that batch and queues the event again after it, and a batch never
  takes a row an edit not yet committed holds (see ``sessionstore.postgres.search``, which takes and indexes).
* Row-level security (0011): whoever sees an event sees its words and its queue row, and no one else
  (``EXISTS`` on ``events``, whose own policy then applies). The trigger runs as the role writing, so its insert
  passes for that role; the administrator sees everything. Each role gets on both tables the privileges it has on
  ``events`` (so an upgrade never stops a role's appends for want of a grant on the queue).

Search stays exact however far the words trail: its candidates are the GIN index's and those of the queued
events, whose words are computed as it reads them; every candidate's text is checked as before.

The downgrade indexes the transcript again with 0009's index (computing every event's words) and drops the rest.
SQLite is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sessionstore.migrations.sqlobjects import Function, Group, Index, Policy, RowSecurity, Table, TableTrigger

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WORDS = Table(
    "events_words",
    "(event bigint PRIMARY KEY REFERENCES events ON DELETE CASCADE, words tsvector NOT NULL)",
    rows="(event, words) SELECT event_id, sessionstore_search_words(text) FROM transcript WHERE text IS NOT NULL",
)
# The words' index: 0009's name, so the check, the plan and REINDEX name the same index as before.
WORDS_INDEX = Index("events_fts", "events_words USING gin (words)")
UNINDEXED = Table("events_unindexed", "(event bigint PRIMARY KEY REFERENCES events ON DELETE CASCADE)")

# ON CONFLICT DO UPDATE rather than DO NOTHING: it locks the queued row, so a batch taking it (DELETE ... SKIP
# LOCKED) either took it before (and this waits for that batch, then queues the event anew) or skips it.
STALE = Function(
    "sessionstore_words_stale",
    "",
    "RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO events_unindexed (event) VALUES (NEW.id)"
    " ON CONFLICT (event) DO UPDATE SET event = EXCLUDED.event; RETURN NULL; END $$",
)
ON_INSERT = TableTrigger(
    "events_words_insert",
    "events",
    "AFTER INSERT ON events FOR EACH ROW WHEN (NEW.role IS NOT NULL) EXECUTE FUNCTION sessionstore_words_stale()",
)
ON_UPDATE = TableTrigger(
    "events_words_update",
    "events",
    "AFTER UPDATE OF payload, role, text, text_path ON events FOR EACH ROW EXECUTE FUNCTION sessionstore_words_stale()",
)


def _owner(table: str) -> Policy:
    """Whoever sees the event (events' own policy, 0011, applies inside) sees and writes the row, no one else."""
    sees = f"EXISTS (SELECT FROM events WHERE events.id = {table}.event)"
    return Policy(f"{table}_owner", table, f"USING ({sees}) WITH CHECK ({sees})")


OWNERS = Group(
    _owner("events_words"), _owner("events_unindexed"), RowSecurity("events_words"), RowSecurity("events_unindexed")
)

PG_WORDS = Group(WORDS, WORDS_INDEX, UNINDEXED, STALE, ON_INSERT, ON_UPDATE, OWNERS)

# Whoever may read or write the events may do the same with their words and queue (rows of theirs alone: OWNERS).
# The trigger queues an event as the role appending it, so without these grants an upgrade would stop every
# per-person role's appends (0011) until an administrator ran the GRANT lines again.
CARRY_GRANTS = """
DO $$ DECLARE r record; BEGIN
FOR r IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END
                AS who, a.privilege_type AS what
         FROM pg_class AS c, aclexplode(c.relacl) AS a
         WHERE c.oid = 'events'::regclass AND a.grantee <> c.relowner
           AND a.privilege_type IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE')
LOOP
    EXECUTE format('GRANT %s ON events_words, events_unindexed TO %s', r.what, r.who);
END LOOP;
END $$
"""


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.drop_object("0009.PG_SEARCH")
    op.create_object(PG_WORDS)
    op.execute(CARRY_GRANTS)


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.drop_object(PG_WORDS)
    op.create_object("0009.PG_SEARCH")
