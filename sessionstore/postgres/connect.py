"""The one place a PostgreSQL database is reached: its URL's redaction, its engine, its errors, its revision.

What :mod:`sessionstore.sqlite.connect` is for a SQLite file, this is for a server:

* a database is named by a URL (:func:`sessionstore.backend.open_backend` tells one from a path), with one host
  or several (``postgresql://user:pw@h1:5432,h2:5432/db?target_session_attrs=read-write``: a client connects to
  the first that answers as asked, so the same URL finds the primary after a failover). The password is never
  shown: every message and repr uses :func:`redacted`;
* everything but migrations runs on bare asyncpg connections: the statements of
  :mod:`~sessionstore.schema.queries` (``:named`` parameters) are sent as asyncpg's own ``$n`` statements
  (:func:`numbered`, once per statement text), and asyncpg prepares and caches each per connection. ``json``
  columns come back as their stored text (sessionstore decodes them itself, and an export is the stored bytes).
  Connections are made by :func:`connector`, which keeps trying while no server answers as asked (a failover
  under way), and a storage keeps them in a :class:`Pool`;
* the shared synchronous reads and the commands run on a :class:`PgConnection` (a
  :class:`~sessionstore.reads.Connection`) in a greenlet (:func:`run_sync`, :func:`blocking`) whose awaits the
  event loop serves;
* SQLAlchemy (:func:`engine`) is loaded only to migrate a database: Alembic runs on it.

Nothing here imports asyncpg or SQLAlchemy until a database is actually reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import queue
import re
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import greenlet  # type: ignore[import-untyped]

from ..errors import (
    AccessDeniedError,
    DatabaseBusyError,
    DatabaseFullError,
    DatabaseNotFoundError,
    DatabaseReadOnlyError,
    DatabaseUnavailableError,
    EventEncodeError,
    ForkedByAnotherRoleError,
    StorageError,
    install_hint,
)
from ..schema import queries
from ..schema.revisions import judge_revision

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

T = TypeVar("T")


__all__ = [
    "PG_LOCK_CLASS",
    "SCHEMES",
    "PgConnection",
    "Pool",
    "usable_after",
    "await_only",
    "bind",
    "check_url",
    "blocking",
    "connected",
    "connector",
    "engine",
    "executemany",
    "fetch",
    "fetchrow",
    "fetchval",
    "lost_connection",
    "from_postgres",
    "numbered",
    "pg_lock_key",
    "read_revision",
    "redacted",
    "revision_of",
    "run_sync",
]

SCHEMES = ("postgresql://", "postgresql+asyncpg://", "postgres://")
"""How a PostgreSQL URL starts; a ``--db`` (or ``-x db=``) that starts otherwise is a SQLite file's path."""


def check_url(url: object) -> str:
    """``url``, if it names a PostgreSQL database; else :class:`ValueError` (a storage given a path by mistake)."""
    if not (isinstance(url, str) and url.startswith(SCHEMES)):
        raise ValueError(f"not a PostgreSQL URL: {redacted(str(url))!r} (postgresql://...)")
    return url


PG_LOCK_CLASS = 0x5E55_0007
"""On PostgreSQL a hold is the advisory lock ``(PG_LOCK_CLASS, pg_lock_key(id))`` on the holder's connection: it dies
with the connection, whichever host that is on, and ``pg_locks`` shows it (the first of its two keys, a constant of
sessionstore's, keeps it apart from other applications' advisory locks)."""


def pg_lock_key(session: int) -> int:
    """The second key of a session's advisory lock (int4; ids wrap at 2**31, never reached in practice)."""
    return session % (1 << 31)


def redacted(url: str) -> str:
    """``url`` with its password (and nothing else) hidden: what every message about the database shows.

    A password is hidden where the URL can carry one: before the host (``user:secret@``) and as a query
    parameter (``?password=secret``, which asyncpg and libpq accept too).
    """
    url = re.sub(r"^([a-z0-9+]+://[^:/@?#]*):[^@/?#]*@", r"\1:***@", url)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", url, flags=re.IGNORECASE)


