"""Durable storage in a PostgreSQL database: the same sessions, events and statements as :class:`SQLiteStorage`.

Imported on demand (``from sessionstore.postgres import PostgresStorage``): it needs the ``postgres`` extra
(asyncpg), which ``import sessionstore`` never loads.

How it keeps conversations safe, at PostgreSQL's default isolation (read committed):

* Every write call is one transaction, and returns only once it has committed. PostgreSQL commits concurrent
  transactions together (one WAL flush for many): no write lane. Everything runs on bare asyncpg connections
  (no SQLAlchemy: the statements of :mod:`~sessionstore.schema.queries` as asyncpg's ``$n`` statements, prepared
  once per connection): appends on connections of their own (:class:`_Appenders`; those that would wait for one
  go in batches, one statement for many sessions, each event whole or absent), everything else on the storage's
  :class:`~sessionstore.postgres.connect.Pool`.
* A write to a session's events first locks the session's row (``SELECT ... FOR UPDATE``; a new session's row
  is inserted ``ON CONFLICT DO NOTHING`` and then locked). An append is one statement (:data:`APPEND_ONE`), one
  round trip and its own transaction when no other writer of the session committed meanwhile; else it is
  done again the long way, in a transaction of three statements. Writers of one session, in any process on any host,
  so take turns: the next position is computed (:data:`queries.APPEND_EVENT`) only by the holder of the lock,
  from what is committed, and ``UNIQUE (session, position)`` stands behind it. Writers of different sessions
  never wait for each other. A lock held past ``lock_timeout`` is :class:`DatabaseBusyError`.
* A write call cancelled once its transaction has started finishes whole in the background (or rolls back
  whole); the storage's next write waits for it, so writes keep their order.
* A connection lost mid-transaction rolls back on the server: a call that raised
  :class:`DatabaseUnavailableError` may or may not have committed, whole; a call that returned is committed.
  Stale connections (a restarted server) are replaced before use, so the next call reconnects; while no server
  answers as the URL asks (a failover under way: a multi-host URL finds the promoted standby), new connections are
  tried for ``reconnect_timeout`` seconds (:func:`~sessionstore.postgres.connect.connector`).
* The search words are not written by the appends (revision 0015): each new event is queued, in its own
  transaction, by a trigger, and the storage indexes the queue in batches in the background, in transactions of
  their own on its pool (never an appender's connection): every :data:`~sessionstore.durable.INDEX_EVERY` events,
  :data:`~sessionstore.durable.INDEX_DELAY` after the first event not indexed, when it opens on a queue left by a
  process that stopped first, and when it closes. An indexing that fails fails no write: the queue keeps the
  events for the next try, or the next storage. Search reads the queued events' text directly meanwhile.
* Through a failover: a read whose connection was lost is read again. An append whose connection was lost after
  it was sent may have committed, so it is never sent again as it was (it could land twice): :meth:`_settle`
  looks for it, with the session's row locked, and appends it only if it is not there. Other writes raise
  :class:`DatabaseUnavailableError`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]

from ..codec import TOKEN_COLUMNS, Codec, decode_all, quick_ready
from ..durable import (
    DELETE_SESSION,
    INDEX_DELAY,
    INDEX_EVERY,
    DurableStorage,
    Rewrite,
    Steps,
    event_row,
    fork_steps,
    replace_steps,
)
from ..errors import AccessDeniedError, DatabaseUnavailableError, StorageError
from ..schema import queries
from ..storage import (
    BUSY_TIMEOUT,
    UPDATED_AT_SLACK,
    ContextLike,
    StreamId,
    check_last,
    held_error,
    missing_parent,
    opened_from,
    session_id_of,
)
from . import connect as pg
from . import search
from .connect import PG_LOCK_CLASS, Pool, pg_lock_key, usable_after
from .migrate import prepare

__all__ = ["PostgresStorage"]

T = TypeVar("T")

logger = logging.getLogger(__name__)


# -- the statements that differ from queries' ---------------------------------------------------------

# The session's row, locked until the transaction ends: its writers take turns.
LOCK_SESSION = queries.FIND_SESSION + " FOR UPDATE"

# Holds (revision 0007), on the storage's holds connection (asyncpg's $n parameters).
_FIND_ID = "SELECT id FROM sessions WHERE session_id = $1"
_NEW_BARE_SESSION = (
    "INSERT INTO sessions (session_id, parent, cwd, additional_directories, mcp_servers, meta, title, created_at,"
    " updated_at, released, revision) VALUES ($1, NULL, '.', '[]', '[]', '{}', NULL, $2, $2, FALSE, 0)"
    " ON CONFLICT (session_id) DO NOTHING"
)
_HELD_BY = "SELECT held_by FROM sessions WHERE id = $1"
_MARK_HELD = "UPDATE sessions SET held_by = $1 WHERE id = $2"
_UNMARK_HELD = "UPDATE sessions SET held_by = NULL WHERE id = $1 AND held_by = $2"
_UNMARK_ALL = "UPDATE sessions SET held_by = NULL WHERE id = ANY($1::bigint[]) AND held_by = $2"
_CLEAR_DEAD_HOLDERS = (
    "UPDATE sessions SET held_by = NULL WHERE held_by IS NOT NULL AND NOT EXISTS (SELECT FROM pg_locks"
    " WHERE locktype = 'advisory' AND classid = $1::oid AND objid = (sessions.id % 2147483648)::oid AND objsubid = 2)"
)
_HELD_BY_ANOTHER = (
    "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::oid"
    " AND objid = $2::oid AND objsubid = 2 AND pid <> $3)"
)
# A bare row for a session written before it was saved (or a subagent's stream); another writer may have made it
# meanwhile.
NEW_SESSION = queries.NEW_SESSION_POSTGRESQL

# An append in one statement, one round trip, committed on its own: lock the session's row (making it if it is
# missing, stamping updated_at if stale), then insert the event at the next position. One statement has one
# snapshot, taken before it waited for the lock: if another writer of the session committed in between, the
# next position computed here would be stale. An append there took that position: the unique key on (session,
# position) sees it committed, ON CONFLICT inserts nothing, and nothing is returned. Any other change to the
# session's events updates its row (the revision-counting triggers; appends are not counted, revision 0014), so
# the locked row (always the newest version) then differs from the row as this statement's snapshot has it:
# nothing is inserted either. Either way the caller appends the long way (the lock first, then the position, in
# two statements). A row made here is made under the session the stream was opened from ($9, its id, or NULL);
# when that one has no row, nothing is made and the long way says why. A fork's first event goes at its
# forked_at; a row made by the statement itself is not in its snapshot, and starts at 0 (only fork makes a row
# that starts later).
APPEND_ONE = """
WITH locked AS (
    SELECT id, updated_at, xmin::text AS version FROM sessions WHERE session_id = $1 AND NOT ({HELD}) FOR UPDATE
), made AS (
    INSERT INTO sessions (session_id, parent, cwd, additional_directories, mcp_servers, meta, title,
                          created_at, updated_at, released, revision)
    SELECT $1, (SELECT id FROM sessions WHERE session_id = $9), '.', '[]', '[]', '{}', NULL, $2, $2, FALSE, 0
    WHERE NOT EXISTS (SELECT FROM locked) AND ($9::text IS NULL OR EXISTS (SELECT FROM sessions WHERE session_id = $9))
    ON CONFLICT (session_id) DO NOTHING RETURNING id
), stamped AS (
    UPDATE sessions SET updated_at = $2 WHERE id = (SELECT id FROM locked WHERE updated_at < $3)
), target AS (
    SELECT id FROM locked
    WHERE version = (SELECT xmin::text FROM sessions WHERE session_id = $1)
    UNION ALL SELECT id FROM made
)
INSERT INTO events (session, position, type, payload, role, text, text_path, created_at, {TOKENS})
SELECT target.id, COALESCE((SELECT MAX(position) + 1 FROM events WHERE session = target.id),
       (SELECT forked_at FROM sessions WHERE id = target.id), 0),
       $4, $5, $6, $7, $8, $2, $10::integer, $11::integer, $12::integer, $13::integer, $14::integer
