"""Search on PostgreSQL: FTS5's answers from PostgreSQL's index, exact however far the index trails, and the
index kept up.

``sessionstore search`` finds the same events for the same words on either
database; this is how PostgreSQL's words index is made to give SQLite's FTS5
answers (see the comment below). Writers index new events in batches
(:func:`index_new_events`, revision 0015); until then search computes the words
of the few queued events as it reads them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from ..errors import NotOnPostgreSQLError, UsageError
from ..reads import Connection, SearchHit
from ..schema import queries

__all__ = ["INDEX_BATCH", "index_new_events", "search", "snippet"]

# -- search on PostgreSQL: FTS5's answers from PostgreSQL's index -------------------------------------------
#
# The index (revision 0009's sessionstore_search_words(text), kept in events_words since 0015, a GIN index over it,
# with the queued events' words computed as search reads them) holds each word of an event's text cut
# as FTS5's unicode61 tokenizer cuts it (letters, digits, _ and private-use characters; everything else a
# separator), lowered by ICU, every accent removed, capped at 100 characters, with no positions. So the index
# only proposes: each query word is spelled as that function spells it (_index_spelling) and looked up as a
# prefix of a lexeme, a phrase as all its words; each candidate is kept only if its text holds the query as FTS5
# cuts and folds words (_tokens: remove_diacritics 2 strips the accents of Latin letters alone, and a
# combining accent U+0300-U+036F inside a word). The index folds at least as much as FTS5 (it strips every
# accent), and never splits a word FTS5 keeps whole, so every event FTS5 finds is proposed.

# A word as FTS5 cuts text: Python's \w (letters, digits of any kind, _), private use, and combining accents,
# which FTS5 keeps inside a word and then drops. Queries are cut by \w+, as SQLite's search quotes them.
_WORD = re.compile(r"\w+")
_TOKEN = re.compile(r"[\w\u0300-\u036f\ue000-\uf8ff]+")
_INDEX_WORD = re.compile(r"[\w\ue000-\uf8ff]+")  # what 0009's function keeps, once accents are gone
_ACCENT = re.compile(r"[\u0300-\u036f]+")
_WORD_CAP = 100  # 0009's cap on a lexeme
_SNIPPET_TOKENS = 12


def _is_latin(c: str) -> bool:
    return ord(c) < 0x250 or 0x1E00 <= ord(c) < 0x1F00


def _fold(word: str) -> str:
    """A word as FTS5's unicode61 tokenizer (remove_diacritics 2) compares it: lower case, the accents of Latin
    letters removed (``é`` is ``e``, Greek ``ά`` stays), combining accents dropped."""
    out = []
    for c in word.lower():
        decomposed = unicodedata.normalize("NFD", c)
        out.append(decomposed[0] if len(decomposed) > 1 and _is_latin(decomposed[0]) else c)
    return _ACCENT.sub("", "".join(out))


def _tokens(text: str) -> list[str]:
    """``text``'s words as FTS5 indexes them, in order."""
    return [word for word in map(_fold, _TOKEN.findall(text)) if word]


def _index_spelling(word: str) -> list[str]:
    """``word`` as 0009's ``sessionstore_search_words`` spells it: lower case, every accent removed, cut at what
    it takes for a separator, each part capped (tests/postgres/test_pg_search.py compares the two)."""
    folded = _ACCENT.sub("", unicodedata.normalize("NFD", word.lower()))
    return [part[:_WORD_CAP] for part in _INDEX_WORD.findall(folded)]


@dataclass(frozen=True, slots=True)
class _Term:
    typed: str
    prefix: bool = False

    @property
    def word(self) -> str:
        return _fold(self.typed)

    def matches(self, token: str) -> bool:
        return token.startswith(self.word) if self.prefix else token == self.word

    def tsquery(self) -> str:
        parts = _index_spelling(self.typed) or [self.typed.lower()]
        return "(" + " & ".join(f"'{part}':*" for part in parts) + ")"


