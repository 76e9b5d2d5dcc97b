"""The statements both databases share, each written once.

The storages' writers and readers and the commands behind the command line run
these. They are plain SQL with ``:named`` parameters over the tables and the two
views, in the part of SQL that SQLite and PostgreSQL share (``RETURNING``,
``ON CONFLICT``, row values): where the dialects differ (JSON, full-text search,
the title rule), the difference lives in the views, which each database's
migrations define; full-text search (:data:`SEARCH`, FTS5) is SQLite's own.
``sqlite3`` runs them as they are; SQLAlchemy's ``text()`` runs them on
PostgreSQL (:class:`sessionstore.postgres.connect.PgConnection`). The few that
cannot be the same have a ``_POSTGRESQL`` variant beside them.

Not every statement is here: what only one database has stays in its own
package (SQLite's ``PRAGMA`` checks and FTS5 maintenance in
:mod:`sessionstore.sqlite.backend` and :mod:`sessionstore.sqlite.search`;
PostgreSQL's one-statement appends, advisory holds and catalogue checks in
:mod:`sessionstore.postgres.storage` and :mod:`sessionstore.postgres.backend`).
"""

from __future__ import annotations

__all__ = [
    "APPEND_EVENT",
    "DELETE_EVENTS_FROM",
    "DATABASE_SIZE_POSTGRESQL",
    "DELETE_SESSION",
    "EVENTS_OF",
    "EVENT_ROWS",
    "EVENT_TYPES",
    "CLEAR_HOLDER",
    "FIND_SESSION",
    "HOLDER",
    "HOLD_SESSION",
    "LET_GO_SESSION",
    "MARKED_HELD",
    "MARKED_HOLDERS",
    "PARENT_OF",
    "ADVISORY_HOLDS_POSTGRESQL",
    "HISTORY",
    "INDEX_NEW_EVENTS",
    "UNINDEXED_EVENTS",
    "INSERT_EVENT",
    "MARK_INDEXED",
    "MERGE_INDEX",
    "NEXT_MARK",
    "NEW_SESSION",
    "OVERVIEW",
    "RESET_MARK",
    "RESOLVE_PREFIX",
    "REVISION",
    "SEARCH",
    "SEARCH_NEW_EVENTS",
    "SEARCH_POSTGRESQL",
    "SESSION_COUNT",
    "SESSION_IDS",
    "SET_PARENT",
    "SET_TITLE",
    "STAMP_SESSION",
    "SUBAGENTS",
    "TOP_LEVEL",
    "TOP_LEVEL_POSTGRESQL",
    "STORED_EVENTS",
    "STORED_EVENTS_BYTES",
    "SUBAGENT_COUNT",
    "TOUCH_SESSION",
    "UPSERT_SESSION",
    "list_sessions",
]

# -- writes ------------------------------------------------------------------------------------

FIND_SESSION = "SELECT id, revision, updated_at FROM sessions WHERE session_id = :sid"

# A session written to before it was ever saved (a storage used without the registry, a subagent's stream)
# gets a bare row; ``:parent`` is the row id of the session its stream was opened from, or NULL.
NEW_SESSION = (
    "INSERT INTO sessions (session_id, parent, cwd, additional_directories, mcp_servers, meta, title,"
    " created_at, updated_at, released, revision)"
    " VALUES (:sid, :parent, '.', '[]', '[]', '{}', NULL, :now, :now, 0, 0) RETURNING id"
)

# An imported subagent's row, made a moment before in the same transaction, under its session's row.
SET_PARENT = "UPDATE sessions SET parent = :parent WHERE id = :id"

STAMP_SESSION = "UPDATE sessions SET updated_at = :now WHERE id = :id"

# The next position is computed in the statement, inside the write transaction,
# so two writers (two processes) can never take the same one.
APPEND_EVENT = (
    "INSERT INTO events (session, position, type, payload, role, text, text_path, created_at)"
    " SELECT :id, COALESCE(MAX(position), -1) + 1, :type, :payload, :role, :text, :text_path, :now"
    " FROM events WHERE session = :id"
)