def _hosts_in_query(url: str) -> str:
    """A URL naming several hosts as libpq writes it (``user:pw@h1:p1,h2:p2/db``) in the form SQLAlchemy parses
    (``user:pw@/db?host=h1:p1&host=h2:p2``, which its asyncpg dialect hands on as asyncpg's host and port lists;
    a host without a port gets PostgreSQL's 5432, as the dialect wants a port for each); any other URL as it is."""
    scheme, sep, rest = url.partition("://")
    authority, tail = re.match(r"([^/?#]*)/?(.*)", rest, re.DOTALL).groups()  # type: ignore[union-attr]
    user, at, hosts = authority.rpartition("@")
    if not sep or "," not in hosts:
        return url
    listed = [host if re.search(r":\d+$", host) else f"{host}:5432" for host in hosts.split(",")]
    path, _, query = tail.partition("?")
    query = "&".join([*(f"host={host}" for host in listed), *([query] if query else [])])
    return f"{scheme}://{user}{at}/{path}?{query}"


def _asyncpg(url: str) -> Any:
    """asyncpg, or :class:`StorageError` naming the extra that installs it."""
    try:
        import asyncpg  # type: ignore[import-untyped]
    except ModuleNotFoundError:
        raise StorageError(f"{redacted(url)} is a PostgreSQL database: {install_hint('postgres')}") from None
    return asyncpg


def _async_url(url: str) -> Any:
    """``url`` as SQLAlchemy's asyncpg dialect takes it (migrations alone)."""
    _asyncpg(url)
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(_hosts_in_query(url))
    except Exception:  # SQLAlchemy's message would quote the URL, password and all
        raise StorageError(f"not a valid database URL: {redacted(url)}") from None
    return parsed.set(drivername="postgresql+asyncpg")


def _dsn(url: str) -> str:
    """``url`` as asyncpg takes it: libpq's form, several hosts and ``target_session_attrs`` included, which
    asyncpg reads itself; only the scheme is made plain (``postgresql+asyncpg://`` is SQLAlchemy's)."""
    _asyncpg(url)
    return "postgresql://" + url.partition("://")[2]


# -- reaching the primary through a failover --------------------------------------------------------------

RETRY_DELAYS = (0.05, 0.1, 0.2, 0.5)
"""How long a connection attempt that found no server answering as asked waits before the next (the last value
repeats): a promoted standby is found within half a second of accepting writes."""


def _not_yet(exc: BaseException) -> bool:
    """Whether a failed connection attempt means only "no server answers as asked yet" (one down, starting,
    shutting down, or only standbys while one is promoted): worth trying again, as the attempt sent no statement.
    A refused login, a database that does not exist, or a bad URL is not."""
    import asyncpg

    state = str(getattr(exc, "sqlstate", None) or "")
    return (
        isinstance(exc, OSError | asyncio.TimeoutError | asyncpg.TargetServerAttributeNotMatched)
        or isinstance(exc, asyncpg.CannotConnectNowError | asyncpg.ConnectionDoesNotExistError)
        or state.startswith(("08", "57P"))
    )


def connector(url: str, *, patience: float, **options: Any) -> Callable[[], Awaitable[Any]]:
    """A function making a new asyncpg connection to ``url`` (every host it names; ``options`` are asyncpg's,
    e.g. ``server_settings``), trying again for up to ``patience`` seconds while no server answers as the URL
    asks (:data:`RETRY_DELAYS` apart). Only the connection is retried, never a statement: nothing was sent."""
    asyncpg = _asyncpg(url)
    dsn = _dsn(url)

    async def connect() -> Any:
        deadline = time.monotonic() + patience
        for attempt in itertools.count():
            try:
                return await asyncpg.connect(dsn, **options)
            except ValueError:  # asyncpg's own message may quote the URL, password and all
                raise StorageError(f"not a valid database URL: {redacted(url)}") from None
            except Exception as exc:
                delay = RETRY_DELAYS[min(attempt, len(RETRY_DELAYS) - 1)]
                if not _not_yet(exc) or time.monotonic() + delay > deadline:
                    raise
                await asyncio.sleep(delay)
        raise AssertionError("itertools.count() ended")

    return connect


