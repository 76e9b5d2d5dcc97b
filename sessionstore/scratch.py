"""Scratch files: what a command writes beside its target before the target is whole.

An import's new database (and its ``-wal``/``-shm``), an import's copy of an
input it can read only once, an export's next file, a backup being taken: each
holds conversation text, is private (0600), and is named
``.<target's name>.<kind>-<pid>-<random>`` (a backup's has no random part:
``sqlite/migrate.py`` takes one at a time), hidden beside the target. A command
that ends by an exception removes its own (Ctrl-C, and SIGTERM and SIGHUP,
which the command line turns into Ctrl-C). One killed outright (SIGKILL, a
power cut) cannot: the next command that makes scratch files for the same
target removes those whose process is gone (:func:`sweep`), and ``sessionstore
check`` lists them (:func:`leftovers`).

Whether a process is gone is judged by its id on this machine: a live one's
files are never touched, and a pid reused since only keeps a leftover longer.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .sqlite.connect import create_file

__all__ = ["Leftover", "leftovers", "new", "open_new", "sweep"]

_KINDS = {
    "import": "an import's new database",
    "import.jsonl": "an import's copy of its input",
    "export.tmp": "an export's unfinished file",
    "backing-up": "an unfinished backup",
}
_COMPANIONS = ("-wal", "-shm", "-journal")


def new(target: Path, kind: str, suffix: str = "") -> Path:
    """A fresh scratch name for ``target`` (its file not made yet)."""
    return target.with_name(f".{target.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}{suffix}")


def open_new(path: Path) -> IO[str]:
    """Make the scratch file ``path`` (private; missing folders too, at 0700) and open it to write text.

    Called inside the ``try`` whose cleanup removes ``path``: an interruption
    between making the file and holding it open then leaves nothing either.
    """
    create_file(path)
    return open(path, "w", encoding="utf-8", newline="")


@dataclass(frozen=True, slots=True)
class Leftover:
    """A scratch file whose process is gone, with the SQLite companions it left."""

    path: Path
    pid: int
    what: str
    companions: tuple[Path, ...] = ()

    @property
    def size(self) -> int:
        return sum(p.stat().st_size for p in (self.path, *self.companions) if p.exists())

    def describe(self) -> str:
        extra = f" (and its {', '.join(p.name.removeprefix(self.path.name) for p in self.companions)})"
        return (
            f"{self.path}{extra if self.companions else ''}: {self.what}, {self.size:,} bytes,"
            f" left by process {self.pid}, which is gone"
        )

    def remove(self) -> None:
        for path in (*self.companions, self.path):
            path.unlink(missing_ok=True)


def leftovers(target: Path) -> list[Leftover]:
    """The scratch files beside ``target`` whose process is gone (this user's own only), oldest name first."""
    folder = target.parent
    pattern = re.compile(
        re.escape(f".{target.name}.") + r"(?P<kind>import|export|backing-up)-(?P<pid>[0-9]+)(?:-[0-9a-f]+)?"
        r"(?P<suffix>\.jsonl|\.tmp)?"
    )
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.name.startswith(f".{target.name}."))
    except OSError:  # a folder that is missing or cannot be listed holds nothing of ours to remove
        return []
    present = set(names)
    found: list[Leftover] = []
    for name in names:
        base = next((name.removesuffix(c) for c in _COMPANIONS if name.endswith(c)), name)
        match = pattern.fullmatch(base)
        if match is None or (base != name and base in present):  # a companion goes with its file
            continue
        what = _KINDS.get(match["kind"] + (match["suffix"] or ""))
        pid = int(match["pid"])
        path = folder / name
        if what is None or _running(pid) or not _own(path):
            continue
        companions = tuple(folder / f"{name}{c}" for c in _COMPANIONS if f"{name}{c}" in present)
        found.append(Leftover(path, pid, what, companions))
    return found


def sweep(target: Path) -> list[Leftover]:
    """Remove what :func:`leftovers` finds beside ``target``; what was removed."""
    gone = leftovers(target)
    for leftover in gone:
        try:
            leftover.remove()
        except OSError:  # removed meanwhile, or not ours to remove (a shared temporary folder): left as it is
            pass
    return gone


def _own(path: Path) -> bool:
    try:
        return not hasattr(os, "getuid") or path.lstat().st_uid == os.getuid()
    except OSError:
        return False


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if os.name == "nt":
        # No signal 0 there (os.kill would end the process); a file a running process holds open cannot be
        # removed there either, so trying is safe.
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
