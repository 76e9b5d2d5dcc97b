"""each event's role and text, as its codec described it

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

Until 0002 the views and the full-text index worked the role and text of an
event out of its payload with ``json_extract``, so they knew only
sessionstore's own event types: an AG2 agent's events showed no text and could
not be found. From here the storage asks the event's codec (``describe``) when
it writes a row and stores the answer in two columns:

* ``events.role``: ``user``, ``assistant``, ``system``, ``tool_call``, ``tool``,
  or NULL for an event that is not part of the conversation (usage figures, a
  second copy of a tool call);
* ``events.text``: what a person reads, and what search finds; or, when that
  text is a string inside the payload, ``events.text_path`` says where
  (``$.content``) and the text is not stored twice.

``transcript`` is now the rows that have a role; ``session_overview`` titles a
session by its first ``user`` row, says whether the title was set
(``title_set``) and carries every column of ``sessions`` a listing needs;
``events_fts`` (0002's table, external content over ``transcript``) gets
triggers that read those columns instead of parsing JSON on every commit.
Rows already in the file are filled
by 0002's expressions, which describe exactly the events that existed then.

On PostgreSQL, the same in its words: JSON read through 0002's functions over
the ``json`` type, and the index rebuilt over the rows with a role.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sessionstore.migrations.sqlobjects import FullTextIndex, Group, Index, Trigger, View

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# What 0002 gave a role: sessionstore's own types, with a payload that is a JSON object.
ROLE = (
    "CASE WHEN NOT json_valid(payload) OR json_type(payload) <> 'object' THEN NULL ELSE CASE type"
    " WHEN 'user_message' THEN 'user' WHEN 'model_message' THEN 'assistant' WHEN 'system_message' THEN 'system'"
    " WHEN 'tool_call' THEN 'tool_call' WHEN 'tool_result' THEN 'tool' END END"
)
# Those rows described as sessionstore's codec describes them (JsonCodec.describe):
# a string, list or dict content is found at $.content; other content is its JSON; a
# tool call is name(key=value, ...), each value as JSON.
_ARGUMENT = (
    "a.key || '=' || CASE a.type WHEN 'text' THEN json_quote(a.value) WHEN 'true' THEN 'true'"
    " WHEN 'false' THEN 'false' WHEN 'null' THEN 'null' ELSE a.value END"
)
TEXT_PATH = (
    "CASE WHEN role IS NOT NULL AND type <> 'tool_call'"
    " AND json_type(payload, '$.content') IN ('text', 'object', 'array') THEN '$.content' END"
)
TEXT = (
    "CASE WHEN role IS NULL THEN NULL"
    " WHEN type = 'tool_call' THEN json_extract(payload, '$.name') || '(' ||"
    f" COALESCE((SELECT group_concat({_ARGUMENT}, ', ') FROM json_each(payload, '$.arguments') AS a), '') || ')'"
    " WHEN text_path IS NOT NULL THEN NULL"
    " ELSE CASE json_type(payload, '$.content') WHEN 'null' THEN NULL WHEN 'true' THEN 'true'"
    " WHEN 'false' THEN 'false' ELSE CAST(json_extract(payload, '$.content') AS TEXT) END END"
)


def _text_of(row: str) -> str:
    """An event row's text (``e``, ``NEW`` or ``OLD``): the stored text, or the payload's string at its path.

    Guarded by json_valid: a payload edited by hand into bad JSON gives no text
    rather than an error in every query that reads the view.
    """
    return (
        f"CASE WHEN {row}.text_path IS NULL THEN {row}.text"
        f" WHEN json_valid({row}.payload) THEN json_extract({row}.payload, {row}.text_path) END"
    )


TRANSCRIPT = View(
    "transcript",
    f"""SELECT
    s.session_id AS session_id,
    e.position AS position,
    e.type AS type,
    e.role AS role,
    {_text_of("e")} AS text,
    e.created_at AS created_at,
    e.id AS event_id
