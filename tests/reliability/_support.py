"""Helpers shared by the reliability suite: child processes, the sqlite3 shell, file fingerprints."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Generous bounds: they only stop a hung child from hanging CI; no test measures time.
CHILD_TIMEOUT = 60.0


def child(script: str, *args: object) -> list[str]:
    """The argv running one of this folder's child scripts with this interpreter."""
    return [sys.executable, str(HERE / script), *map(str, args)]


def sqlite3_shell(db: Path, sql: str) -> str:
    """Run ``sql`` in the real ``sqlite3`` command-line shell, as a person editing the file would."""
    shell = shutil.which("sqlite3")
    assert shell is not None, "the sqlite3 command-line shell is needed (apt-get install sqlite3)"
    done = subprocess.run(
        [shell, "-batch", "-bail", str(db)], input=sql, capture_output=True, text=True, timeout=CHILD_TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def fingerprint(db: Path) -> dict[str, str | None]:
    """The bytes of a database file and of each of its companion files (None where absent)."""
    out: dict[str, str | None] = {}
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = Path(f"{db}{suffix}")
        out[suffix or "db"] = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None
    return out


def namespace_argv(setup: str, *argv: str, after: str = ":") -> list[str]:
    """Run ``argv`` between the shell commands ``setup`` and ``after``, in a new user and mount namespace.

    That makes this process root of its own mount table (also when it is not
    root on the host): it can mount a tiny tmpfs (a real full disk) or bind a
    folder read-only (a real read-only location, which even root cannot write),
    and both vanish with the namespace.
    """
    unshare = shutil.which("unshare")
    assert unshare is not None, "util-linux's unshare is needed for the read-only and full-disk tests"
    script = f'set -e; {setup}; set +e; "$@"; status=$?; {after}; exit $status'
    return [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", *argv]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env
