"""Datasette finds the search index on its own; phrase queries

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03

``datasette agent.db`` showed no search box on ``transcript`` or ``events``, and ``?_search=`` silently returned
every row. Datasette looks for an FTS table whose declaration says ``content="T"`` (or ``content=[T]``) for the
table or view ``T`` it shows, and then filters that page with ``rowid IN (SELECT rowid FROM fts WHERE fts
MATCH ...)``. 0002's table said ``content='transcript'`` (single quotes: not found), over a view whose ``rowid``
is NULL. From here, on SQLite:

* ``transcript`` has a ``rowid`` column (the event's id, as ``event_id``), so Datasette's filter finds its rows,
  and ``cwd`` (the session's), so its search hits can be narrowed by project with a facet;
* ``events_fts`` is declared ``content="transcript"``: the transcript's own page searches it. Its declaration
  also says, in a comment that FTS5 ignores, that it is the index of ``content="events"``: the events table's
  rowid is the same event id, so the events page searches it too, and there each hit's ``session`` links to its
  session's row (a view has no foreign keys to link by);
* ``detail=full``: the index keeps where each word is, so phrases (``"build red"``), ``NEAR`` and a column
  filter (Datasette's ``?_search_text=``) work, where ``detail=none`` refused them. What it costs, on the
  bench's events: ``python3 bench/fts_detail.py`` (``docs/benchmarks.md``).

The table is made anew and rebuilt from the transcript in the upgrade's own transaction, and the mark of 0005
moves to the newest event (the rebuild indexed them all). The triggers are 0005's, unchanged: they write to the
table by name. A downgrade puts 0002's table and 0003's view back the same way.

On PostgreSQL the view gains the same two columns (one definition of the transcript for both); its search index
is PostgreSQL's own and does not change.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sessionstore.migrations.sqlobjects import ExtendedView, Group, VirtualTable

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The row id Datasette filters a page by, and the session's folder (a facet).
_COLUMNS = "e.id AS rowid, s.cwd AS cwd"
TRANSCRIPT = ExtendedView("0003.TRANSCRIPT", _COLUMNS)
PG_TRANSCRIPT = ExtendedView("0003.PG_TRANSCRIPT", _COLUMNS)

# Double quotes: what Datasette's detection looks for (``content="transcript"``). The content's rowid is the
# view's rowid column (FTS5's default). The comment is read by Datasette's detection alone.
EVENTS_FTS = VirtualTable(
    "events_fts",
    'fts5(text, content="transcript", detail=full, columnsize=0,'
    " tokenize=\"unicode61 remove_diacritics 2 tokenchars '_'\""
    ' /* also the index of content="events": an event\'s rowid there is the same id */)',
)

# The index and 0005's triggers, which write to it by name; rebuilt after (what FullTextIndex does for 0003's).
SEARCH = Group(EVENTS_FTS, "0005.TRIGGERS")
_OLD_SEARCH = Group("0002.EVENTS_FTS", "0005.TRIGGERS")

REBUILD = "INSERT INTO events_fts (events_fts) VALUES ('rebuild')"
# Every event is indexed after a rebuild: the mark moves to the newest (0005's mark never moves back).
MARK_ALL = "UPDATE events_fts_progress SET indexed_through = (SELECT coalesce(max(id), 0) FROM events)"


def upgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.replace_object(PG_TRANSCRIPT, replaces="0003.PG_TRANSCRIPT")
        return
    op.drop_object(_OLD_SEARCH)
    op.replace_object(TRANSCRIPT, replaces="0003.TRANSCRIPT")
    op.create_object(SEARCH)
    op.execute(REBUILD)
    op.execute(MARK_ALL)


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.replace_object(PG_TRANSCRIPT, replace_with="0003.PG_TRANSCRIPT")
        return
    op.drop_object(SEARCH)
    op.replace_object(TRANSCRIPT, replace_with="0003.TRANSCRIPT")
    op.create_object(_OLD_SEARCH)
    op.execute(REBUILD)
    op.execute(MARK_ALL)