class Pool:
    """At most ``size`` asyncpg connections made by ``connect`` (:func:`connector`), each kept open once made and
    handed to one caller at a time.

    Why not SQLAlchemy's pool or asyncpg's: an append is one statement, and a checkout and return there (greenlet
    switches and connection wrappers; asyncpg's reset query on every return, a round trip) cost about as much as
    that statement's round trip. A connection here is handed back as it is: every use either commits or rolls
    back what it began, and :meth:`connection` closes one that failed in a way that leaves it unusable. One found
    closed (a server that stopped or restarted closes its connections, and asyncpg sees the socket close as soon as
    the event loop runs) is made anew.
    """

    def __init__(self, connect: Callable[[], Awaitable[Any]], size: int) -> None:
        self.connect = connect
        # An open connection, or None: a free slot to fill. Last in, first out: the connection used last (its
        # statements prepared, its backend's caches warm) is used again, and a slot is filled only when every
        # connection made is in use.
        self._slots: asyncio.LifoQueue[Any] = asyncio.LifoQueue()
        for _ in range(size):
            self._slots.put_nowait(None)
        self.handed_out = 0  # connections asked for so far

    def free(self) -> bool:
        """Whether a connection (or a slot for one) is free now: :meth:`acquire` would not wait."""
        return not self._slots.empty()

    async def acquire(self) -> Any:
        self.handed_out += 1
        conn = await self._slots.get()
        if conn is not None and not conn.is_closed():
            return conn
        try:
            return await self.connect()
        except BaseException:
            self._slots.put_nowait(None)
            raise

    def release(self, conn: Any) -> None:
        self._slots.put_nowait(None if conn.is_closed() else conn)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A connection for the block; closed at once (never handed out again) if the block raised anything but a
        statement's error that a server still there reported (see :func:`usable_after`)."""
        conn = await self.acquire()
        try:
            yield conn
        except BaseException as exc:
            if not usable_after(exc):
                conn.terminate()
            raise
        finally:
            self.release(conn)

    async def close(self) -> None:
        """Close the idle connections (all of them, once none is in use)."""
        while not self._slots.empty():
            conn = self._slots.get_nowait()
            if conn is not None:
                try:
                    await conn.close(timeout=5)
                except Exception:
                    conn.terminate()


def usable_after(exc: BaseException) -> bool:
    """Whether a connection that raised ``exc`` may run another statement: after a statement's error that a
    server still there reported, yes; after anything else (a lost connection, asyncpg's protocol in a state it
    cannot go on from, a cancellation mid-statement), it is terminated instead."""
    import asyncpg

    return isinstance(exc, asyncpg.PostgresError) and not lost_connection(exc)


