"""The storage's reads on its reader threads against aiosqlite, in interleaved rounds (issue 21).

    python3 bench/read_ab.py --rounds 16
    python3 bench/read_ab.py --smoke            # tiny sizes, a few seconds (tests/test_bench_smoke.py)

The same ``SQLiteStorage`` calls (``get_history`` of a 100- and a 1,000-event session, a page of 20 from
``list_sessions``, ``load_session``) on one file, by five read paths. Only the path differs; the write lane, the
read cache and the decoding are the storage's own, and every path's readers are opened by the same
``connect(write=False)`` (the run checks their PRAGMAs, read from each path's own connection):

* ``threads``: the storage as it is: a read is one function run whole on one of ``read_pool_size`` (4) reader
  threads (``run_in_executor``).
* ``threads again``: the same, sampled a second time in every round: its ratios against ``threads`` are the
  noise, the band within which a candidate is level.
* ``aiosqlite``: one aiosqlite connection (so one thread) per reader, at most 4, opened on demand; each statement
  one call of aiosqlite's API. ``get_history``'s two statements run inside ``BEGIN`` ... ``COMMIT`` on its
  connection, so the revision and the events come from one snapshot, as today (and rows that are not UTF-8 are
  read as bytes, as today). A one-statement read (``list_sessions``, ``load_session``) is one
  ``execute_fetchall``; its statement is learnt from, and its records built by, the storage's own functions
  (learning it costs ~1 us).
* ``aiosqlite whole``: the storage's read functions run whole on an aiosqlite connection's thread, through
  aiosqlite's *private* ``Connection._execute`` (its API has no way to run a function): the best its threads can
  do, one hop per read as today.
* ``pinned threads``: the same model without aiosqlite: 4 threads of our own, each owning one connection and a
  queue of reads, results handed to the loop by ``call_soon_threadsafe``.

Each round every path takes one sample (the order reversed every other round: ``rounds.interleave``): a fresh
event loop and storage on the file, one unmeasured call of each kind, then each call's median time over
``--reps`` calls, then 8 tasks reading at once (the four calls in turn, ``--cycles`` times) while one task
appends to a third session: reads and appends per second, and the p99 lag of a 1 ms ticker on the loop
(``workloads.Ticker``). Each path is compared with ``threads`` round by round: ``Nx as fast`` above 1 is the
path faster, with the min-max of the rounds' ratios and the rounds it was faster in. Last, what reaching a
thread costs a read before it reads anything: one empty round trip from the loop to a reader's thread and back,
by ``run_in_executor``, by aiosqlite's queue and by a pinned thread's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID, uuid4

import aiosqlite

from sessionstore import EventContext, ModelMessage, SessionRecord, SQLiteStorage
from sessionstore.errors import from_sqlite
from sessionstore.schema import queries
from sessionstore.sqlite.connect import connect
from sessionstore.sqlite.reads import _is_bad_utf8, _texts
from sessionstore.sqlite.storage import _history_and_size

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from payloads import make_events  # noqa: E402
from peers.sessionstore_sqlite import to_events  # noqa: E402
from rounds import Cell, Entrant, interleave, paired  # noqa: E402
from workloads import Ticker  # noqa: E402

T = TypeVar("T")

# What each reader connection must say of itself, whichever path opened it.
SETTINGS = ("query_only", "busy_timeout", "foreign_keys", "synchronous", "journal_mode")


def reader_settings(conn: sqlite3.Connection) -> dict[str, str]:
    return {name: str(conn.execute(f"PRAGMA {name}").fetchone()[0]) for name in SETTINGS}


# -- the candidates -----------------------------------------------------------------------------------------


class _Learnt(Exception):
    """Raised by a pass of a read at the first statement whose rows are not fetched yet."""


class _Rows(list[Any]):
    def fetchall(self) -> list[Any]:
        return list(self)

    def fetchone(self) -> Any:
        return self[0] if self else None


class _Statements:
    """Stands in for the connection of a read of a few statements (``load_session``; ``session_page``, a page and
    each record's usage): a pass stops at the first statement whose rows aiosqlite has not fetched yet, the
    rows are fetched (one round trip, as aiosqlite's API costs), and the read runs again; the last pass builds
    the records by the storage's own functions (on the event loop's thread, as with aiosqlite's API)."""

    in_transaction = False

    def __init__(self) -> None:
        self.fetched: dict[tuple[str, str], list[Any]] = {}
        self.statement: tuple[str, Any] | None = None

    def execute(self, sql: str, parameters: Any = ()) -> _Rows:
        key = (sql, repr(parameters))
        if key not in self.fetched:
            self.statement = (sql, parameters)
            raise _Learnt
        return _Rows(self.fetched[key])

    def executemany(self, sql: str, parameters: Any) -> Any:
        raise AssertionError("a read does not write")


async def one_statement(conn: aiosqlite.Connection, read: Callable[..., T], *args: Any) -> T:
    learner = _Statements()
    while True:
        try:
            return read(learner, *args)
        except _Learnt:
            assert learner.statement is not None
            sql, parameters = learner.statement
            learner.fetched[(sql, repr(parameters))] = list(await conn.execute_fetchall(sql, parameters))


async def history_by_statements(
    conn: aiosqlite.Connection, sid: str, last: int | None = None
) -> tuple[tuple[int, int, int], list[tuple[str, str]], int] | None:
    """``_history_and_size`` in aiosqlite's API: the same statements in one read transaction, one call each (the
    whole history: the A/B reads no window)."""
    assert last is None, "the A/B reads whole histories only"
    await conn.execute("BEGIN")
    try:
        found = list(await conn.execute_fetchall(queries.SESSION_STATE, {"sid": sid}))
        if not found:
            return None
        row_id, revision, length = int(found[0][0]), int(found[0][1]), int(found[0][4])
        try:
            rows: list[tuple[str, str]] = list(await conn.execute_fetchall(queries.STORED_EVENTS, {"id": row_id}))
            if not all(type(t) is str and type(p) is str for t, p in rows):
                rows = [(str(t), str(p)) for t, p in rows]
        except sqlite3.OperationalError as exc:
            if not _is_bad_utf8(exc):
                raise
            raw = await conn.execute_fetchall(queries.STORED_EVENTS_BYTES, {"id": row_id})
            rows = [(str(t), str(p)) for t, p in (_texts(*row) for row in raw)]
        return (row_id, revision, length), rows, sum(len(payload) for _, payload in rows)
    finally:
        await conn.execute("COMMIT")


class _PinnedReader:
    """A thread that owns one connection and runs the reads queued for it, handing each result to the event loop
    (``call_soon_threadsafe``): aiosqlite's model of a connection, written out without aiosqlite."""

    def __init__(self, connector: Callable[[], sqlite3.Connection]) -> None:
        self._conn = connector()
        self._jobs: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="pinned-reader", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, future, read, args = job
            try:
                result = read(self._conn, *args)
            except BaseException as exc:
                loop.call_soon_threadsafe(_settle, future, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, future, result, None)
        self._conn.close()

    async def run(self, read: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((loop, future, read, args))
        return await future

    async def close(self) -> None:
        self._jobs.put(None)
        await asyncio.to_thread(self._thread.join)


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if not future.done():
        future.set_result(result) if exc is None else future.set_exception(exc)


class _PooledReads(SQLiteStorage):
    """``SQLiteStorage`` with its reads on readers of a path's own (writes stay on its write lane): at most
    ``read_pool_size``, each a thread with its connection, opened by the same ``connect(write=False)`` on first
    need; a read takes an idle one, or waits for one."""

    def __init__(self, path: str | os.PathLike[str], **options: Any) -> None:
        super().__init__(path, **options)
        # Names of the bench's own (_ab_), so no attribute or hook of the storage's is overwritten by mistake.
        self._ab_idle: asyncio.Queue[Any] | None = None
        self._ab_readers: list[Any] = []
        self._ab_being_opened = 0

    def _ab_connector(self) -> sqlite3.Connection:
        return connect(self.path, busy_timeout=self.busy_timeout, write=False)

    async def _ab_open_reader(self) -> Any:
        raise NotImplementedError

    async def _ab_whole(self, reader: Any, read: Callable[..., T], *args: Any) -> T:
        """Run ``read(connection, *args)`` whole on the reader's thread."""
        raise NotImplementedError

    async def _ab_run(self, reader: Any, read: Callable[..., T], *args: Any) -> T:
        return await self._ab_whole(reader, read, *args)

    async def _ab_on_reader(self, use: Callable[[Any], Awaitable[T]]) -> T:
        await self._ready()
        if self._ab_idle is None:
            self._ab_idle = asyncio.Queue()
        if self._ab_idle.empty() and len(self._ab_readers) + self._ab_being_opened < self._read_pool_size:
            self._ab_being_opened += 1  # its place, taken before the await
            try:
                reader = await self._ab_open_reader()
            finally:
                self._ab_being_opened -= 1
            self._ab_readers.append(reader)
        else:
            reader = await self._ab_idle.get()
        try:
            return await use(reader)
        except sqlite3.Error as exc:
            raise from_sqlite(exc, self.path) from exc
        finally:
            self._ab_idle.put_nowait(reader)

    async def _read(self, read: Callable[..., T], *args: Any) -> T:
        return await self._ab_on_reader(lambda reader: self._ab_run(reader, read, *args))

    async def settings(self) -> dict[str, str]:
        return await self._ab_on_reader(lambda reader: self._ab_whole(reader, reader_settings))

    async def aclose(self) -> None:
        await super().aclose()
        for reader in self._ab_readers:
            await reader.close()
        self._ab_readers, self._ab_idle = [], None


class WholeAiosqliteStorage(_PooledReads):
    """Today's read functions run whole on an aiosqlite connection's thread (its private ``_execute``)."""

    async def _ab_open_reader(self) -> Any:
        return await aiosqlite.Connection(self._ab_connector, 64)

    async def _ab_whole(self, reader: Any, read: Callable[..., T], *args: Any) -> T:
        return await reader._execute(read, reader._conn, *args)  # type: ignore[no-any-return]


class AiosqliteStorage(WholeAiosqliteStorage):
    """The reads in aiosqlite's API: a call per statement."""

    async def _ab_run(self, reader: Any, read: Callable[..., T], *args: Any) -> T:
        if read is _history_and_size:
            return await history_by_statements(reader, *args)  # type: ignore[return-value]
        return await one_statement(reader, read, *args)


class PinnedThreadStorage(_PooledReads):
    """Today's read functions run whole on a thread that owns its connection, without aiosqlite."""

    async def _ab_open_reader(self) -> Any:
        return await asyncio.to_thread(_PinnedReader, self._ab_connector)

    async def _ab_whole(self, reader: Any, read: Callable[..., T], *args: Any) -> T:
        return await reader.run(read, *args)  # type: ignore[no-any-return]


class ThreadStorage(SQLiteStorage):
    """The storage as it is, with the same settings probe as the candidates."""

    async def settings(self) -> dict[str, str]:
        return await self._read(reader_settings)


Path_ = type[ThreadStorage] | type[_PooledReads]
PATHS: dict[str, Path_] = {
    "threads": ThreadStorage,
    "threads again": ThreadStorage,
    "aiosqlite": AiosqliteStorage,
    "aiosqlite whole": WholeAiosqliteStorage,
    "pinned threads": PinnedThreadStorage,
}
BASE = "threads"


# -- the file and one sample --------------------------------------------------------------------------------

SHORT, LONG, WRITER = UUID(int=100), UUID(int=1000), UUID(int=7)


def build(path: Path, long_events: int, listed: int) -> None:
    """The file: a 100-event and a ``long_events``-event session, ``listed`` sessions with a record and 4 events
    each (the page is 20 of them), and the session the concurrency sample appends to."""

    async def fill() -> None:
        async with SQLiteStorage(path) as storage:
            # The writer's session first: the oldest, never on the page listed (its growing count is not read).
            await storage.save_session(SessionRecord(session_id=WRITER.hex, cwd="/work"))
            await storage.set_history(SHORT, to_events(make_events(100, seed=1)))
            await storage.set_history(LONG, to_events(make_events(long_events, seed=2)))
            for number in range(listed):
                sid = uuid4()
                await storage.save_session(SessionRecord(session_id=sid.hex, cwd="/work", title=f"task {number}"))
                await storage.set_history(sid, to_events(make_events(4, seed=number)))

    asyncio.run(fill())


async def _calls(storage: SQLiteStorage) -> dict[str, Callable[[], Awaitable[object]]]:
    listed = await storage.list_sessions(limit=20)
    assert len(listed.sessions) == 20
    one = UUID(hex=listed.sessions[-1].session_id)
    return {
        "get_history 100": lambda: storage.get_history(SHORT),
        "get_history long": lambda: storage.get_history(LONG),
        "list_sessions 20": lambda: storage.list_sessions(limit=20),
        "load_session": lambda: storage.load_session(one),
    }


async def sample(cls: Path_, path: Path, reps: int, cycles: int) -> dict[str, float]:
    """One round's figures for one path: microseconds per call (medians), then reads and appends per second
    and the loop's p99 lag (ms) with 8 readers and a writer at once."""
    figures: dict[str, float] = {}
    async with cls(path) as storage:
        calls = await _calls(storage)
        for call in calls.values():  # unmeasured: the reader connections and the read cache warm
            await call()
        for name, call in calls.items():
            times = []
            for _ in range(reps):
                started = time.perf_counter()
                await call()
                times.append(time.perf_counter() - started)
            figures[f"{name} us"] = statistics.median(times) * 1e6
        context = EventContext.for_stream(WRITER)
        stop = asyncio.Event()
        appended = 0

        async def writer() -> None:
            nonlocal appended
            while not stop.is_set():
                await storage.save_event(ModelMessage("an answer, appended while eight readers read"), context)
                appended += 1

        async def reader() -> None:
            for _ in range(cycles):
                for call in calls.values():
                    await call()

        ticker = Ticker()
        await ticker.start()
        writing = asyncio.create_task(writer())
        started = time.perf_counter()
        await asyncio.gather(*(reader() for _ in range(8)))
        spent = time.perf_counter() - started
        stop.set()
        await writing
        figures["8 readers: reads/s"] = 8 * cycles * len(calls) / spent
        figures["8 readers: appends/s"] = appended / spent
        figures["8 readers: loop lag p99 ms"] = await ticker.stop()
    return figures


def settings_of(cls: Path_, path: Path) -> dict[str, str]:
    async def probe() -> dict[str, str]:
        async with cls(path) as storage:
            return await storage.settings()

    return asyncio.run(probe())


def _nothing(conn: sqlite3.Connection) -> None:
    return None


def hops(path: Path, rounds: int, count: int) -> dict[str, float]:
    """Microseconds of one empty round trip from the event loop to a reader's thread and back (median of
    ``count`` per round, median over rounds, the ways taking turns): what each way of reaching a thread costs a
    read before it reads anything."""

    async def measure() -> dict[str, list[float]]:
        def opened() -> sqlite3.Connection:
            return connect(path, write=False)

        executor = ThreadPoolExecutor(1)
        conn = opened()
        aio = await aiosqlite.Connection(opened, 64)
        pinned = _PinnedReader(opened)
        loop = asyncio.get_running_loop()
        ways: dict[str, Callable[[], Awaitable[None]]] = {
            "run_in_executor": lambda: loop.run_in_executor(executor, _nothing, conn),
            "aiosqlite's queue": lambda: aio._execute(_nothing, aio._conn),
            "a pinned thread's queue": lambda: pinned.run(_nothing),
        }
        got: dict[str, list[float]] = {name: [] for name in ways}
        try:
            for number in range(rounds):
                for name, way in ways.items() if number % 2 == 0 else reversed(ways.items()):
                    times = []
                    for _ in range(count):
                        started = time.perf_counter()
                        await way()
                        times.append(time.perf_counter() - started)
                    got[name].append(statistics.median(times) * 1e6)
        finally:
            executor.shutdown()
            conn.close()
            await aio.close()
            await pinned.close()
        return got

    return {name: statistics.median(values) for name, values in asyncio.run(measure()).items()}


# -- the report ---------------------------------------------------------------------------------------------

METRICS: list[tuple[str, str]] = [  # (metric, kind): a time per call, a rate, a lag
    ("get_history 100 us", "time"),
    ("get_history long us", "time"),
    ("list_sessions 20 us", "time"),
    ("load_session us", "time"),
    ("8 readers: reads/s", "rate"),
    ("8 readers: appends/s", "rate"),
    ("8 readers: loop lag p99 ms", "lag"),
]


def compare(base: Cell, other: Cell, kind: str) -> str:
    """``other`` against ``base`` round by round: how many times as fast (rates, times) or its lag's ratio."""
    if kind == "time":  # base time over other time: above 1 is other faster; won = rounds other was faster
        got = paired(base, other, higher=True)
        verb, better = "as fast", "faster"
    elif kind == "rate":
        got = paired(other, base, higher=True)
        verb, better = "as fast", "faster"
    else:
        got = paired(other, base, higher=False)
        verb, better = "the lag", "lower"
    assert got is not None
    return f"{got.median:.2f}x {verb} ({got.low:.2f}-{got.high:.2f}), {better} in {got.won} of {got.n} rounds"


def report(
    cells: dict[str, dict[str, Cell]], settings: dict[str, str], hop: dict[str, float], args: argparse.Namespace
) -> str:
    lines = [
        f"{args.rounds} rounds, {args.reps} calls per figure per round, long history {args.long} events,"
        f" 8 readers x {args.cycles} cycles; aiosqlite {aiosqlite.__version__}, SQLite {sqlite3.sqlite_version}",
        "",
        "| path | " + " | ".join(metric for metric, _ in METRICS) + " |",
        "| --- |" + " --- |" * len(METRICS),
    ]
    for key, got in cells.items():
        values = []
        for metric, _ in METRICS:
            cell = got[metric]
            assert cell.value is not None, (key, metric, cell.problem)
            values.append(f"{cell.value:,.0f}" if cell.value >= 100 else f"{cell.value:.2f}")
        lines.append(f"| {key} | " + " | ".join(values) + " |")
    lines += ["", f"Paired by round against `{BASE}`:", ""]
    for key, got in cells.items():
        if key == BASE:
            continue
        for metric, kind in METRICS:
            lines.append(f"- {key}, {metric}: {compare(cells[BASE][metric], got[metric], kind)}")
    lines += ["", "One empty round trip to a reader's thread: " + ", ".join(f"{k} {v:.1f} us" for k, v in hop.items())]
    lines += ["", "Every path's reader connection: " + ", ".join(f"{k} = {v}" for k, v in settings.items())]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--reps", type=int, default=400, help="calls per figure per round")
    parser.add_argument("--long", type=int, default=1000, help="events of the long history")
    parser.add_argument("--cycles", type=int, default=40, help="each concurrent reader's passes over the 4 calls")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: the test suite's run")
    parser.add_argument("--json", type=Path, help="also write every figure, by round, here")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.reps, args.long, args.cycles = 2, 3, 50, 2
    with tempfile.TemporaryDirectory(prefix="read_ab-") as folder:
        path = Path(folder) / "reads.db"
        build(path, args.long, listed=60 if args.smoke else 300)
        settings = {key: settings_of(cls, path) for key, cls in PATHS.items()}
        first = settings[BASE]
        if any(other != first for other in settings.values()):
            raise SystemExit(f"the paths' readers differ in their settings: {settings}")

        def entrant(key: str, cls: Path_) -> Entrant:
            return Entrant(
                key=key,
                run=lambda _round: dict(asyncio.run(sample(cls, path, args.reps, args.cycles))),
                warm=lambda: asyncio.run(sample(cls, path, 1, 1)),
            )

        progress = None if args.smoke else (lambda line: print(line, file=sys.stderr))
        cells = interleave([entrant(k, c) for k, c in PATHS.items()], args.rounds, budget=1e9, progress=progress)
        hop = hops(path, args.rounds, 20 * args.reps)
    print(report(cells, first, hop, args))
    if args.json is not None:
        figures = {
            key: {metric: {"value": c.value, "rounds": c.rounds, "problem": c.problem} for metric, c in got.items()}
            for key, got in cells.items()
        }
        args.json.write_text(json.dumps({"settings": first, "paths": figures, "hops_us": hop}, indent=1))


if __name__ == "__main__":
    main()
