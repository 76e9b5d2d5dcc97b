"""The write lane: every write of one storage, run whole on one connection, committed in groups.

Why a lane (``python3 bench/group_commit.py`` is the A/B that justifies it):
SQLite lets one writer at a time, and each commit costs an fsync. A caller
appending alone gains nothing from it (one thread hop per transaction either
way: 0.97x handing each transaction to ``asyncio.to_thread``, 1.02x sending
each statement through aiosqlite, in one run on this project's machine). But
the writes that arrive while one transaction commits are committed together
in the next (group commit): with 50 sessions appending at once, 7.0x and 8.2x
those two, since many callers share one fsync, yet each call still returns
only after its own commit.

Where a transaction commits (``python3 bench/run.py --sections a,b,lag`` measures both):

* on the event loop's own thread, when the lane is idle and the disk has
  proven quick: the first write of a loop iteration commits at once, inside
  the call, and so do the same task's next ones for :data:`LOOP_SLICE` (a
  sequential writer yields to the loop's other tasks once per slice, not once
  per write); the writes of other tasks in the same iteration (at most
  :data:`LOOP_BATCH`) share the next transaction, started by
  ``loop.call_soon``. No hop to another thread and back (~160 us on this
  project's machine, more than half of what an append costs now), at the price
  of the loop waiting for the commit's fsync (typically 0.1-0.3 ms here).
* on the writer thread otherwise: the first :data:`RECOVERY_COMMITS` writes
  (the connection is opened as the storage opens), more writes at once than
  :data:`LOOP_BATCH`, a write larger than :data:`LOOP_WRITE_ROWS` rows or
  :data:`LOOP_WRITE_SIZE` characters (:func:`will_write`), background work
  (indexing new events, merging the index), a write while another process holds the write lock
  (the loop never waits for a lock: it hands the batch over at once), every
  write after a commit on the loop took longer than
  :data:`LOOP_COMMIT_LIMIT`, until :data:`RECOVERY_COMMITS` in a row were
  quick there (measured, not a timer: while the disk stays slow, the loop
  never waits for it again), one write after :data:`LOOP_RUN` in a row on the
  loop while the disk is not quick enough for the loop's commits to checkpoint
  the WAL (it is checkpointed there), and the writes queued while a commit
  runs there.

So the loop's thread waits on the disk only for a small write while the
disk's last commits were quick; a disk that turns slow between two commits
costs it that one commit.

A write is whole or absent: a caller cancelled before its write starts has
written nothing; once it has started, the transaction commits or rolls back
whole, whatever happens to the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from ..errors import DatabaseBusyError, StorageError, from_sqlite
from .connect import transaction

__all__ = ["AfterCommit", "WriteLane", "Work"]

T = TypeVar("T")

AfterCommit = Callable[[], None] | None
"""Run right after the transaction holding the work commits, in commit order, on the thread that committed it."""

Work = Callable[[sqlite3.Connection], tuple[T, AfterCommit]]
"""One job's share of a transaction, run with the lane's connection (on the loop's thread or the writer's)."""

MAX_BATCH = 256
"""At most this many jobs share one transaction."""

BACKGROUND_WAITS = 8
"""Background work waits for at most this many transactions of other writes before it is taken."""
LOOP_BATCH = 8
"""At most this many writes commit together on the event loop's thread; more go to the writer thread (inserting
them would keep the loop waiting)."""
LOOP_SLICE = 0.0005
"""Seconds one task's writes may go on committing at once on the event loop's thread before the call yields to
the loop's other tasks. A loop iteration per write cost a sequential writer ~5% of each append; a slice of 1 ms
took the loop lag's p99 during sequential appends from 1.4 to ~3.5 ms, half of it to ~2.5 ms (the 5 ms an agent's
other tasks should never see is the bound; measured again with this lane: 2.5-2.8 ms at 0.5 ms, 3.3-3.8 ms at 1 ms,
for no gain in the same benchmark's sequential appends)."""
LOOP_COMMIT_LIMIT = 0.003
"""Seconds a commit may take and still count as quick. One on the event loop's thread that takes longer sends the
next ones to the writer thread (the loop must not wait for a slow disk again): well under the 5 ms of loop lag an
agent's other tasks should ever see."""
RECOVERY_COMMITS = 8
"""Commits in a row, each quicker than :data:`LOOP_COMMIT_LIMIT`, timed on the writer thread, before the loop's
thread may commit (again): at first, and after a slow commit or another process's lock. Evidence, not a timer: a
disk that stays slow keeps every commit off the loop (a back-off of a second let one 800 ms fsync freeze the loop
every second). Only writes the loop could have taken count (at most :data:`LOOP_BATCH`, none too large), timed from
the lock being held to the commit's end."""
LOOP_WRITE_ROWS = 32
"""Rows (inserted or deleted) one transaction on the event loop's thread may write; a larger write runs on the
writer thread (:func:`will_write`). Appending one event, or ``set_history`` adding a few, stays on the loop; a
history of 10,000 events written at once (220 ms of the loop's time) never does."""
LOOP_WRITE_SIZE = 64 * 1024
"""Characters of stored text (payloads, titles, a session's context) one transaction on the event loop's thread may
write; a larger write runs on the writer thread (:func:`will_write`). 16 pages of the WAL at most: under a
millisecond to encode, insert and write here."""
LOOP_RUN = 100
"""While the disk is not quick enough for the event loop's thread to checkpoint the WAL (:data:`_ON_LOOP`), the
commit after this many in a row there goes to the writer thread, which checkpoints (indexing new events may bring
one sooner). A sequential append writes two or three pages, so the WAL is checkpointed near
:data:`CHECKPOINT_PAGES` and its file stops growing early: every commit that lengthens the file syncs slower (at
256, a fresh file's WAL reached ~600 pages over the first thousand appends; sessionstore's statements on a plain
connection, checkpointed every 256 commits rather than every 256 pages, took a commit's p90 from ~0.3 to ~0.5 ms on
this project's disk)."""
CHECKPOINT_PAGES = 256
"""SQLite checkpoints the WAL (copies it into the file: up to megabytes and two fsyncs) in the commit that finds it
holding this many pages: on the writer thread, and on the loop's while the disk is quick
(:data:`_ON_LOOP_CHECKPOINTING`). The writer thread's commits come every hundred or so when the disk is not
(:data:`LOOP_RUN`, indexing), so the threshold is a quarter of SQLite's 1,000: a WAL checkpointed from 1,000 pages
grew to ~1,700 first, and a commit that makes the file longer syncs slower (sequential appends ran 0.85x as fast,
``bench/append_profile.py``, 0 rounds of 16 won)."""

