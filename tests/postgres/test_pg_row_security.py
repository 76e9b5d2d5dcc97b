"""Row-level security (revision 0011): on a team's database each role sees and changes only its own sessions and
their events, through the library, the installed command line, the views and raw SQL alike; the administrator
(the role owning the tables, and whoever is granted it) sees everything.

Real roles on the tests' server, set up by running the commands docs/postgresql.md shows (``_pgteam.py``): ann
and bob in a group holding the grants, carol granted the owner role.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from uuid import UUID, uuid4

import asyncpg  # type: ignore[import-untyped]
import pytest
from _pgcli import child_env, run
from _pgteam import Team, team
from pg_server import PostgresServer

from sessionstore import (
    AccessDeniedError,
    EventContext,
    ForkedByAnotherRoleError,
    ModelMessage,
    SessionRecord,
    SessionStore,
    UserMessage,
)
from sessionstore.postgres import PostgresStorage
from sessionstore.postgres import migrate as pgmigrate
from sessionstore.schema.revisions import HEAD


@pytest.fixture
def crew(pg_server: PostgresServer) -> Iterator[Team]:
    """A team set up by the docs' own commands (the owner upgrades the database with the installed command)."""
    made = team(pg_server)
    try:
        yield made
    finally:
        made.remove()


async def fetch(url: str, sql: str) -> list[tuple[object, ...]]:
    """Raw SQL as a person types it, on a connection of its own: the rows of one statement (statements separated
    by ``;`` are run, and give none)."""
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        if ";" in sql:
            await conn.execute(sql)
            return []
        return [tuple(row) for row in await conn.fetch(sql)]
    finally:
        await conn.close()


async def write(url: str, words: str) -> UUID:
    """A session written as an agent would (the registry over the storage): its id."""
    async with PostgresStorage(url) as storage:
        store = SessionStore(storage=storage, retain_history=True)
        session = await store.create(cwd="/work")
        async with session.turn():
            await store.stream(session).send(UserMessage(f"question about {words}"))
            await store.stream(session).send(ModelMessage(f"answer about {words}"))
        await store.aclose()
        return session.stream_id


def cli(team: Team, who: str, *args: str) -> tuple[int, str, str]:
    done = run(*args, env=child_env(SESSIONSTORE_DB=team.url(who, driver="postgresql")))
    return done.returncode, done.stdout, done.stderr


async def test_each_role_sees_and_changes_only_its_own_through_the_library(crew: Team) -> None:
    ann_sid = await write(crew.url("ann"), "zeppelins")
    bob_sid = await write(crew.url("bob"), "submarines")
    owners = dict(await fetch(crew.url("carol"), "SELECT session_id, owner FROM sessions"))
    assert owners == {ann_sid.hex: crew.role("ann"), bob_sid.hex: crew.role("bob")}

    async with PostgresStorage(crew.url("ann")) as ann:
        assert [r.session_id for r in (await ann.list_sessions()).sessions] == [ann_sid.hex]
        assert await ann.get_history(bob_sid) == []
        assert await ann.load_session(bob_sid) is None
        assert len(await ann.get_history(ann_sid)) == 2
        context = EventContext.for_stream(bob_sid)
        with pytest.raises(AccessDeniedError, match=f"session {bob_sid.hex} belongs to another database role"):
            await ann.save_event(UserMessage("injected"), context)
        with pytest.raises(AccessDeniedError, match="belongs to another database role"):
            await ann.set_history(bob_sid, [UserMessage("replaced")])
        with pytest.raises(AccessDeniedError, match="belongs to another database role"):
            await ann.hold(bob_sid)
        with pytest.raises(AccessDeniedError, match="refused this role"):
            await ann.save_session(SessionRecord(session_id=bob_sid.hex, title="mine now"))
        await ann.drop_history(bob_sid)  # as for a session that is not there: nothing
        # Her own go on as before, a new one included.
        fresh = uuid4()
        await ann.save_event(UserMessage("a new one"), EventContext.for_stream(fresh))
        await ann.set_history(ann_sid, [UserMessage("rewritten")])
        # Many new ones at once: those that wait for a connection go in one statement, which the policy refuses
        # whole while it makes their rows; each then goes the long way.
        burst = [uuid4() for _ in range(20)]
        await asyncio.gather(*(ann.save_event(UserMessage(s.hex), EventContext.for_stream(s)) for s in burst))
        for sid in burst:
            assert [e.content for e in await ann.get_history(sid)] == [sid.hex]

    async with PostgresStorage(crew.url("carol")) as carol:  # the administrator
        listed = {r.session_id for r in (await carol.list_sessions()).sessions}
        assert listed == {ann_sid.hex, bob_sid.hex, fresh.hex, *(sid.hex for sid in burst)}
        assert [e.content for e in await carol.get_history(bob_sid)] == [
            "question about submarines",
            "answer about submarines",
        ]
        await carol.save_event(ModelMessage("a note from the administrator"), EventContext.for_stream(bob_sid))
    async with PostgresStorage(crew.url("bob")) as bob:  # sees what the administrator wrote into his session
        assert [e.content for e in await bob.get_history(bob_sid)][-1] == "a note from the administrator"
        assert [r.session_id for r in (await bob.list_sessions()).sessions] == [bob_sid.hex]


