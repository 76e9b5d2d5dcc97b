"""PostgreSQL search: revision 0009's index (the words as FTS5 cuts them) against 0003's (to_tsvector('simple')).

Starts a throwaway server (tests/pg_server.py), fills a database at head with ``--events`` events by
generate_series (texts mixing words, paths, e-mail addresses, versions, dotted names, accents), builds both
indexes side by side (their build times and sizes), then times one page of candidates (the search statement's
first 200 rows, what the index serves) for each query with each index, in interleaved rounds (the order swapped
every round): the paired ratio old/new per query, as every bench here reports it.

    python3 bench/pg_search.py --events 1000000 --rounds 16
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pg_server import PostgresServer

from sessionstore.postgres import migrate as pgmigrate
from sessionstore.postgres.search import _all_words, _tsquery
from sessionstore.schema import queries
from sessionstore.schema.revisions import objects_at_head

TEXT = "CASE WHEN text_path IS NULL THEN text ELSE sessionstore_json_text(payload, text_path) END"
OLD_INDEX = f"CREATE INDEX events_fts_old ON events USING gin (to_tsvector('simple', {TEXT})) WHERE role IS NOT NULL"
OLD_SEARCH = (
    queries.SEARCH_POSTGRESQL.replace("sessionstore_search_words(m.text)", "to_tsvector('simple', m.text)")
    .replace("CAST(:query AS TSQUERY)", "to_tsquery('simple', :query)")
    .replace(":limit", "200")
    .replace(":offset", "0")
)
NEW_SEARCH = queries.SEARCH_POSTGRESQL.replace(":limit", "200").replace(":offset", "0")
# One event's text, varied by its number: prose, a path, an address, a version, a dotted name, accents.
FILL = """
INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, created_at, updated_at, released,
                      revision)
SELECT lpad(to_hex(s), 32, '0'), '/w', '[]', '[]', '{}', now(), now(), false, 0 FROM generate_series(1, $1) AS s;
"""
EVENTS = """
INSERT INTO events (session, position, type, payload, created_at, role, text_path)
SELECT 1 + n % $2, n / $2, 'user_message', json_build_object('content',
  (ARRAY['Why is the build red', 'Please parse dates in the log', 'the café served crème brûlée',
         'It was green yesterday', 'run the tests again'])[1 + n % 5]
  || ' edit /home/u' || (n % 997) || '/src/mod' || (n % 89) || '.py for dev' || (n % 613) || '@example.org'
  || ', pin v1.' || (n % 31) || '.' || (n % 7) || ', call self.assert' || (ARRAY['Equal', 'True', 'In'])[1 + n % 3]
  || ' and word' || (n % 50000))::text, now(), 'user', '$.content'
FROM generate_series(0, $1 - 1) AS n
"""
QUERIES = ["build", "home", "example.com", "v1.2.3", "self.assertEqual", "word4242", "creme", "mod17"]


def bound(sql: str, query: str) -> str:
    return sql.replace(":query", "'" + query.replace("'", "''") + "'")


async def timed(conn: asyncpg.Connection, sql: str, query: str) -> float:
    start = time.perf_counter()
    await conn.fetch(bound(sql, query))
    return (time.perf_counter() - start) * 1000


async def main(events: int, rounds: int) -> None:
    server = PostgresServer().start()
    try:
        name = server.create_database()
        url = server.url(name)
        pgmigrate.migrate(url)
        conn = await asyncpg.connect(url.replace("+asyncpg", ""))
        try:
            await conn.execute("DROP INDEX events_fts")
            await conn.execute("SET maintenance_work_mem = '256MB'")
            start = time.perf_counter()
            await conn.execute(FILL.replace("$1", str(max(1, events // 100))))
            await conn.execute(EVENTS.replace("$1", str(events)).replace("$2", str(max(1, events // 100))))
            print(f"{events:,} events written in {time.perf_counter() - start:.1f} s")
            for label, sql in (("0003 to_tsvector('simple')", OLD_INDEX), ("0009 sessionstore_search_words", None)):
                start = time.perf_counter()
                await conn.execute(sql or objects_at_head(postgresql=True)["INDEX events_fts"])
                print(f"index {label}: built in {time.perf_counter() - start:.1f} s")
            await conn.execute("VACUUM ANALYZE events")
            sizes = await conn.fetch(
                "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes"
                " WHERE indexrelname IN ('events_fts', 'events_fts_old')"
            )
            for index, size in sizes:
                print(f"size {index}: {size / 2**20:.1f} MiB")
            table = await conn.fetchval("SELECT pg_relation_size('events')")
            print(f"table events: {table / 2**20:.1f} MiB")
            print(
                f"\n{'query':<18} {'old ms':>8} {'new ms':>8} {'old/new (range, new faster in)':>34}"
                f" {'rows old/new':>13}"
            )
            for word in QUERIES:
                old_q = new_q = _tsquery(_all_words(word))  # the same words: ASCII, one lexeme each
                rows_old = len(await conn.fetch(bound(OLD_SEARCH, old_q)))
                rows_new = len(await conn.fetch(bound(NEW_SEARCH, new_q)))
                old_t: list[float] = []
                new_t: list[float] = []
                for r in range(rounds):
                    pair = [(old_t, OLD_SEARCH, old_q), (new_t, NEW_SEARCH, new_q)]
                    for into, sql, q in pair if r % 2 == 0 else reversed(pair):
                        into.append(await timed(conn, sql, q))
                ratios = [o / n for o, n in zip(old_t, new_t, strict=True)]
                faster = sum(r > 1 for r in ratios)
                print(
                    f"{word:<18} {statistics.median(old_t):>8.2f} {statistics.median(new_t):>8.2f}"
                    f" {statistics.median(ratios):>9.2f}x ({min(ratios):.2f}-{max(ratios):.2f}, {faster} of {rounds})"
                    f" {rows_old:>6}/{rows_new}"
                )
        finally:
            await conn.close()
    finally:
        server.remove()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(main(args.events, args.rounds))
