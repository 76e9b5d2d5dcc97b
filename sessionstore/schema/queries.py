"""The statements on the tables, each written once: generated from the models, edit the generator.

Written by ``python -m sessionstore.schema.statements --write`` from the models
(:mod:`sessionstore.schema.models`) and the statements built over them in
:mod:`sessionstore.schema.statements` (SQLAlchemy Core, compiled for each
database): change those and run it again; a test fails while this file differs
from what it writes. Only the part after the line that says so is written by hand.

The storages' writers and readers and the commands behind the command line run
these: plain SQL with ``:named`` parameters, which ``sqlite3`` runs as it is and
asyncpg runs on PostgreSQL, numbered ``$n`` (:func:`sessionstore.postgres.connect.numbered`). Where PostgreSQL's text
differs, its own is beside SQLite's as ``..._POSTGRESQL``, which names too what
PostgreSQL alone runs. Which statements stay text, and why, is said in
:mod:`sessionstore.schema.statements`.
"""

from __future__ import annotations

__all__ = [
    "ADVISORY_HOLDS_POSTGRESQL",
    "ANY_UNINDEXED_POSTGRESQL",
    "APPEND_EVENT",
    "BRANCHES",
    "CLEAR_HOLDER",
    "DATABASE_SIZE_POSTGRESQL",
    "DELETE_EVENTS_FROM",
    "DELETE_SESSION",
    "DETACH_HEIRS",
    "DROP_SETTING",
    "EVENTS_OF",
    "EVENTS_OF_POSTGRESQL",
    "EVENT_ID_RANGE",
    "EVENT_ROWS",
    "EVENT_TOKENS",
    "EVENT_TYPES",
    "FIND_SESSION",
    "FORKS_ABOVE",
    "FORK_EVENTS",
    "FORK_EVENTS_BYTES",
    "FORK_EVENTS_POSTGRESQL",
    "FORK_ORIGIN",
    "FORK_RECENT",
    "FORK_RECENT_BYTES",
    "FORK_SESSION",
    "GIVE_SHARED_ROWS",
    "HISTORY",
    "HOLDER",
    "HOLD_SESSION",
    "INDEX_NEW_EVENTS",
    "INSERT_EVENT",
    "LEGACY_EVENTS_OF",
    "LEGACY_OVERVIEW",
    "LET_GO_SESSION",
    "LIVE_SESSION_COUNT",
    "MARKED_HELD",
    "MARKED_HOLDERS",
    "MARK_INDEXED",
    "MERGE_INDEX",
    "MOVE_EVENTS",
    "NEW_SESSION",
    "NEW_SESSION_POSTGRESQL",
    "NEXT_MARK",
    "NEXT_STALE",
    "ORPHAN_EVENTS_POSTGRESQL",
    "OVERVIEW",
    "PAGE_USAGE",
    "PARENT_OF",
    "PUT_SETTING",
    "RECENT_EVENTS",
    "RECENT_EVENTS_BYTES",
    "RECENT_EVENTS_POSTGRESQL",
    "REPOINT_FORKS",
    "RESET_MARK",
    "RESOLVE_PREFIX",
    "REVISION",
    "SEARCH",
    "SEARCH_NEW_EVENTS",
    "SEARCH_POSTGRESQL",
    "SESSION_COUNT",
    "SESSION_IDS",
    "SESSION_STATE",
    "SESSION_USAGE",
    "SETTING",
    "SET_BRANCH_OF",
    "SET_FORKED_AT",
    "SET_PARENT",
    "SET_TITLE",
    "STALE_SESSIONS",
    "STAMP_SESSION",
    "STORED_EVENTS",
    "STORED_EVENTS_BYTES",
    "SUBAGENTS",
    "SUBAGENT_COUNT",
    "TAKE_UNINDEXED_POSTGRESQL",
    "TOP_LEVEL",
    "TOP_LEVEL_POSTGRESQL",
    "TOTAL_USAGE",
    "TOUCH_SESSION",
    "TURN_USAGE",
    "UNINDEXED_EVENTS",
    "UPSERT_SESSION",
    "WRITE_WORDS_POSTGRESQL",
    "list_sessions",
    "search_in",
]

# -- writes ------------------------------------------------------------------------------------------------------------

FIND_SESSION = (
    "SELECT sessions.id, sessions.revision, sessions.updated_at, sessions.forked_from FROM sessions WHERE "
    "sessions.session_id = :sid"
)

# FIND_SESSION and the session's length: what a write on SQLite checks its read cache against (the revision counts every
# change but an append, the length every append); and its holder's mark.
SESSION_STATE = (
    "SELECT sessions.id, sessions.revision, sessions.updated_at, sessions.forked_from, coalesce((SELECT "
    "max(events.position) + 1 AS anon_1 FROM events WHERE events.session = sessions.id), sessions.forked_at, 0) AS "
    "length, sessions.held_by FROM sessions WHERE sessions.session_id = :sid"
)

# A session written to before it was ever saved (a storage used without the registry, a subagent's stream) gets a bare
# row, with the models' defaults; ``:parent`` is the row id of the session its stream was opened from, or NULL.
NEW_SESSION = (
    "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, title, created_at, updated_at, "
    "released, revision, parent) VALUES (:sid, '.', '[]', '[]', '{}', NULL, :now, :now, 0, 0, :parent) RETURNING id"
)

# The same on PostgreSQL, where another writer may have made the row meanwhile (no write lock on the database): then
# nothing is made and nothing returned.
NEW_SESSION_POSTGRESQL = (
    "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, title, created_at, updated_at, "
    "released, revision, parent) VALUES (:sid, '.', '[]', '[]', '{}', NULL, :now, :now, false, 0, :parent) ON CONFLICT "
    "(session_id) DO NOTHING RETURNING id"
)

# An imported subagent's row, made a moment before in the same transaction, under its session's row.
SET_PARENT = "UPDATE sessions SET parent=:parent WHERE sessions.id = :id"