CHECKPOINT_PAGES_SLOW = 1000
""":data:`CHECKPOINT_PAGES` while the disk is slow (the last commit timed took over :data:`LOOP_COMMIT_LIMIT`):
SQLite's own default. There what an append waits for is the disk's syncs, and each checkpoint takes three (the log,
the file, then the restarted log's header): at 10 ms per sync, checkpointing from 256 pages cost ~0.3 ms of every
append in a sequence of 150, where the floor of the benchmark, at 1,000, never checkpointed."""

_PENDING, _TAKEN, _CANCELLED = 0, 1, 2
_UNSET: Any = object()
_MISSED: Any = object()
"""A transaction on the loop's thread that did not commit (a bad write, another process holding the lock): it is
queued as any other write, and fails, waits or runs there."""
_TOO_LARGE: Any = object()
"""A transaction too large for the loop's thread (:func:`will_write`): rolled back, it runs on the writer thread."""
_ON_LOOP = (0, 0)
"""The (busy timeout, checkpoint pages) of the connection on the loop's thread: no waiting, no checkpoints
(:data:`LOOP_RUN` hands them to the writer thread)."""
_ON_LOOP_CHECKPOINTING = (0, CHECKPOINT_PAGES)
"""The same while the disk is quick (:attr:`WriteLane._syncs_quick`): the commit that finds the WAL holding
:data:`CHECKPOINT_PAGES` copies it into the file, as the floor's commits do. Checkpointing on the loop's thread
only after :data:`LOOP_RUN` commits, with a ``PASSIVE`` checkpoint of its own, sequential appends ran 0.95x as fast
(``bench/ab_inproc.py``, 32 rounds, slower in all 32)."""