FROM events AS e JOIN sessions AS s ON s.id = e.session
WHERE e.role IS NOT NULL""",
)

# The title rule, here and in storage.derive_title: the title set, else the
# first user message with line breaks and tabs as spaces, trimmed, cut to 80
# characters (79 and an ellipsis). A plain SELECT over sessions, with scalar
# subqueries: SQLite flattens it into a query on the view, so a lookup by id or
# a page in updated_at order uses the sessions table's indexes.
_PROMPT = (
    f"(SELECT NULLIF(trim(replace(replace(replace({_text_of('u')}, char(13), ' '), char(10), ' '), char(9), ' ')), '')"
    " FROM events AS u WHERE u.session = s.id AND u.role = 'user' ORDER BY u.position LIMIT 1)"
)

SESSION_OVERVIEW = View(
    "session_overview",
    f"""SELECT
    s.session_id AS session_id,
    COALESCE(s.title, (
        SELECT CASE WHEN length(p.prompt) > 80 THEN substr(p.prompt, 1, 79) || '…' ELSE p.prompt END
        FROM (SELECT {_PROMPT} AS prompt) AS p
    )) AS title,
    s.title IS NOT NULL AS title_set,
    s.cwd AS cwd,
    s.created_at AS created_at,
    s.updated_at AS updated_at,
    s.released AS released,
    (SELECT count(*) FROM events AS c WHERE c.session = s.id) AS events,
    s.additional_directories AS additional_directories,
    s.mcp_servers AS mcp_servers,
    s.meta AS meta
