"""The one place a PostgreSQL database is reached: its URL's redaction, its engine, its errors, its revision.

What :mod:`sessionstore.sqlite.connect` is for a SQLite file, this is for a server:

* a database is named by a URL (:func:`sessionstore.backend.open_backend` tells one from a path), with one host
  or several (``postgresql://user:pw@h1:5432,h2:5432/db?target_session_attrs=read-write``: a client connects to
  the first that answers as asked, so the same URL finds the primary after a failover). The password is never
  shown: every message and repr uses :func:`redacted`;
* the engine is SQLAlchemy's async engine over asyncpg; ``json`` columns come back as their stored text
  (sessionstore decodes them itself, and an export is the stored bytes). A storage's connections are made by
  :func:`connector`, which keeps trying while no server answers as asked (a failover under way);
* the commands' statements run on a :class:`PgConnection` (a :class:`~sessionstore.reads.Connection`) inside
  :func:`blocking`.

Nothing here imports asyncpg or SQLAlchemy's asyncio support until a database is actually reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import queue
import re
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import (
    AccessDeniedError,
    DatabaseBusyError,
    DatabaseFullError,
    DatabaseNotFoundError,
    DatabaseReadOnlyError,
    DatabaseUnavailableError,
    EventEncodeError,
    StorageError,
    install_hint,
)
from ..schema import queries
from ..schema.revisions import judge_revision

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection
    from sqlalchemy.ext.asyncio import AsyncEngine


__all__ = [
    "PG_LOCK_CLASS",
    "SCHEMES",
    "PgConnection",
    "bind",
    "check_url",
    "blocking",
    "connected",
    "connector",
    "engine",
    "lost_connection",
    "from_postgres",
    "null_pool",
    "pg_lock_key",
    "read_revision",
    "redacted",
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


def _async_url(url: str) -> Any:
    try:
        import asyncpg  # type: ignore[import-untyped]  # noqa: F401
    except ModuleNotFoundError:
        raise StorageError(f"{redacted(url)} is a PostgreSQL database: {install_hint('postgres')}") from None
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(_hosts_in_query(url))
    except Exception:  # SQLAlchemy's message would quote the URL, password and all
        raise StorageError(f"not a valid database URL: {redacted(url)}") from None
    return parsed.set(drivername="postgresql+asyncpg")


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
    import asyncpg

    parsed = _async_url(url)
    _, params = parsed.get_dialect()().create_connect_args(parsed)  # the host and port lists, the query's options

    async def connect() -> Any:
        deadline = time.monotonic() + patience
        for attempt in itertools.count():
            try:
                return await asyncpg.connect(**params, **options)
            except Exception as exc:
                delay = RETRY_DELAYS[min(attempt, len(RETRY_DELAYS) - 1)]
                if not _not_yet(exc) or time.monotonic() + delay > deadline:
                    raise
                await asyncio.sleep(delay)
        raise AssertionError("itertools.count() ended")

    return connect


def lost_connection(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a statement already sent, means the connection was lost before its answer
    came (the server ended, restarted, or is gone): whether the statement committed is then unknown."""
    return isinstance(from_postgres(exc, ""), DatabaseUnavailableError)


def engine(url: str, *, ping: bool = True, patience: float = 0, **options: Any) -> AsyncEngine:
    """An async engine for ``url``. Stale connections (a restarted server) are replaced before use.

    ``ping=True`` asks the server at every checkout (SQLAlchemy's pre-ping: on asyncpg three round trips, BEGIN,
    a query, ROLLBACK, more than an append itself costs). ``ping=False`` replaces at checkout, for nothing, a
    connection asyncpg already knows is closed: a server that stops or restarts closes its connections, and
    asyncpg sees the socket close as soon as the event loop runs. A connection that fails in use is discarded
    (SQLAlchemy invalidates it, and the pool's older ones with it). ``patience`` (seconds): how long a new
    connection is tried for while no server answers (see :func:`connector`).
    """
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import create_async_engine

    if patience:
        settings = options.get("connect_args", {})
        options["async_creator"] = connector(url, patience=patience, **settings)
    made = create_async_engine(
        _async_url(url),
        pool_pre_ping=ping,
        json_deserializer=str,  # a json column's text as stored: decoded (or exported) by sessionstore
        hide_parameters=True,  # a failed statement's message never quotes a conversation
        **options,
    )
    if not ping:
        event.listen(made.sync_engine.pool, "checkout", _replace_if_closed)
    event.listen(made.sync_engine, "handle_error", _discard_if_lost)
    return made


def _discard_if_lost(context: Any) -> None:
    # SQLAlchemy discards a connection whose socket it sees closed; one whose protocol asyncpg cannot go on with
    # (see from_postgres) is discarded too, rather than handed out again to fail the same way.
    if lost_connection(context.original_exception):
        context.is_disconnect = True


