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

On PostgreSQL the same views read JSON through two functions that stand for
SQLite's (``sessionstore_json_valid``, ``sessionstore_json_text``: a value at a
SQLite JSON path as text, NULL for invalid JSON), over the ``json`` type, which
keeps a payload's text as it is; the index is a GIN index over
``to_tsvector('simple', ...)`` of the same text, named ``events_fts`` too, which
PostgreSQL keeps in step itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sessionstore.migrations.sqlobjects import FullTextIndex, Function, Group, Index, Trigger, View, VirtualTable

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


# -- PostgreSQL ------------------------------------------------------------------------------------

# json_valid(x): NULL for NULL, else whether x is JSON (the json type's own parser says).
JSON_VALID = Function(
    "sessionstore_json_valid",
    "payload text",
    "RETURNS boolean LANGUAGE plpgsql IMMUTABLE STRICT AS $$ BEGIN PERFORM payload::json; RETURN true;"
    " EXCEPTION WHEN others THEN RETURN false; END $$",
)
# _as_text over a SQLite JSON path ($.a.b, $.a[0], $."$key"): a string as it is, null or missing as NULL,
# anything else as its JSON text; NULL for a payload that is not JSON.
JSON_TEXT = Function(
    "sessionstore_json_text",
    "payload text, path text",
    "RETURNS text LANGUAGE plpgsql IMMUTABLE STRICT AS $$ DECLARE doc json; keys text[] := '{}'; part text[];"
    " BEGIN doc := payload::json;"
    " FOR part IN SELECT regexp_matches(path, '\\.(?:\"([^\"]*)\"|([^.\\[]+))|\\[(\\d+)\\]', 'g') LOOP"
    " keys := keys || coalesce(part[1], part[2], part[3]); END LOOP;"
    " RETURN CASE json_typeof(doc #> keys) WHEN 'null' THEN NULL WHEN 'string' THEN doc #>> keys"
    " ELSE (doc #> keys)::text END;"
    " EXCEPTION WHEN others THEN RETURN NULL; END $$",
)
PG_FUNCTIONS = Group(JSON_VALID, JSON_TEXT)


def _pg_event_text(row: str) -> str:
    """:func:`_event_text` in PostgreSQL's words (``row`` is ``e.``, or empty for the index's own columns)."""

    def text(path: str) -> str:
        return f"sessionstore_json_text({row}payload, '{path}')"

    return (
        f"CASE WHEN NOT sessionstore_json_valid({row}payload) THEN {row}payload"
        f" WHEN {row}type = 'tool_call' THEN COALESCE({text('$.name')}, '') || '(' ||"
        f" COALESCE({text('$.arguments')}, '{{}}') || ')'"
        f" ELSE {text('$.content')} END"
    )


PG_TRANSCRIPT = View("transcript", TRANSCRIPT.select.replace(_event_text("e"), _pg_event_text("e.")))
PG_SESSION_OVERVIEW = View(
    "session_overview",
    SESSION_OVERVIEW.select.replace(_event_text("u"), _pg_event_text("u."))
    .replace("char(13)", "chr(13)")
    .replace("char(10)", "chr(10)"),
)
PG_SEARCH = Index("events_fts", f"events USING gin (to_tsvector('simple', {_pg_event_text('')}))")
PG_INSPECTION = Group(PG_TRANSCRIPT, PG_SESSION_OVERVIEW, PG_SEARCH)


def upgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.create_object(PG_FUNCTIONS)
        op.create_object(PG_INSPECTION)
        return
    op.create_object(INSPECTION)  # and indexes the rows already there


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.drop_object(PG_INSPECTION)
        op.drop_object(PG_FUNCTIONS)
        return
    op.drop_object(INSPECTION)
