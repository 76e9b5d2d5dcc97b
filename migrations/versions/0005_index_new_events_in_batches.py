"""index new events in batches, off the append's commit

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

Until 0004 a trigger added every new event to ``events_fts`` in the append's
own transaction: more than half the pages each commit wrote (7.9 WAL frames
per one-event commit, 3.3 without it), so every agent turn paid for search.
From here the index is brought up to date in batches: the one row of
``events_fts_progress`` holds ``indexed_through``, the event id up to which
every event with a role is in the index. A writer indexes the newer events
(:data:`sessionstore.schema.queries.INDEX_NEW_EVENTS`) in a transaction of their own,
every few hundred events, after a short idle, and when it closes.

The triggers still keep the indexed part exact: they are 0003's, guarded to
the events at or below the mark. An event deleted or edited (by a storage,
``prune``, or by hand in ``sqlite3``) is taken out of or changed in the index
when it was indexed, and needs nothing when it was not. Event ids are not
AUTOINCREMENT, so an id at or below the mark can be handed out again once the
newest events are deleted: the insert trigger indexes such a row at once.

Search stays exact: ``sessionstore search`` reads the indexed events through
``events_fts`` and the few newer ones through a scratch index of its own, in
one snapshot (:func:`sessionstore.records.search`).

On PostgreSQL nothing changes: its GIN index is kept in step by the database
in each transaction, at a fraction of the cost.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sessionstore.migrations.sqlobjects import Group, IndexTrigger, Table

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_MARK = "(SELECT indexed_through FROM events_fts_progress)"

PROGRESS = Table(
    "events_fts_progress",
    "(id INTEGER PRIMARY KEY CHECK (id = 1), indexed_through INTEGER NOT NULL)",
    rows="SELECT 1, coalesce(max(id), 0) FROM events",
)

# Each of 0003's triggers, and the row it reads (NEW or OLD), whose id the guard compares with the mark.
_NAMES = {
    "events_fts_insert": "NEW",
    "events_fts_delete": "OLD",
    "events_fts_update_old": "OLD",
    "events_fts_update_new": "NEW",
}
# The old text of an updated event leaves the index before the update (0002 and 0003 took it out after, in
# whichever order SQLite ran the two update triggers: a word in both the old and the new text was lost).
TRIGGERS = Group(
    *(
        IndexTrigger("0003.SEARCH", name, f"{row}.id <= {_MARK}", before=name == "events_fts_update_old")
        for name, row in _NAMES.items()
    )
)

# 0003's triggers as they were, for a downgrade.
UNGUARDED = Group(*(IndexTrigger("0003.SEARCH", name) for name in _NAMES))

# The search objects a file has from here on: 0002's table (kept as it is, with what it holds), the mark
# (every event already there is indexed), and the guarded triggers.
INDEXING = Group(PROGRESS, TRIGGERS)

# What a downgrade indexes before the unguarded triggers return (queries.INDEX_NEW_EVENTS, as of this revision).
_INDEX_NEW_EVENTS = (
    f"INSERT INTO events_fts (rowid, text) SELECT event_id, text FROM transcript WHERE event_id > {_MARK}"
)


def upgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        return
    op.drop_object(TRIGGERS)  # 0003's: the same names
    op.create_object(INDEXING)


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        return
    op.execute(_INDEX_NEW_EVENTS)
    op.drop_object(INDEXING)
    op.create_object(UNGUARDED)