def _replace_if_closed(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    from sqlalchemy.exc import DisconnectionError

    if dbapi_connection.driver_connection.is_closed():
        raise DisconnectionError("the server closed this connection")  # the pool connects anew


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


def from_postgres(exc: BaseException, url: str) -> StorageError:
    """The :class:`StorageError` for an error reaching or using the database at ``url`` (shown redacted).

    Chosen by the error's SQLSTATE (most specific first); a socket that could not connect at all is
    :class:`DatabaseUnavailableError`. The original error is kept as ``__cause__``.
    """
    if isinstance(exc, StorageError):
        return exc
    cause = getattr(exc, "orig", None) or exc
    cause = getattr(cause, "__cause__", None) or cause  # SQLAlchemy's adapted error wraps asyncpg's
    state = str(getattr(cause, "sqlstate", None) or getattr(getattr(exc, "orig", None), "sqlstate", None) or "")
    where = redacted(url)
    kind, hint = StorageError, "failed"
    for length in (5, 3, 2):
        if state and state[:length] in _STATES:
            kind, hint = _STATES[state[:length]]
            break
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


class PgConnection:
    """A :class:`~sessionstore.reads.Connection` to PostgreSQL: the commands' statements with ``:named``
    parameters, rows back as tuples, and :meth:`transaction`.

    It is SQLAlchemy's synchronous ``Connection`` over asyncpg, so it is used inside :func:`blocking` (a greenlet,
    as the PostgreSQL backend runs every command).
    """

    def __init__(self, conn: Any, url: str) -> None:
        self._conn = conn
        self.url = redacted(url)

    def __repr__(self) -> str:
        return f"<sessionstore.postgres.connect.PgConnection {self.url}>"

    def execute(self, sql: str, params: Mapping[str, Any] | None = None, /) -> Any:
        from sqlalchemy import text

        return self._conn.execute(text(sql), bind(params or {}))

    def executemany(self, sql: str, rows: Sequence[Mapping[str, Any]], /) -> None:
        from sqlalchemy import text

        if rows:
            self._conn.execute(text(sql), [bind(row) for row in rows])

    @property
    def in_transaction(self) -> bool:
        return bool(self._conn.in_transaction())

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PgConnection]:
        """One transaction: committed if the block ends, rolled back if it raises."""
        if not self._conn.in_transaction():
            self._conn.begin()
        try:
            yield self
            self._conn.commit()
        finally:
            if self._conn.in_transaction():
                self._conn.rollback()

    def revision(self) -> str | None:
        return read_revision(self._conn)[0]

    def revision_and_tables(self) -> tuple[str | None, bool]:
        """The revision, and whether the database holds any other table (see :func:`judge_revision`)."""
        return read_revision(self._conn)


def _db_errors() -> tuple[type[BaseException], ...]:
    import asyncpg
    from sqlalchemy.exc import SQLAlchemyError

    return (
        SQLAlchemyError,
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
    default isolation, in the transactions its caller begins.
    """
    from sqlalchemy.util.concurrency import await_only

    eng = engine(url, poolclass=null_pool())
    errors = _db_errors()
    try:
        try:
            conn = await_only(eng.connect())
            try:
                if not write:
                    # Rows come from a server-side cursor, as they are read: a listing of every session is
                    # never held whole (at most a batch of rows, and whatever the command keeps).
                    await_only(
                        conn.execution_options(
                            isolation_level="REPEATABLE READ", postgresql_readonly=True, stream_results=True
                        )
                    )
                yield PgConnection(conn.sync_connection, url)
                if conn.in_transaction():
                    await_only(conn.commit())
            finally:
                await_only(conn.close())
        finally:
            await_only(eng.dispose())
    except errors as exc:
        raise from_postgres(exc, url) from exc


def blocking(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, synchronous code using :func:`connected`, run to its end from synchronous code.

    SQLAlchemy's synchronous API over asyncpg works inside a greenlet that an event loop drives
    (``greenlet_spawn``, as ``AsyncConnection.run_sync`` does): this starts one, on a loop of its own (in a thread
    of its own if the caller's thread already runs a loop), unless the caller is in one already.
    """
    from sqlalchemy.util.concurrency import greenlet_spawn, in_greenlet

    if in_greenlet():
        return fn(*args, **kwargs)

    async def run() -> Any:
        return await greenlet_spawn(fn, *args, **kwargs)

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


def null_pool() -> Any:
    from sqlalchemy.pool import NullPool

    return NullPool


def read_revision(conn: Connection) -> tuple[str | None, bool]:
    """``(revision, has_other_tables)`` of the database's current schema, as for a SQLite file."""
    tables = conn.exec_driver_sql("SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = current_schema()")
    return judge_revision(
        [str(row[0]) for row in tables], lambda: conn.exec_driver_sql(queries.REVISION).all(), "the database"
    )
