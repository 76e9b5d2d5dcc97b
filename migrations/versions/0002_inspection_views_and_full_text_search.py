"""inspection views and full-text search

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29

* ``session_overview``: one row per session, with a title even when none was set.
* ``transcript``: every event as (role, text), readable in the ``sqlite3`` shell.
* ``events_fts``: an FTS5 index over the same text, kept in step with
  ``events`` by triggers; existing rows are indexed here.

The FTS table is *external content* over ``transcript`` (so ``snippet()`` and
``highlight()`` read the text from there, nothing is stored twice) with
``detail=none``: per 1,000 realistic events it adds about 0.2x the JSON's size
where ``detail=full`` adds 0.5x, keeping a file within 1.5x its JSON. The price
is no phrase or NEAR queries; terms, prefixes and AND/OR/NOT work. ``_`` is a
token character, so ``parse_dates`` is one term, not a phrase. ``columnsize=0``
keeps no per-row size table: ranking re-reads a matching row's text instead,
and each commit writes one page less (5.3 instead of 6.3 for one event).

Payloads may have been hand-edited into invalid JSON: every ``json_extract`` is
guarded by ``json_valid`` (the raw text is used instead), so neither the views
nor the triggers can fail on a row.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sessionstore.migrations.sqlobjects import FullTextIndex, Group, Trigger, View, VirtualTable

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _as_text(payload: str, path: str) -> str:
    """A JSON value as text: strings as they are, anything else as its JSON text, missing as NULL."""
    value = f"json_extract({payload}, '{path}')"
    return (
        f"CASE json_type({payload}, '{path}') WHEN 'text' THEN {value} WHEN 'null' THEN NULL"
        f" WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE CAST({value} AS TEXT) END"
    )


def _event_text(row: str) -> str:
    """The searchable text of an event row (``e``, ``NEW`` or ``OLD``): one expression, used everywhere.

    The triggers must compute exactly what the view gives: the FTS index is told
    what to remove by recomputing it from the old row.
    """
    payload, kind = f"{row}.payload", f"{row}.type"
    arguments = f"COALESCE({_as_text(payload, '$.arguments')}, '{{}}')"
    return (
        f"CASE WHEN NOT json_valid({payload}) THEN CAST({payload} AS TEXT)"
        f" WHEN {kind} = 'tool_call' THEN COALESCE({_as_text(payload, '$.name')}, '') || '(' || {arguments} || ')'"
        f" ELSE {_as_text(payload, '$.content')} END"
    )


TRANSCRIPT = View(
    "transcript",
    f"""SELECT
    s.session_id AS session_id,
    e.position AS position,
    e.type AS type,
    CASE e.type
        WHEN 'user_message' THEN 'user'
        WHEN 'model_message' THEN 'assistant'
        WHEN 'system_message' THEN 'system'
        WHEN 'tool_call' THEN 'tool_call'
        WHEN 'tool_result' THEN 'tool'
    END AS role,
    {_event_text("e")} AS text,
    e.created_at AS created_at,
    e.id AS event_id
FROM events AS e JOIN sessions AS s ON s.id = e.session""",
)

SESSION_OVERVIEW = View(
    "session_overview",
    f"""SELECT
    o.session_id AS session_id,
    COALESCE(o.title, CASE WHEN length(o.prompt) > 80 THEN substr(o.prompt, 1, 79) || '…' ELSE o.prompt END) AS title,
    o.cwd AS cwd,
    o.created_at AS created_at,
    o.updated_at AS updated_at,
    o.released AS released,
    (SELECT count(*) FROM events AS c WHERE c.session = o.id) AS events
FROM (
    SELECT s.*, replace(replace({_event_text("u")}, char(13), ' '), char(10), ' ') AS prompt
    FROM sessions AS s LEFT JOIN events AS u ON u.session = s.id AND u.position = (
        SELECT min(f.position) FROM events AS f WHERE f.session = s.id AND f.type = 'user_message'
    )
) AS o""",
)

EVENTS_FTS = VirtualTable(
    "events_fts",
    "fts5(text, content='transcript', content_rowid='event_id', detail='none', columnsize=0,"
    " tokenize=\"unicode61 remove_diacritics 2 tokenchars '_'\")",
)

SEARCH = FullTextIndex(
    EVENTS_FTS,
    triggers=(
        Trigger(
            "events_fts_insert",
            "AFTER INSERT ON events BEGIN"
            f" INSERT INTO events_fts (rowid, text) VALUES (NEW.id, {_event_text('NEW')}); END",
        ),
        Trigger(
            "events_fts_delete",
            "AFTER DELETE ON events BEGIN"
            f" INSERT INTO events_fts (events_fts, rowid, text) VALUES ('delete', OLD.id, {_event_text('OLD')}); END",
        ),
        Trigger(
            "events_fts_update",
            "AFTER UPDATE ON events BEGIN"
            f" INSERT INTO events_fts (events_fts, rowid, text) VALUES ('delete', OLD.id, {_event_text('OLD')});"
            f" INSERT INTO events_fts (rowid, text) VALUES (NEW.id, {_event_text('NEW')}); END",
        ),
    ),
)

# The views first: the index reads its text through the transcript.
INSPECTION = Group(TRANSCRIPT, SESSION_OVERVIEW, SEARCH)


def upgrade() -> None:
    op.create_object(INSPECTION)  # and indexes the rows already there


def downgrade() -> None:
    op.drop_object(INSPECTION)
