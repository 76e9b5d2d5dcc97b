"""Every statement sessionstore runs on PostgreSQL, with its access path on a large database, so the schema stays
distributable by the session key.

The statements are found, not listed by hand: every string constant of ``schema/queries.py``, of the modules of
``sessionstore/postgres/`` and of the command modules that run the shared statements, that is SQL; every SQL
string written inline in their functions (constants and ``+`` of constants, worked out from the source); and each
shape of ``queries.list_sessions``. A new statement is so covered the day it is written: one this file does not
classify fails the test until it is.

Each is EXPLAINed on 200,000 events over 20,000 sessions (made with ``generate_series``, then ANALYZEd). A hot
statement (appends, history reads, listing pages, loads, holds: everything an agent's storage runs) must reach
``sessions`` and ``events`` only through an index, each scan either a lookup by key (the session's, or a row id
found by it: one session's rows) or under a ``LIMIT`` (a page in index order), or through a partial index (which
holds only the few rows it is for). A seq scan, or an index read whole, fails the test. The statements of commands
that read or change the whole database by design (stats, check, search, export --all, prune, a listing asked for
whole) are listed as such, each with its reason; SQLite's own (as the generator of queries.py declares them) are
listed and not run. Run with ``-s`` to see the table.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import itertools
import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest

from sessionstore import admin, reads, records, transfer
from sessionstore.postgres import backend, connect, migrate, search
from sessionstore.postgres import storage as pgstorage
from sessionstore.schema import queries
from sessionstore.schema import statements as generator
from sessionstore.schema.models import Base

MODULES: list[ModuleType] = [queries, connect, pgstorage, backend, search, migrate, reads, records, admin, transfer]

SQL = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\s")  # as the package writes SQL: in capitals

# What is not a hot statement, and why. Everything found and not named here is hot.
WHOLE_DATABASE = {
    "queries.SESSION_COUNT": "stats: counts every session",
    "queries.LIVE_SESSION_COUNT": "stats: counts every session but the earlier branches",
    "queries.EVENT_TYPES": "stats: counts every event by type",
    "queries.DATABASE_SIZE_POSTGRESQL": "stats: the database's size",
    "queries.SESSION_IDS": "export --all: every session's id, in order",
    "queries.SEARCH_POSTGRESQL": "search: every event the GIN index or the queue of unindexed events proposes",
    "queries.ORPHAN_EVENTS_POSTGRESQL": "check: every event's session",
    "queries.TOTAL_USAGE": "stats: every usage event's tokens (through the partial index ix_events_usage)",
    "queries.NEXT_STALE": "stats, retention show: the oldest session not stale yet",
    "queries.STALE_SESSIONS": "retention and its forecast: the stale sessions, oldest first, by the updated_at index",
    "backend.check": "check: one row of each view, to see that it works (its name filled in at run time)",
    "migrate.refuse_dropping_sessions#2": "db downgrade base: whether any session is left to lose (its first row)",
}
# Not statements of their own: parts the statements below are made of (each composed use is found and checked).
FRAGMENTS = {
    "queries.OVERVIEW": "the base of list_sessions and of a load by session_id (each checked as composed)",
    "queries.LEGACY_OVERVIEW": "the same for a file from before revision 0006 (SQLite's alone)",
    "reads._OVERVIEW_BEFORE_FORKS": "the same for a file at 0006-0011 (SQLite's alone: PostgreSQL reads only its head)",
}


def sqlite_only() -> set[str]:
    """The constants of queries.py PostgreSQL never runs, as the generator declares them: a statement SQLite alone
    runs, and SQLite's text of one whose PostgreSQL text differs (``..._POSTGRESQL`` beside it)."""
    found = set()
    for entry in generator.STATEMENTS:
        if isinstance(entry, generator.Statement):
            variants = generator.constants(entry, Base.metadata)
            if "postgresql" not in entry.databases or len(variants) > 1:
                found.add(f"queries.{entry.name}")
    return found


SQLITE_ONLY = sqlite_only()


# -- finding the statements --------------------------------------------------------------------------------