FROM target
ON CONFLICT (session, position) DO NOTHING
RETURNING position
"""

# Appends to several sessions in one statement, one round trip and one commit, for appends that would otherwise
# wait for a connection: APPEND_ONE for each session ($1: their ids, distinct; $9: the sessions they were opened
# from), all else alike, and the ids appended returned. A session whose row another transaction holds locked is
# skipped (SKIP LOCKED: a batch never waits for one session's writer), as is one another writer changed
# meanwhile (a change the revision counts, or an append whose position ON CONFLICT finds taken); the caller
# appends those the long way, one by one.
APPEND_MANY = """
WITH input AS (
    SELECT * FROM unnest($1::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                         $10::integer[], $11::integer[], $12::integer[], $13::integer[], $14::integer[])
        AS i(sid, type, payload, role, text, text_path, parent, {TOKENS})
), locked AS (
    SELECT id, session_id, updated_at, xmin::text AS version FROM sessions
    WHERE session_id = ANY($1::text[]) AND NOT ({HELD}) ORDER BY id FOR UPDATE SKIP LOCKED
), made AS (
    INSERT INTO sessions (session_id, parent, cwd, additional_directories, mcp_servers, meta, title,
                          created_at, updated_at, released, revision)
    SELECT sid, (SELECT id FROM sessions WHERE session_id = input.parent), '.', '[]', '[]', '{}', NULL, $2, $2,
           FALSE, 0 FROM input
    WHERE sid NOT IN (SELECT session_id FROM locked)
      AND (input.parent IS NULL OR EXISTS (SELECT FROM sessions WHERE session_id = input.parent))
    ORDER BY sid
    ON CONFLICT (session_id) DO NOTHING RETURNING id, session_id
), stamped AS (
    UPDATE sessions SET updated_at = $2 WHERE id IN (SELECT id FROM locked WHERE updated_at < $3)
), target AS (
    SELECT id, session_id FROM locked
    WHERE version = (SELECT xmin::text FROM sessions WHERE sessions.id = locked.id)
    UNION ALL SELECT id, session_id FROM made
), appended AS (
    INSERT INTO events (session, position, type, payload, role, text, text_path, created_at, {TOKENS})
    SELECT target.id, COALESCE((SELECT MAX(position) + 1 FROM events WHERE session = target.id),
       (SELECT forked_at FROM sessions WHERE id = target.id), 0),
           input.type, input.payload, input.role, input.text, input.text_path, $2, {INPUT_TOKENS}
    FROM target JOIN input ON input.sid = target.session_id
    ON CONFLICT (session, position) DO NOTHING
    RETURNING session
)
SELECT target.session_id FROM appended JOIN target ON target.id = appended.session
"""

# Whether another connection holds a session (``sessions`` in scope): marked held by someone other than this
# storage ($16, its holder text), and that mark's advisory lock (connect.PG_LOCK_CLASS, $15) taken. The lock table is
# looked at only for a session marked held by another (a holder marks its hold in an update of the row, after
# taking the lock: an append that locked the row first commits before that mark, as if before the hold). A session
# held elsewhere is not appended to by the one-statement appends: it goes the long way, which refuses it.
HELD_ELSEWHERE = (
    "sessions.held_by IS NOT NULL AND sessions.held_by <> $16 AND EXISTS (SELECT FROM pg_locks"
    " WHERE locktype = 'advisory' AND classid = $15::oid AND objid = (sessions.id % 2147483648)::oid"
    " AND objsubid = 2)"
)
# The token columns (revision 0010): $10-$14, NULL for an event that reports none.
_TOKENS = ", ".join(TOKEN_COLUMNS)
APPEND_ONE = APPEND_ONE.replace("{HELD}", HELD_ELSEWHERE).replace("{TOKENS}", _TOKENS)
APPEND_MANY = (
    APPEND_MANY.replace("{HELD}", HELD_ELSEWHERE)
    .replace("{TOKENS}", _TOKENS)
    .replace("{INPUT_TOKENS}", ", ".join(f"input.{name}" for name in TOKEN_COLUMNS))
)

# Whether an append whose commit's outcome is unknown is stored: its event, found by what it wrote, its
# created_at included (to the microsecond; _now never gives a process two appends the same one). Run with the
# session's row locked, so a transaction still committing it on this server has ended first.
LANDED = "SELECT 1 FROM events WHERE session = :id AND created_at = :now AND type = :type AND payload = :payload"

_BATCH = 64  # events in one APPEND_MANY at most

_DB_ERRORS = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncio.TimeoutError,
)


def _not_owned(sid: str) -> AccessDeniedError:
    """A write to a session this role cannot see although its id is taken: another role owns it (row-level
    security, revision 0011; the unique index on ids answers for every role)."""
    return AccessDeniedError(
        f"session {sid} belongs to another database role: this role may neither read nor write it (row-level"
        " security), so nothing was written"
    )


class _Lost(Exception):
    """An append sent on a connection that was lost before its answer came: committed or not, unknown. ``at`` is
    the ``created_at`` it gave its event, by which :meth:`PostgresStorage._settle` finds it, or not."""

    def __init__(self, at: datetime) -> None:
        super().__init__(at)
        self.at = at


class _Appenders:
    """The storage's own asyncpg connections for :meth:`PostgresStorage.save_event`, at most ``size`` at once.

    Why a pool of their own: an append that waits for a connection joins a batch, which needs to know at once
    whether one is free; and a write transaction holding every connection never holds appends up. These
    connections only ever run :data:`APPEND_ONE` or :data:`APPEND_MANY` in autocommit.

    An append that finds a connection free runs at once, alone. One that would wait for a connection joins a
    batch instead, and the first connection freed runs the whole batch in one statement: under load, one round
    trip and one commit for many sessions' events rather than one each.
    """

    def __init__(self, connect: Callable[[], Awaitable[Any]], size: int, holder: str) -> None:
        self._connect = connect
        self.pool = Pool(connect, size)
        # Batches waiting for a connection, oldest first: session id -> (values, the caller's future).
        self._pending: list[dict[str, tuple[tuple[Any, ...], asyncio.Future[bool]]]] = []
        self._runners: set[asyncio.Task[None]] = set()
        # How the storage marks its own holds (a session so marked is not held elsewhere), and the backend of its
        # holds connection, whose advisory locks are its own.
        self.holder = holder
        self.holder_pid = 0

    def connect(self) -> Awaitable[Any]:
        """A new connection of the same kind (the storage's holds connection is one)."""
        return self._connect()

    async def append(self, sid: str, values: tuple[Any, ...]) -> bool:
        """Append ``(type, payload, role, text, text_path, parent, *tokens)`` to session ``sid``; False: do it the
        long way."""
        if self.pool.free() and not self._pending:
            conn = await self.pool.acquire()  # free: no wait
            now = _now()
            try:
                guard = (PG_LOCK_CLASS, self.holder)
                return await conn.fetchval(APPEND_ONE, sid, now, now - UPDATED_AT_SLACK, *values, *guard) is not None
            except asyncpg.InsufficientPrivilegeError:
                # Row-level security (revision 0011): the events policy looks for the session in the statement's
                # snapshot, which lacks the row this statement made, so a role's first append to a session it has
                # no row for yet is refused whole; the long way makes the row, then appends. (Another role's
                # session is refused there, by name.)
                return False
            except BaseException as exc:
                if not usable_after(exc):
                    conn.terminate()  # never handed out again
                if isinstance(exc, _DB_ERRORS) and pg.lost_connection(exc):
                    raise _Lost(now) from exc
                raise
            finally:
                self.pool.release(conn)
        batch = self._pending[-1] if self._pending else None
        if batch is None or sid in batch or len(batch) >= _BATCH:
            batch = {}
            self._pending.append(batch)
            runner = asyncio.ensure_future(self._run(batch))
            self._runners.add(runner)
            runner.add_done_callback(self._runners.discard)
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        batch[sid] = (values, done)
        return await done

    async def _run(self, batch: dict[str, tuple[tuple[Any, ...], asyncio.Future[bool]]]) -> None:
        try:
            conn = await self.pool.acquire()
        except BaseException as exc:
            self._pending.remove(batch)
            for _, done in batch.values():
                done.set_exception(exc)
            return
        self._pending.remove(batch)  # closed to newcomers from here on
        now = _now()
        try:
            columns = [list(column) for column in zip(*(values for values, _ in batch.values()), strict=True)]
            guard = (PG_LOCK_CLASS, self.holder)
            found = {
                row[0]
                for row in await conn.fetch(APPEND_MANY, list(batch), now, now - UPDATED_AT_SLACK, *columns, *guard)
            }
        except BaseException as exc:
            if usable_after(exc):
                found = set()  # refused whole (nothing committed): each appends the long way
            else:  # the connection was lost (committed or not, unknown: each caller settles its own), or worse
                conn.terminate()
                lost = isinstance(exc, _DB_ERRORS) and pg.lost_connection(exc)
                for _, done in batch.values():
                    done.set_exception(_Lost(now) if lost else exc)
                return
        finally:
            self.pool.release(conn)
        for sid, (_, done) in batch.items():
            done.set_result(sid in found)

    async def close(self) -> None:
        """Close the idle connections (all of them, once no append is under way)."""
        if self._runners:
            await asyncio.wait(list(self._runners))
        await self.pool.close()


_last_now = datetime.min


async def _run_steps(conn: Any, steps: Steps[T]) -> T:
    """:func:`~sessionstore.durable.run_steps` on an asyncpg connection: each statement awaited on ``conn``."""
    result: _StepResult | None = None
    try:
        while True:
            sql, params = steps.send(result)
            result = await _StepResult.of(conn, sql, params)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


_COUNTED = frozenset({"UPDATE", "DELETE"})  # steps whose answer is how many rows they changed


class _StepResult:
    """A step's answer as a ``sqlite3`` cursor gives it (what :data:`~sessionstore.durable.Steps` use): its rows
    (``fetchone``) or, for an UPDATE or DELETE, how many rows it changed (``rowcount``, from asyncpg's status)."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    @classmethod
    async def of(cls, conn: Any, sql: str, params: dict[str, Any]) -> _StepResult:
        if sql.split(None, 1)[0] in _COUNTED and " RETURNING " not in sql:
            text, names = pg.numbered(sql)
            bound = pg.bind(params)
            status = await conn.execute(text, *(bound[name] for name in names))  # "UPDATE 3"
            return cls([], int(status.rsplit(" ", 1)[1]))
        rows = await pg.fetch(conn, sql, params)
        return cls(rows, len(rows))

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None


async def _delete_session(conn: Any, sid: str) -> None:
    """:data:`~sessionstore.durable.DELETE_SESSION` on an asyncpg connection: forks given their shared rows, then
    the session with its subagents and earlier branches (``drop_history`` and retention alike)."""
    for sql in DELETE_SESSION:
        await pg.fetch(conn, sql, {"sid": sid})


def _now() -> datetime:
    """Now, as a timestamp is bound: naive UTC (``timestamp without time zone``, as the models' columns), and never
    the same microsecond twice in a process (an append's created_at tells it from any other this process made:
    :data:`LANDED`)."""
    global _last_now
    now = datetime.now(UTC).replace(tzinfo=None)
    _last_now = now if now > _last_now else _last_now + timedelta(microseconds=1)
    return _last_now


class PostgresStorage(DurableStorage[Pool]):
    """Sessions and their events in a PostgreSQL database, named by its URL.

    Implements :class:`~sessionstore.Storage` and :class:`~sessionstore.SessionCatalog`. The constructor does
    no I/O; the database is reached (and brought to the current schema, under the migration lock) on first
    use or on ``async with``. ``lock_timeout`` is how long (seconds) a write waits for another writer of the
    same session before :class:`~sessionstore.DatabaseBusyError`. At most ``pool_size`` connections for appends
    and as many for everything else, each kept open once made (no overflow: a connection closed on return would
    pay its login, a TCP handshake and a SCRAM exchange, again on the next burst of writes); calls beyond that
    wait for one.
    The URL's password is never shown: ``repr``, messages and logs show ``***``.

    High availability: ``url`` may name several hosts (``postgresql://u:pw@h1:5432,h2:5432/db?
    target_session_attrs=read-write``); while none answers as asked (a failover under way), calls wait up to
    ``reconnect_timeout`` seconds for one before :class:`~sessionstore.DatabaseUnavailableError`. ``read_url``,
    if given, is where reads go (``get_history``, ``load_session``, ``list_sessions``): a standby, which may not
    have applied the newest commits yet (see the PostgreSQL guide); writes and holds stay on ``url``.
    """

    def __init__(
        self,
        url: str,
        *,
        codec: Codec | None = None,
        auto_upgrade: bool = True,
        lock_timeout: float = BUSY_TIMEOUT,
        pool_size: int = 5,
        read_url: str | None = None,
        reconnect_timeout: float = 30.0,
        keep_past: bool = True,
    ) -> None:
        pg.check_url(url)
        if read_url is not None:
            pg.check_url(read_url)
        if reconnect_timeout < 0:
            raise ValueError(f"reconnect_timeout must not be negative, got {reconnect_timeout}")
        if lock_timeout < 0:
            raise ValueError(f"lock_timeout must not be negative, got {lock_timeout}")
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        super().__init__(codec=codec, auto_upgrade=auto_upgrade, keep_past=keep_past)
        self._url = url
        self.url = pg.redacted(url)
        """The URL with its password hidden."""
        self.lock_timeout = lock_timeout
        self.pool_size = pool_size
        self._read_url = read_url
        self.reconnect_timeout = reconnect_timeout
        self._reader: Pool | None = None  # on read_url, if given
        # The pool for everything but appends is the base's _opened; the appenders have connections of their own.
        self._appenders: _Appenders | None = None
        # Writes under way; those whose caller was cancelled are waited for before the next write starts.
        self._writes: set[asyncio.Task[Any]] = set()
        # Holds (see hold): the sessions held (session id -> row id), on one connection of their own.
        self._held: dict[str, int] = {}
        self._holds: Any = None
        self._holds_lock = asyncio.Lock()
        self._retaking: asyncio.Future[None] | None = None  # the holds taken again after their connection was lost
        self._orphans: set[asyncio.Task[Any]] = set()
        # Events written since the words were last brought up to date, and what does it next (see _written).
        self._unindexed = 0
        self._indexing: asyncio.Task[None] | None = None
        self._index_timer: asyncio.TimerHandle | None = None

    _top_level = queries.TOP_LEVEL_POSTGRESQL

    def __repr__(self) -> str:
        return f"PostgresStorage({self.url!r})"

    # -- lifecycle (the rest is DurableStorage's) ------------------------------------

    def _new_loop(self) -> None:
        self._writes, self._orphans = set(), set()
        self._indexing, self._index_timer = None, None

    async def _open(self, loop: asyncio.AbstractEventLoop) -> Pool:
        settings = {"lock_timeout": str(int(self.lock_timeout * 1000)), "application_name": "sessionstore"}
        patience = self.reconnect_timeout
        connect = pg.connector(self._url, patience=patience, server_settings=settings)
        pool = Pool(connect, self.pool_size)
        appenders = _Appenders(connect, self.pool_size, self._holder)

        trailing = False

        async def first(pool: Pool, check: bool) -> None:
            nonlocal trailing
            async with pool.connection() as conn:
                if check:
                    await prepare(self._url, auto_upgrade=self.auto_upgrade, conn=conn)
                    # Events queued by a process that stopped before it indexed them: indexed once open.
                    trailing = bool(await pg.fetch(conn, queries.ANY_UNINDEXED_POSTGRESQL))

        # The schema is checked on the pool's first connection, and the appenders' first is made meanwhile: both
        # are kept, so the first read and the first append pay no login (a TCP handshake and a SCRAM exchange).
        # The decoder's parser is imported meanwhile too, off the loop's thread (no read pays the import).
        ready = loop.run_in_executor(None, quick_ready)
        failed = [
            found
            for found in await asyncio.gather(
                first(pool, True), first(appenders.pool, False), ready, return_exceptions=True
            )
            if found is not None
        ]
        if failed:
            await asyncio.gather(pool.close(), appenders.close(), return_exceptions=True)
            error = failed[0]
            raise pg.from_postgres(error, self._url) if isinstance(error, _DB_ERRORS) else error
        self._appenders = appenders
        if self._read_url is not None:
            self._reader = Pool(pg.connector(self._read_url, patience=patience), self.pool_size)
        if trailing:  # indexed once the pool is the storage's (_ready sets it on return), or at close if sooner
            self._unindexed += 1
            loop.call_soon(self._start_indexing)
        return pool

    async def _dispose(self) -> None:
        if self._writes:
            await asyncio.wait(list(self._writes))
        # The events written and not indexed yet, indexed before the connections go (a failure leaves them queued).
        if self._indexing is not None:
            await asyncio.wait([self._indexing])
        if self._unindexed:
            self._start_indexing()
        if self._indexing is not None:
            await asyncio.wait([self._indexing])
        if self._index_timer is not None:
            self._index_timer.cancel()
            self._index_timer = None
        holds, self._holds = self._holds, None
        retaking, self._retaking = self._retaking, None
        if retaking is not None:
            retaking.cancel()
        if holds is not None and not holds.is_closed():
            try:  # the marks of what this storage still holds; the locks go with the connection
                await holds.execute(_UNMARK_ALL, list(self._held.values()), self._holder)
                await holds.close(timeout=5)
            except _DB_ERRORS:
                holds.terminate()
        self._held.clear()
        pool, self._opened = self._opened, None
        reader, self._reader = self._reader, None
        appenders, self._appenders = self._appenders, None
        if appenders is not None:
            await appenders.close()
        for each in (pool, reader):
            if each is not None:
                await each.close()

    # -- running work --------------------------------------------------------------------

    async def _write(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``work`` in one transaction; return once it has committed. Cancelled, it still ends whole."""
        return await self._guarded(lambda pool: self._transaction(pool, work))

    async def _guarded(self, write: Callable[[Pool], Awaitable[T]]) -> T:
        """Run ``write``, after the writes whose callers were cancelled; cancelled, it still runs to its end."""
        pool = await self._ready()
        if self._orphans:
            await asyncio.wait(list(self._orphans))
        if self._held and self._holds is not None and self._holds.is_closed():  # lost: no write before they are back
            await self._take_again()
        task = asyncio.ensure_future(write(pool))
        self._writes.add(task)
        task.add_done_callback(self._finished)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                self._orphans.add(task)
            raise

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._writes.discard(task)
        self._orphans.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a caller cancelled meanwhile no longer waits for it

    async def _transaction(self, pool: Pool, work: Callable[[Any], Awaitable[T]]) -> T:
        """``work(connection)`` in one transaction of a pooled connection: committed if it returns."""
        try:
            async with pool.connection() as conn, conn.transaction():
                return await work(conn)
        except _DB_ERRORS as exc:
            raise pg.from_postgres(exc, self._url) from exc

    async def _read(self, read: Callable[..., T], *args: Any) -> T:
        """Run ``read(connection, *args)`` on a pooled connection, as a :class:`~.connect.PgConnection` (in the
        greenlet :func:`~.connect.run_sync` drives)."""
        url = self._url

        async def run(conn: Any) -> T:
            return await pg.run_sync(read, pg.PgConnection(conn, url), *args)

        return await self._read_async(run)

    async def _write_row(self, sql: str, params: dict[str, Any]) -> None:
        async def work(conn: Any) -> None:
            await pg.fetch(conn, sql, params)  # times bound as datetimes, released a boolean

        await self._write(work)

    async def _read_async(self, read: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``read`` on a pooled connection (read committed; its statements see what was committed), on
        ``read_url`` if given; read again if its connection is lost (a read changes nothing), on a new one, for up
        to ``reconnect_timeout``."""
        pool = await self._ready()
        reader, url = (self._reader, self._read_url) if self._reader is not None else (pool, self._url)
        assert url is not None
        deadline = time.monotonic() + self.reconnect_timeout
        while True:
            try:
                async with reader.connection() as conn:
                    return await read(conn)
            except _DB_ERRORS as exc:
                if not pg.lost_connection(exc) or time.monotonic() > deadline:
                    raise pg.from_postgres(exc, url) from exc
            await asyncio.sleep(pg.RETRY_DELAYS[0])

    # -- inside a write transaction -------------------------------------------------------

    async def _lock_session(self, conn: Any, stream_id: StreamId, parent: StreamId | None, now: datetime) -> int:
        """The session's row id, its row locked until the transaction ends (made if missing, under ``parent``'s
        row, which must exist); stamps ``updated_at``. :class:`SessionHeldError` if another connection holds it."""
        return (await self._lock_row(conn, stream_id, parent, now))[0]

    async def _lock_row(
        self, conn: Any, stream_id: StreamId, parent: StreamId | None, now: datetime
    ) -> tuple[int, int | None]:
        """:meth:`_lock_session`, and the row's ``forked_from`` (revision 0012; None for a row made here)."""
        sid = stream_id.hex
        row = await pg.fetchrow(conn, LOCK_SESSION, {"sid": sid})
        if row is not None:
            await self._refuse_held(conn, int(row[0]), sid)
        if row is None:
            parent_row = None
            if parent is not None:
                parent_row = await pg.fetchval(conn, queries.FIND_SESSION, {"sid": parent.hex})
                if parent_row is None:
                    raise missing_parent(stream_id, parent)
            made = await pg.fetchval(conn, NEW_SESSION, {"sid": sid, "parent": parent_row, "now": now})
            if made is not None:
                return int(made), None
            row = await pg.fetchrow(conn, LOCK_SESSION, {"sid": sid})  # another writer made it
            if row is None:  # or it is another role's, which this one cannot see
                raise _not_owned(sid)
        if row[2] < now - UPDATED_AT_SLACK:
            await pg.fetch(conn, queries.STAMP_SESSION, {"now": now, "id": row[0]})
        return int(row[0]), row[3]

    # -- Storage ----------------------------------------------------------------------------

    async def save_event(self, event: Any, context: ContextLike) -> None:
        """Append one event; returns once it is committed."""
        stream_id = context.stream.id
        sid = session_id_of(stream_id)
        parent = opened_from(stream_id, context)
        row = event_row(self.codec, event)

        async def append(pool: Pool) -> None:
            appenders = self._appenders
            assert appenders is not None  # made with the pool, dropped only once no write is under way
            values = (
                row["type"],
                row["payload"],
                row["role"],
                row["text"],
                row["text_path"],
                None if parent is None else parent.hex,
                *(row[name] for name in TOKEN_COLUMNS),
            )
            try:
                # One prepared statement (asyncpg caches it per connection), in autocommit.
                if await appenders.append(sid, values):
                    return
            except _Lost as lost:
                return await self._settle(pool, stream_id, parent, row, lost.at)
            except _DB_ERRORS as exc:
                raise pg.from_postgres(exc, self._url) from exc

            # Another writer of this session committed meanwhile, or holds its row: lock, then append.
            now = _now()

            async def the_long_way(conn: Any) -> None:
                row_id = await self._lock_session(conn, stream_id, parent, now)
                await pg.fetch(conn, queries.APPEND_EVENT, {**row, "id": row_id, "now": now})

            try:
                await self._transaction(pool, the_long_way)
            except DatabaseUnavailableError:
                await self._settle(pool, stream_id, parent, row, now)

        await self._guarded(append)
        self._written(1)

    async def _settle(
        self, pool: Pool, stream_id: StreamId, parent: StreamId | None, row: dict[str, Any], at: datetime
    ) -> None:
        """Finish an append whose connection was lost after it was sent (the server ended or failed over): it may
        have committed, so it is never simply sent again, which could store it twice. Once a primary answers, in
        one transaction, the session's row is locked (a transaction still committing the append there ends
        first) and the event looked for by what it wrote (:data:`LANDED`: its ``created_at``, ``at``, is this
        process's alone); if it is not there it is appended, with that ``created_at`` (refused, as any append, if
        another storage holds the session now). Tried again while connections are lost, for up to
        ``reconnect_timeout``; then :class:`DatabaseUnavailableError`, the outcome unknown."""
        sid = stream_id.hex
        deadline = time.monotonic() + self.reconnect_timeout
        params = {**row, "now": at}

        async def settle(conn: Any) -> bool:
            locked = await pg.fetchrow(conn, LOCK_SESSION, {"sid": sid})
            if locked is not None and await pg.fetchrow(conn, LANDED, {**params, "id": locked[0]}):
                return True  # stored, whoever holds the session now
            row_id = await self._lock_session(conn, stream_id, parent, _now())
            await pg.fetch(conn, queries.APPEND_EVENT, {**params, "id": row_id})
            return False

        while True:
            try:
                landed = await self._transaction(pool, settle)
            except DatabaseUnavailableError as exc:
                if time.monotonic() > deadline:
                    unknown = f"{exc}; the append to session {sid} may or may not be stored"
                    raise DatabaseUnavailableError(unknown) from exc
                await asyncio.sleep(pg.RETRY_DELAYS[0])
                continue
            logger.warning(
                "%s: the connection was lost during an append to session %s, which %s",
                self.url,
                sid,
                "had committed" if landed else "had not committed and is appended now",
            )
            return

    async def get_history(self, stream_id: StreamId, *, last: int | None = None) -> list[Any]:
        """The session's events in order (empty for an unknown stream); with ``last``, only its newest ``last``,
        oldest of them first (all of them if it has fewer; :class:`~sessionstore.InvalidWindowError` for a
        ``last`` that is not a whole number of zero or more). A window is one statement, one range of an index
        however long the history; this storage keeps no read cache."""
        sid = session_id_of(stream_id)
        last = check_last(last)
        if last == 0:
            return []

        async def read(conn: Any) -> list[Any]:
            if last is not None:
                window = await pg.fetch(conn, queries.RECENT_EVENTS_POSTGRESQL, {"sid": sid, "last": last})
                if len(window) == last or (window and window[0][0] == 0):
                    return [(t, p) for _, t, p in window]
                # Shorter than asked and not from position 0: maybe a fork's own rows alone (revision 0012).
                found = await pg.fetchrow(conn, queries.FIND_SESSION, {"sid": sid})
                if found is None or found[3] is None:
                    return [(t, p) for _, t, p in window]
                return await pg.fetch(conn, queries.FORK_RECENT, {"id": found[0], "last": last})
            rows = await pg.fetch(conn, queries.HISTORY, {"sid": sid})
            if rows and rows[0][4] is not None:  # a fork: its segments' rows
                return await pg.fetch(conn, queries.FORK_EVENTS_POSTGRESQL, {"id": rows[0][0]})
            return [(r[2], r[3]) for r in rows if r[2] is not None]

        return decode_all(self.codec, await self._read_async(read))

    # -- the search words, brought up to date in batches (revision 0015) ------------------------------

    def _written(self, events: int) -> None:
        """After a write of ``events`` events: index when enough were written, or soon after the first."""
        self._unindexed += events
        loop = self._loop
        if loop is None or self._indexing is not None or not self._unindexed:
            return
        if self._unindexed >= INDEX_EVERY:
            self._start_indexing()
        elif self._index_timer is None:
            self._index_timer = loop.call_later(INDEX_DELAY, self._start_indexing)

    def _start_indexing(self) -> None:
        """Index the queue now, in the background (unless that is under way already, or the storage is closed)."""
        if self._index_timer is not None:
            self._index_timer.cancel()
            self._index_timer = None
        if self._indexing is None and self._opened is not None and self._loop is not None:
            self._indexing = self._loop.create_task(self._index(), name=f"sessionstore indexing {self!r}")

    async def _index(self) -> None:
        self._unindexed = 0
        try:
            # A batch per transaction, on the pool: appends, on their own connections, never wait for it.
            while await self._index_batch():
                pass
        except Exception as exc:  # the events are committed and queued whatever happens here: a later try
            logger.warning("%s: the search words could not be brought up to date yet: %s", self.url, exc)
            failed = True
        else:
            failed = False
        finally:
            self._indexing = None
        if failed:
            # Tried again INDEX_DELAY from now or INDEX_EVERY writes from now, whichever comes first (not at every
            # write while the cause lasts), and at close.
            self._unindexed = 1  # (the queue, not this count, says what is left)
            if self._loop is not None and self._index_timer is None:
                self._index_timer = self._loop.call_later(INDEX_DELAY, self._start_indexing)
            return
        self._written(0)  # what was written meanwhile

    async def _index_batch(self) -> bool:
        pool = self._opened
        if pool is None:
            return False

        async def batch(conn: Any) -> bool:
            return await pg.run_sync(search.index_new_events, pg.PgConnection(conn, self._url))

        return await self._transaction(pool, batch)

    async def set_history(self, stream_id: StreamId, events: Iterable[Any]) -> None:
        """Replace the session's events in one transaction, writing only what changed."""
        sid = session_id_of(stream_id)
        parent = opened_from(stream_id)
        # Encoded now: a bad event fails before any write, and a mutable one is stored as it is at this call.
        rewrite = Rewrite(self.codec, events, eager=True)

        async def work(conn: Any) -> int:
            now = _now()
            row_id, forked_from = await self._lock_row(conn, stream_id, parent, now)
            read = queries.STORED_EVENTS if forked_from is None else queries.FORK_EVENTS_POSTGRESQL
            stored = [(t, p) for t, p in await pg.fetch(conn, read, {"id": row_id})]
            keep = rewrite.unchanged(stored)
            if keep < len(stored):
                forked_at = None
                if forked_from is not None:
                    forked_at = (await pg.fetchrow(conn, queries.FORK_ORIGIN, {"sid": sid}))[2]
                steps = replace_steps(
                    row_id,
                    forked_from,
                    forked_at,
                    keep,
                    len(stored),
                    keep_past=self.keep_past,
                    now=now,
                    new_sid=lambda: uuid.uuid4().hex,
                )
                await _run_steps(conn, steps)
            rows = list(rewrite.rows(row_id, keep, now))
            await pg.executemany(conn, queries.INSERT_EVENT, rows)
            return len(rows)

        self._written(await self._write(work))

    async def drop_history(self, stream_id: StreamId) -> None:
        """Delete the session, its subagents and all their events."""
        sid = session_id_of(stream_id)

        async def work(conn: Any) -> None:
            row = await pg.fetchrow(conn, LOCK_SESSION, {"sid": sid})
            if row is not None:
                await self._refuse_held(conn, int(row[0]), sid)
            await _delete_session(conn, sid)

        await self._write(work)
        if sid in self._held:
            await self.let_go(stream_id)  # the row is gone; the lock goes too

    async def fork(self, stream_id: StreamId, *, at: int | None = None) -> StreamId:
        """A new session whose history is this one's first ``at`` events (all of them when ``None``), shared,
        not copied (revision 0012); its id. As :meth:`SQLiteStorage.fork <sessionstore.SQLiteStorage.fork>`."""
        sid = session_id_of(stream_id)
        new = uuid.uuid4()

        async def work(conn: Any) -> None:
            await _run_steps(conn, fork_steps(sid, at, _now(), new.hex))

        await self._write(work)
        return new

    # -- retention (DurableStorage's passes) ----------------------------------------------------

    async def _remove_stale(self, row_id: int, sid: str, cutoff: str) -> tuple[bool, int]:
        if sid in self._held:
            return False, 0
        stale_before = pg.bind({"cutoff": cutoff})["cutoff"]

        async def work(conn: Any) -> bool:
            # The row locked first: a holder marks its hold in an update of it, so the answer holds to the commit.
            found = await pg.fetchrow(conn, LOCK_SESSION, {"sid": sid})
            if found is None or found[2] >= stale_before:
                return False  # gone, or written to since it was found
            if await conn.fetchval(_HELD_BY_ANOTHER, PG_LOCK_CLASS, pg_lock_key(row_id), self._holder_pid()):
                return False
            await _delete_session(conn, sid)  # as delete: forks keep their shared rows, branches go with it
            return True

        return await self._write(work), 0

    # -- holds (the SessionCatalog is DurableStorage's, over _read and _write_row) ---------------

    async def hold(self, stream_id: StreamId) -> None:
        """Hold the session for this storage (a registry has it live), making its row if it has none.

        The hold is an advisory lock on this storage's own connection: it dies with that connection (the process
        ending, the host going away), and ``pg_locks`` shows it on every host. :class:`SessionHeldError`,
        naming the holder, while another storage holds it.
        """
        sid = session_id_of(stream_id)
        await self._ready()
        async with self._holds_lock:
            if sid in self._held:
                return
            try:
                conn = await self._holds_connection()
                row_id = await conn.fetchval(_FIND_ID, sid)
                if row_id is None:
                    await conn.execute(_NEW_BARE_SESSION, sid, _now())
                    row_id = await conn.fetchval(_FIND_ID, sid)
                if row_id is None:
                    raise _not_owned(sid)
                if not await self._take(conn, row_id):
                    raise held_error(sid, await conn.fetchval(_HELD_BY, row_id))
            except _DB_ERRORS as exc:
                raise pg.from_postgres(exc, self._url) from exc
            self._held[sid] = int(row_id)

    async def _take(self, conn: Any, row_id: int) -> bool:
        """Take the session's advisory lock on the holds connection ``conn`` and mark its row held by this storage;
        False, and nothing taken, while another connection holds it."""
        if not await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", PG_LOCK_CLASS, pg_lock_key(row_id)):
            return False
        try:
            await conn.execute(_MARK_HELD, self._holder, row_id)
        except BaseException:
            await conn.execute("SELECT pg_advisory_unlock($1, $2)", PG_LOCK_CLASS, pg_lock_key(row_id))
            raise
        return True

    async def let_go(self, stream_id: StreamId) -> None:
        """Stop holding the session (nothing if this storage does not hold it)."""
        sid = session_id_of(stream_id)
        async with self._holds_lock:
            row_id = self._held.pop(sid, None)
            conn = self._holds
            if row_id is None or conn is None or conn.is_closed():
                return
            try:
                await conn.execute(_UNMARK_HELD, row_id, self._holder)
                await conn.execute("SELECT pg_advisory_unlock($1, $2)", PG_LOCK_CLASS, pg_lock_key(row_id))
            except _DB_ERRORS as exc:
                raise pg.from_postgres(exc, self._url) from exc

    async def _holds_connection(self) -> Any:
        """The connection this storage's holds are taken on, made on first use; dead holders' marks cleared then.

        Made anew after the last one was lost (a restart; a failover, where the promoted standby never had the
        locks: they live in a server's memory), it takes every hold this storage had again, as :meth:`hold` does.
        A session another storage took meanwhile is let go, this storage's mark on it cleared: its next write here
        is refused (:class:`SessionHeldError`, naming the new holder), as any write to a session held elsewhere.
        """
        if self._holds is None or self._holds.is_closed():
            assert self._appenders is not None
            self._holds = conn = await self._appenders.connect()
            conn.add_termination_listener(self._holds_lost)
            self._appenders.holder_pid = await conn.fetchval("SELECT pg_backend_pid()")
            await conn.execute(_CLEAR_DEAD_HOLDERS, PG_LOCK_CLASS)
            for sid, row_id in list(self._held.items()):
                if not await self._take(conn, row_id):
                    del self._held[sid]
                    await conn.execute(_UNMARK_HELD, row_id, self._holder)
                    logger.warning(
                        "%s: session %s was taken by another holder while the connection was lost", self.url, sid
                    )
        return self._holds

    def _holds_lost(self, conn: Any) -> None:
        """asyncpg's word that the holds connection closed: unless the storage closed it, its holds are taken again
        at once (in the background, waiting up to ``reconnect_timeout`` for a primary), not at the next write."""
        if conn is self._holds and self._held and self._retaking is None:
            self._retaking = asyncio.ensure_future(self._take_again_in_background())

    async def _take_again(self) -> None:
        """Take the holds again if their connection was lost (see :meth:`_holds_connection`)."""
        async with self._holds_lock:
            if self._holds is not None and self._holds.is_closed():  # not taken again meanwhile, nor closed for good
                try:
                    await self._holds_connection()
                except _DB_ERRORS as exc:
                    raise pg.from_postgres(exc, self._url) from exc

    async def _take_again_in_background(self) -> None:
        try:
            await self._take_again()
        except StorageError as exc:  # no primary yet: the next write tries again, and raises
            logger.warning("%s: the holds could not be taken again yet: %s", self.url, exc)
        finally:
            self._retaking = None

    async def _refuse_held(self, conn: Any, row_id: int, sid: str) -> None:
        """Inside a write transaction, with the session's row locked: refuse if another connection holds it (a
        holder marks its hold in an update of that row, so it waits for this transaction: the answer stays
        true until the commit)."""
        if sid in self._held:
            return
        if await conn.fetchval(_HELD_BY_ANOTHER, PG_LOCK_CLASS, pg_lock_key(row_id), self._holder_pid()):
            marked = await pg.fetchrow(conn, queries.HOLDER, {"sid": sid})
            raise held_error(sid, None if marked is None else marked[1])

    def _holder_pid(self) -> int:
        return self._appenders.holder_pid if self._appenders is not None else 0