class _OffLoop(Exception):
    """Raised inside a transaction on the event loop's thread by a write larger than the loop may take."""


class _Size(threading.local):
    """What the transaction under way on this thread said it writes (:func:`will_write`)."""

    def __init__(self) -> None:
        self.rows = 0
        self.size = 0
        self.on_loop = False

    def start(self, on_loop: bool) -> None:
        self.rows = self.size = 0
        self.on_loop = on_loop

    @property
    def small(self) -> bool:
        return self.rows <= LOOP_WRITE_ROWS and self.size <= LOOP_WRITE_SIZE


_size = _Size()


def will_write(rows: int, size: int = 0) -> None:
    """Inside a write: it is about to write ``rows`` rows holding ``size`` characters of text.

    On the event loop's thread, a transaction that would write more than
    :data:`LOOP_WRITE_ROWS` rows or :data:`LOOP_WRITE_SIZE` characters stops
    here: it is rolled back whole (nothing written) and runs on the writer
    thread instead. Called before the work it announces, so the loop never does
    that work.
    """
    said = _size
    said.rows += rows
    said.size += size
    if said.on_loop and (said.rows > LOOP_WRITE_ROWS or said.size > LOOP_WRITE_SIZE):
        raise _OffLoop


def size_unknown() -> None:
    """Inside a write whose size is not known before it runs (deleting a session and all its events, or
    comparing against a history this process has not read): it never runs on the event loop's thread."""
    will_write(LOOP_WRITE_ROWS + 1)


@dataclass(slots=True)
class _Job:
    """One write waiting for the writer thread; ``state`` changes only under the lane's lock."""

    work: Work[Any]
    future: asyncio.Future[Any]
    background: bool = False
    state: int = _PENDING
    outcome: Any = _UNSET
    off_loop: bool = False
    """Found too large for the event loop's thread (:func:`will_write`): it runs on the writer thread."""