FROM sessions AS s""",
)

# 0002's table, external content over the transcript: snippet() reads the text
# from there, so no text is stored twice. Only rows with a role are in the
# transcript, so only they are indexed; the delete triggers recompute the old
# text from the old row, which is what the index needs to forget it.
SEARCH = FullTextIndex(
    "0002.EVENTS_FTS",
    triggers=(
        Trigger(
            "events_fts_insert",
            "AFTER INSERT ON events WHEN NEW.role IS NOT NULL BEGIN"
            f" INSERT INTO events_fts (rowid, text) VALUES (NEW.id, {_text_of('NEW')}); END",
        ),
        Trigger(
            "events_fts_delete",
            "AFTER DELETE ON events WHEN OLD.role IS NOT NULL BEGIN"
            f" INSERT INTO events_fts (events_fts, rowid, text) VALUES ('delete', OLD.id, {_text_of('OLD')}); END",
        ),
        Trigger(
            "events_fts_update_old",
            "AFTER UPDATE ON events WHEN OLD.role IS NOT NULL BEGIN"
            f" INSERT INTO events_fts (events_fts, rowid, text) VALUES ('delete', OLD.id, {_text_of('OLD')}); END",
        ),
        Trigger(
            "events_fts_update_new",
            "AFTER UPDATE ON events WHEN NEW.role IS NOT NULL BEGIN"
            f" INSERT INTO events_fts (rowid, text) VALUES (NEW.id, {_text_of('NEW')}); END",
        ),
    ),
)

INSPECTION = Group(TRANSCRIPT, SESSION_OVERVIEW, SEARCH)


# -- PostgreSQL ------------------------------------------------------------------------------------

# ROLE, TEXT_PATH and TEXT in PostgreSQL's words. CASE decides the order: nothing casts a payload to json
# before it is known to be JSON (an AND could be evaluated in either order).
PG_ROLE = (
    "CASE WHEN NOT sessionstore_json_valid(payload) THEN NULL WHEN json_typeof(payload::json) <> 'object' THEN NULL"
    " ELSE CASE type WHEN 'user_message' THEN 'user' WHEN 'model_message' THEN 'assistant'"
    " WHEN 'system_message' THEN 'system' WHEN 'tool_call' THEN 'tool_call' WHEN 'tool_result' THEN 'tool' END END"
)
PG_TEXT_PATH = (
    "CASE WHEN role IS NULL OR type = 'tool_call' THEN NULL"
    " WHEN json_typeof(payload::json -> 'content') IN ('string', 'object', 'array') THEN '$.content' END"
)
PG_TEXT = (
    "CASE WHEN role IS NULL THEN NULL"
    " WHEN type = 'tool_call' THEN (payload::json ->> 'name') || '(' || COALESCE(CASE"
    " WHEN json_typeof(payload::json -> 'arguments') = 'object' THEN (SELECT string_agg(a.key || '=' ||"
    " a.value::text, ', ' ORDER BY a.n)"
    " FROM json_each(payload::json -> 'arguments') WITH ORDINALITY AS a(key, value, n))"
    " END, '') || ')'"
    " WHEN text_path IS NOT NULL THEN NULL"
    " ELSE sessionstore_json_text(payload, '$.content') END"
)


def _pg_text_of(row: str) -> str:
    """:func:`_text_of` in PostgreSQL's words (``row`` is ``e.``, or empty for the index's own columns)."""
    return (
        f"CASE WHEN {row}text_path IS NULL THEN {row}text ELSE sessionstore_json_text({row}payload, {row}text_path) END"
    )


PG_TRANSCRIPT = View("transcript", TRANSCRIPT.select.replace(_text_of("e"), _pg_text_of("e.")))
PG_SESSION_OVERVIEW = View(
    "session_overview",
    SESSION_OVERVIEW.select.replace(_text_of("u"), _pg_text_of("u."))
    .replace("char(13)", "chr(13)")
    .replace("char(10)", "chr(10)")
    .replace("char(9)", "chr(9)"),
)
# The transcript's text, as search reads it from the view (which PostgreSQL inlines, so the index serves it).
PG_SEARCH = Index("events_fts", f"events USING gin (to_tsvector('simple', {_pg_text_of('')})) WHERE role IS NOT NULL")
PG_INSPECTION = Group(PG_TRANSCRIPT, PG_SESSION_OVERVIEW, PG_SEARCH)


def _upgrade_postgresql() -> None:
    op.drop_object("0002.PG_INSPECTION")
    op.execute("ALTER TABLE events ADD COLUMN role TEXT")
    op.execute("ALTER TABLE events ADD COLUMN text TEXT")
    op.execute("ALTER TABLE events ADD COLUMN text_path TEXT")
    op.execute("ALTER TABLE events DISABLE TRIGGER events_revision_update")  # filling changes no event
    op.execute(f"UPDATE events SET role = {PG_ROLE}")
    op.execute(f"UPDATE events SET text_path = {PG_TEXT_PATH}")
    op.execute(f"UPDATE events SET text = {PG_TEXT}")
    op.execute("ALTER TABLE events ENABLE TRIGGER events_revision_update")
    op.create_object(PG_INSPECTION)


def upgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        _upgrade_postgresql()
        return
    # 0002's triggers would index every row the fill below touches: its objects go
    # first, and 0003's are made once the rows are filled (the index built once).
    op.drop_object("0002.INSPECTION")
    # Plain ALTER TABLE: a batch rebuild would drop the table's revision triggers with it.
    op.execute("ALTER TABLE events ADD COLUMN role TEXT")
    op.execute("ALTER TABLE events ADD COLUMN text TEXT")
    op.execute("ALTER TABLE events ADD COLUMN text_path TEXT")
    # Filling the new columns changes no event, so it must not count as a change
    # of every session (sessions.revision): the update trigger is off meanwhile.
    bind = op.get_bind()
    counting = bind.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'events_revision_update'").scalar()
    op.execute("DROP TRIGGER IF EXISTS events_revision_update")
    op.execute(f"UPDATE events SET role = {ROLE}")
    op.execute(f"UPDATE events SET text_path = {TEXT_PATH}")
    op.execute(f"UPDATE events SET text = {TEXT}")
    if counting is not None:
        op.execute(counting)
    op.create_object(INSPECTION)  # and indexes the filled rows, once


def downgrade() -> None:
    postgresql = op.get_context().dialect.name == "postgresql"
    op.drop_object(PG_INSPECTION if postgresql else INSPECTION)
    op.execute("ALTER TABLE events DROP COLUMN text_path")
    op.execute("ALTER TABLE events DROP COLUMN text")
    op.execute("ALTER TABLE events DROP COLUMN role")
    op.create_object("0002.PG_INSPECTION" if postgresql else "0002.INSPECTION")