STAMP_SESSION = "UPDATE sessions SET updated_at=:now WHERE sessions.id = :id"

# The next position is computed in the statement, inside the write transaction, so two writers (two processes) can never
# take the same one.
APPEND_EVENT = (
    "INSERT INTO events (session, position, type, payload, role, text, text_path, input_tokens, output_tokens, "
    "cache_read_tokens, cache_write_tokens, reasoning_tokens, created_at) SELECT :id AS anon_1, "
    "coalesce(max(events.position) + 1, (SELECT coalesce(sessions.forked_at, 0) AS coalesce_2 FROM sessions WHERE "
    "sessions.id = :id)) AS coalesce_1, :type AS anon_2, :payload AS anon_3, :role AS anon_4, :text AS anon_5, "
    ":text_path AS anon_6, :input_tokens AS anon_7, :output_tokens AS anon_8, :cache_read_tokens AS anon_9, "
    ":cache_write_tokens AS anon_10, :reasoning_tokens AS anon_11, :now AS anon_12 FROM events WHERE events.session = "
    ":id"
)

INSERT_EVENT = (
    "INSERT INTO events (session, position, type, payload, created_at, role, text, text_path, input_tokens, "
    "output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens) VALUES (:id, :position, :type, :payload, "
    ":now, :role, :text, :text_path, :input_tokens, :output_tokens, :cache_read_tokens, :cache_write_tokens, "
    ":reasoning_tokens)"
)

DELETE_EVENTS_FROM = "DELETE FROM events WHERE events.session = :id AND events.position >= :position"

# Its events and its subagents (theirs too, with their events) go with it (ON DELETE CASCADE).
DELETE_SESSION = "DELETE FROM sessions WHERE sessions.session_id = :sid"

# Forks and earlier branches (revision 0012): a fork shares its parent's events below its ``forked_at``; rows a fork
# shares never change in place.
FORK_ORIGIN = (
    "SELECT sessions.id, sessions.forked_from, sessions.forked_at, coalesce((SELECT max(events.position) + 1 AS anon_1 "
    "FROM events WHERE events.session = sessions.id), sessions.forked_at, 0) AS coalesce_1 FROM sessions WHERE "
    "sessions.session_id = :sid"
)

FORK_SESSION = (
    "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, title, created_at, updated_at, "
    "released, revision, forked_from, forked_at, branch_of) SELECT :sid AS anon_1, p.cwd, p.additional_directories, "
    "p.mcp_servers, p.meta, (SELECT o.title FROM session_overview AS o WHERE p.session_id = o.session_id) AS anon_2, "
    ":now AS anon_3, :now AS anon_4, CAST(0 AS BOOLEAN) AS released, 0 AS anon_5, :forked_from AS anon_6, :forked_at "
    "AS anon_7, :branch_of AS anon_8 FROM sessions AS p WHERE p.id = :id RETURNING id"
)

# Whether a fork reads the session's rows at ``:position`` or later (a rewrite from there must keep them).
FORKS_ABOVE = (
    "SELECT sessions.id FROM sessions WHERE sessions.forked_from = :id AND sessions.forked_at > :position LIMIT 1"
)

# A rewrite from ``:position`` moves the rows there and after to the earlier branch ``:branch``, and the forks that read
# them follow.
MOVE_EVENTS = "UPDATE events SET session=:branch WHERE events.session = :id AND events.position >= :position"

REPOINT_FORKS = (
    "UPDATE sessions SET forked_from=:branch WHERE sessions.forked_from = :id AND sessions.forked_at > :position AND "
    "sessions.id != :branch"
)

SET_FORKED_AT = "UPDATE sessions SET forked_at=:position WHERE sessions.id = :id"

# An imported earlier branch, under its live session's row.
SET_BRANCH_OF = "UPDATE sessions SET branch_of=:branch_of WHERE sessions.id = :id"

# Before a session is deleted, a fork of it (or of its subagents or earlier branches) gets the rows it shared copied
# into its own, and then shares nothing: it stays whole.
GIVE_SHARED_ROWS = (
    "WITH RECURSIVE doomed(id) AS (SELECT sessions.id AS id FROM sessions WHERE sessions.session_id = :sid UNION "
    "SELECT x.id AS id FROM sessions AS x JOIN doomed ON x.parent = doomed.id OR x.branch_of = doomed.id), heirs AS "
    "(SELECT h.id AS id, h.forked_from AS forked_from, h.forked_at AS forked_at FROM sessions AS h WHERE h.forked_from "
    "IN (SELECT doomed.id FROM doomed) AND (h.id NOT IN (SELECT doomed.id FROM doomed))), shared(owner, session, "
    "below) AS (SELECT heirs.id AS owner, heirs.forked_from AS session, heirs.forked_at AS below FROM heirs UNION ALL "
    "SELECT shared.owner AS owner, y.forked_from AS forked_from, y.forked_at AS forked_at FROM shared, sessions AS y "
    "WHERE y.id = shared.session AND y.forked_from IS NOT NULL) INSERT INTO events (session, position, created_at, "
    "type, payload, role, text, text_path, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, "
    "reasoning_tokens) SELECT shared.owner, e.position, e.created_at, e.type, e.payload, e.role, e.text, e.text_path, "
    "e.input_tokens, e.output_tokens, e.cache_read_tokens, e.cache_write_tokens, e.reasoning_tokens FROM shared JOIN "
    "events AS e ON e.session = shared.session AND e.position < shared.below"
)

DETACH_HEIRS = (
    "WITH RECURSIVE doomed(id) AS (SELECT sessions.id AS id FROM sessions WHERE sessions.session_id = :sid UNION "
    "SELECT x.id AS id FROM sessions AS x JOIN doomed ON x.parent = doomed.id OR x.branch_of = doomed.id), heirs AS "
    "(SELECT h.id AS id, h.forked_from AS forked_from, h.forked_at AS forked_at FROM sessions AS h WHERE h.forked_from "
    "IN (SELECT doomed.id FROM doomed) AND (h.id NOT IN (SELECT doomed.id FROM doomed))) UPDATE sessions SET "
    "forked_from=NULL, forked_at=NULL WHERE sessions.id IN (SELECT heirs.id FROM heirs)"
)

