"""Reading a 10,000-event history (the bench's (d)): this checkout against another revision, OpenAI's
``SQLiteSession`` and the raw floor, in alternating rounds.

    python3 bench/run.py --quick --sections d          # once: makes bench/.venv with the peers
    python3 bench/read_versions.py --against main --rounds 21
    python3 bench/read_versions.py --smoke             # tiny sizes, a few seconds

Each store runs in a process of its own, all on bench/.venv's interpreter: ``this`` (this checkout's
sessionstore), ``REV`` (the revision given by ``--against``, checked out into a temporary worktree and put first
on that process's ``sys.path``; the process checks that it imported that copy; its migrations are this
checkout's, so REV must have the same ones), ``openai_sqlite`` and ``raw``.
Each writes its own file once with its own bulk write (``workloads.prepare_d``) and reads it once unmeasured;
then in every round each takes one sample of ``workloads.sample_d``, the bench's (d) itself (a fresh store
object on the file, the read timed from the call to the returned list), after ``gc.collect()``, in the
stores' order in even rounds and the reverse in odd ones. Ratios are paired: one store's sample over another's
from the same round, median (min-max), and the rounds the first was faster in.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV_PYTHON = HERE / ".venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")

# key -> the bench's adapter module.
ADAPTERS = {"sessionstore": "peers.sessionstore_sqlite", "openai_sqlite": "peers.openai_sqlite", "raw": "peers.raw"}


def worker(adapter: str, folder: Path, count: int, expect_root: str) -> None:
    """One store's process: prepare its file, then one (d) sample per ``sample`` line on stdin."""
    sys.path.insert(0, str(HERE))
    import importlib

    import workloads as w
    from payloads import make_events

    cls = importlib.import_module(ADAPTERS[adapter]).Store
    where = ""
    if adapter == "sessionstore":
        import sessionstore

        where = str(Path(sessionstore.__file__).resolve().parent.parent)
        if where != expect_root:
            raise SystemExit(f"imported sessionstore from {where}, not {expect_root}")
    sizes = w.Sizes(d=count)
    events = make_events(count)
    path = folder / "bench.db"
    w.run(w.prepare(cls, path, ["s0"], events))  # what prepare_d does, in the folder given
    w.sample_d(cls, sizes, path, events)  # unmeasured: lazy imports, first-use caches
    print(json.dumps({"ready": where}), flush=True)
    for line in sys.stdin:
        if line.strip() != "sample":
            break
        gc.collect()  # as rounds.interleave does before every sample
        print(json.dumps(w.sample_d(cls, sizes, path, events)), flush=True)


class Store:
    def __init__(self, name: str, adapter: str, root: Path, folder: Path, count: int) -> None:
        self.name = name
        env = os.environ | {"PYTHONPATH": os.pathsep.join([str(root), str(HERE)])}
        command = [sys.executable, __file__, "--worker", adapter, "--folder", str(folder), "--events", str(count)]
        command += ["--root", str(root.resolve())]
        self.process = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ms: list[float] = []

    def ready(self) -> None:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name}: the worker failed to start")
        json.loads(line)

    def sample(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("sample\n")
        self.process.stdin.flush()
        self.ms.append(float(json.loads(self.process.stdout.readline())["d"]))

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def ratio(ours: list[float], theirs: list[float]) -> str:
    pairs = list(zip(ours, theirs, strict=True))
    ratios = [a / b for a, b in pairs]
    won = sum(1 for a, b in pairs if a < b)
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) faster in {won}/{len(pairs)}"


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="a git revision to compare with (default: none)")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--smoke", action="store_true", help="50 events, 2 rounds")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, Path(args.folder), args.events, args.root)
        return
    if args.smoke:
        args.events, args.rounds = 50, 2
    if VENV_PYTHON.exists() and Path(sys.executable).resolve() != VENV_PYTHON.resolve() and not args.smoke:
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), __file__, *sys.argv[1:]])
    temp = Path(tempfile.mkdtemp(prefix="read-versions-"))
    roots = {"this": ROOT}
    worktree = None
    if args.against:
        worktree = temp / "against"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(worktree), args.against])
        roots = {args.against: worktree, **roots}
    entrants = [(name, "sessionstore", root) for name, root in roots.items()]
    try:
        import agents  # noqa: F401

        entrants.append(("openai_sqlite", "openai_sqlite", ROOT))
    except ImportError:
        print("OpenAI Agents is not installed here: `python3 bench/run.py --quick --sections d` makes bench/.venv")
    entrants.append(("raw", "raw", ROOT))
    print(f"load before: {load()}; {args.events:,} events, {args.rounds} rounds", flush=True)
    stores: list[Store] = []
    try:
        for i, (name, adapter, root) in enumerate(entrants):
            folder = temp / f"store{i}"
            folder.mkdir()
            stores.append(Store(name, adapter, root, folder, args.events))
        for store in stores:
            store.ready()
        for number in range(args.rounds):
            for store in stores if number % 2 == 0 else stores[::-1]:
                store.sample()
            print(f"round {number + 1}: " + ", ".join(f"{s.name} {s.ms[-1]:.1f}" for s in stores), flush=True)
    finally:
        for store in stores:
            store.stop()
        if worktree is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], check=False)
        shutil.rmtree(temp, ignore_errors=True)
    print(f"load after: {load()}")
    for store in stores:
        print(f"{store.name}: median {statistics.median(store.ms):.2f} ms (min {min(store.ms):.2f})")
    print("paired, time over time (below 1x the first is faster):")
    for i, ours in enumerate(stores):
        for theirs in stores[i + 1 :]:
            if ours.name == "raw":
                continue
            print(f"{ours.name} / {theirs.name}: {ratio(ours.ms, theirs.ms)}")


if __name__ == "__main__":
    main()