INSERT_EVENT = (
    "INSERT INTO events (session, position, type, payload, role, text, text_path, created_at)"
    " VALUES (:id, :position, :type, :payload, :role, :text, :text_path, :now)"
)

DELETE_EVENTS_FROM = "DELETE FROM events WHERE session = :id AND position >= :position"

# Its events and its subagents (theirs too, with their events) go with it (ON DELETE CASCADE).
DELETE_SESSION = "DELETE FROM sessions WHERE session_id = :sid"

# Holding (revision 0007): who holds a session, written for people; its lock says whether that holder lives.
HOLDER = "SELECT id, held_by FROM sessions WHERE session_id = :sid"
HOLD_SESSION = "UPDATE sessions SET held_by = :who WHERE id = :id"
LET_GO_SESSION = "UPDATE sessions SET held_by = NULL WHERE id = :id AND held_by = :who"
MARKED_HELD = "SELECT id, held_by FROM sessions WHERE held_by IS NOT NULL"
MARKED_HOLDERS = "SELECT id, session_id, held_by FROM sessions WHERE held_by IS NOT NULL"
PARENT_OF = "SELECT p.session_id FROM sessions AS s JOIN sessions AS p ON p.id = s.parent WHERE s.session_id = :sid"
# The advisory locks held now on PostgreSQL (postgres/connect.PG_LOCK_CLASS; a two-key lock's objsubid is 2).
ADVISORY_HOLDS_POSTGRESQL = (
    "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND classid = :class AND objsubid = 2 AND granted"
)
CLEAR_HOLDER = "UPDATE sessions SET held_by = NULL WHERE id = :id AND held_by = :who"

# A record written again keeps its creation time; its events are untouched.
UPSERT_SESSION = (
    "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, title,"
    " created_at, updated_at, released, revision)"
    " VALUES (:sid, :cwd, :additional_directories, :mcp_servers, :meta, :title, :created_at, :updated_at,"
    " :released, 0)"
    " ON CONFLICT (session_id) DO UPDATE SET cwd = excluded.cwd,"
    " additional_directories = excluded.additional_directories, mcp_servers = excluded.mcp_servers,"
    " meta = excluded.meta, title = excluded.title, updated_at = excluded.updated_at,"
    " released = excluded.released"
    " RETURNING id"
)

TOUCH_SESSION = (
    "UPDATE sessions SET updated_at = :now, released = COALESCE(:released, released) WHERE session_id = :sid"
)

SET_TITLE = "UPDATE sessions SET title = :title WHERE session_id = :sid"

# One step of merging the full-text index's segments (a negative page count merges whatever is there, however
# few): a deleted event's words stay in the index's older segments until they are merged away. A step that
# found nothing left to merge changes one row (the command itself). SQLite's FTS5 only.
MERGE_INDEX = "INSERT INTO events_fts (events_fts, rank) VALUES ('merge', -64)"

# Bringing the full-text index up to date (revision 0005), a batch at a time: NEXT_MARK is the id of the
# ``:batch``-th event past the mark (or the newest); the events up to it are indexed and the mark moves there,
# in one write transaction. A writer runs it every few hundred events and when it closes; what is not indexed
# meanwhile, search reads through SEARCH_NEW_EVENTS. The mark never moves back: an id at or below it handed
# out again is indexed by the insert trigger.
NEXT_MARK = (
    "SELECT max(id) FROM (SELECT id FROM events WHERE id > (SELECT indexed_through FROM events_fts_progress)"
    " ORDER BY id LIMIT :batch)"
)
INDEX_NEW_EVENTS = (
    "INSERT INTO events_fts (rowid, text) SELECT event_id, text FROM transcript"
    " WHERE event_id > (SELECT indexed_through FROM events_fts_progress) AND event_id <= :through"
)
MARK_INDEXED = "UPDATE events_fts_progress SET indexed_through = max(indexed_through, :through)"
# After a rebuild (which indexes every event): the mark at the newest event, its row made again if it was lost.
RESET_MARK = (
    "INSERT OR REPLACE INTO events_fts_progress (id, indexed_through) SELECT 1, coalesce(max(id), 0) FROM events"
)
# How many events the full-text index does not hold yet (those past the mark).
UNINDEXED_EVENTS = "SELECT count(*) FROM events WHERE id > (SELECT indexed_through FROM events_fts_progress)"