async def test_raw_sql_and_the_views_show_a_role_its_own_rows_alone(crew: Team) -> None:
    ann_sid = await write(crew.url("ann"), "zeppelins")
    bob_sid = await write(crew.url("bob"), "submarines")
    ann = crew.url("ann")
    for sql in (
        "SELECT DISTINCT session_id FROM sessions",
        "SELECT DISTINCT s.session_id FROM events e JOIN sessions s ON s.id = e.session",
        "SELECT DISTINCT session_id FROM session_overview",
        "SELECT DISTINCT session_id FROM transcript",
    ):
        assert await fetch(ann, sql) == [(ann_sid.hex,)], sql
    assert await fetch(ann, "SELECT count(*) FROM events") == [(2,)]
    assert len(await fetch(crew.url("carol"), "SELECT * FROM transcript")) == 4
    bob_row = (await fetch(crew.url("bob"), "SELECT id FROM sessions"))[0][0]
    # Not into another's session, not as another, not giving one's own away; an update or delete of another's
    # rows touches nothing.
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
        await fetch(
            ann,
            f"INSERT INTO events (session, position, type, payload, created_at) VALUES ({bob_row}, 9,"
            " 'user_message', '{}', now())",
        )
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
        await fetch(
            ann,
            f"INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta,"
            f" created_at, updated_at, released, revision, owner) VALUES ('{uuid4().hex}', '.', '[]', '[]',"
            f" '{{}}', now(), now(), false, 0, '{crew.role('bob')}')",
        )
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
        await fetch(ann, f"UPDATE sessions SET owner = '{crew.role('bob')}'")
    await fetch(ann, "UPDATE events SET payload = '{}'; DELETE FROM sessions WHERE session_id <> ''")
    assert len(await fetch(crew.url("bob"), "SELECT * FROM events WHERE payload <> '{}'")) == 2
    assert await fetch(crew.url("carol"), "SELECT session_id FROM sessions") == [(bob_sid.hex,)]