# A session's earlier branches, oldest first (show --all, export).
BRANCHES = (
    "SELECT b.session_id FROM sessions AS b WHERE b.branch_of = (SELECT l.id FROM sessions AS l WHERE l.session_id = "
    ":sid) ORDER BY b.id"
)

# Holding (revision 0007): who holds a session, written for people; its lock says whether that holder lives.
HOLDER = "SELECT sessions.id, sessions.held_by FROM sessions WHERE sessions.session_id = :sid"

HOLD_SESSION = "UPDATE sessions SET held_by=:who WHERE sessions.id = :id"

LET_GO_SESSION = "UPDATE sessions SET held_by=NULL WHERE sessions.id = :id AND sessions.held_by = :who"

# A dead holder's mark cleared: the same statement.
CLEAR_HOLDER = LET_GO_SESSION

MARKED_HELD = "SELECT sessions.id, sessions.held_by FROM sessions WHERE sessions.held_by IS NOT NULL"

MARKED_HOLDERS = (
    "SELECT sessions.id, sessions.session_id, sessions.held_by FROM sessions WHERE sessions.held_by IS NOT NULL"
)

PARENT_OF = "SELECT p.session_id FROM sessions AS s JOIN sessions AS p ON p.id = s.parent WHERE s.session_id = :sid"

# The advisory locks held now on PostgreSQL (postgres/connect.PG_LOCK_CLASS; a two-key lock's objsubid is 2).
ADVISORY_HOLDS_POSTGRESQL = (
    "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND classid = :class AND objsubid = 2 AND granted"
)

# A record written again keeps its creation time; its events are untouched.
UPSERT_SESSION = (
    "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, title, created_at, updated_at, "
    "released, revision) VALUES (:sid, :cwd, :additional_directories, :mcp_servers, :meta, :title, :created_at, "
    ":updated_at, :released, 0) ON CONFLICT (session_id) DO UPDATE SET cwd = excluded.cwd, additional_directories = "
    "excluded.additional_directories, mcp_servers = excluded.mcp_servers, meta = excluded.meta, title = "
    "excluded.title, updated_at = excluded.updated_at, released = excluded.released RETURNING id"
)

TOUCH_SESSION = (
    "UPDATE sessions SET updated_at=:now, released=coalesce(:released, sessions.released) WHERE sessions.session_id = "
    ":sid"
)

SET_TITLE = "UPDATE sessions SET title=:title WHERE sessions.session_id = :sid"

# One step of merging the full-text index's segments (a negative page count merges whatever is there, however few): a
# deleted event's words stay in the index's older segments until they are merged away. A step that found nothing left to
# merge changes one row (the command itself). SQLite's FTS5 only.
MERGE_INDEX = "INSERT INTO events_fts (events_fts, rank) VALUES ('merge', -64)"

# Bringing the full-text index up to date (revision 0005), a batch at a time: NEXT_MARK is the id of the ``:batch``-th
# event past the mark (or the newest); the events up to it are indexed and the mark moves there, in one write
# transaction. A writer runs it every few hundred events and when it closes; what is not indexed meanwhile, search reads
# through SEARCH_NEW_EVENTS. The mark never moves back: an id at or below it handed out again is indexed by the insert
# trigger.
NEXT_MARK = (
    "SELECT max(anon_1.id) AS max_1 FROM (SELECT events.id AS id FROM events WHERE events.id > (SELECT "
    "events_fts_progress.indexed_through FROM events_fts_progress) ORDER BY events.id LIMIT :batch) AS anon_1"
)

INDEX_NEW_EVENTS = (
    "INSERT INTO events_fts (rowid, text) SELECT transcript.event_id, transcript.text FROM transcript WHERE "
    "transcript.event_id > (SELECT events_fts_progress.indexed_through FROM events_fts_progress) AND "
    "transcript.event_id <= :through"
)

MARK_INDEXED = "UPDATE events_fts_progress SET indexed_through=max(events_fts_progress.indexed_through, :through)"

# After a rebuild (which indexes every event): the mark at the newest event, its row made again if it was lost.
RESET_MARK = (
    "INSERT OR REPLACE INTO events_fts_progress (id, indexed_through) SELECT 1 AS anon_1, coalesce(max(events.id), 0) "
    "AS coalesce_1 FROM events"
)

# How many events the full-text index does not hold yet (those past the mark).
UNINDEXED_EVENTS = (
    "SELECT count(*) AS count_1 FROM events WHERE events.id > (SELECT events_fts_progress.indexed_through FROM "
    "events_fts_progress)"
)

# -- reads -------------------------------------------------------------------------------------------------------------

# A session's events in order, with the session's row id and revision (one row with NULL events for a session that has
# none): one round trip, for PostgreSQL.
HISTORY = (
    "SELECT s.id, s.revision, e.type, e.payload, s.forked_from FROM sessions AS s LEFT OUTER JOIN events AS e ON "
    "e.session = s.id WHERE s.session_id = :sid ORDER BY e.position"
)

# A session's events in order, by its row id; and the same for a history holding text that is not UTF-8 (edited by
# hand): bytes come back as they are and are decoded row by row.
STORED_EVENTS = "SELECT events.type, events.payload FROM events WHERE events.session = :id ORDER BY events.position"

STORED_EVENTS_BYTES = (
    "SELECT CAST(events.type AS BLOB) AS type, CAST(events.payload AS BLOB) AS payload FROM events WHERE "
    "events.session = :id ORDER BY events.position"
)

