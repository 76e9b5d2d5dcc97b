"""PostgreSQL's search index cuts words as FTS5 does

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04

On PostgreSQL, 0003's index was ``to_tsvector('simple', text)``: PostgreSQL's parser keeps ``example.com``,
``3.14``, ``/home/me/src/app.py``, ``bob@example.org``, ``v1.2.3`` and ``self.assertEqual`` whole, keeps accents,
and in a C-locale database lowers ASCII alone. Search used the index only to propose candidates, so a word inside
such a token (``home``, ``example``), or an accented word typed without its accents, was never proposed and never
found, where SQLite's FTS5 (``unicode61 remove_diacritics 2 tokenchars '_'``) finds it.

From here the index is over ``sessionstore_search_words(text)``: the text cut as FTS5 cuts it, whatever the
database's locale. Lower case and letters by ICU (the ``und-x-icu`` collation, named in the function, so the
database's own locale plays no part), accents (U+0300-U+036F after canonical decomposition) removed, everything
but letters, digits (any kind of number: ``²``, ``Ⅷ``), ``_`` and private-use characters a separator, and each
word, capped at 100 characters, one lexeme as it is (``array_to_tsvector``: no parser, so ``parse_dates`` stays
one word). No positions: search checks phrases, and the cases where this folds more than FTS5 (Greek accents),
on each candidate's text (``sessionstore/postgres/search.py``, which spells a query word exactly as this
function does). The cap keeps every lexeme far below tsvector's 2 KiB limit; a longer word is found by its
first 100 characters as a prefix, and then checked whole.

It needs ICU (every packaged PostgreSQL has it) and a UTF8 database (``normalize``); without either the upgrade
stops before changing anything, saying which. No extension is needed. SQLite is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sessionstore.migrations.sqlobjects import Function, Group, Index

from sessionstore.errors import MigrationError

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Kinds of number ICU's [:alnum:] (letters and decimal digits) leaves out but FTS5 and Python's \w count as
# word characters (No, Nl in the BMP), and the private-use area (FTS5's Co).
_MORE_WORD = (
    "\\u00b2-\\u00b3\\u00b9\\u00bc-\\u00be\\u09f4-\\u09f9\\u0b72-\\u0b77\\u0bf0-\\u0bf2\\u0c78-\\u0c7e"
    "\\u0d58-\\u0d5e\\u0d70-\\u0d78\\u0f2a-\\u0f33\\u1369-\\u137c\\u16ee-\\u16f0\\u17f0-\\u17f9\\u19da\\u2070"
    "\\u2074-\\u2079\\u2080-\\u2089\\u2150-\\u2182\\u2185-\\u2189\\u2460-\\u249b\\u24ea-\\u24ff\\u2776-\\u2793"
    "\\u2cfd\\u3007\\u3021-\\u3029\\u3038-\\u303a\\u3192-\\u3195\\u3220-\\u3229\\u3248-\\u324f\\u3251-\\u325f"
    "\\u3280-\\u3289\\u32b1-\\u32bf\\ua6e6-\\ua6ef\\ua830-\\ua835\\ue000-\\uf8ff"
)
WORD_CAP = 100

# Innermost first: lower case (ICU), decomposed, accents dropped, separators to one space, words capped.
_FOLDED = "regexp_replace(normalize(lower(body COLLATE \"und-x-icu\"), NFD), '[\\u0300-\\u036f]+', '', 'g')"
_SPACED = f"regexp_replace({_FOLDED} COLLATE \"und-x-icu\", '[^[:alnum:]_{_MORE_WORD}]+', ' ', 'g')"
_CAPPED = f"regexp_replace({_SPACED}, '([^ ]{{{WORD_CAP}}})[^ ]+', '\\1', 'g')"
SEARCH_WORDS = Function(
    "sessionstore_search_words",
    "body text",
    "RETURNS tsvector LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS"
    f" $$ SELECT array_to_tsvector(string_to_array(btrim({_CAPPED}), ' ')) $$",
)
PG_SEARCH = Index(
    "events_fts",
    "events USING gin (sessionstore_search_words(CASE WHEN text_path IS NULL THEN text"
    " ELSE sessionstore_json_text(payload, text_path) END)) WHERE role IS NOT NULL",
)
PG_SEARCH_WORDS = Group(SEARCH_WORDS, PG_SEARCH)

_NEEDS = (
    "SELECT getdatabaseencoding() = 'UTF8',"
    " EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu' AND collprovider = 'i')"
)


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    utf8, icu = op.get_bind().exec_driver_sql(_NEEDS).one()
    if not utf8 or not icu:
        lacks = "is not UTF8 (normalize() needs it)" if not utf8 else "has no ICU (no collation und-x-icu)"
        raise MigrationError(
            f"revision 0009 (search as FTS5 cuts words) cannot be applied: this database {lacks}; nothing was changed"
        )
    op.drop_object("0003.PG_SEARCH")
    op.create_object(PG_SEARCH_WORDS)


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.drop_object(PG_SEARCH_WORDS)
    op.create_object("0003.PG_SEARCH")