def lost_connection(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a statement already sent, means the connection was lost before its answer
    came (the server ended, restarted, or is gone): whether the statement committed is then unknown."""
    return isinstance(from_postgres(exc, ""), DatabaseUnavailableError)


def engine(url: str) -> AsyncEngine:
    """A SQLAlchemy async engine for ``url``, one connection per use (no pool): what Alembic migrates a database
    through, and nothing else does."""
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    return create_async_engine(
        _async_url(url),
        poolclass=NullPool,
        json_deserializer=str,  # a json column's text as stored, as asyncpg gives it everywhere else
        hide_parameters=True,  # a failed statement's message never quotes a conversation
    )


# SQLSTATE classes and codes, and what each means for the database.
_STATES: dict[str, tuple[type[StorageError], str]] = {
    "08": (DatabaseUnavailableError, "cannot be reached, or the connection was lost"),
    "57P": (DatabaseUnavailableError, "is shutting down or restarting"),
    "53": (DatabaseFullError, "is out of space or resources; the write was rolled back"),
    "40": (DatabaseBusyError, "could not finish the transaction because of another one (deadlock or serialization)"),
    "55P03": (DatabaseBusyError, "stayed locked by another transaction for longer than the lock timeout"),
    "57014": (DatabaseBusyError, "cancelled the statement (statement or lock timeout)"),
    "25006": (DatabaseReadOnlyError, "is read-only here (a standby, or a read-only transaction)"),
    "3D000": (DatabaseNotFoundError, "does not exist"),
    "28": (StorageError, "refused the login (user or password)"),
    "42501": (AccessDeniedError, "refused this role (a privilege it lacks, or a session another role owns)"),
    "22021": (EventEncodeError, "cannot store text holding a NUL character or bytes that are not UTF-8"),
    "22P05": (EventEncodeError, "cannot store text holding a NUL character or bytes that are not UTF-8"),
}


# Constraints whose violation means more than its SQLSTATE says, by name (as the models' naming convention names them).
_CONSTRAINTS: dict[str, tuple[type[StorageError], str]] = {
    # Checked at commit (revision 0013): the delete left a fork pointing at a deleted session, one this role could
    # not see to give its shared events (another role's, under row-level security).
    "fk_sessions_forked_from_sessions": (
        ForkedByAnotherRoleError,
        "refused a delete: another role's fork of the session shares its events, and this role cannot see it to"
        " give them; the delete was rolled back whole (the administrator's delete gives the fork its events)",
    ),
}


def from_postgres(exc: BaseException, url: str) -> StorageError:
    """The :class:`StorageError` for an error reaching or using the database at ``url`` (shown redacted).

    Chosen by the constraint it broke, if that says more, else by its SQLSTATE (most specific first); a socket
    that could not connect at all is :class:`DatabaseUnavailableError`. The original error is kept as ``__cause__``.
    """
    if isinstance(exc, StorageError):
        return exc
    cause = getattr(exc, "orig", None) or exc
    cause = getattr(cause, "__cause__", None) or cause  # SQLAlchemy's adapted error wraps asyncpg's
    state = str(getattr(cause, "sqlstate", None) or getattr(getattr(exc, "orig", None), "sqlstate", None) or "")
    where = redacted(url)
    kind, hint = StorageError, "failed"
    found = _CONSTRAINTS.get(str(getattr(cause, "constraint_name", None))) or next(
        (_STATES[state[:length]] for length in (5, 3, 2) if state and state[:length] in _STATES), None
    )
    if found is not None:
        kind, hint = found
    else:
        name = type(cause).__name__
        # InternalClientError: asyncpg's protocol left in a state it cannot go on from, as when the server sent a
        # FATAL error in the middle of a statement and closed (a server killed, its backends a moment later).
        if isinstance(cause, OSError | asyncio.TimeoutError) or name in (
            "ConnectionDoesNotExistError",
            "InterfaceError",
            "InternalClientError",
            "ConnectionFailureError",
        ):
            kind, hint = DatabaseUnavailableError, "cannot be reached, or the connection was lost"
        elif name == "TargetServerAttributeNotMatched":
            kind, hint = DatabaseUnavailableError, "has no host answering as the URL asks (target_session_attrs)"
    message = str(cause).replace(url, where) if url else str(cause)
    error = kind(f"{where} {hint} ({type(cause).__name__}: {message})")
    error.__cause__ = cause if isinstance(cause, Exception) else None
    return error


# -- the same statements as on SQLite, through one small adapter ---------------------------------------

# Parameters the statements name that hold times: bound as naive UTC datetimes (``timestamp without time
# zone``), where SQLite takes utc_text's text. asyncpg types each parameter as its column does, and takes no text
# for a timestamp; ``released`` is a boolean column here, an integer there.
_TIMES = frozenset({"now", "created_at", "updated_at", "cutoff", "before"})


def bind(params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` as PostgreSQL takes them: times (stored naive UTC text) as datetimes, ``released`` a boolean."""
    out = dict(params)
    for key in _TIMES & out.keys():
        if isinstance(out[key], str):
            out[key] = datetime.fromisoformat(out[key])
    if isinstance(out.get("released"), int):
        out["released"] = bool(out["released"])
    return out


# -- statements on asyncpg ----------------------------------------------------------------------------

_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")  # a :name, not a ::cast


@functools.lru_cache(maxsize=1024)
def numbered(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` with its ``:named`` parameters as asyncpg's ``$n`` (a name used twice is one ``$n``), and the names
    in order of their numbers. Cached: the storages run a few dozen statement texts, again and again."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _NAMED.sub(number, sql), tuple(names)


def _args(sql: str, params: Mapping[str, Any] | None) -> tuple[str, list[Any]]:
    text, names = numbered(sql)
    bound = bind(params or {})
    return text, [bound[name] for name in names]


async def fetch(conn: Any, sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
    """The rows of one of the shared statements (``:named`` parameters, bound by :func:`bind`) on an asyncpg
    connection; each row a tuple-like ``Record``."""
    text, args = _args(sql, params)
    return list(await conn.fetch(text, *args))


async def executemany(conn: Any, sql: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """One of the shared statements once for each of ``rows`` (see :func:`fetch`), in one round trip."""
    if rows:
        text, names = numbered(sql)
        await conn.executemany(text, [[bound[name] for name in names] for bound in map(bind, rows)])


async def fetchrow(conn: Any, sql: str, params: Mapping[str, Any] | None = None) -> Any:
    """The first row, or None (see :func:`fetch`)."""
    text, args = _args(sql, params)
    return await conn.fetchrow(text, *args)


async def fetchval(conn: Any, sql: str, params: Mapping[str, Any] | None = None) -> Any:
    """The first row's first value, or None (see :func:`fetch`)."""
    text, args = _args(sql, params)
    return await conn.fetchval(text, *args)


# -- synchronous code over asyncpg: a greenlet the event loop serves ---------------------------------


class _Bridge(greenlet.greenlet):  # type: ignore[misc]
    """A greenlet running synchronous code whose every :func:`await_only` the loop driving it serves (its
    parent, :func:`run_sync`): the shared reads and the commands are written once, synchronously, for a
    ``sqlite3`` connection and for asyncpg alike (as SQLAlchemy's ``run_sync`` does, without SQLAlchemy)."""


def in_bridge() -> bool:
    """Whether the caller runs inside :func:`run_sync` (so may call :func:`await_only`)."""
    return isinstance(greenlet.getcurrent(), _Bridge)


def await_only(awaitable: Awaitable[T]) -> T:
    """The result of ``awaitable``, awaited by the event loop driving this greenlet, from synchronous code."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Bridge):
        raise RuntimeError("await_only() called outside run_sync()")
    return current.parent.switch(awaitable)  # type: ignore[no-any-return]


async def run_sync(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, synchronous code that calls :func:`await_only`, run to its end on this loop."""
    bridge = _Bridge(fn, greenlet.getcurrent())
    result = bridge.switch(*args, **kwargs)
    while not bridge.dead:
        try:
            value = await result
        except BaseException:
            result = bridge.throw(*sys.exc_info())
        else:
            result = bridge.switch(value)
    return result  # type: ignore[no-any-return]


STREAM_BATCH = 256  # rows a streamed read fetches at a time


class _Rows:
    """What :meth:`PgConnection.execute` returns: the rows (tuple-like), iterable, ``fetchone``, ``fetchall``.
    Rows read from a cursor (``cursor``) come :data:`STREAM_BATCH` at a time, as they are iterated."""

    def __init__(self, rows: list[Any] | None = None, cursor: Any = None) -> None:
        self._rows = rows or []
        self._cursor = cursor

    def __iter__(self) -> Iterator[Any]:
        while True:
            yield from self._rows
            self._rows = []
            if self._cursor is None:
                return
            self._rows = await_only(self._cursor.fetch(STREAM_BATCH))
            if len(self._rows) < STREAM_BATCH:
                self._cursor = None

    def fetchone(self) -> Any:
        return next(iter(self), None)

    def fetchall(self) -> list[Any]:
        return list(self)


class PgConnection:
    """A :class:`~sessionstore.reads.Connection` to PostgreSQL: the shared statements with ``:named``
    parameters on an asyncpg connection, rows back as tuples, and :meth:`transaction`; used inside
    :func:`run_sync` (or :func:`blocking`).

    ``stream``: rows come from a cursor as they are read (inside a transaction: :func:`connected`'s snapshot); a
    listing of every session is never held whole. ``autobegin``: a statement outside a transaction begins one,
    which the caller commits (:func:`connected` for writing); otherwise such a statement commits on its own.
    """

    def __init__(self, conn: Any, url: str, *, stream: bool = False, autobegin: bool = False) -> None:
        self._conn = conn
        self.url = redacted(url)
        self._stream = stream
        self._autobegin = autobegin
        self._transaction: Any = None

    def __repr__(self) -> str:
        return f"<sessionstore.postgres.connect.PgConnection {self.url}>"

    def execute(self, sql: str, params: Mapping[str, Any] | None = None, /) -> _Rows:
        text, args = _args(sql, params)
        if self._autobegin and self._transaction is None:
            self.begin()
        if self._stream and self._transaction is not None:
            return _Rows(cursor=await_only(self._conn.cursor(text, *args)))
        return _Rows(await_only(self._conn.fetch(text, *args)))

    def executemany(self, sql: str, rows: Sequence[Mapping[str, Any]], /) -> None:
        if rows:
            if self._autobegin and self._transaction is None:
                self.begin()
            await_only(executemany(self._conn, sql, rows))

    @property
    def in_transaction(self) -> bool:
        return self._transaction is not None

    def begin(self, **options: Any) -> None:
        """Begin a transaction (``options``: asyncpg's, e.g. ``isolation``, ``readonly``)."""
        self._transaction = self._conn.transaction(**options)
        await_only(self._transaction.start())

    def commit(self) -> None:
        transaction, self._transaction = self._transaction, None
        if transaction is not None:
            await_only(transaction.commit())

    def rollback(self) -> None:
        transaction, self._transaction = self._transaction, None
        if transaction is not None and not self._conn.is_closed():
            await_only(transaction.rollback())

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PgConnection]:
        """One transaction (the one under way, if any): committed if the block ends, rolled back if it raises."""
        if self._transaction is None:
            self.begin()
        try:
            yield self
            self.commit()
        finally:
            self.rollback()

    def revision(self) -> str | None:
        return self.revision_and_tables()[0]

    def revision_and_tables(self) -> tuple[str | None, bool]:
        """The revision, and whether the database holds any other table (see :func:`judge_revision`)."""
        return read_revision(lambda sql: self.execute(sql).fetchall())


def _db_errors() -> tuple[type[BaseException], ...]:
    import asyncpg

    return (
        OSError,
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        asyncpg.InternalClientError,
        asyncio.TimeoutError,
    )


@contextlib.contextmanager
def connected(url: str, *, write: bool = False) -> Iterator[PgConnection]:
    """A :class:`PgConnection` to the database at ``url`` (inside :func:`blocking`); errors as :class:`StorageError`.

    Reading (``write=False``) is one ``REPEATABLE READ READ ONLY`` transaction: every answer (a session and its
    events, a whole export) comes from one snapshot, as a SQLite read transaction gives. Writing is at the
    default isolation, in the transactions its caller begins (or one begun by its first statement), committed
    when the block ends.
    """
    errors = _db_errors()
    try:
        conn = await_only(connector(url, patience=0)())
        try:
            made = PgConnection(conn, url, stream=not write, autobegin=write)
            if not write:
                made.begin(isolation="repeatable_read", readonly=True)
            yield made
            made.commit()
        finally:
            if not conn.is_closed():
                await_only(conn.close(timeout=5))
    except errors as exc:
        raise from_postgres(exc, url) from exc


def blocking(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, synchronous code using :func:`connected`, run to its end from synchronous code.

    It runs in a greenlet (:func:`run_sync`) that an event loop drives: one of its own (in a thread of its own if
    the caller's thread already runs a loop), unless the caller is in one already.
    """
    if in_bridge():
        return fn(*args, **kwargs)

    async def run() -> Any:
        return await run_sync(fn, *args, **kwargs)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run())
    with ThreadPoolExecutor(1, thread_name_prefix="sessionstore-postgres") as thread:
        return thread.submit(asyncio.run, run()).result()


STREAM_BUFFER = 256  # items a streamed command's producer may run ahead of its reader


class _End:
    """What ends a :func:`streamed` producer's items: its exception, or None when it ran out."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def streamed(fn: Callable[..., Generator[Any, None, None]], *args: Any, **kwargs: Any) -> Iterator[Any]:
    """The items of the generator ``fn(*args, **kwargs)`` as it makes them, run by :func:`blocking` on a thread of
    its own: a listing of every session is printed as it is read, never gathered first.

    The two threads meet at a queue of :data:`STREAM_BUFFER` items, so the producer (and its server-side cursor) runs at
    most that far ahead of the reader. Its exception is raised here, where the items are taken; a reader that
    stops early (``close()``, an exception) stops the producer at its next item and waits for it to close its
    connection.
    """
    items: queue.Queue[Any] = queue.Queue(STREAM_BUFFER)
    stop = threading.Event()

    def hand_over(item: Any) -> bool:
        while not stop.is_set():
            try:
                items.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        end = _End(None)
        made = fn(*args, **kwargs)
        try:
            for item in made:
                if not hand_over(item):
                    return
        except BaseException as exc:  # handed to the reader, raised there
            end = _End(exc)
        finally:
            made.close()  # here, in the greenlet: its connection closes before the thread ends
        hand_over(end)

    producer = threading.Thread(target=blocking, args=(produce,), name="sessionstore-postgres-stream", daemon=True)
    producer.start()
    try:
        while True:
            item = items.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item
    finally:
        stop.set()
        producer.join()


def read_revision(rows: Callable[[str], Sequence[Sequence[object]]]) -> tuple[str | None, bool]:
    """``(revision, has_other_tables)`` of the database's current schema, as for a SQLite file; ``rows(sql)`` runs
    a statement on the database (SQLAlchemy's connection while migrating, asyncpg's otherwise)."""
    tables = rows("SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = current_schema()")
    return judge_revision([str(row[0]) for row in tables], lambda: rows(queries.REVISION), "the database")


async def revision_of(conn: Any) -> tuple[str | None, bool]:
    """:func:`read_revision` on an asyncpg connection, from async code."""
    return await run_sync(read_revision, lambda sql: await_only(conn.fetch(sql)))