# A session's newest events, oldest of them first, by its session id: a range of the index on (session, position) read
# from its end, whatever the history's length (get_history(..., last=N)); and the same as bytes, for a window holding
# text that is not UTF-8.
RECENT_EVENTS = (
    "SELECT w.type, w.payload FROM (SELECT events.position AS position, events.type AS type, events.payload AS payload "
    "FROM events WHERE events.session = (SELECT sessions.id FROM sessions WHERE sessions.session_id = :sid) ORDER BY "
    "events.position DESC LIMIT :last) AS w ORDER BY w.position"
)

RECENT_EVENTS_BYTES = (
    "SELECT w.type, w.payload FROM (SELECT events.position AS position, CAST(events.type AS BLOB) AS type, "
    "CAST(events.payload AS BLOB) AS payload FROM events WHERE events.session = (SELECT sessions.id FROM sessions "
    "WHERE sessions.session_id = :sid) ORDER BY events.position DESC LIMIT :last) AS w ORDER BY w.position"
)

# The same with each row's position, on PostgreSQL: a window shorter than asked that does not start at 0 is a fork's,
# read again with FORK_RECENT.
RECENT_EVENTS_POSTGRESQL = (
    "SELECT w.position, w.type, w.payload FROM (SELECT events.position AS position, events.type AS type, "
    "events.payload AS payload FROM events WHERE events.session = (SELECT sessions.id FROM sessions WHERE "
    "sessions.session_id = :sid) ORDER BY events.position DESC LIMIT :last) AS w ORDER BY w.position"
)

# A fork's history by its row id: its segments' rows in one statement (each a range of the index on (session,
# position)); and as bytes. A session that shares nothing reads STORED_EVENTS.
FORK_EVENTS = (
    "WITH RECURSIVE chain(session, below, up, at) AS (SELECT sessions.id AS session, CAST(NULL AS INTEGER) AS below, "
    "sessions.forked_from AS up, sessions.forked_at AS at FROM sessions WHERE sessions.id = :id UNION ALL SELECT x.id "
    "AS id, chain.at AS at, x.forked_from AS forked_from, x.forked_at AS forked_at FROM sessions AS x, chain WHERE "
    "x.id = chain.up) SELECT e.type, e.payload FROM chain JOIN events AS e ON e.session = chain.session AND "
    "(chain.below IS NULL OR e.position < chain.below) ORDER BY e.position"
)

FORK_EVENTS_BYTES = (
    "WITH RECURSIVE chain(session, below, up, at) AS (SELECT sessions.id AS session, CAST(NULL AS INTEGER) AS below, "
    "sessions.forked_from AS up, sessions.forked_at AS at FROM sessions WHERE sessions.id = :id UNION ALL SELECT x.id "
    "AS id, chain.at AS at, x.forked_from AS forked_from, x.forked_at AS forked_at FROM sessions AS x, chain WHERE "
    "x.id = chain.up) SELECT CAST(e.type AS BLOB) AS type, CAST(e.payload AS BLOB) AS payload FROM chain JOIN events "
    "AS e ON e.session = chain.session AND (chain.below IS NULL OR e.position < chain.below) ORDER BY e.position"
)

# The same on PostgreSQL, each segment through LATERAL (its planner would read every event otherwise).
FORK_EVENTS_POSTGRESQL = (
    "WITH RECURSIVE chain(session, below, up, at) AS (SELECT sessions.id AS session, CAST(NULL AS INTEGER) AS below, "
    "sessions.forked_from AS up, sessions.forked_at AS at FROM sessions WHERE sessions.id = :id UNION ALL SELECT x.id "
    "AS id, chain.at AS at, x.forked_from AS forked_from, x.forked_at AS forked_at FROM sessions AS x, chain WHERE "
    "x.id = chain.up) SELECT e.type, e.payload FROM chain JOIN LATERAL (SELECT events.position AS position, "
    "events.type AS type, events.payload AS payload FROM events WHERE events.session = chain.session AND (chain.below "
    "IS NULL OR events.position < chain.below) LIMIT ALL OFFSET 0) AS e ON true ORDER BY e.position"
)

# A fork's newest events, oldest of them first; and as bytes.
FORK_RECENT = (
    "WITH RECURSIVE walk(pos, stop) AS (SELECT coalesce((SELECT max(e.position) + 1 AS anon_2 FROM events AS e WHERE "
    "e.session = :id), (SELECT sessions.forked_at FROM sessions WHERE sessions.id = :id), 0) - 1 AS pos, "
    "coalesce((SELECT max(e.position) + 1 AS anon_2 FROM events AS e WHERE e.session = :id), (SELECT "
    "sessions.forked_at FROM sessions WHERE sessions.id = :id), 0) - :last AS stop UNION ALL SELECT walk.pos - 1 AS "
    "anon_3, walk.stop AS stop FROM walk WHERE walk.pos > walk.stop AND walk.pos > 0), chain(session, below, up, at) "
    "AS (SELECT sessions.id AS session, CAST(NULL AS INTEGER) AS below, sessions.forked_from AS up, sessions.forked_at "
    "AS at FROM sessions WHERE sessions.id = :id UNION ALL SELECT x.id AS id, chain.at AS at, x.forked_from AS "
    "forked_from, x.forked_at AS forked_at FROM sessions AS x, chain WHERE x.id = chain.up) SELECT w.type, w.payload "
    "FROM (SELECT anon_1.pos AS pos, (SELECT e.type FROM events AS e WHERE e.session = anon_1.session AND e.position = "
    "anon_1.pos) AS type, (SELECT e.payload FROM events AS e WHERE e.session = anon_1.session AND e.position = "
    "anon_1.pos) AS payload FROM (SELECT walk.pos AS pos, chain.session AS session FROM walk JOIN chain ON walk.pos >= "
    "coalesce(chain.at, 0) AND (chain.below IS NULL OR walk.pos < chain.below) WHERE walk.pos >= 0) AS anon_1) AS w "
    "WHERE w.type IS NOT NULL ORDER BY w.pos"
)