def _value(node: ast.expr, module: ModuleType) -> str | None:
    """The string an expression of ``module``'s source always has (a literal, a module constant, ``queries.X``,
    or ``+`` of those), or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        found = getattr(module, node.id, None)
        return found if isinstance(found, str) else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        owner = getattr(module, node.value.id, None)
        found = getattr(owner, node.attr, None) if isinstance(owner, ModuleType) else None
        return found if isinstance(found, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left, module), _value(node.right, module)
        return None if left is None or right is None else left + right
    return None


def _inline(module: ModuleType) -> dict[str, str]:
    """The SQL strings written inside ``module``'s functions, by function (``#2`` for a function's second)."""
    found: dict[str, str] = {}
    constants = {v for v in vars(module).values() if isinstance(v, str)} | {
        v for v in vars(queries).values() if isinstance(v, str)
    }
    short = module.__name__.rsplit(".", 1)[1]

    def visit(node: ast.AST, where: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant):
                continue  # a docstring
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, [*where, child.name])
                continue
            if where and isinstance(child, ast.expr):
                text = _value(child, module)
                if text is not None and SQL.match(text) and text not in constants:
                    name = f"{short}.{'.'.join(w for w in where if not w[0].isupper())}"
                    seen = [k for k, v in found.items() if k.split("#")[0] == name and v != text]
                    if text not in found.values():
                        found[name + (f"#{len(seen) + 1}" if seen else "")] = text
                    continue
                if isinstance(child, ast.JoinedStr) and any(
                    isinstance(part, ast.Constant) and SQL.match(str(part.value)) for part in child.values[:1]
                ):
                    found[f"{short}.{'.'.join(w for w in where if not w[0].isupper())}"] = "<dynamic>"
                    continue
            visit(child, where)

    visit(ast.parse(inspect.getsource(module)), [])
    return found


def _conditions() -> dict[str, str]:
    """Every ``where=`` the package passes on PostgreSQL (to list_sessions, or to iter_sessions, which hands it on):
    its source text -> its value. The backend's and the storage's top_level, which the commands and the storage pass
    as a variable, and prune's condition made of it, by name; any other found in the source."""
    top = backend.PostgresBackend.top_level
    assert pgstorage.PostgresStorage._top_level == top  # the storage's listing pages and the command line's alike
    found = {"top_level": top, "prunable": f"{top} AND {admin._STALE}"}
    for module in MODULES:
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    value = _value(keyword.value, module) if keyword.arg == "where" else None
                    if value is not None:
                        found[ast.unparse(keyword.value)] = value
    return found


def statements() -> dict[str, str]:
    """Every statement, by name: ``module.CONSTANT``, ``module.function`` (inline), ``list_sessions(...)``."""
    found: dict[str, str] = {}
    for module in MODULES:
        short = module.__name__.rsplit(".", 1)[1]
        for name, value in vars(module).items():
            if isinstance(value, str) and not name.startswith("__") and SQL.match(value):
                if module is queries or value not in vars(queries).values():
                    found[f"{short}.{name}"] = value
        found.update(_inline(module))
    for cwd, after, limit, order, (where, condition) in itertools.product(
        (False, True), (False, True), (False, True), ("updated_at", "created_at"), _conditions().items()
    ):
        shape = [order, *(["cwd"] if cwd else []), *(["after"] if after else []), *(["limit"] if limit else [])]
        sql = queries.list_sessions(cwd=cwd, after=after, limit=limit, where=condition, order=order)
        found[f"list_sessions({','.join([*shape, where])})"] = sql
    return found


def hot_list(name: str) -> str | None:
    """Why a list_sessions shape is not a hot statement (None if it is one)."""
    if ":sid" in name:
        return None  # one session, by its key (show, export)
    if "limit" not in name:
        return "a listing asked for whole (the command line's list, a client that asks for no page)"
    if name.endswith(",prunable)"):
        return "prune: the old sessions, through the index by last activity"
    return None


def kind_of(name: str) -> tuple[str, str | None]:
    """``sqlite`` (PostgreSQL never runs it), ``part`` (a fragment), ``whole`` (a command's, over the whole
    database by design) or ``hot`` (must be single-session or index-paged); and the reason, for the first three."""
    if name in SQLITE_ONLY:
        return "sqlite", "SQLite's own (the generator says so): PostgreSQL runs another text, or none"
    if name in FRAGMENTS:
        return "part", FRAGMENTS[name]
    reason = WHOLE_DATABASE.get(name) or (hot_list(name) if name.startswith("list_sessions") else None)
    return ("whole", reason) if reason else ("hot", None)


