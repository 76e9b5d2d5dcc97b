"""The tests' slow-fsync shim (``tests/reliability/_slow_fsync.c``), built and used by the bench.

One C file serves both: the tests preload it to make a disk slow on purpose, the bench to give every store the
fsync latency of a laptop's disk. Preloaded (``LD_PRELOAD``), its fsync and fdatasync sleep for the milliseconds
a file names and never reach the real disk, so a figure taken under it depends on that number and not on the
machine's disk of the moment; and it counts its calls, which is how the bench checks that each store's commits
went through it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent / "tests" / "reliability" / "_slow_fsync.c"


def build(folder: Path) -> Path:
    """The shared library, compiled into ``folder`` with ``cc``."""
    cc = shutil.which("cc")
    if cc is None:
        raise RuntimeError("a C compiler (cc) is needed to build the slow-fsync shim (apt-get install gcc)")
    built = folder / "slow_fsync.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(built), str(SOURCE)], check=True)
    return built


def environ(shim: Path, speed: Path) -> dict[str, str]:
    """The environment of a process whose fsync takes the milliseconds written in ``speed``."""
    preload = " ".join(filter(None, [str(shim), os.environ.get("LD_PRELOAD")]))
    return os.environ | {"LD_PRELOAD": preload, "SLOW_FSYNC_FILE": str(speed)}


def calls() -> int | None:
    """How many fsync/fdatasync calls went through the shim in this process so far; None when it is not
    preloaded here."""
    try:
        counter = ctypes.CDLL(None).slow_fsync_calls
    except AttributeError:
        return None
    counter.restype = ctypes.c_ulong
    return int(counter())
