"""Search on PostgreSQL: FTS5's answers from PostgreSQL's index.

``sessionstore search`` finds the same events for the same words on either
database; this is how PostgreSQL's ``to_tsvector('simple', ...)`` index is made
to give SQLite's FTS5 answers (see the comment below).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from ..errors import NotOnPostgreSQLError, UsageError
from ..reads import Connection, SearchHit
from ..schema import queries

__all__ = ["search", "snippet"]

# -- search on PostgreSQL: FTS5's answers from PostgreSQL's index -------------------------------------------
#
# The index (to_tsvector('simple', text)) cuts words differently from FTS5's unicode61 tokenizer (letters,
# digits and _ in a word; lower case; accents removed): it splits parse_dates in two, keeps example.com,
# user@example.com, /usr/bin and 3.14 whole, and lowers only what the server's locale lowers. So the index only
# proposes: every query word is looked up as a prefix of a lexeme (parse_dates as 'parse':* <-> 'dates':*,
# example as 'example':*, which finds example.com), and each candidate is kept only if its text holds the words
# as FTS5 cuts and folds them. What the index cannot propose is the known difference: a word that PostgreSQL
# keeps inside a longer token not starting with it (the "example" of user@example.com), and an accented word
# searched without its accents (or, in a C-locale database, in another case).

_WORD = re.compile(r"\w+")
_SNIPPET_TOKENS = 12


def _fold(word: str) -> str:
    """A word as FTS5's unicode61 tokenizer (remove_diacritics 2) compares it: lower case, accents removed."""
    return "".join(c for c in unicodedata.normalize("NFD", word.lower()) if not unicodedata.combining(c))


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
        spellings = {self.word}
        if not self.typed.isascii():  # the index keeps accents, and a C-locale server's case, as written
            spellings |= {self.typed, self.typed.lower(), self.typed.capitalize(), self.typed.upper()}
        return "(" + " | ".join(f"'{s}':*" for s in sorted(spellings)) + ")"


# A query: a term, or (operator, left, right) with operator AND, OR or NOT (FTS5's binary NOT: left and not right).
_Query = _Term | tuple[str, Any, Any]


def _all_words(text: str) -> _Query:
    terms: list[_Query] = [_Term(word) for word in _WORD.findall(text)]
    query = terms[0]
    for term in terms[1:]:
        query = ("AND", query, term)
    return query


_FTS_TOKEN = re.compile(r'\s*(\(|\)|"[^"]*"\*?|[^\s()"]+)')


def _parse_fts(text: str) -> _Query:
    """FTS5 query syntax, the part with a meaning on PostgreSQL: words, ``prefix*``, ``"word"``, AND, OR, NOT,
    parentheses (NOT binds tightest, then AND, then OR, as in FTS5). Phrases, NEAR, ``^`` and column filters are
    :class:`NotOnPostgreSQLError`."""
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
            word = word[1:-1]
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
        " AND, OR, NOT and parentheses (phrases, NEAR, ^ and column filters are SQLite's alone)"
    )


def _tsquery(query: _Query) -> str:
    """The index's candidates for ``query``: never fewer than it matches (NOT's right side is left to the check)."""
    if isinstance(query, _Term):
        return query.tsquery()
    op, left, right = query
    if op == "NOT":
        return _tsquery(left)
    return f"({_tsquery(left)} {'&' if op == 'AND' else '|'} {_tsquery(right)})"


def _holds(query: _Query, tokens: set[str]) -> bool:
    if isinstance(query, _Term):
        return any(query.matches(token) for token in tokens) if query.prefix else query.word in tokens
    op, left, right = query
    if op == "AND":
        return _holds(left, tokens) and _holds(right, tokens)
    if op == "OR":
        return _holds(left, tokens) or _holds(right, tokens)
    return _holds(left, tokens) and not _holds(right, tokens)


def _terms(query: _Query) -> list[_Term]:
    if isinstance(query, _Term):
        return [query]
    op, left, right = query
    return _terms(left) + ([] if op == "NOT" else _terms(right))


def snippet(text: str, query: _Query, tokens: int = _SNIPPET_TOKENS) -> str:
    """Up to ``tokens`` words of ``text`` around the first that matches, matches in ``[...]``, cuts as ``…``
    (what FTS5's ``snippet(events_fts, -1, '[', ']', '…', 12)`` shows)."""
    words = list(_WORD.finditer(text))
    terms = _terms(query)
    hits = {i for i, m in enumerate(words) if any(t.matches(_fold(m.group())) for t in terms)}
    first = min(hits, default=0)
    start = max(0, min(first - 2, len(words) - tokens))
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
            if said is not None and _holds(query, {_fold(w) for w in _WORD.findall(said)}):
                hits.append(SearchHit(str(sid), title, int(position), str(kind), snippet(said, query), role, parent))
        if len(rows) < page:
            break
        offset += page
    return hits[:limit]