def test_the_command_line_shows_each_role_its_own(crew: Team) -> None:
    ann_sid = asyncio.run(write(crew.url("ann"), "zeppelins"))
    bob_sid = asyncio.run(write(crew.url("bob"), "submarines"))

    code, out, err = cli(crew, "ann", "list", "--json")
    assert code == 0, err
    assert [entry["session_id"] for entry in json.loads(out)] == [ann_sid.hex]
    assert cli(crew, "ann", "search", "submarines")[1] == ""
    assert "zeppelins" in cli(crew, "ann", "search", "zeppelins")[1]
    code, out, err = cli(crew, "ann", "show", bob_sid.hex)
    assert code != 0 and "no session" in err.lower() and "submarines" not in out
    code, out, _ = cli(crew, "ann", "stats", "--json")
    assert (json.loads(out)["sessions"], json.loads(out)["events"]) == (1, 2)
    exported = cli(crew, "ann", "export", "--all")[1]
    assert ann_sid.hex in exported and bob_sid.hex not in exported
    assert cli(crew, "ann", "check")[0] == 0

    # An import is made the importer's; a session another role owns is refused (the import whole).
    bob_export = cli(crew, "bob", "export", "--all")[1]
    done = run("import", "-", input=bob_export, env=child_env(SESSIONSTORE_DB=crew.url("ann", driver="postgresql")))
    assert done.returncode != 0 and "refused this role" in done.stderr and "row-level security" in done.stderr
    assert cli(crew, "ann", "export", "--all")[1] == exported
    ann_export = exported.replace(ann_sid.hex, uuid4().hex)
    assert cli(crew, "ann", "delete", ann_sid.hex)[0] == 0
    done = run("import", "-", input=ann_export, env=child_env(SESSIONSTORE_DB=crew.url("ann", driver="postgresql")))
    assert done.returncode == 0, done.stderr

    # The administrator lists everyone's; a prune by ann removes only hers.
    code, out, _ = cli(crew, "carol", "list", "--json")
    assert len(json.loads(out)) == 2
    assert cli(crew, "ann", "prune", "--older-than", "0s", "--yes")[0] == 0
    assert [entry["session_id"] for entry in json.loads(cli(crew, "carol", "list", "--json")[1])] == [bob_sid.hex]


def test_check_says_when_a_view_or_a_table_is_left_unguarded(crew: Team) -> None:
    assert cli(crew, "carol", "check")[0] == 0
    crew.server.psql(
        "ALTER VIEW transcript RESET (security_invoker); ALTER TABLE events DISABLE ROW LEVEL SECURITY", crew.database
    )
    code, out, err = cli(crew, "carol", "check")
    assert code != 0, out
    assert "view transcript runs as its owner" in out + err
    assert "row-level security is off on events" in out + err


def test_a_role_that_does_not_own_the_schema_cannot_migrate_it(crew: Team) -> None:
    done = run("db", "downgrade", "0009", "--db", crew.url("ann", driver="postgresql"))
    assert done.returncode != 0 and "failed and was rolled back" in done.stderr, done.stderr
    assert cli(crew, "carol", "db", "current")[1].strip().startswith(HEAD)


def test_0011_gives_stored_sessions_to_the_upgrader_and_goes_back(pg_server: PostgresServer, pg_empty_url: str) -> None:
    pgmigrate.migrate(pg_empty_url, "0010")
    stored = (
        "INSERT INTO sessions (session_id, cwd, additional_directories, mcp_servers, meta, created_at, updated_at,"
        f" released, revision) VALUES ('{'a' * 32}', '/w', '[]', '[]', '{{}}', now(), now(), false, 0);"
        "INSERT INTO events (session, position, type, payload, created_at) SELECT id, 0, 'user_message',"
        ' \'{"content":"from 0010"}\', now() FROM sessions'
    )
    asyncio.run(fetch(pg_empty_url, stored))
    database = pg_empty_url.rsplit("/", 1)[1]
    before = pg_server.schema(database)
    pgmigrate.migrate(pg_empty_url, "0011")  # (0015 guards its own tables too)
    assert asyncio.run(fetch(pg_empty_url, "SELECT owner FROM sessions")) == [("postgres",)]
    guarded = "SELECT relname FROM pg_class WHERE relrowsecurity ORDER BY relname"
    assert asyncio.run(fetch(pg_empty_url, guarded)) == [("events",), ("sessions",)]
    invokers = "SELECT relname FROM pg_class WHERE 'security_invoker=true' = ANY(reloptions) ORDER BY relname"
    assert asyncio.run(fetch(pg_empty_url, invokers)) == [("session_overview",), ("transcript",), ("usage",)]
    pgmigrate.migrate(pg_empty_url, "0010", "downgrade")
    assert pg_server.schema(database) == before
    assert asyncio.run(fetch(pg_empty_url, "SELECT payload FROM events")) == [('{"content":"from 0010"}',)]