FORK_RECENT_BYTES = (
    "WITH RECURSIVE walk(pos, stop) AS (SELECT coalesce((SELECT max(e.position) + 1 AS anon_2 FROM events AS e WHERE "
    "e.session = :id), (SELECT sessions.forked_at FROM sessions WHERE sessions.id = :id), 0) - 1 AS pos, "
    "coalesce((SELECT max(e.position) + 1 AS anon_2 FROM events AS e WHERE e.session = :id), (SELECT "
    "sessions.forked_at FROM sessions WHERE sessions.id = :id), 0) - :last AS stop UNION ALL SELECT walk.pos - 1 AS "
    "anon_3, walk.stop AS stop FROM walk WHERE walk.pos > walk.stop AND walk.pos > 0), chain(session, below, up, at) "
    "AS (SELECT sessions.id AS session, CAST(NULL AS INTEGER) AS below, sessions.forked_from AS up, sessions.forked_at "
    "AS at FROM sessions WHERE sessions.id = :id UNION ALL SELECT x.id AS id, chain.at AS at, x.forked_from AS "
    "forked_from, x.forked_at AS forked_at FROM sessions AS x, chain WHERE x.id = chain.up) SELECT w.type, w.payload "
    "FROM (SELECT anon_1.pos AS pos, (SELECT CAST(e.type AS BLOB) AS type FROM events AS e WHERE e.session = "
    "anon_1.session AND e.position = anon_1.pos) AS type, (SELECT CAST(e.payload AS BLOB) AS payload FROM events AS e "
    "WHERE e.session = anon_1.session AND e.position = anon_1.pos) AS payload FROM (SELECT walk.pos AS pos, "
    "chain.session AS session FROM walk JOIN chain ON walk.pos >= coalesce(chain.at, 0) AND (chain.below IS NULL OR "
    "walk.pos < chain.below) WHERE walk.pos >= 0) AS anon_1) AS w WHERE w.type IS NOT NULL ORDER BY w.pos"
)

# What import compares a stored session's events with.
EVENT_ROWS = (
    "SELECT events.position, events.type, events.payload FROM events WHERE events.session = :id ORDER BY "
    "events.position"
)

# What a person reads of each event: its role and text (or where in the payload the text is); a fork's shared events
# included. PostgreSQL's through LATERAL (as FORK_EVENTS_POSTGRESQL), which its backend names.
EVENTS_OF = (
    "WITH RECURSIVE chain(session, below, up, at) AS (SELECT sessions.id AS session, CAST(NULL AS INTEGER) AS below, "
    "sessions.forked_from AS up, sessions.forked_at AS at FROM sessions WHERE sessions.id = (SELECT sessions.id FROM "
    "sessions WHERE sessions.session_id = :sid) UNION ALL SELECT x.id AS id, chain.at AS at, x.forked_from AS "
    "forked_from, x.forked_at AS forked_at FROM sessions AS x, chain WHERE x.id = chain.up) SELECT e.position, e.type, "
    "e.payload, e.created_at, e.role, e.text, e.text_path FROM chain JOIN events AS e ON e.session = chain.session AND "
    "(chain.below IS NULL OR e.position < chain.below) ORDER BY e.position"
)

EVENTS_OF_POSTGRESQL = (
    "WITH RECURSIVE chain(session, below, up, at) AS (SELECT sessions.id AS session, CAST(NULL AS INTEGER) AS below, "
    "sessions.forked_from AS up, sessions.forked_at AS at FROM sessions WHERE sessions.id = (SELECT sessions.id FROM "
    "sessions WHERE sessions.session_id = :sid) UNION ALL SELECT x.id AS id, chain.at AS at, x.forked_from AS "
    "forked_from, x.forked_at AS forked_at FROM sessions AS x, chain WHERE x.id = chain.up) SELECT e.position, e.type, "
    "e.payload, e.created_at, e.role, e.text, e.text_path FROM chain JOIN LATERAL (SELECT events.position AS position, "
    "events.type AS type, events.payload AS payload, events.created_at AS created_at, events.role AS role, events.text "
    "AS text, events.text_path AS text_path FROM events WHERE events.session = chain.session AND (chain.below IS NULL "
    "OR events.position < chain.below) LIMIT ALL OFFSET 0) AS e ON true ORDER BY e.position"
)

# The same of a file from before revision 0003, which stores no role or text (the codec describes them).
LEGACY_EVENTS_OF = (
    "SELECT e.position, e.type, e.payload, e.created_at FROM events AS e JOIN sessions AS s ON s.id = e.session WHERE "
    "s.session_id = :sid ORDER BY e.position"
)

# One row per session, as session_overview shows it (the title rule and the event count live in the view).
OVERVIEW = (
    "SELECT session_overview.session_id, session_overview.title, session_overview.title_set, session_overview.cwd, "
    "session_overview.additional_directories, session_overview.mcp_servers, session_overview.meta, "
    "session_overview.created_at, session_overview.updated_at, session_overview.released, session_overview.events, "
    "session_overview.parent_id, session_overview.forked_from_id, session_overview.forked_at, "
    "session_overview.branch_of_id FROM session_overview"
)

# The same of a file from before session_overview had every column it lists (revision 0006): stored titles only, counts
# included, no subagents (nothing linked them before 0006). It ends where OVERVIEW ends, so what follows OVERVIEW in a
# statement follows it as well.
LEGACY_OVERVIEW = (
    "SELECT session_overview.session_id, session_overview.title, session_overview.title_set, session_overview.cwd, "
    "session_overview.additional_directories, session_overview.mcp_servers, session_overview.meta, "
    "session_overview.created_at, session_overview.updated_at, session_overview.released, session_overview.events, "
    "session_overview.parent_id, session_overview.forked_from_id, session_overview.forked_at, "
    "session_overview.branch_of_id FROM (SELECT sessions.session_id AS session_id, sessions.title AS title, "
    "sessions.title IS NOT NULL AS title_set, sessions.cwd AS cwd, sessions.additional_directories AS "
    "additional_directories, sessions.mcp_servers AS mcp_servers, sessions.meta AS meta, sessions.created_at AS "
    "created_at, sessions.updated_at AS updated_at, sessions.released AS released, (SELECT count(*) AS count_1 FROM "
    "events AS c WHERE c.session = sessions.id) AS events, NULL AS parent_id, NULL AS forked_from_id, NULL AS "
    "forked_at, NULL AS branch_of_id FROM sessions) AS session_overview"
)

