"""Memory: what a process holds after reading long histories, and what it keeps after letting them go.

An agent server reads a conversation's whole history when it resumes it. Here
a fresh process per store opens a file of ``mem_sessions`` sessions of
``mem_events`` ~1 KiB events, reads every session once (holding them all, as a
server with that many live conversations does), then drops them and collects
garbage: resident memory (RSS) before, after the reads and after the drop.
What stays after the drop is what the store keeps, plus what the allocator
has not handed back to the system: so the RSS is read once more after asking
glibc to return its free memory (``malloc_trim``, where there is one), which
leaves mostly what is still referenced, and once more after closing the store
(a cache it keeps while open goes then).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from payloads import make_events
from peers import Adapter, load
from rounds import Sample
from workloads import RUN, Fresh, Sizes, file_bytes, prepare, run

MIB = 1024 * 1024


def rss_mib() -> float:
    """Resident memory now (Linux: /proc/self/statm); the peak so far where that is missing."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / MIB
    except (OSError, ValueError, IndexError):
        return peak_mib()


def peak_mib() -> float:
    """This process's peak RSS. On Linux VmHWM: ``ru_maxrss`` of a process started by a large one counts the
    parent's memory at the fork (the mm the child ran in until exec), so it would report the bench, not the store."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / MIB if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


def trim() -> bool:
    """Hand the C heap's free memory back to the system (glibc); False where there is no malloc_trim."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.malloc_trim(0)
    except (OSError, AttributeError, TypeError):
        return False
    return True


def keys(sizes: Sizes) -> list[str]:
    return [f"m{i}" for i in range(sizes.mem_sessions)]


def prepare_memory(cls: type[Adapter], sizes: Sizes, fresh: Fresh) -> tuple[Path, int]:
    """The file, written once per store with its bulk write; and its size in bytes."""
    path = fresh.path()
    events = make_events(sizes.mem_events, seed=5, scale=sizes.mem_scale)
    run(prepare(cls, path, keys(sizes), events))
    return path, file_bytes(path)


def sample_memory(cls: type[Adapter], sizes: Sizes, path: Path) -> Sample:
    done = subprocess.run(
        [sys.executable, str(RUN), "--worker-memory", cls.key, str(path), str(sizes.mem_sessions)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"memory worker failed: {done.stderr.strip().splitlines()[-1:]}")
    got: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    expected = sizes.mem_sessions * sizes.mem_events
    if got.pop("events") != expected:
        raise AssertionError(f"the memory worker read {got} events, not {expected}")
    return dict(got)


def worker_memory(key: str, path: str, sessions: int) -> None:
    """In a fresh process: open the store, read every session (held), drop them, report RSS at each step."""
    cls = next(item.adapter for item in load({key}) if item.adapter is not None)
    names = [f"m{i}" for i in range(sessions)]

    async def main() -> dict[str, float]:
        store = cls()
        await store.open(Path(path))
        for name in names:
            await store.create(name)
        gc.collect()
        before = rss_mib()
        held = [await store.read(name) for name in names]
        count = sum(len(h) for h in held)
        gc.collect()
        after_reads = rss_mib()
        del held
        gc.collect()
        dropped = rss_mib()
        trimmed = rss_mib() if trim() else dropped
        await store.close()  # what a store keeps while open (a cache) goes now; what is left is the allocator's
        gc.collect()
        trim()
        closed = rss_mib()
        return {
            "m0": before,
            "m1": after_reads,
            "m2": dropped,
            "m3": trimmed,
            "m4": closed,
            "mp": peak_mib(),
            "events": count,
        }

    print(json.dumps(asyncio.run(main())), flush=True)