def test_a_role_without_the_grants_is_refused_by_name(crew: Team) -> None:
    stranger = f"{crew.prefix}_dan"
    crew.server.psql(f"CREATE ROLE {stranger} LOGIN PASSWORD 'dan-secret'")
    try:
        url = f"postgresql://{stranger}:dan-secret@127.0.0.1:{crew.server.port}/{crew.database}"
        done = run("list", env=child_env(SESSIONSTORE_DB=url))
        assert done.returncode != 0
        assert "refused this role" in done.stderr and "permission denied for table" in done.stderr, done.stderr
        assert "dan-secret" not in done.stderr
    finally:
        crew.server.psql(f"DROP ROLE {stranger}")


async def test_a_delete_that_would_cut_short_another_roles_fork_is_refused_and_loses_nothing(crew: Team) -> None:
    """Was: the administrator forks ann's session; ann cannot see that fork, so her delete could not give it the
    events it shares first, and 0012's ``SET NULL`` cut the fork short without a word. Now (0013) the fork's key,
    checked at commit, refuses her delete whole and by name, from the library and the command line; a retention
    pass keeps that session and removes her others; the administrator's delete, which sees the fork, gives it its
    events. Her own forks and earlier branches go on as before: her delete of a session with both goes through."""
    ann_sid = await write(crew.url("ann"), "zeppelins")
    async with PostgresStorage(crew.url("carol")) as carol:
        fork_sid = await carol.fork(ann_sid)
        whole = await carol.get_history(fork_sid)
    assert [e.content for e in whole] == ["question about zeppelins", "answer about zeppelins"]

    async with PostgresStorage(crew.url("ann")) as ann:
        with pytest.raises(ForkedByAnotherRoleError, match="another role's fork of the session shares its events"):
            await ann.drop_history(ann_sid)
        assert await ann.get_history(ann_sid) == whole  # hers: untouched
    code, _, err = cli(crew, "ann", "delete", ann_sid.hex)
    assert code != 0 and "another role's fork of the session shares its events" in err, err
    assert "ann-secret" not in err

    # Her own session with an earlier branch (a rewrite kept what it replaced) and a fork of her own, and one more.
    mine, other = await write(crew.url("ann"), "balloons"), await write(crew.url("ann"), "kites")
    async with PostgresStorage(crew.url("ann")) as ann:
        own_fork = await ann.fork(mine)
        await ann.set_history(mine, [UserMessage("question about balloons"), ModelMessage("rewritten")])
    branches = "SELECT count(*) FROM sessions WHERE branch_of IS NOT NULL"
    assert await fetch(crew.url("carol"), branches) == [(1,)]

    # A retention pass (the administrator sets the policy): ann's storage keeps the session carol's fork reads and
    # removes her other old ones, the one with a branch and a fork of her own among them; her fork, recent, stays
    # whole.
    await fetch(crew.url("carol"), "UPDATE sessions SET updated_at = '2025-01-01'; SELECT 1")
    await fetch(
        crew.url("carol"), f"UPDATE sessions SET updated_at = now() WHERE session_id = '{own_fork.hex}'; SELECT 1"
    )
    assert "retention 1d" in cli(crew, "carol", "retention", "set", "1d")[1]
    storage = PostgresStorage(crew.url("ann"))
    storage.retention_every = 0.1
    async with storage as ann:
        deadline = time.monotonic() + 60
        while {r.session_id for r in (await ann.list_sessions()).sessions} != {ann_sid.hex, own_fork.hex}:
            assert time.monotonic() < deadline, "the policy was never applied"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # passes go on: it still stays
        assert await ann.get_history(ann_sid) == whole
        assert await ann.load_session(other) is None and await ann.load_session(mine) is None
        assert [e.content for e in await ann.get_history(own_fork)] == [
            "question about balloons",
            "answer about balloons",
        ]
    assert await fetch(crew.url("carol"), branches) == [(0,)]  # the branch went with its session
    assert cli(crew, "carol", "retention", "off")[0] == 0

    async with PostgresStorage(crew.url("carol")) as carol:
        await carol.drop_history(ann_sid)  # the administrator sees the fork: it is given its events first
        assert await carol.get_history(fork_sid) == whole
        assert await carol.load_session(ann_sid) is None