class WriteLane:
    """One write connection and its writer thread, for one event loop: a transaction runs whole on the loop's
    thread or on the writer thread (see the module's docstring).

    ``connect`` opens the write connection (on the writer thread, at the first
    write); ``commit_lock`` is held while each job's after-commit step runs, so
    a reader on another thread never sees a half-updated cache.
    """

    def __init__(self, path: Path, connect: Callable[[], sqlite3.Connection], commit_lock: threading.Lock) -> None:
        self._path = path
        self._connect = connect
        self._commit_lock = commit_lock
        self._conn: sqlite3.Connection | None = None
        self._thread: ThreadPoolExecutor | None = ThreadPoolExecutor(1, thread_name_prefix="sessionstore-writer")
        self._pending: deque[_Job] = deque()
        self._background: deque[_Job] = deque()
        self._background_waited = 0  # transactions of other writes since background work was last taken
        self._lock = threading.Lock()
        # Set while no flush is queued or running, on either thread (event-loop side).
        self._idle = asyncio.Event()
        self._idle.set()
        # Whether the flush to come is one the loop's thread runs and has not begun (see _only_background).
        self._flush_on_loop_next = False
        # Commits in a row that were quick (the loop's thread may commit while there are RECOVERY_COMMITS),
        # and commits on the loop's thread since the writer thread's last (changed by whichever thread commits;
        # commits never overlap).
        self._quick = 0
        self._loop_run = 0
        # Whether the last commit timed as evidence of the disk's speed was slow (not merely: the disk has not
        # yet proven quick, as at first): then background work shares callers' commits and checkpoints are rarer.
        self._slow = False
        # The task whose writes commit at once in this loop iteration, and since when (None: none did yet).
        self._slice_task: asyncio.Task[Any] | None = None
        self._slice_started = 0.0
        # How long the last commit on the loop's thread took, and whether the last commit may have checkpointed
        # the WAL (the next one then starts it again: see _judge, _commit_here and _loop_allowed).
        self._last_on_loop = 0.0
        self._restart_due = False
        # How long the last commit timed as evidence of the disk's speed took (here or on the writer thread).
        self._last_commit = LOOP_COMMIT_LIMIT
        # The busy timeout the connection was opened with, and the (busy timeout, checkpoint pages) in force.
        self._busy_ms = 0
        self._applied: tuple[int, int] | None = None

    def start(self) -> None:
        """Open the write connection now, on the writer thread, without waiting for it: the first write then
        finds it open (opening it was part of that write's time), and a write submitted meanwhile queues behind
        it."""
        assert self._thread is not None
        self._thread.submit(self._open_quietly)

    async def submit(self, work: Work[T], *, background: bool = False) -> T:
        """Queue ``work``; return its result once the transaction holding it has committed.

        ``background`` work (indexing a batch of events, merging the index) runs
        on the writer thread, in a transaction of its own, when no other write
        is waiting or once :data:`BACKGROUND_WAITS` transactions of other writes
        went first (so a steady stream of writes cannot starve it): a caller's
        write waits for at most the one under way. While the disk is too slow
        for the loop's thread, it shares the next transaction of callers' writes
        instead (:meth:`_take`): there a sync of its own costs more than the work.

        The thread answers a whole transaction's callers with one call back
        into the event loop, and the next transaction starts only after they
        have run: the writes they queue in reply share it, and the thread's
        Python code never competes with the loop's for the GIL.
        """
        if self._thread is None:
            raise StorageError(f"{self._path}: the storage was closed")
        loop = asyncio.get_running_loop()
        off_loop = False
        if not background and self._slice_task is not None and self._slice_task is asyncio.current_task(loop):
            if time.perf_counter() - self._slice_started >= LOOP_SLICE:
                # Its slice ran out since its last commit: the loop's other tasks run, then a new slice begins
                # (queued instead, the write would wait for two loop iterations and a future).
                await asyncio.sleep(0)
        if not background and (self._idle.is_set() or self._only_background) and self._may_commit_here(loop):
            outcome = self._commit_here(work)
            if outcome is _TOO_LARGE:
                off_loop = True
            elif outcome is not _MISSED:
                result, after_commit = outcome
                if after_commit is not None:
                    with self._commit_lock:
                        after_commit()
                if time.perf_counter() - self._slice_started >= LOOP_SLICE:
                    await asyncio.sleep(0)  # the loop's other tasks run, as when the commit is queued
                    if self._last_on_loop > LOOP_SLICE:
                        # And the tasks whose timers came due during a commit this long: a timer is made ready
                        # behind this task's wake-up, and wakes its task one iteration later still (at 2 ms per
                        # commit, a task sleeping 1 ms waited for two or three commits: 4-7 ms).
                        await asyncio.sleep(0)
                        await asyncio.sleep(0)
                return cast(T, result)
        job = _Job(work, loop.create_future(), background, off_loop=off_loop)
        with self._lock:
            (self._background if background else self._pending).append(job)
        if self._idle.is_set():
            self._idle.clear()
            self._schedule(loop)
        try:
            return cast(T, await job.future)
        except asyncio.CancelledError:
            with self._lock:
                if job.state == _PENDING:
                    job.state = _CANCELLED  # not started: it will never be written
            raise

    async def close(self) -> None:
        """Let queued writes commit and their callers hear back, then close the connection and stop the thread."""
        await self._idle.wait()
        thread, self._thread = self._thread, None
        if thread is not None:
            # Queued behind every flush already submitted: those writes finish first.
            await asyncio.get_running_loop().run_in_executor(thread, self._close_connection)
            thread.shutdown(wait=False)

    def _may_commit_here(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether a write may commit at once, here: the first of this loop iteration, or the same task's next
        within its slice (other tasks' writes in it are queued, to share the next transaction), when the loop
        may commit at all (:meth:`_loop_allowed`)."""
        if not self._loop_allowed():
            return False
        task = asyncio.current_task(loop)
        if self._slice_task is None:
            self._slice_task, self._slice_started = task, time.perf_counter()
            loop.call_soon(self._next_iteration)
            return True
        return task is self._slice_task and time.perf_counter() - self._slice_started < LOOP_SLICE

    def _next_iteration(self) -> None:
        self._slice_task = None

    @property
    def _only_background(self) -> bool:
        """Whether all that waits is background work, for a flush the loop's thread has yet to begin: the
        connection is free, and a caller's write may commit at once ahead of it (queued behind it instead, it
        waited for :data:`BACKGROUND_WAITS` such flushes, each two loop iterations and a future: 8 appends in
        every 256, as each batch of new events was indexed)."""
        return self._flush_on_loop_next and not self._pending

    def _loop_allowed(self) -> bool:
        """Whether the loop's thread may commit now: the connection is open, the last :data:`RECOVERY_COMMITS`
        commits were quick, the writer thread committed within the last :data:`LOOP_RUN`, and not a checkpoint
        that leaves the WAL to start again (:meth:`_judge`, :meth:`_commit_here`) unless :attr:`_syncs_quick`
        (at 0.3 ms per sync, each restart handed over cost ~0.25 ms more than one committed here)."""
        return (
            self._conn is not None
            and self._quick >= RECOVERY_COMMITS
            and self._loop_run < LOOP_RUN
            and (not self._restart_due or self._syncs_quick)
        )

    @property
    def _syncs_quick(self) -> bool:
        """Whether the last commit timed took under half :data:`LOOP_COMMIT_LIMIT`: then the loop's commits may also
        checkpoint the WAL (:data:`_ON_LOOP_CHECKPOINTING`) and start it again, whose extra syncs stay under the
        limit."""
        return 2 * self._last_commit < LOOP_COMMIT_LIMIT

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the next flush: on the loop's thread when it may (see the module's docstring), else the writer's."""
        assert self._thread is not None
        if self._loop_allowed():
            self._flush_on_loop_next = True
            loop.call_soon(self._flush_on_loop, loop)
        else:
            self._thread.submit(self._flush, loop)

    def _take(self) -> list[_Job]:
        with self._lock:
            if self._background and self._pending and self._slow:
                # While the disk is too slow for the loop's thread, background work shares the callers'
                # transaction, after their writes: a transaction of its own costs a sync, which takes longer
                # there than the work (indexing a few hundred events: a millisecond or two).
                self._background_waited = 0
                return self._pop(self._pending, MAX_BATCH - 1) + self._pop(self._background, 1)
            # Background work goes alone, when no other write waits, or after BACKGROUND_WAITS transactions
            # of others (so a steady stream of writes never holds it off for long).
            if self._background and (not self._pending or self._background_waited >= BACKGROUND_WAITS):
                self._background_waited = 0
                return self._pop(self._background, 1)
            self._background_waited += bool(self._background)
            return self._pop(self._pending, MAX_BATCH)

    @staticmethod
    def _pop(queue: deque[_Job], limit: int) -> list[_Job]:
        """Up to ``limit`` jobs off ``queue`` (under the lane's lock), those cancelled before they started left out."""
        jobs: list[_Job] = []
        while queue and len(jobs) < limit:
            job = queue.popleft()
            if job.state == _PENDING:
                job.state = _TAKEN
                jobs.append(job)
        return jobs

    # -- on the event loop's thread ---------------------------------------------------------------

    def _flush_on_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Commit the queued jobs here if the lock is free at once; else, or on any error, hand them over."""
        self._flush_on_loop_next = False
        jobs = self._take()
        if len(jobs) > LOOP_BATCH or any(job.background or job.off_loop for job in jobs):
            assert self._thread is not None
            self._thread.submit(self._flush, loop, jobs)
            return
        outcomes = self._commit_here(lambda conn: [job.work(conn) for job in jobs]) if jobs else []
        if outcomes is _TOO_LARGE:
            for job in jobs:
                job.off_loop = True
        if outcomes is _TOO_LARGE or outcomes is _MISSED:
            assert self._thread is not None
            # Nothing was written: the writer thread runs them again, waits for the lock, and fails only
            # the jobs at fault.
            self._thread.submit(self._flush, loop, jobs)
            return
        try:
            self._report(jobs, outcomes)
        finally:
            self._delivered(jobs, loop)

    def _commit_here(self, run: Callable[[sqlite3.Connection], Any]) -> Any:
        """``run`` in one transaction on the loop's thread, never waiting for the lock, checkpointing only while
        the disk is quick (:meth:`_settings`): what it returned, or :data:`_MISSED` if anything stopped it (rolled
        back whole), :data:`_TOO_LARGE` if it was too large for the loop (:func:`will_write`). Timed: a slow
        commit, or the lock taken, sends the next ones to the writer thread until :data:`RECOVERY_COMMITS` in a
        row were quick there."""
        assert self._conn is not None
        self._settings(on_loop=True)
        _size.start(on_loop=True)
        started = time.perf_counter()
        try:
            with transaction(self._conn, self._path) as conn:
                done = run(conn)
        except _OffLoop:
            return _TOO_LARGE
        except DatabaseBusyError:
            self._quick = 0
            return _MISSED
        except Exception:
            return _MISSED
        finally:
            _size.on_loop = False
        checkpoints = self._applied != _ON_LOOP  # the WAL never grows past CHECKPOINT_PAGES: no LOOP_RUN due
        self._loop_run = 0 if checkpoints else self._loop_run + 1
        self._last_on_loop = self._last_commit = spent = time.perf_counter() - started
        # One that may have checkpointed and was not quick: the next may start the WAL again, off the loop.
        self._restart_due = checkpoints and not self._syncs_quick
        if spent > LOOP_COMMIT_LIMIT:
            self._quick = 0
            self._slow = True
        return done

    # -- on the writer thread -------------------------------------------------------------------

    def _flush(self, loop: asyncio.AbstractEventLoop, jobs: list[_Job] | None = None) -> None:
        """Commit the queued jobs (at most ``MAX_BATCH``), or ``jobs``, in one transaction and report back."""
        jobs = self._take() if jobs is None else jobs
        try:
            self._report(jobs, self._commit(jobs) if jobs else [])
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
                loop.call_soon_threadsafe(self._delivered, jobs, loop)

    def _report(self, jobs: Sequence[_Job], outcomes: Sequence[tuple[Any, AfterCommit] | BaseException]) -> None:
        """Run each committed job's after-commit step and keep its outcome for its caller."""
        try:
            for job, outcome in zip(jobs, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    job.outcome = outcome
                    continue
                result, after_commit = outcome
                if after_commit is not None:
                    with self._commit_lock:
                        after_commit()
                job.outcome = result
        except BaseException as exc:  # a bug here must fail the callers, never leave them waiting
            for job in jobs:
                if job.outcome is _UNSET:
                    job.outcome = exc
            raise

    def _settings(self, on_loop: bool) -> None:
        """On the loop's thread the connection never waits for another process's lock, and checkpoints the WAL
        only while the disk is quick (:data:`_ON_LOOP_CHECKPOINTING`); on the writer thread it does both (its busy
        timeout; :data:`CHECKPOINT_PAGES`, or :data:`CHECKPOINT_PAGES_SLOW` while the disk is slow)."""
        assert self._conn is not None
        if on_loop:
            wanted = _ON_LOOP_CHECKPOINTING if self._syncs_quick else _ON_LOOP
        else:
            wanted = (self._busy_ms, CHECKPOINT_PAGES_SLOW if self._slow else CHECKPOINT_PAGES)
        if wanted != self._applied:
            self._conn.execute(f"PRAGMA busy_timeout = {wanted[0]}")
            self._conn.execute(f"PRAGMA wal_autocheckpoint = {wanted[1]}")
            self._applied = wanted

    def _commit(self, jobs: Sequence[_Job]) -> list[tuple[Any, AfterCommit] | BaseException]:
        """Run ``jobs`` in one transaction, timed (:meth:`_judge`); on failure, each alone so one bad write fails
        alone."""
        try:
            opened = self._open_connection()
            self._settings(on_loop=False)
            _size.start(on_loop=False)
            with transaction(opened, self._path) as conn:
                started = time.perf_counter()  # the lock is held: waiting for it is not the disk's time
                outcomes: list[tuple[Any, AfterCommit] | BaseException] = [job.work(conn) for job in jobs]
            self._judge(jobs, time.perf_counter() - started)
            return outcomes
        except Exception as exc:
            if len(jobs) > 1:
                return [self._commit([job])[0] for job in jobs]
            return [from_sqlite(exc, self._path) if isinstance(exc, sqlite3.Error) else exc]

    def _open_connection(self) -> sqlite3.Connection:
        """The write connection, opened if it is not."""
        if self._conn is None:
            conn = self._connect()
            self._busy_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
            self._applied = None  # set before the first transaction
            self._conn = conn
        return self._conn

    def _open_quietly(self) -> None:
        """:meth:`_open_connection`, a failure left for the first write to meet (and report) when it tries again."""
        with contextlib.suppress(Exception):
            self._open_connection()

    def _judge(self, jobs: Sequence[_Job], seconds: float) -> None:
        """Count a commit on the writer thread: quick ones in a row let the loop's thread commit again. Only a
        transaction the loop could have taken is evidence (a large one is slow for its size, not the disk's).

        Nor is a checkpoint's: background work's, or the commit :data:`LOOP_RUN` sent there, which are the ones
        that find the WAL full, and the commit after them, which starts the WAL again from its beginning and
        then syncs twice (the log's new header, then its frames). Those are slow for their syncs, not the
        disk's (counted, they kept the next :data:`RECOVERY_COMMITS` writes off the loop, each paying the
        hand-over), and the commit after one is kept on this thread too (:attr:`_restart_due`) unless the
        disk is quick (:meth:`_loop_allowed`): on the loop its two syncs kept a timer waiting 4-5 ms at 2 ms
        per sync."""
        checkpointing = self._loop_run >= LOOP_RUN or any(job.background for job in jobs)
        restarted, self._restart_due = self._restart_due, checkpointing
        self._loop_run = 0
        if checkpointing or restarted:
            return
        if len(jobs) <= LOOP_BATCH and _size.small:
            self._last_commit = seconds
            self._slow = seconds > LOOP_COMMIT_LIMIT
            self._quick = 0 if self._slow else self._quick + 1

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # -- back on the event loop ------------------------------------------------------------------

    def _delivered(self, jobs: Sequence[_Job], loop: asyncio.AbstractEventLoop) -> None:
        for job in jobs:
            if job.future.done():  # the caller was cancelled while its write committed
                continue
            if isinstance(job.outcome, BaseException):
                job.future.set_exception(job.outcome)
            else:
                job.future.set_result(job.outcome)
        if len(jobs) <= 1 and not self._waiting():
            # A lone writer, answered: its next write may commit at once, inside its call (see submit),
            # rather than be queued behind its own wake-up for a transaction of one all the same.
            self._idle.set()
            return
        # Scheduled behind the wake-ups of the callers just answered, so the
        # writes they queue in reply are there when the next flush starts.
        loop.call_soon(self._next_flush, loop)

    def _next_flush(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._waiting() and self._thread is not None:
            self._schedule(loop)
        else:
            self._idle.set()

    def _waiting(self) -> bool:
        """Whether writes or background work wait to be taken."""
        with self._lock:
            return bool(self._pending or self._background)