# The sessions a client made, not their subagents nor earlier branches: what session/list, `sessionstore list` and prune
# walk.
TOP_LEVEL = "session_overview.parent_id IS NULL AND session_overview.branch_of_id IS NULL"

# The same on PostgreSQL (its session/list, `sessionstore list`, prune), whose pages must walk an index: PostgreSQL
# cannot estimate how many rows pass a condition on the view's parent_id (a subquery; it guesses 1 in 200), so for a
# page it read and sorted every session; on the column its statistics say most do, and it walks the index, looking each
# row up by its key (tests/postgres/test_pg_access_paths.py). The same rows: a parent, once set, has its row (a foreign
# key).
TOP_LEVEL_POSTGRESQL = (
    "EXISTS (SELECT 1 FROM sessions AS c WHERE c.session_id = session_overview.session_id AND c.parent IS NULL AND "
    "c.branch_of IS NULL)"
)

# A session's subagents, oldest first (through the index on sessions.parent).
SUBAGENTS = (
    "SELECT c.session_id FROM sessions AS c JOIN sessions AS p ON p.id = c.parent WHERE p.session_id = :sid ORDER BY "
    "c.id"
)

# How many sessions deleting this one deletes with it: its subagents, theirs, and so on (UNION: a loop made by hand
# ends).
SUBAGENT_COUNT = (
    "WITH RECURSIVE tree(id) AS (SELECT sessions.id AS id FROM sessions WHERE sessions.session_id = :sid UNION SELECT "
    "s.id AS id FROM sessions AS s JOIN tree ON s.parent = tree.id) SELECT count(*) - 1 AS anon_1 FROM tree"
)

# Ids starting with a prefix: a range scan over the unique index (LIKE could not use it).
RESOLVE_PREFIX = (
    "SELECT sessions.session_id FROM sessions WHERE sessions.session_id >= :low AND sessions.session_id < :high ORDER "
    "BY sessions.session_id LIMIT 6"
)

# Full-text search, best first, over ``events_fts`` (search_in: over the scratch index records.search makes of the
# events the index does not hold yet). A hit: the session, its title and its parent (as the overview gives them), the
# event, and what shows where the words are; its rank last, so the two can be merged.
SEARCH = (
    "SELECT s.session_id, (SELECT o.title FROM session_overview AS o WHERE s.session_id = o.session_id) AS anon_1, "
    "(SELECT o.parent_id FROM session_overview AS o WHERE s.session_id = o.session_id) AS anon_2, e.position, e.type, "
    "e.role, snippet(events_fts, -1, '[', ']', '…', 12) AS snippet_1, events_fts.rank FROM events_fts JOIN events AS e "
    "ON e.id = events_fts.rowid JOIN sessions AS s ON s.id = e.session WHERE events_fts MATCH :query ORDER BY "
    "events_fts.rank LIMIT :limit"
)

# The events the full-text index does not hold yet (ids past the mark), with their text.
SEARCH_NEW_EVENTS = (
    "SELECT transcript.event_id, transcript.text FROM transcript WHERE transcript.event_id > (SELECT "
    "events_fts_progress.indexed_through FROM events_fts_progress) AND transcript.text IS NOT NULL"
)

# PostgreSQL: the words (the transcript's text cut as FTS5 cuts words, revisions 0009 and 0015) find candidates for a
# tsquery, through the GIN index events_fts and, for the events not indexed yet, computed from their text;
# records.search keeps those whose words match as FTS5's tokenizer has it, and cuts the snippet from the text. Paged: a
# page may keep fewer hits than it read.
SEARCH_POSTGRESQL = (
    "WITH found AS MATERIALIZED (SELECT events_words.event AS event_id FROM events_words WHERE events_words.words @@ "
    "CAST(:query AS TSQUERY) UNION SELECT m.event_id AS event_id FROM transcript AS m JOIN events_unindexed ON "
    "events_unindexed.event = m.event_id WHERE sessionstore_search_words(m.text) @@ CAST(:query AS TSQUERY)) SELECT "
    "t.session_id, (SELECT o.title FROM session_overview AS o WHERE o.session_id = t.session_id) AS anon_1, (SELECT "
    "o.parent_id FROM session_overview AS o WHERE o.session_id = t.session_id) AS anon_2, t.position, t.type, t.role, "
    "t.text FROM transcript AS t JOIN found ON found.event_id = t.event_id ORDER BY t.event_id DESC LIMIT :limit "
    "OFFSET :offset"
)

# PostgreSQL: up to :batch queued events (revision 0015), taken off the queue for this transaction to index (rows
# another transaction holds are skipped); their ids.
TAKE_UNINDEXED_POSTGRESQL = (
    "DELETE FROM events_unindexed WHERE events_unindexed.event IN (SELECT events_unindexed.event FROM events_unindexed "
    "ORDER BY events_unindexed.event LIMIT :batch FOR UPDATE SKIP LOCKED) RETURNING event"
)

# PostgreSQL: the words of the events taken (:events), computed from their text as it is now; an event out of the
# transcript has none.
WRITE_WORDS_POSTGRESQL = (
    "WITH fresh AS (SELECT transcript.event_id AS event_id, sessionstore_search_words(transcript.text) AS words FROM "
    "transcript WHERE transcript.event_id = any(:events)), gone AS (DELETE FROM events_words WHERE events_words.event "
    "= any(:events) AND (events_words.event NOT IN (SELECT fresh.event_id FROM fresh WHERE fresh.words IS NOT NULL))) "
    "INSERT INTO events_words (event, words) SELECT fresh.event_id, fresh.words FROM fresh WHERE fresh.words IS NOT "
    "NULL ON CONFLICT (event) DO UPDATE SET words = excluded.words"
)

