"""The store workloads (a)-(h) and the event-loop lag probes: one sample each, for :func:`rounds.interleave`.

Every store gets the same neutral events, converted to its native objects
before timing starts, and (except where a workload says otherwise) a fresh
file for every sample.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from payloads import json_bytes, make_events
from peers import PG_STORES, STORES, Adapter, load
from rounds import Sample, percentile

RUN = Path(__file__).resolve().parent / "run.py"


@dataclass(frozen=True)
class Sizes:
    a: int = 1000  # events appended one call at a time
    a_rounds: int = 14
    turns_rounds: int = 24  # (a) again, in turns with the floor (bench/turns.py)
    turns_block: int = 50
    b_sessions: int = 50
    b_events: int = 100
    b_rounds: int = 7
    c_procs: int = 4
    c_events: int = 250  # per process
    c_rounds: int = 5
    d: int = 10_000
    d_rounds: int = 7
    e: tuple[int, ...] = (100, 1_000, 10_000)
    e_calls: int = 20
    e_rounds: int = 3
    g_events: int = 100
    g_rounds: int = 10
    h_base: int = 100_000  # events already in the long-lived file
    h_history: int = 1_000  # per session of it
    h_events: int = 1_000  # appended per round
    h_rounds: int = 5
    lag_rounds: int = 3
    mem_sessions: int = 60
    mem_events: int = 5_000
    mem_scale: float = 2.3  # ~1 KiB per event
    ag2_turns: int = 100  # 9 AG2 events a turn
    ag2_rounds: int = 14
    cli_sessions: int = 100_000
    cli_events: int = 10
    cli_small: int = 1_000  # sessions in the file list --json's memory is compared against
    cli_rounds: int = 10
    fsync: int = 30  # fsyncs per probe
    budget: float = 30.0  # seconds per store and workload before a store sits rounds out (never below 1)


SMOKE = Sizes(
    a=20,
    a_rounds=2,
    turns_rounds=1,
    turns_block=5,
    b_sessions=3,
    b_events=5,
    b_rounds=2,
    c_procs=2,
    c_events=5,
    c_rounds=1,
    d=50,
    d_rounds=2,
    e=(10, 20, 40),
    e_calls=2,
    e_rounds=1,
    g_events=5,
    g_rounds=1,
    h_base=200,
    h_history=50,
    h_events=10,
    h_rounds=2,
    lag_rounds=1,
    mem_sessions=2,
    mem_events=20,
    ag2_turns=3,
    ag2_rounds=2,
    cli_sessions=300,
    cli_events=4,
    cli_small=30,
    cli_rounds=1,
    fsync=5,
    budget=5.0,
)

# For working on the bench: every section at a size that runs in a few minutes, not a measurement to publish.
QUICK = Sizes(
    a=300,
    a_rounds=4,
    turns_rounds=3,
    b_events=30,
    b_rounds=3,
    c_events=60,
    c_rounds=2,
    d=3_000,
    d_rounds=3,
    e=(100, 1_000, 3_000),
    e_calls=10,
    e_rounds=2,
    g_rounds=3,
    h_base=20_000,
    h_events=300,
    h_rounds=2,
    lag_rounds=2,
    mem_sessions=10,
    mem_events=2_000,
    ag2_turns=40,
    ag2_rounds=3,
    cli_sessions=10_000,
    cli_small=500,
    cli_rounds=3,
    fsync=10,
    budget=5.0,
)


class Fresh:
    """Fresh files for every sample, in one temporary folder removed at exit."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="sessionstore-bench-"))
        self.count = 0

    def path(self) -> Path:
        self.count += 1
        folder = self.root / f"run{self.count}"
        folder.mkdir()
        return folder / "bench.db"


