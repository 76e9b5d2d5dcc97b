"""The event loop's lag on a disk whose fsync takes what we say, for this checkout and another git revision.

    python3 bench/slow_disk.py                            # this checkout, 3 rounds
    python3 bench/slow_disk.py --against REV --rounds 3   # and REV, in alternating rounds

Runs ``tests/reliability/_slow_disk.py`` (the test's own child: a 1 ms ticker on the event loop while the storage
works) under ``tests/reliability/_slow_fsync.c``, built by ``shim.py`` and preloaded, for each scenario:
``slow`` (800 ms per fsync from the start: appends, several tasks writing at once, session records, opening and
closing), ``turns`` (quick, 800 ms for 4 s, quick again) and ``large`` (one ``set_history`` of 10,000 events,
4.6 MB, into an idle lane, fsync instant). Prints, per scenario and version, the worst lag, the p99 lag and the
stalls over 50 ms (medians over the rounds, and their range).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import shim

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests" / "reliability"
SCENARIOS = {"slow": 800, "turns": 0, "large": 0}
STALL = 0.050


def sample(root: Path, built: Path, folder: Path, scenario: str) -> dict[str, float]:
    """One run of the child with ``root``'s sessionstore: worst lag, p99 lag (ms) and stalls over 50 ms."""
    run = Path(tempfile.mkdtemp(dir=folder))
    db = run / "agent.db"
    own = {"PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    env = os.environ | own
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sessionstore.sqlite.migrate as d, pathlib; d.prepare(pathlib.Path({str(db)!r}))",
        ],
        env=env,
        check=True,
    )
    speed = run / "fsync-ms"
    speed.write_text(str(SCENARIOS[scenario]))
    env = shim.environ(built, speed) | own
    done = subprocess.run(
        [sys.executable, TESTS / "_slow_disk.py", db, scenario], env=env, capture_output=True, text=True, check=True
    )
    lags = sorted(lag for _, lag in json.loads(done.stdout)["lags"])
    shutil.rmtree(run)
    return {
        "max": lags[-1] * 1000,
        "p99": lags[max(0, math.ceil(0.99 * len(lags)) - 1)] * 1000,
        "stalls": sum(lag > STALL for lag in lags),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="a git revision to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    versions = {"this checkout": HERE.parent}
    worktree = None
    if args.against:
        worktree = folder / "against"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(worktree), args.against], check=True)
        versions = {args.against: worktree, **versions}
    try:
        built = shim.build(folder)
        for scenario in args.scenarios.split(","):
            results: dict[str, list[dict[str, float]]] = {name: [] for name in versions}
            for number in range(args.rounds):
                order = list(versions.items())
                for name, root in order if number % 2 == 0 else reversed(order):
                    results[name].append(sample(root, built, folder, scenario))
            for name, samples in results.items():
                shown = []
                for key, unit in (("max", " ms"), ("p99", " ms"), ("stalls", "")):
                    values = [s[key] for s in samples]
                    shown.append(f"{key} {statistics.median(values):.1f}{unit} ({min(values):.1f}-{max(values):.1f})")
                print(f"{scenario:<6} {name:<14} " + ", ".join(shown) + f"  [{len(samples)} rounds]")
    finally:
        if worktree is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