# PostgreSQL: whether any event this role sees is queued for indexing (a storage opening indexes them).
ANY_UNINDEXED_POSTGRESQL = "SELECT events_unindexed.event FROM events_unindexed LIMIT 1"

# How many sessions, and how many released: the column as each database reads a boolean (an integer in SQLite, where any
# but 0 is true, as records read it), one text for both.
SESSION_COUNT = "SELECT count(*) AS count_1, count(CASE WHEN sessions.released THEN 1 END) AS count_2 FROM sessions"

# SESSION_COUNT at revision 0012 on: an earlier branch is part of its session, not one more (stats).
LIVE_SESSION_COUNT = (
    "SELECT count(*) AS count_1, count(CASE WHEN sessions.released THEN 1 END) AS count_2 FROM sessions WHERE "
    "sessions.branch_of IS NULL"
)

SESSION_IDS = "SELECT sessions.session_id FROM sessions ORDER BY sessions.id"

EVENT_TYPES = (
    "SELECT events.type, count(*) AS count_1 FROM events GROUP BY events.type ORDER BY count(*) DESC, events.type"
)

# The lowest and highest event ids (check samples events between them).
EVENT_ID_RANGE = "SELECT min(events.id) AS min_1, max(events.id) AS max_1 FROM events"

# What stats shows for a server's database where a file has its size.
DATABASE_SIZE_POSTGRESQL = (
    "SELECT pg_database_size(current_database()) AS pg_database_size_1, pg_total_relation_size('sessions') + "
    "pg_total_relation_size('events') AS anon_1"
)

# Events whose session row is gone (the foreign key stops it, unless it was dropped or triggers disabled).
ORPHAN_EVENTS_POSTGRESQL = (
    "SELECT e.id, e.session FROM events AS e LEFT OUTER JOIN sessions AS s ON s.id = e.session WHERE s.id IS NULL "
    "ORDER BY e.id LIMIT 10"
)

REVISION = "SELECT version_num FROM alembic_version"

# -- usage and retention (revision 0010) -------------------------------------------------------------------------------

# A session's tokens, summed over its usage events alone (the partial index ix_events_usage): how many, then each kind.
# Its subagents' are not added: AG2 reports what a subagent spent in its session too (a subtask rollup), and it is
# counted there.
SESSION_USAGE = (
    "SELECT count(events.input_tokens) AS count_1, coalesce(sum(events.input_tokens), 0) AS coalesce_1, "
    "coalesce(sum(events.output_tokens), 0) AS coalesce_2, coalesce(sum(events.cache_read_tokens), 0) AS coalesce_3, "
    "coalesce(sum(events.cache_write_tokens), 0) AS coalesce_4, coalesce(sum(events.reasoning_tokens), 0) AS "
    "coalesce_5 FROM events WHERE events.input_tokens IS NOT NULL AND events.session = (SELECT sessions.id FROM "
    "sessions WHERE sessions.session_id = :sid)"
)

# SESSION_USAGE of every session of a listing's page in one statement, not one per session: their ids as ``:sid0``,
# ``:sid1``, ... (USAGE_PAGE of them in statements.py; NULL past the page's end); a row for each that spent tokens,
# counted as SESSION_USAGE counts.
PAGE_USAGE = (
    "SELECT sessions.session_id, count(events.input_tokens) AS count_1, coalesce(sum(events.input_tokens), 0) AS "
    "coalesce_1, coalesce(sum(events.output_tokens), 0) AS coalesce_2, coalesce(sum(events.cache_read_tokens), 0) AS "
    "coalesce_3, coalesce(sum(events.cache_write_tokens), 0) AS coalesce_4, coalesce(sum(events.reasoning_tokens), 0) "
    "AS coalesce_5 FROM events JOIN sessions ON events.session = sessions.id WHERE events.input_tokens IS NOT NULL AND "
    "sessions.session_id IN (:sid0, :sid1, :sid2, :sid3, :sid4, :sid5, :sid6, :sid7, :sid8, :sid9, :sid10, :sid11, "
    ":sid12, :sid13, :sid14, :sid15, :sid16, :sid17, :sid18, :sid19, :sid20, :sid21, :sid22, :sid23, :sid24, :sid25, "
    ":sid26, :sid27, :sid28, :sid29, :sid30, :sid31, :sid32, :sid33, :sid34, :sid35, :sid36, :sid37, :sid38, :sid39, "
    ":sid40, :sid41, :sid42, :sid43, :sid44, :sid45, :sid46, :sid47, :sid48, :sid49, :sid50, :sid51, :sid52, :sid53, "
    ":sid54, :sid55, :sid56, :sid57, :sid58, :sid59, :sid60, :sid61, :sid62, :sid63, :sid64, :sid65, :sid66, :sid67, "
    ":sid68, :sid69, :sid70, :sid71, :sid72, :sid73, :sid74, :sid75, :sid76, :sid77, :sid78, :sid79, :sid80, :sid81, "
    ":sid82, :sid83, :sid84, :sid85, :sid86, :sid87, :sid88, :sid89, :sid90, :sid91, :sid92, :sid93, :sid94, :sid95, "
    ":sid96, :sid97, :sid98, :sid99, :sid100, :sid101, :sid102, :sid103, :sid104, :sid105, :sid106, :sid107, :sid108, "
    ":sid109, :sid110, :sid111, :sid112, :sid113, :sid114, :sid115, :sid116, :sid117, :sid118, :sid119, :sid120, "
    ":sid121, :sid122, :sid123, :sid124, :sid125, :sid126, :sid127, :sid128, :sid129, :sid130, :sid131, :sid132, "
    ":sid133, :sid134, :sid135, :sid136, :sid137, :sid138, :sid139, :sid140, :sid141, :sid142, :sid143, :sid144, "
    ":sid145, :sid146, :sid147, :sid148, :sid149, :sid150, :sid151, :sid152, :sid153, :sid154, :sid155, :sid156, "
    ":sid157, :sid158, :sid159, :sid160, :sid161, :sid162, :sid163, :sid164, :sid165, :sid166, :sid167, :sid168, "
    ":sid169, :sid170, :sid171, :sid172, :sid173, :sid174, :sid175, :sid176, :sid177, :sid178, :sid179, :sid180, "
    ":sid181, :sid182, :sid183, :sid184, :sid185, :sid186, :sid187, :sid188, :sid189, :sid190, :sid191, :sid192, "
    ":sid193, :sid194, :sid195, :sid196, :sid197, :sid198, :sid199, :sid200, :sid201, :sid202, :sid203, :sid204, "
    ":sid205, :sid206, :sid207, :sid208, :sid209, :sid210, :sid211, :sid212, :sid213, :sid214, :sid215, :sid216, "
    ":sid217, :sid218, :sid219, :sid220, :sid221, :sid222, :sid223, :sid224, :sid225, :sid226, :sid227, :sid228, "
    ":sid229, :sid230, :sid231, :sid232, :sid233, :sid234, :sid235, :sid236, :sid237, :sid238, :sid239, :sid240, "
    ":sid241, :sid242, :sid243, :sid244, :sid245, :sid246, :sid247, :sid248, :sid249, :sid250, :sid251, :sid252, "
    ":sid253, :sid254, :sid255) GROUP BY sessions.session_id"
)

