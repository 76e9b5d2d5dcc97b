"""Search on PostgreSQL gives SQLite's answers for any text and any query drawn from it (hypothesis): words,
dotted names, paths, e-mail addresses, versions, identifiers with ``_``, accents, Greek, mixed case, written to a
SQLite file (FTS5) and a PostgreSQL database (revision 0009's index), the same hits by ``records.search``."""

from __future__ import annotations

import asyncio
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest
from _pgcli import write_sessions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_server import PostgresServer

from sessionstore import ModelMessage, SQLiteStorage, UserMessage, records
from sessionstore.postgres import PostgresStorage
from sessionstore.postgres import migrate as pgmigrate
from sessionstore.postgres.search import _tokens

# Latin with and without accents, Greek with tonos (FTS5 keeps it), Cyrillic.
LETTERS = "abcdeprstxyzABCDEPRSTXYZéèêëàâäîïôöüçñåøßÉÈÊÀÄÖÜÇÑÅŁłœĳ"
LETTERS += "\u03b1\u03b2\u03b3\u03ac\u03ad\u03a9\u0386\u0416\u0436\u0439"
_word = st.text(LETTERS, min_size=1, max_size=7)
_digits = st.integers(0, 399).map(str)
_name = st.lists(_word, min_size=1, max_size=3)


def _accents_off(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", word) if not unicodedata.combining(c))


PIECES = st.one_of(
    _word,
    _digits,
    _name.map(".".join),  # dotted names: self.assertEqual, example.com
    _name.map(lambda parts: "/" + "/".join(parts) + ".py"),  # paths
    st.tuples(_word, _word, _word).map(lambda p: f"{p[0]}@{p[1]}.{p[2]}"),  # e-mail addresses
    st.tuples(_digits, _digits, _digits).map(lambda p: f"v{p[0]}.{p[1]}.{p[2]}"),  # versions
    _name.map("_".join),  # identifiers
    _word.map(lambda w: unicodedata.normalize("NFD", w)),  # accents written apart
    st.sampled_from(["x²", "3.14", "foo-bar", "it's", "(a)", "—", "m²", "e\u0301"]),
)
SEPARATORS = st.sampled_from([" ", ", ", "\n", " — ", "; ", ": ", "  "])


@st.composite
def text_and_queries(draw: st.DrawFn) -> tuple[str, list[tuple[str, bool]]]:
    pieces = draw(st.lists(PIECES, min_size=1, max_size=8))
    text = "".join(piece + draw(SEPARATORS) for piece in pieces).strip()
    piece = draw(st.sampled_from(pieces))
    words = [w for p in pieces for w in re.findall(r"\w+", p)] or ["x"]
    word = draw(st.sampled_from(words))
    queries = [
        (piece, False),  # a whole piece as typed: example.com, /home/me/src/app.py
        (word, False),  # a word inside one
        (draw(st.sampled_from([str.upper, str.lower, str.capitalize, _accents_off]))(word), False),
        (draw(_word), False),  # often not there
    ]
    if word.isalnum():
        queries.append((word[: draw(st.integers(1, len(word)))] + "*", True))  # a prefix
    if len(words) > 1:
        i = draw(st.integers(0, len(words) - 2))
        queries.append((f'"{words[i]} {words[i + 1]}"', True))  # a phrase
    return text, queries


@pytest.fixture(scope="module")
def pair(pg_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    name = pg_server.create_database()
    url = pg_server.url(name)
    pgmigrate.migrate(url)
    yield tmp_path_factory.mktemp("property") / "same.db", url
    pg_server.drop_database(name)


def _hits(db: str | Path, query: str, raw: bool) -> set[tuple[str, int]]:
    return {(h.session_id, h.position) for h in records.search(db, query, raw=raw, limit=10_000)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=text_and_queries())
def test_any_text_any_query_the_same_hits(pair: tuple[Path, str], case: tuple[str, list[tuple[str, bool]]]) -> None:
    db, url = pair
    text, queries = case
    session = (uuid4(), [UserMessage(text), ModelMessage(text.upper())], {"cwd": "/w"})

    async def write() -> None:
        async with SQLiteStorage(db) as lite, PostgresStorage(url) as pg:
            await write_sessions(lite, [session])
            await write_sessions(pg, [session])

    asyncio.run(write())
    for query, raw in queries:
        if not re.search(r"\w", query):
            continue
        expected = _hits(db, query, raw)
        assert _hits(url, query, raw) == expected, (text, query)
    # The session's own first word (as FTS5 indexed it) finds it on both: the comparisons are not all empty.
    first = _tokens(text)[0]
    assert (session[0].hex, 0) in _hits(db, first, False) & _hits(url, first, False)
