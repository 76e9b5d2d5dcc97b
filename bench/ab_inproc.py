"""Sequential appends of this checkout against git revision REV and the floor, in turns in one process.

    python3 bench/ab_inproc.py --against REV [--rounds 10] [--block 50] [--dir DIR]

Why: two versions timed a second apart (``append_profile.py``, one process each) differ by +-30% round to round on
this machine's drifting disk, more than a change worth making. Here the floor, REV and this checkout take turns
every ``--block`` appends (``bench/turns.py``, which the published run uses against the floor): the paired ratio of
a whole round moves by +-3-5%. REV's ``sessionstore`` is imported as ``sessionstore_against``, so both versions
live in this process; REV must have this checkout's schema revision.
"""

from __future__ import annotations

import argparse
import importlib
import io
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import turns  # noqa: E402
from payloads import make_events  # noqa: E402
from peers import raw, sessionstore_sqlite  # noqa: E402

import sessionstore  # noqa: E402

COUNT = 1000
AGAINST = "sessionstore_against"


def import_revision(revision: str, folder: Path) -> ModuleType:
    """REV's package as :data:`AGAINST`, its migration scripts inside it (where it looks for them, to know its head
    revision: the files are made at head by this checkout, as Alembic's operations are registered process-wide)."""
    archive = subprocess.run(
        ["git", "archive", revision, "sessionstore", "migrations"], cwd=HERE.parent, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    package = folder / AGAINST
    (folder / "sessionstore").rename(package)
    (folder / "migrations").rename(package / "migrations")
    sys.path.insert(0, str(folder))
    return importlib.import_module(AGAINST)


def against(package: ModuleType) -> type[sessionstore_sqlite.Store]:
    """The adapter, on REV's package; its file's schema made first by this checkout (see :func:`import_revision`)."""

    class Against(sessionstore_sqlite.Store):
        async def open(self, path: Path) -> None:
            async with sessionstore.SQLiteStorage(path):
                pass
            await super().open(path)

    Against.package = package
    return Against


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="a git revision to compare with")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--block", type=int, default=50, help="appends per turn (default: 50)")
    parser.add_argument("--dir", help="where the files go (default: the system's temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as code:
        stores = {
            "floor": raw.Store,
            "against": against(import_revision(args.against, Path(code))),
            "this": sessionstore_sqlite.Store,
        }
        section = turns.measure(
            stores, make_events(COUNT), args.rounds, args.block, Path(args.dir) if args.dir else None
        )
    print(f"{COUNT} sequential appends in turns of {args.block}, {args.rounds} rounds, sqlite {sqlite3.sqlite_version}")
    for name in ("against", "this"):
        ratios = turns.ratios(section, name, "floor")
        label = args.against if name == "against" else "this checkout"
        print(
            f"{label}: {statistics.median(r[name] for r in section.rounds) / COUNT * 1e6:.0f} us per append,"
            f" {statistics.median(ratios):.3f}x the floor's rate ({min(ratios):.2f}-{max(ratios):.2f},"
            f" at or above 0.8x in {sum(x >= 0.8 for x in ratios)} of {len(ratios)})"
        )
    paired = turns.ratios(section, "this", "against")
    print(
        f"paired: this checkout appends {statistics.median(paired):.3f}x as fast as {args.against}"
        f" ({min(paired):.2f}-{max(paired):.2f}), faster in {sum(x > 1 for x in paired)} of {len(paired)} rounds"
    )


if __name__ == "__main__":
    main()