# The database's tokens (stats), each counted once: the sessions of their own alone, since AG2 reports what a subagent
# spent in the subagent's session and again in its parent's (a subtask rollup).
TOTAL_USAGE = (
    "SELECT count(events.input_tokens) AS count_1, coalesce(sum(events.input_tokens), 0) AS coalesce_1, "
    "coalesce(sum(events.output_tokens), 0) AS coalesce_2, coalesce(sum(events.cache_read_tokens), 0) AS coalesce_3, "
    "coalesce(sum(events.cache_write_tokens), 0) AS coalesce_4, coalesce(sum(events.reasoning_tokens), 0) AS "
    "coalesce_5 FROM events WHERE events.input_tokens IS NOT NULL AND events.session IN (SELECT sessions.id FROM "
    "sessions WHERE sessions.parent IS NULL)"
)

# A session's tokens turn by turn, turns numbered as the usage view numbers them (a turn begins at a user message; 0 is
# what came before the first), over this session's events alone (the view numbers every session's).
TURN_USAGE = (
    "SELECT u.turn, count(*) AS count_1, sum(u.input_tokens) AS sum_1, sum(u.output_tokens) AS sum_2, "
    "sum(u.cache_read_tokens) AS sum_3, sum(u.cache_write_tokens) AS sum_4, sum(u.reasoning_tokens) AS sum_5 FROM "
    "(SELECT events.input_tokens AS input_tokens, events.output_tokens AS output_tokens, events.cache_read_tokens AS "
    "cache_read_tokens, events.cache_write_tokens AS cache_write_tokens, events.reasoning_tokens AS reasoning_tokens, "
    "sum(CASE WHEN (events.role = 'user') THEN 1 ELSE 0 END) OVER (ORDER BY events.position) AS turn FROM events WHERE "
    "events.session = (SELECT sessions.id FROM sessions WHERE sessions.session_id = :sid)) AS u WHERE u.input_tokens "
    "IS NOT NULL GROUP BY u.turn ORDER BY u.turn"
)

# A setting of the database (the retention policy: its age in seconds).
SETTING = "SELECT settings.value FROM settings WHERE settings.name = :name"

PUT_SETTING = (
    "INSERT INTO settings (name, value) VALUES (:name, :value) ON CONFLICT (name) DO UPDATE SET value = excluded.value"
)

DROP_SETTING = "DELETE FROM settings WHERE settings.name = :name"

# What retention removes (prune judges by the same rule over the listing's records, admin.prune): sessions of their own
# (a subagent or an earlier branch goes with its session, never alone) not updated since ``:cutoff``, oldest first, with
# their row ids (a storage asks their holds' locks); the caller leaves out those a live process holds.
STALE_SESSIONS = (
    "SELECT sessions.id, sessions.session_id, sessions.updated_at FROM sessions WHERE sessions.parent IS NULL AND "
    "sessions.branch_of IS NULL AND sessions.updated_at < :cutoff ORDER BY sessions.updated_at, sessions.id LIMIT "
    ":limit"
)

# When retention finds something next: the last update of the oldest session of its own not stale yet.
NEXT_STALE = (
    "SELECT min(sessions.updated_at) AS min_1 FROM sessions WHERE sessions.parent IS NULL AND sessions.branch_of IS "
    "NULL AND sessions.updated_at >= :cutoff"
)

# The usage events of a session, by position, with their tokens (show, export).
EVENT_TOKENS = (
    "SELECT events.position, events.input_tokens, events.output_tokens, events.cache_read_tokens, "
    "events.cache_write_tokens, events.reasoning_tokens FROM events WHERE events.input_tokens IS NOT NULL AND "
    "events.session = (SELECT sessions.id FROM sessions WHERE sessions.session_id = :sid) ORDER BY events.position"
)


# -- written by hand: what follows is kept as it is by --write ------------------------------------------------------


def list_sessions(*, cwd: bool, after: bool, limit: bool, where: str = "", order: str = "updated_at") -> str:
    """Sessions newest first by ``order`` (``updated_at`` or ``created_at``, then ``session_id``), keyset-paged after
    ``(:before, :before_id)``.

    One statement in a few shapes (with or without a ``cwd``, a cursor, a
    limit), each able to use its index; ``where`` adds a condition of the
    caller's. Assembled per call after :data:`OVERVIEW` (which
    :data:`LEGACY_OVERVIEW` can stand for), over the view's own column names.
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


def search_in(table: str) -> str:
    """:data:`SEARCH` over another FTS5 table of event ids and their text (``temp.new_events``): the index's name
    appears in it only where it names the index."""
    return SEARCH.replace("events_fts", table)
