"""Search on SQLite: FTS5 over the transcript, exact however far the index trails, and the index kept up.

Writers index new events in batches (:func:`index_new_events`, revision 0005);
a search indexes the events past the index's mark into a scratch index of its
own connection, and reads both in one snapshot, so no committed event is missed.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterator

from ..errors import UsageError
from ..reads import Connection, SearchHit
from ..schema import queries

__all__ = ["INDEX_BATCH", "fts_query", "index_new_events", "merge_index", "search"]


def fts_query(text: str) -> str:
    """Plain words to an FTS5 query matching events that hold all of them.

    Each word becomes one quoted term, so punctuation (``-``, ``:``, quotes) is
    never read as query syntax; words are cut where the index's tokenizer cuts
    them (letters, digits and ``_``), and found anywhere in an event, in any
    order, as PostgreSQL finds them too. Phrases (``"build red"``) and the rest
    of FTS5's syntax are for ``raw``.
    """
    return " ".join(f'"{word}"' for word in re.findall(r"\w+", text))


def search(conn: Connection, text: str, *, raw: bool, limit: int) -> list[SearchHit]:
    """Events whose text matches, best first; ``raw`` takes FTS5 query syntax as it is. ``conn`` reads a file at
    :data:`~sessionstore.schema.revisions.HEAD` (the backend refused any other).

    Exact however far the index trails (revision 0005): the events past its mark
    are indexed into a scratch index of this connection's own, and both are
    searched in one snapshot, so no committed event is missed.
    """
    query = text if raw else fts_query(text)
    if not query.strip():
        raise UsageError(f"nothing to search for in {text!r} (words are letters, digits and _)")
    assert isinstance(conn, sqlite3.Connection)
    try:
        with _new_events_index(conn) as table:
            params = {"query": query, "limit": limit}
            rows = conn.execute(queries.SEARCH, params).fetchall()
            if table is not None:
                rows += conn.execute(queries.search_in(table), params).fetchall()
    except sqlite3.OperationalError as exc:
        if "fts5" in str(exc).lower() or "syntax" in str(exc).lower():
            raise UsageError(f"not a valid full-text query: {text!r} ({exc})") from None
        raise
    rows.sort(key=lambda row: row[-1])  # by rank; bm25 of the two indexes are alike enough to interleave
    return [
        SearchHit(str(s), t, int(p), str(k), str(snip), role, parent)
        for s, t, parent, p, k, role, snip, _ in rows[:limit]
    ]


_NEW_EVENTS = "new_events"
# The index's own options but where its text comes from (and the comments in its declaration): the scratch index
# tokenizes exactly as it does. A name is quoted either way (revision 0008 writes content="transcript").
_CONTENT_OPTION = re.compile(r"""\s*\bcontent(?:_rowid)?\s*=\s*(?:'[^']*'|"[^"]*")\s*,?|\s*/\*.*?\*/""", re.DOTALL)


@contextlib.contextmanager
def _new_events_index(conn: sqlite3.Connection) -> Iterator[str | None]:
    """One read snapshot, and in it a temporary FTS5 table of the events ``events_fts`` does not hold yet (None
    when it holds them all).

    The temp schema is the connection's own, in memory: the database file is
    not written (``query_only`` is lifted only while the scratch table exists).
    """
    new: list[tuple[int, str]] = []
    conn.execute("BEGIN")
    try:
        new = conn.execute(queries.SEARCH_NEW_EVENTS).fetchall()
        if new:
            sql = str(conn.execute("SELECT sql FROM sqlite_master WHERE name = 'events_fts'").fetchone()[0])
            options = _CONTENT_OPTION.sub(" ", sql[sql.index("(") + 1 : sql.rindex(")")]).strip()
            conn.execute("PRAGMA query_only = OFF")
            conn.execute(f"CREATE VIRTUAL TABLE temp.{_NEW_EVENTS} USING fts5({options})")
            conn.executemany(f"INSERT INTO temp.{_NEW_EVENTS} (rowid, text) VALUES (?, ?)", new)
        yield _NEW_EVENTS if new else None
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")  # a read, and the scratch table's rows: nothing to keep
        if new:
            conn.execute(f"DROP TABLE IF EXISTS temp.{_NEW_EVENTS}")
            conn.execute("PRAGMA query_only = ON")


INDEX_BATCH = 256
"""At most this many events are indexed in one transaction (about a millisecond): a file left far behind, by a
crash or a large ``set_history``, is caught up without holding up the writes that come meanwhile."""


def index_new_events(conn: sqlite3.Connection, batch: int = INDEX_BATCH) -> bool:
    """Index up to ``batch`` events past the full-text index's mark, inside the caller's write transaction, and
    move the mark past them (revision 0005); whether more are left.

    Writers call it every few hundred events and when they finish; until then
    ``search`` finds the newer events through a scratch index of its own.
    """
    through = conn.execute(queries.NEXT_MARK, {"batch": batch}).fetchone()[0]
    if through is None:
        return False
    conn.execute(queries.INDEX_NEW_EVENTS, {"through": through})
    conn.execute(queries.MARK_INDEXED, {"through": through})
    return bool(conn.execute(queries.NEXT_MARK, {"batch": 1}).fetchone()[0])


def merge_index(conn: sqlite3.Connection) -> bool:
    """One step of merging the index's segments, inside the caller's write transaction; whether it merged
    anything (until it does not, a deleted event's words may be left in older segments)."""
    before = conn.total_changes
    conn.execute(queries.MERGE_INDEX)
    return conn.total_changes - before > 1