# -- a large database ---------------------------------------------------------------------------------------

BUILD = """
INSERT INTO sessions (session_id, parent, cwd, additional_directories, mcp_servers, meta, title, created_at,
                      updated_at, released, revision, held_by)
SELECT md5(i::text), NULL, '/work/' || (i % 20), '[]', '[]', '{}', CASE WHEN i % 3 = 0 THEN 'title ' || i END,
       timestamp '2026-01-01' + i * interval '1 minute', timestamp '2026-01-02' + i * interval '1 minute',
       i % 2 = 0, 100, CASE WHEN i % 500 = 0 THEN 'pid ' || i END
FROM generate_series(1, 20000) AS i;
UPDATE sessions SET parent = id - 1 WHERE id % 10 = 0;
INSERT INTO events (session, position, type, payload, role, text, text_path, created_at)
SELECT s.id, p, 'user_message', '{"content": "hello world ' || p || '"}', 'user', NULL, '$.content',
       s.created_at + p * interval '1 second'
FROM sessions AS s, generate_series(0, 9) AS p;
ANALYZE;
"""

SID = "a87ff679a2f3e71d9181a67b7542122c"  # md5('4'): a session with events
NOW = datetime(2026, 1, 3)

# Values for the statements' named parameters (the storage's $n statements get values by type).
NAMED: dict[str, Any] = {
    "sid": SID,
    "id": 4,
    "parent": None,
    "now": NOW,
    "created_at": NOW,
    "updated_at": NOW,
    "cutoff": NOW - timedelta(days=1),
    "before": NOW,
    "before_id": SID,
    "type": "user_message",
    "payload": '{"content": "hello"}',
    "role": "user",
    "text": "hello",
    "text_path": None,
    **dict.fromkeys(("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")),
    "name": "retention",
    "value": "86400",
    "position": 50,
    "title": "a title",
    "cwd": "/work/3",
    "limit": 21,
    "low": "a87f",
    "high": "a87g",
    "query": "hello:*",
    "offset": 0,
    "who": "pid 1",
    "class": connect.PG_LOCK_CLASS,
    "key": 4,
    "mine": 0,
    "released": True,
    "additional_directories": "[]",
    "mcp_servers": "[]",
    "meta": "{}",
    "through": 10,
    "batch": 100,
    "last": 50,
    "forked_from": 3,
    "forked_at": 50,
    "events": [4, 5],  # the events a batch took off the queue (revision 0015)
    "branch_of": None,
    "branch": 5,
    # A listing's page of ids (PAGE_USAGE): one session, the rest NULL, as a short page binds them.
    **{f"sid{n}": SID if n == 0 else None for n in range(256)},
}
BY_TYPE: dict[str, Any] = {
    "text": SID,
    "varchar": SID,
    "int8": 4,
    "int4": 4,
    "oid": connect.PG_LOCK_CLASS,
    "bool": True,
    "timestamp": NOW,
    "text[]": [SID, "c81e728d9d4c2f636f067f89cc14862c"],
    "int8[]": [4, 5],
    "int4[]": [None, None],  # token counts (revision 0010): NULL for a plain event
}