def file_bytes(path: Path) -> int:
    if "://" in str(path):
        return 0  # a database on a server (pg): no file of its own here
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def wal_bytes(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


@dataclass
class Meter:
    """Counts something over the timed part of (a) and (b) only, not the store's opening and closing: ``read``
    says how many so far, ``total`` adds up what it said over each timed part. ``laptop.py`` counts fsyncs with it."""

    read: Callable[[], int] = lambda: 0
    total: int = 0


METER = Meter()


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


class Ticker:
    """Sleeps 1 ms on the event loop, again and again; how late each wake-up comes is the loop's lag.

    A store that blocks the loop (or keeps it busy) while it writes delays
    every other task of the agent: the streaming of tokens, a heartbeat, a UI.
    """

    TICK = 0.001

    def __init__(self) -> None:
        self.lags_ms: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._since = 0.0

    async def _tick(self) -> None:
        while True:
            self._since = time.perf_counter()
            await asyncio.sleep(self.TICK)
            self.lags_ms.append((time.perf_counter() - self._since - self.TICK) * 1000)

    async def start(self) -> None:
        """Start ticking; returns once the first sleep has begun."""
        self._task = asyncio.get_running_loop().create_task(self._tick())
        await asyncio.sleep(0)

    async def stop(self) -> float:
        """Stop; the p99 lag in ms.

        The sleep under way counts too: a store that never yields (the floor
        blocks the loop on every commit) keeps the ticker from waking at all,
        and its lag is that whole wait.
        """
        assert self._task is not None
        pending = (time.perf_counter() - self._since - self.TICK) * 1000
        if pending > 0:
            self.lags_ms.append(pending)
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        return percentile(self.lags_ms, 0.99) if self.lags_ms else 0.0


def idle_lag(seconds: float = 1.0) -> float:
    """p99 lag of the ticker on an idle loop: the resolution of the lag figures on this machine."""

    async def idle() -> float:
        ticker = Ticker()
        await ticker.start()
        await asyncio.sleep(seconds)
        return await ticker.stop()

    return float(run(idle()))


# -- the timed parts ------------------------------------------------------------------------------


async def append_sequential(
    cls: type[Adapter], path: Path, events: list[Any], key: str = "s0", lag: bool = False
) -> tuple[float, int, float]:
    """``(seconds, bytes on disk, p99 loop lag ms)`` for one awaited append per event."""
    store = cls()
    native = store.convert(events)
    await store.open(path)
    await store.create(key)
    ticker = Ticker()
    if lag:
        await ticker.start()
    start, metered = time.perf_counter(), METER.read()
    for event in native:
        await store.append(key, event)
    elapsed = time.perf_counter() - start
    METER.total += METER.read() - metered
    p99 = await ticker.stop() if lag else 0.0
    got = len(await store.read(key))
    await store.close()
    if got != len(events):
        raise AssertionError(f"read back {got} of {len(events)} events")
    # After closing: the last connection to close checkpoints the WAL into the file (and removes it).
    return elapsed, file_bytes(path) if store.persistent else 0, p99


async def append_concurrent(
    cls: type[Adapter], path: Path, sessions: int, events: list[Any], lag: bool = False
) -> tuple[float, float]:
    """``(seconds, p99 loop lag ms)`` for ``sessions`` tasks appending at once."""
    store = cls()
    native = store.convert(events)
    await store.open(path)
    keys = [f"s{i}" for i in range(sessions)]
    for key in keys:
        await store.create(key)

    async def one(key: str) -> None:
        for event in native:
            await store.append(key, event)

    ticker = Ticker()
    if lag:
        await ticker.start()
    start, metered = time.perf_counter(), METER.read()
    await asyncio.gather(*(one(key) for key in keys))
    elapsed = time.perf_counter() - start
    METER.total += METER.read() - metered
    p99 = await ticker.stop() if lag else 0.0
    got = len(await store.read(keys[-1]))
    await store.close()
    if got != len(events):
        raise AssertionError(f"read back {got} of {len(events)} events")
    return elapsed, p99


async def prepare(cls: type[Adapter], path: Path, keys: list[str], events: list[Any]) -> None:
    store = cls()
    native = store.convert(events)
    await store.open(path)
    for key in keys:
        await store.create(key)
        if native:
            await store.load(key, native)
    await store.close()


async def read(cls: type[Adapter], path: Path, count: int) -> float:
    store = cls()
    await store.open(path)
    if cls.key.startswith("openai"):
        await store.create("s0")
    start = time.perf_counter()
    events = await store.read("s0")
    elapsed = time.perf_counter() - start
    await store.close()
    if len(events) != count:
        raise AssertionError(f"read {len(events)} of {count} events")
    return elapsed


async def replace(cls: type[Adapter], path: Path, base: list[Any], extra: list[Any]) -> list[float]:
    store = cls()
    history = store.convert(base)
    more = store.convert(extra)
    await store.open(path)
    await store.create("s0")
    await store.load("s0", history)
    times: list[float] = []
    for event in more:
        history = [*history, event]  # the previous list's objects plus one: what an agent passes
        start = time.perf_counter()
        await store.replace("s0", history)
        times.append(time.perf_counter() - start)
    await store.close()
    return times


# -- one sample of each workload --------------------------------------------------------------------


def sample_a(cls: type[Adapter], sizes: Sizes, fresh: Fresh, events: list[Any]) -> Sample:
    """(a) rate, and (f) from the same file: KiB on disk per 1,000 events and the ratio to the raw JSON."""
    elapsed, size, _ = run(append_sequential(cls, fresh.path(), events[: sizes.a]))
    out: Sample = {"a": sizes.a / elapsed}
    if cls.persistent:
        out["f"] = size * 1000 / sizes.a / 1024
        out["f_json"] = size / json_bytes(events[: sizes.a])
    return out


def sample_b(cls: type[Adapter], sizes: Sizes, fresh: Fresh, events: list[Any]) -> Sample:
    elapsed, _ = run(append_concurrent(cls, fresh.path(), sizes.b_sessions, events[: sizes.b_events]))
    return {"b": sizes.b_sessions * sizes.b_events / elapsed}


def sample_lag_a(cls: type[Adapter], sizes: Sizes, fresh: Fresh, events: list[Any]) -> Sample:
    _, _, p99 = run(append_sequential(cls, fresh.path(), events[: sizes.a], lag=True))
    return {"la": p99}


def sample_lag_b(cls: type[Adapter], sizes: Sizes, fresh: Fresh, events: list[Any]) -> Sample:
    _, p99 = run(append_concurrent(cls, fresh.path(), sizes.b_sessions, events[: sizes.b_events], lag=True))
    return {"lb": p99}


def sample_c(cls: type[Adapter], sizes: Sizes, fresh: Fresh) -> Sample:
    path = fresh.path()
    keys = [f"p{i}" for i in range(sizes.c_procs)]
    run(prepare(cls, path, keys, []))
    procs = [
        subprocess.Popen(
            [sys.executable, str(RUN), "--worker-append", cls.key, str(path), key, str(sizes.c_events)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for key in keys
    ]
    for proc in procs:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"worker for {cls.key} failed to start (exit {proc.wait()})")
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    spans = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"worker for {cls.key} exited {proc.returncode}")
        spans.append(json.loads(out.strip().splitlines()[-1]))
    elapsed = max(s["end"] for s in spans) - min(s["start"] for s in spans)
    return {"c": sizes.c_procs * sizes.c_events / elapsed}


def prepare_d(cls: type[Adapter], sizes: Sizes, fresh: Fresh, events: list[Any]) -> tuple[Path, float | None]:
    """The 10,000-event file (d) reads, written once per store; and its size over the raw JSON's."""
    path = fresh.path()
    if not cls.persistent:
        return path, None
    run(prepare(cls, path, ["s0"], events[: sizes.d]))
    return path, file_bytes(path) / json_bytes(events[: sizes.d])


def sample_d(cls: type[Adapter], sizes: Sizes, path: Path, events: list[Any]) -> Sample:
    if not cls.persistent:  # the same object keeps the history: read it back in the same process
        store = cls()

        async def mem() -> float:
            await store.open(path)
            await store.load("s0", store.convert(events[: sizes.d]))
            start = time.perf_counter()
            await store.read("s0")
            return time.perf_counter() - start

        return {"d": run(mem()) * 1000}
    return {"d": run(read(cls, path, sizes.d)) * 1000}


def sample_e(cls: type[Adapter], sizes: Sizes, fresh: Fresh, events: list[Any]) -> Sample:
    out: Sample = {}
    for i, n in enumerate(sizes.e):
        times = run(replace(cls, fresh.path(), events[:n], events[n : n + sizes.e_calls]))
        out[f"e{i}"] = [t * 1000 for t in times]
    return out


def process_ms(code: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"cold start failed: {done.stderr.strip().splitlines()[-1:]}")
    return elapsed * 1000


def prepare_g(cls: type[Adapter], sizes: Sizes, fresh: Fresh, events: list[Any]) -> str:
    path = fresh.path()
    run(prepare(cls, path, ["s0"], events[: sizes.g_events]))
    return cls().cold_start_code(path, "s0")


BASELINES = {
    "python -c pass": "pass",
    "import sqlalchemy.ext.asyncio, aiosqlite": "import sqlalchemy.ext.asyncio, aiosqlite",
    "import sessionstore": "import sessionstore",
}


def prepare_h(cls: type[Adapter], sizes: Sizes, fresh: Fresh) -> Path:
    """The long-lived file: ``h_base`` events in sessions of ``h_history``, written before the rounds."""
    path = fresh.path()
    history = make_events(sizes.h_history, seed=11)
    sessions = max(1, sizes.h_base // sizes.h_history)
    run(prepare(cls, path, [f"old{i}" for i in range(sessions)], history))
    return path


def sample_h(cls: type[Adapter], sizes: Sizes, path: Path, events: list[Any], number: int) -> Sample:
    """Append to the long-lived file (a new session each round, so every store writes the same rows);
    the WAL's size after the appends, before the store closes it: reused in place, or grown."""

    async def go() -> tuple[float, int]:
        store = cls()
        native = store.convert(events[: sizes.h_events])
        await store.open(path)
        key = f"h{number}"
        await store.create(key)
        start = time.perf_counter()
        for event in native:
            await store.append(key, event)
        elapsed = time.perf_counter() - start
        wal = wal_bytes(path)
        await store.close()
        return elapsed, wal

    elapsed, wal = run(go())
    return {"h": sizes.h_events / elapsed, "hw": wal / 1024 / 1024}


async def store_pragmas(cls: type[Adapter], path: Path) -> dict[str, str]:
    """The store's settings as its own connection reports them, after it wrote one event."""
    store = cls()
    native = store.convert(make_events(1))
    await store.open(path)
    await store.create("p")
    await store.append("p", native[0])
    try:
        return await store.pragmas("p")
    finally:
        await store.close()


def pragmas_of(cls: type[Adapter], fresh: Fresh) -> tuple[dict[str, str] | str, str | None]:
    """``(pragmas or why not, journal_mode on its own)``: the second is read when the bench sets WAL for it."""
    try:
        found: dict[str, str] | str = run(store_pragmas(cls, fresh.path()))
    except Exception as exc:
        found = f"cannot be read: {type(exc).__name__}: {exc}"[:160]
    own = None
    if cls.bench_wal:

        class Untouched(cls):  # type: ignore[valid-type,misc]
            bench_wal = False

        try:
            own = run(store_pragmas(Untouched, fresh.path()))["journal_mode"]
        except Exception as exc:
            own = f"cannot be read: {type(exc).__name__}"
    return found, own


# -- worker processes ---------------------------------------------------------------------------------


def worker_append(key: str, path: str, session: str, count: int) -> None:
    """One process of workload (c): open, report ready, wait for go, append, report the span."""
    cls = next(item.adapter for item in load({key}, [*STORES, *PG_STORES]) if item.adapter is not None)
    events = make_events(count, seed=sum(map(ord, session)))

    async def main() -> None:
        store = cls()
        native = store.convert(events)
        await store.open(path if "://" in path else Path(path))  # a PostgreSQL database's URL, or a file
        await store.create(session)
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        start = time.perf_counter()
        for event in native:
            await store.append(session, event)
        end = time.perf_counter()
        await store.close()
        print(json.dumps({"start": start, "end": end}), flush=True)

    asyncio.run(main())
