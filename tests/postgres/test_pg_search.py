"""Search on PostgreSQL gives SQLite's answers: the same sessions written into a SQLite file (FTS5, unicode61)
and a PostgreSQL database (GIN index over the words as FTS5 cuts them, revision 0009), the same queries, the same
hits: named examples, and texts and queries hypothesis makes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID, uuid4

import asyncpg  # type: ignore[import-untyped]
import pytest
from _pgcli import run, write_both
from pg_server import PostgresServer

from sessionstore import ModelMessage, ToolCall, ToolResult, UserMessage, records
from sessionstore.errors import NotOnPostgreSQLError
from sessionstore.postgres import migrate as pgmigrate
from sessionstore.postgres.search import _index_spelling
from sessionstore.schema import queries

TEXTS = [
    "Why is the build red? It was green yesterday.",
    "test_parse_dates fails: the fixture expects UTC.",
    "Please parse dates in the log",
    "Use a well-known foo-bar pattern; it's fine, don't worry.",
    "BUILD Succeeded (after 3 tries)",
    "Straße naïve émigré café",
    "naive emigre cafe in ASCII",
    "See example.com for more",
    "mixed CASE Words and MiXeD",
    "unicode Ünïcödé ÜBER",
    "numbers 42 and 3.14 and v1",
    "open /home/me/src/app.py, mail bob@example.org, pin v1.2.3, call self.assertEqual",
    "ÉCOLE Ωmega ΆΝΘΡΩΠΟΣ x² straße E\u0301ric",
]

AGREE = [
    "build", "red", "build red", "Build", "BUILD", "green yesterday", "test_parse_dates", "parse", "dates",
    "parse dates", "parse_dates", "fixture UTC", "foo", "bar", "foo-bar", "it", "s", "don t", "well known",
    "succeeded", "3", "tries", "naïve", "émigré", "café", "Straße", "NAÏVE", "example", "mixed", "case", "words",
    "42", "pytest", "cmd", "run", "x", "ünïcödé", "über", "Ünïcödé", "nothing-here", "red?", "(after",
    "naive", "com", "14", "ecole", "école", "Ecole", "ωmega", "ανθρωπος", "ΆΝΘΡΩΠΟΣ", "x²", "x", "eric", "STRASSE",
]  # fmt: skip

AGREE_FTS = [
    "bui*", "build OR green", "build NOT red", "parse*", "test_*", "(build OR green) AND red", "naï*", "caf*",
    "red AND NOT", "fixture OR (mixed AND words)", "Build", "\"build\"", "ex*",
    '"build red"', '"red build"', '"parse dates"', '"parse da"*', '"example com"', '"home me src"', '"me home"',
    '"3.14"', '"v1.2.3"', '"self.assertEqual"', '"bob@example.org"', 'app AND "src app"', '"ecole"', "eco*",
]  # fmt: skip


@pytest.fixture(scope="module")
def both(pg_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """The same sessions in a SQLite file and a PostgreSQL database (written by each storage)."""
    name = pg_server.create_database()
    url = pg_server.url(name)
    pgmigrate.migrate(url)
    db = tmp_path_factory.mktemp("search") / "same.db"
    sessions = [
        (uuid4(), [UserMessage(text), ModelMessage(f"answer {n}")], {"cwd": "/w"}) for n, text in enumerate(TEXTS)
    ]
    sessions.append(
        (
            uuid4(),
            [
                ToolCall(call_id="c1", name="run", arguments={"cmd": "pytest -x"}),
                ToolResult(call_id="c1", content="ok"),
            ],
            {"cwd": "/w", "title": "tools"},
        )
    )
    write_both(db, url, sessions)
    yield db, url
    pg_server.drop_database(name)


def hits(db: str | Path, query: str, raw: bool = False) -> set[tuple[str, int]]:
    return {(h.session_id, h.position) for h in records.search(db, query, raw=raw, limit=1000)}


def sqlite_or_error(db: Path, query: str, raw: bool) -> set[tuple[str, int]] | None:
    try:
        return hits(db, query, raw)
    except Exception:
        return None


@pytest.mark.parametrize("query", AGREE)
def test_plain_words_find_the_same_events(both: tuple[Path, str], query: str) -> None:
    db, url = both
    expected = hits(db, query)
    assert hits(url, query) == expected


@pytest.mark.parametrize("query", AGREE_FTS)
def test_fts_syntax_with_a_meaning_on_postgresql_finds_the_same(both: tuple[Path, str], query: str) -> None:
    db, url = both
    expected = sqlite_or_error(db, query, raw=True)
    if expected is None:  # FTS5 refuses it: so does PostgreSQL, in one line
        with pytest.raises(Exception) as refused:
            hits(url, query, raw=True)
        assert "not a valid full-text query" in str(refused.value)
    else:
        assert hits(url, query, raw=True) == expected


def test_the_corpus_is_not_trivial(both: tuple[Path, str]) -> None:
    db, _ = both
    assert len(hits(db, "naïve")) == 2 and len(hits(db, "build")) == 2 and len(hits(db, "parse")) == 1
    assert len(hits(db, "parse*", raw=True)) == 1 and len(hits(db, "build NOT red", raw=True)) == 1


# What a user on PostgreSQL 15 searched for and found only on SQLite (issue 23): PostgreSQL's parser kept these
# tokens whole, so no word inside them was proposed.
NAMED = [
    "example.com", "3.14", "app.py", "/home/me/src/app.py", "home", "src", "bob@example.org", "v1.2.3",
    "self.assertEqual", "example", "org", "assertEqual",
]  # fmt: skip


@pytest.mark.parametrize("query", NAMED)
def test_the_named_examples_on_the_command_line(both: tuple[Path, str], query: str) -> None:
    db, url = both
    lite, pg = run("search", query, "--json", "--db", db), run("search", query, "--json", "--db", url)
    assert lite.returncode == 0 and pg.returncode == 0, (lite.stderr, pg.stderr)
    found = json.loads(lite.stdout)
    assert found, query  # SQLite finds it: the corpus holds it
    assert sorted(json.loads(pg.stdout), key=str) == sorted(found, key=str)


@pytest.mark.parametrize("query", ["NEAR(build red)", "text:build", "^build", "build + red"])
def test_fts5_syntax_without_an_equivalent_is_refused_in_one_line(both: tuple[Path, str], query: str) -> None:
    _, url = both
    with pytest.raises(NotOnPostgreSQLError, match="no equivalent on PostgreSQL"):
        records.search(url, query, raw=True)
    done = run("search", "--fts", query, "--db", url)
    assert done.returncode == 1 and done.stderr.startswith("sessionstore: error: --fts ")
    assert done.stderr.count("\n") == 1


def test_snippets_show_the_matching_words(both: tuple[Path, str]) -> None:
    db, url = both
    for query in ("fixture", "parse dates", "émigré", "bui*"):
        raw = query.endswith("*")
        pg = records.search(url, query, raw=raw)
        lite = {(h.session_id, h.position): h.snippet for h in records.search(db, query, raw=raw)}
        assert pg and {(h.session_id, h.position) for h in pg} == set(lite)
        for hit in pg:
            assert "[" in hit.snippet and "]" in hit.snippet, hit
            assert hit.snippet == lite[(hit.session_id, hit.position)], hit  # FTS5's snippet, made the same way


def test_the_limit_and_the_command_line(both: tuple[Path, str]) -> None:
    db, url = both
    assert len(records.search(url, "answer", limit=3)) == 3
    assert hits(url, "answer") == hits(db, "answer") and len(hits(db, "answer")) == len(TEXTS)
    lite, pg = run("search", "build", "--json", "--db", db), run("search", "build", "--json", "--db", url)
    # The same hits, snippets and titles; in each database's own order (FTS5's bm25; newest first on PostgreSQL).
    assert pg.returncode == 0 and len(json.loads(pg.stdout)) == 2
    assert sorted(json.loads(pg.stdout), key=str) == sorted(json.loads(lite.stdout), key=str)


def test_the_index_serves_the_search(both: tuple[Path, str]) -> None:
    _, url = both
    sql = queries.SEARCH_POSTGRESQL
    for name, value in (("query", "'build':*"), ("limit", "20"), ("offset", "0")):
        sql = sql.replace(f":{name}", value if name != "query" else f"'{value.replace(chr(39), chr(39) * 2)}'")

    async def plan() -> str:
        conn = await asyncpg.connect(url.replace("+asyncpg", ""))
        try:
            await conn.execute("SET enable_seqscan = off")
            return "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + sql))
        finally:
            await conn.close()

    assert "events_fts" in asyncio.run(plan())


def test_the_python_spelling_is_the_functions(both: tuple[Path, str]) -> None:
    """search.py spells a query word as 0009's sessionstore_search_words spells the text: one rule, two places."""
    _, url = both
    texts = [*TEXTS, "a" * 150 + " b", "x\u00b2 \u2167 \ue000z \u05e9\u05b7\u05d1 a\u20d0b \u0130stanbul \u01c5", ""]

    async def lexemes() -> list[set[str]]:
        conn = await asyncpg.connect(url.replace("+asyncpg", ""))
        try:
            rows = [await conn.fetchval("SELECT tsvector_to_array(sessionstore_search_words($1))", t) for t in texts]
            return [set(r) for r in rows]
        finally:
            await conn.close()

    assert asyncio.run(lexemes()) == [set(_index_spelling(t)) for t in texts]


def test_ids_are_uuids(both: tuple[Path, str]) -> None:
    db, _ = both
    assert all(UUID(hex=sid) for sid, _ in hits(db, "answer"))