@dataclass(frozen=True, slots=True)
class _Phrase:
    """FTS5's ``"a b c"`` (``"a b"*``: the last word a prefix): the words in a row."""

    terms: tuple[_Term, ...]

    def holds(self, tokens: list[str]) -> bool:
        n = len(self.terms)
        return any(
            all(term.matches(tokens[i + k]) for k, term in enumerate(self.terms)) for i in range(len(tokens) - n + 1)
        )

    def tsquery(self) -> str:
        return "(" + " & ".join(term.tsquery() for term in self.terms) + ")"


# A query: a term, a phrase, or (operator, left, right) with operator AND, OR or NOT (FTS5's binary NOT: left and
# not right).
_Query = _Term | _Phrase | tuple[str, Any, Any]


def _all_words(text: str) -> _Query:
    terms: list[_Query] = [_Term(word) for word in _WORD.findall(text)]
    query = terms[0]
    for term in terms[1:]:
        query = ("AND", query, term)
    return query


_FTS_TOKEN = re.compile(r'\s*(\(|\)|"[^"]*"\*?|[^\s()"]+)')


def _parse_fts(text: str) -> _Query:
    """FTS5 query syntax, the part with a meaning on PostgreSQL: words, ``prefix*``, phrases (``"a b"``,
    ``"a b"*``), AND, OR, NOT, parentheses (NOT binds tightest, then AND, then OR, as in FTS5). NEAR, ``^`` and
    column filters are :class:`NotOnPostgreSQLError`."""
    tokens: list[str] = _FTS_TOKEN.findall(text)
    if "".join(tokens).replace(" ", "") != "".join(text.split()):
        raise NotOnPostgreSQLError(_fts_unsupported(text))
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def primary() -> _Query:
        token = peek()
        if token is None or token in (")", "AND", "OR", "NOT"):
            raise UsageError(f"not a valid full-text query: {text!r}")
        take()
        if token == "NEAR" and peek() == "(":
            raise NotOnPostgreSQLError(_fts_unsupported(text, "NEAR"))
        if token == "(":
            inner = either()
            if peek() != ")":
                raise UsageError(f"not a valid full-text query: {text!r} (a parenthesis is not closed)")
            take()
            return inner
        prefix = token.endswith("*")
        word = token[:-1] if prefix else token
        if word.startswith('"') and word.endswith('"') and len(word) >= 2:
            words = _TOKEN.findall(word[1:-1])  # a phrase: its words as FTS5 cuts them
            if not words:
                raise UsageError(f"not a valid full-text query: {text!r} (an empty phrase)")
            terms = tuple(_Term(w, prefix and i == len(words) - 1) for i, w in enumerate(words))
            return terms[0] if len(terms) == 1 else _Phrase(terms)
        if _WORD.fullmatch(word) is None:
            raise NotOnPostgreSQLError(_fts_unsupported(text, token))
        return _Term(word, prefix)

    def negated() -> _Query:
        query = primary()
        while peek() == "NOT":
            take()
            query = ("NOT", query, primary())
        return query

    def both() -> _Query:
        query = negated()
        while peek() not in (None, ")", "OR"):
            if peek() == "AND":
                take()
            query = ("AND", query, negated())
        return query

    def either() -> _Query:
        query = both()
        while peek() == "OR":
            take()
            query = ("OR", query, both())
        return query

    query = either()
    if peek() is not None:
        raise UsageError(f"not a valid full-text query: {text!r}")
    return query


def _fts_unsupported(text: str, part: str | None = None) -> str:
    what = f"{part!r} in {text!r}" if part and part != text else repr(text)
    return (
        f"--fts {what}: this FTS5 syntax has no equivalent on PostgreSQL; there --fts takes words, prefix*,"
        ' AND, OR, NOT, "phrases" and parentheses (NEAR, ^ and column filters are SQLite\'s alone)'
    )


def _tsquery(query: _Query) -> str:
    """The index's candidates for ``query``: never fewer than it matches (NOT's right side is left to the check)."""
    if isinstance(query, _Term | _Phrase):
        return query.tsquery()
    op, left, right = query
    if op == "NOT":
        return _tsquery(left)
    return f"({_tsquery(left)} {'&' if op == 'AND' else '|'} {_tsquery(right)})"