# -- reads -------------------------------------------------------------------------------------

# A session's events in order, with the session's row id and revision (one
# row with NULL events for a session that has none): one round trip, for PostgreSQL.
HISTORY = (
    "SELECT s.id, s.revision, e.type, e.payload FROM sessions AS s"
    " LEFT JOIN events AS e ON e.session = s.id WHERE s.session_id = :sid ORDER BY e.position"
)

# A session's events in order, by its row id; and the same for a history holding text that is not UTF-8
# (edited by hand): bytes come back as they are and are decoded row by row.
STORED_EVENTS = "SELECT type, payload FROM events WHERE session = :id ORDER BY position"
# What import compares a stored session's events with.
EVENT_ROWS = "SELECT position, type, payload FROM events WHERE session = :id ORDER BY position"
STORED_EVENTS_BYTES = (
    "SELECT CAST(type AS BLOB), CAST(payload AS BLOB) FROM events WHERE session = :id ORDER BY position"
)

# What a person reads of each event: its role and text (or where in the payload the text is).
EVENTS_OF = (
    "SELECT e.position, e.type, e.payload, e.created_at, e.role, e.text, e.text_path"
    " FROM events AS e JOIN sessions AS s ON s.id = e.session WHERE s.session_id = :sid ORDER BY e.position"
)

# One row per session, as session_overview shows it (the title rule and the
# event count live in the view).
OVERVIEW = (
    "SELECT session_id, title, title_set, cwd, additional_directories, mcp_servers, meta,"
    " created_at, updated_at, released, events, parent_id FROM session_overview"
)

# The sessions a client made, not their subagents: what session/list, `sessionstore list` and prune walk.
TOP_LEVEL = "parent_id IS NULL"
# The same on PostgreSQL's session/list, whose pages must walk the creation index: PostgreSQL cannot estimate how
# many rows pass a condition on the view's parent_id (a subquery; it guesses 1 in 200), so for a page it read and
# sorted every session; on the column itself its statistics say most do, and it walks the index, looking each row
# up by its key (tests/postgres/test_pg_access_paths.py). The same rows: a parent, once set, has its row (a foreign
# key).
TOP_LEVEL_POSTGRESQL = (
    "EXISTS (SELECT 1 FROM sessions AS c WHERE c.session_id = session_overview.session_id AND c.parent IS NULL)"
)

# A session's subagents, oldest first (through the index on sessions.parent).
SUBAGENTS = (
    "SELECT c.session_id FROM sessions AS c JOIN sessions AS p ON p.id = c.parent"
    " WHERE p.session_id = :sid ORDER BY c.id"
)

# How many sessions deleting this one deletes with it: its subagents, theirs, and so on (UNION: a loop made by
# hand ends).
SUBAGENT_COUNT = (
    "WITH RECURSIVE tree(id) AS (SELECT id FROM sessions WHERE session_id = :sid"
    " UNION SELECT s.id FROM sessions AS s JOIN tree ON s.parent = tree.id)"
    " SELECT count(*) - 1 FROM tree"
)