def positional(sql: str) -> tuple[str, list[str]]:
    """``sql`` with ``:named`` parameters as ``$n`` (the first use of a name numbers it), and the names in order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return re.sub(r"(?<![:\w]):([a-z_]\w*)\b", number, sql), names


# Nodes that hand their rows on as they come (a Limit above them stops what is below early), and joins, whose outer
# side streams. Below anything else (a sort, a hash, an aggregate, a join's inner side) rows are read whole.
STREAMING = {"Limit", "Result", "Subquery Scan", "Append", "Merge Append", "Unique", "Incremental Sort"}
JOINS = {"Nested Loop", "Merge Join", "Hash Join"}


def scans(plan: dict[str, Any], limited: bool = False) -> list[tuple[dict[str, Any], bool]]:
    """Every node of a plan, with whether a Limit above it stops it early (see STREAMING)."""
    kind = plan["Node Type"]
    limited = limited or kind == "Limit"
    found = [(plan, limited)]
    for n, child in enumerate(plan.get("Plans", [])):
        outer = child.get("Parent Relationship") == "Outer" or (kind not in JOINS and n == 0)
        streams = kind in STREAMING or (kind in JOINS and outer)
        subplan = child.get("Parent Relationship") in ("SubPlan", "InitPlan")  # per row, or once: as it is
        found += scans(child, limited and (streams or subplan))
    return found


def path(plan: dict[str, Any], partial: set[str]) -> tuple[str, list[str]]:
    """A plan's access path to sessions and events, in a few words, and what in it breaks the rule."""
    words, broken = [], []
    for node, limited in scans(plan):
        relation = node.get("Relation Name")
        kind = node["Node Type"]
        if kind == "Bitmap Index Scan":
            relation = "index"
        if relation not in ("sessions", "events", "index") or kind == "ModifyTable":
            continue
        index = node.get("Index Name", "")
        cond = node.get("Index Cond", "")
        if kind == "Bitmap Heap Scan":
            words.append(f"bitmap {relation}")
            continue
        if kind == "Seq Scan":
            words.append(f"SEQ SCAN {relation}")
            broken.append(f"seq scan of {relation}")
        elif cond and re.search(r"(= |= ANY)", cond):
            words.append(f"{index} by key")
        elif limited:
            words.append(f"{index} paged")
        elif index in partial:
            words.append(f"{index} (partial)")
        else:
            words.append(f"{index} WHOLE")
            broken.append(f"{index} read whole ({cond or 'no condition'})")
    return ", ".join(words) or "no table", broken


async def explain_all(url: str) -> dict[str, tuple[str, str, list[str]]]:
    """name -> (kind, access path, what breaks the rule): every statement, EXPLAINed on the large database."""
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        await conn.execute(BUILD)
        partial = {
            str(r[0])
            for r in await conn.fetch("SELECT indexrelid::regclass::text FROM pg_index WHERE indpred IS NOT NULL")
        }
        found: dict[str, tuple[str, str, list[str]]] = {}
        for name, sql in sorted(statements().items()):
            kind, reason = kind_of(name)
            if kind in ("part", "sqlite"):
                found[name] = (kind, reason or "", [])
                continue
            if sql == "<dynamic>":
                found[name] = (kind, "built at run time", [] if reason else ["a statement built at run time"])
                continue
            numbered, names = positional(sql)
            try:
                async with conn.transaction():
                    prepared = await conn.prepare("EXPLAIN (FORMAT JSON) " + numbered)
                    types = [t.name for t in prepared.get_parameters()]
                    args = [NAMED[n] for n in names] if names else [BY_TYPE[t] for t in types]
                    plan = json.loads(await prepared.fetchval(*args))[0]["Plan"]
            except asyncpg.PostgresError as exc:
                found[name] = (kind, f"refused by PostgreSQL ({type(exc).__name__})", [f"{exc}: {sql}"])
                continue
            access, broken = path(plan, partial)
            found[name] = (kind, access if reason is None else f"{access} [{reason}]", broken if kind == "hot" else [])
        return found
    finally:
        await conn.close()


def test_every_statement_is_single_session_or_index_paged(pg_url: str) -> None:
    found = asyncio.run(explain_all(pg_url))
    width = max(map(len, found))
    print("\n" + "\n".join(f"{kind:6} {name:{width}}  {access}" for name, (kind, access, _) in found.items()))
    named = set(WHOLE_DATABASE) | set(FRAGMENTS) | SQLITE_ONLY
    assert named <= set(found), f"classified but no longer found: {sorted(named - set(found))}"
    broken = {name: why for name, (_, _, why) in found.items() if why}
    assert not broken, broken
    assert sum(kind == "hot" for kind, _, _ in found.values()) >= 30  # the storage's, the commands' own


def test_a_new_statement_is_found() -> None:
    """The finder sees constants, inline literals and ``+`` of them: a statement added anywhere is covered."""
    found = statements()
    assert found["queries.HISTORY"] == queries.HISTORY
    assert found["reads.load_session"] == queries.OVERVIEW + " WHERE session_id = :sid"
    assert "storage._take" in found and "storage._take#2" in found  # two inline statements of one method
    assert "backend.check" in found  # an f-string: classified by where it is
    with pytest.raises(KeyError):
        found["queries.TOP_LEVEL"]  # a condition, not a statement
    assert Path(inspect.getfile(pgstorage)).name == "storage.py"