def _holds(query: _Query, tokens: list[str], words: set[str]) -> bool:
    """Whether a text of ``tokens`` (its ``words``, as a set) matches ``query`` as FTS5 would."""
    if isinstance(query, _Phrase):
        return query.holds(tokens)
    if isinstance(query, _Term):
        return any(query.matches(token) for token in words) if query.prefix else query.word in words
    op, left, right = query
    if op == "AND":
        return _holds(left, tokens, words) and _holds(right, tokens, words)
    if op == "OR":
        return _holds(left, tokens, words) or _holds(right, tokens, words)
    return _holds(left, tokens, words) and not _holds(right, tokens, words)


def _terms(query: _Query) -> list[_Term]:
    if isinstance(query, _Term):
        return [query]
    if isinstance(query, _Phrase):
        return list(query.terms)
    op, left, right = query
    return _terms(left) + ([] if op == "NOT" else _terms(right))


def snippet(text: str, query: _Query, tokens: int = _SNIPPET_TOKENS) -> str:
    """Up to ``tokens`` words of ``text`` around the first that matches, matches in ``[...]``, cuts as ``…``
    (what FTS5's ``snippet(events_fts, -1, '[', ']', '…', 12)`` shows)."""
    words = [m for m in _TOKEN.finditer(text) if _fold(m.group())]
    terms = _terms(query)
    matched = {i: {n for n, t in enumerate(terms) if t.matches(_fold(m.group()))} for i, m in enumerate(words)}
    hits = {i for i, found in matched.items() if found}

    def score(start: int) -> tuple[int, int, int]:
        # FTS5 scores a window by the query words it shows, then by its matches; a tie goes to the earlier one.
        shown = [i for i in hits if start <= i < start + tokens]
        return len(set().union(*(matched[i] for i in shown))), len(shown), -start

    start = max({0} | {max(0, min(i - 2, len(words) - tokens)) for i in hits}, key=score)
    end = min(len(words), start + tokens)
    if not words:
        return text
    out = ["…" if start > 0 else text[: words[0].start()]]
    for i in range(start, end):
        if i > start:
            out.append(text[words[i - 1].end() : words[i].start()])
        out.append(f"[{words[i].group()}]" if i in hits else words[i].group())
    out.append("…" if end < len(words) else text[words[-1].end() :])
    return "".join(out)


def search(conn: Connection, text: str, *, raw: bool, limit: int) -> list[SearchHit]:
    """The hits SQLite's FTS5 gives for ``text``: the index proposes, each candidate's text decides (see above).
    ``raw`` takes the part of FTS5's syntax that has a meaning here."""
    if not (text.strip() if raw else _WORD.search(text)):
        raise UsageError(f"nothing to search for in {text!r} (words are letters, digits and _)")
    query = _parse_fts(text) if raw else _all_words(text)
    hits: list[SearchHit] = []
    page = max(2 * limit, 200)
    offset = 0
    params = {"query": _tsquery(query), "limit": page}
    while len(hits) < limit:
        rows = conn.execute(queries.SEARCH_POSTGRESQL, {**params, "offset": offset}).fetchall()
        for sid, title, parent, position, kind, role, said in rows:
            tokens = _tokens(said) if said is not None else []
            if said is not None and _holds(query, tokens, set(tokens)):
                hits.append(SearchHit(str(sid), title, int(position), str(kind), snippet(said, query), role, parent))
        if len(rows) < page:
            break
        offset += page
    return hits[:limit]


INDEX_BATCH = 256
"""At most this many events are indexed in one transaction (a few milliseconds): a database left far behind (a
process killed before it indexed, an import) is caught up without long transactions."""


def index_new_events(conn: Connection, batch: int = INDEX_BATCH) -> bool:
    """Index up to ``batch`` queued events (revision 0015) inside the caller's transaction: take them off the queue,
    then write their words from their text as it is now; whether a full batch was taken (more may be left).

    Two statements, in this order: the second's snapshot is taken once the first holds the rows, so it sees every
    change they were queued for (an edit committed meanwhile waits for this transaction, then queues its event
    again). Events another transaction is taking, or has queued and not committed, are left to it or to later.
    """
    taken = [int(row[0]) for row in conn.execute(queries.TAKE_UNINDEXED_POSTGRESQL, {"batch": batch}).fetchall()]
    if taken:
        conn.execute(queries.WRITE_WORDS_POSTGRESQL, {"events": taken}).fetchall()
    return len(taken) == batch