def list_sessions(*, cwd: bool, after: bool, limit: bool, where: str = "", order: str = "updated_at") -> str:
    """Sessions newest first by ``order`` (``updated_at`` or ``created_at``, then id), keyset-paged after
    ``(:before, :before_id)``.

    One statement in a few shapes (with or without a ``cwd``, a cursor, a
    limit), each able to use its index; ``where`` adds a condition of the caller's.
    """
    if order not in ("updated_at", "created_at"):
        raise ValueError(f"sessions are listed by updated_at or created_at, not {order!r}")
    conditions = [where] if where else []
    if cwd:
        conditions.append("cwd = :cwd")
    if after:
        conditions.append(f"({order} < :before OR ({order} = :before AND session_id < :before_id))")
    sql = OVERVIEW
    if conditions:
        sql += " WHERE " + " AND ".join(conditions)
    sql += f" ORDER BY {order} DESC, session_id DESC"
    if limit:
        sql += " LIMIT :limit"
    return sql


# Ids starting with a prefix: a range scan over the unique index (LIKE could not use it).
RESOLVE_PREFIX = (
    "SELECT session_id FROM sessions WHERE session_id >= :low AND session_id < :high ORDER BY session_id LIMIT 6"
)

# A hit: the session, its title and its parent (as the overview gives them), the event, and what shows where
# the words are.
_HIT = (
    "SELECT s.session_id, (SELECT o.title FROM session_overview AS o WHERE o.session_id = s.session_id),"
    " (SELECT o.parent_id FROM session_overview AS o WHERE o.session_id = s.session_id),"
    " e.position, e.type, e.role, "
)
# Full-text search, best first: over ``events_fts``, or (``table``) over the scratch index records.search
# makes of the events the index does not hold yet. The hit's rank is last, so the two can be merged.
_SEARCH = (
    _HIT + "snippet({table}, -1, '[', ']', '…', 12), {table}.rank"
    " FROM {table} JOIN events AS e ON e.id = {table}.rowid JOIN sessions AS s ON s.id = e.session"
    " WHERE {table} MATCH :query ORDER BY {table}.rank LIMIT :limit"
)
SEARCH = _SEARCH.format(table="events_fts")


def search_in(table: str) -> str:
    """:data:`SEARCH` over another FTS5 table of event ids and their text (``temp.new_events``)."""
    return _SEARCH.format(table=table)


# The events the full-text index does not hold yet (ids past the mark), with their text.
SEARCH_NEW_EVENTS = (
    "SELECT event_id, text FROM transcript"
    " WHERE event_id > (SELECT indexed_through FROM events_fts_progress) AND text IS NOT NULL"
)
# PostgreSQL: the GIN index events_fts (to_tsvector('simple', ...) of the transcript's text, revision 0003)
# finds candidates for a tsquery; records.search keeps those whose words match as FTS5's tokenizer has it, and
# cuts the snippet from the text. Paged: a page may keep fewer hits than it read.
SEARCH_POSTGRESQL = (
    _HIT.replace("s.", "t.").replace("e.", "t.") + "t.text FROM transcript AS t"
    " WHERE to_tsvector('simple', t.text) @@ to_tsquery('simple', :query)"
    " ORDER BY ts_rank(to_tsvector('simple', t.text), to_tsquery('simple', :query)) DESC, t.event_id"
    " LIMIT :limit OFFSET :offset"
)

# CASE, not sum(released): released is an integer in SQLite and a boolean in PostgreSQL.
SESSION_COUNT = "SELECT count(*), count(CASE WHEN released = TRUE THEN 1 END) FROM sessions"
SESSION_IDS = "SELECT session_id FROM sessions ORDER BY id"
EVENT_TYPES = "SELECT type, count(*) FROM events GROUP BY type ORDER BY count(*) DESC, type"
# What stats shows for a server's database where a file has its size.
DATABASE_SIZE_POSTGRESQL = (
    "SELECT pg_database_size(current_database()), pg_total_relation_size('sessions') + pg_total_relation_size('events')"
)

REVISION = "SELECT version_num FROM alembic_version"
