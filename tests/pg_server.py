"""A throwaway PostgreSQL server for the tests: initdb in a temporary folder, started with pg_ctl, stopped and
removed at the end whatever happens.

The tests start it themselves (a session-scoped fixture in ``tests/conftest.py``), so the one command that runs
the suite, on a developer's machine and in CI alike, is ``pytest``; nothing has to be running beforehand.

* Binaries: ``$SESSIONSTORE_PG_BINDIR``, else the folder of ``initdb`` on the ``PATH``, else the newest
  ``/usr/lib/postgresql/*/bin`` (Debian's layout).
* PostgreSQL refuses to run as root: run as root (CI is), the server runs as the ``postgres`` user, which owns
  its folder. Run as anyone else, it runs as that user.
* It listens on a Unix socket in its folder (local connections are trusted: the fixtures' own administration)
  and on 127.0.0.1 at a free port, where a password is asked (scram-sha-256): the tests connect with a URL that
  holds one, as an application would.
* ``fsync=off``: the tests kill clients and restart the server, never the machine; what a server crash keeps
  does not depend on fsync (the OS has the pages). ``PostgresServer(durable=True)`` keeps PostgreSQL's defaults
  instead (fsync, full_page_writes, synchronous_commit on): what the benchmark measures, where a commit's
  flush to disk is most of what an append costs.

Run as a script, it starts a server, prints its URL and waits until Ctrl-C (for poking at it with psql).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import itertools
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["PostgresServer", "ServerUnavailable", "bindir"]

USER = "postgres"
"""The database superuser the tests connect as (and, run as root, the OS user the server runs as)."""


class ServerUnavailable(RuntimeError):
    """No PostgreSQL server could be started here; the message says why and what to do."""


def bindir() -> Path:
    """The folder holding initdb, pg_ctl, postgres and psql."""
    given = os.environ.get("SESSIONSTORE_PG_BINDIR")
    if given:
        return Path(given)
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if debian:
        return Path(debian[-1]).parent
    raise ServerUnavailable(
        "the PostgreSQL tests need PostgreSQL's server binaries (initdb, pg_ctl, postgres): install them"
        " (Debian: apt-get install postgresql) or set SESSIONSTORE_PG_BINDIR to their folder"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """One server in its own temporary folder; :meth:`start`, :meth:`stop`, :meth:`restart`."""

    def __init__(self, *, durable: bool = False) -> None:
        self.bin = bindir()
        self.durable = durable
        self.password = secrets.token_hex(12)
        self.port = 0
        self.root = Path(tempfile.mkdtemp(prefix="sessionstore-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._names = itertools.count()
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam(USER)
            except KeyError:
                raise ServerUnavailable(
                    "PostgreSQL refuses to run as root, and there is no 'postgres' user to run it as: run the tests"
                    " as a normal user, or create one (Debian's postgresql package does: apt-get install postgresql)"
                ) from None
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._as = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
        self.socket_dir = self.root

    # -- running the server's programs ------------------------------------------------------------

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            env={**os.environ, "LC_ALL": "C"},
            **self._as,
        )
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise ServerUnavailable(f"{' '.join(args[:2])} failed ({done.returncode}): {done.stderr.strip()}\n{log}")
        return done

    def start(self) -> PostgresServer:
        """initdb (the first time), then start it and wait until it accepts connections."""
        if not self.data.exists():
            pwfile = self.root / "pwfile"
            pwfile.write_text(self.password + "\n")
            if self._as:
                os.chown(pwfile, self._as["user"], self._as["group"])
            self._run(
                "initdb",
                "-D",
                str(self.data),
                "-U",
                USER,
                "--pwfile",
                str(pwfile),
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            )
            pwfile.unlink()
        for attempt in range(5):
            self.port = self.port or _free_port()
            options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.socket_dir}"
            if not self.durable:
                options += " -c fsync=off -c full_page_writes=off"
            options += " -c max_connections=300 -c shared_buffers=32MB"
            try:
                self._run("pg_ctl", "start", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options)
                return self
            except ServerUnavailable:
                if attempt == 4 or "could not bind" not in self.log.read_text(errors="replace"):
                    raise
                self.port = 0  # taken meanwhile by someone else: another port
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: clients are disconnected; ``immediate``: as if it crashed)."""
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", mode, "-w", "-t", "60")

    def restart(self, mode: str = "immediate") -> None:
        """Stop (by default as a crash would) and start again on the same port."""
        self.stop(mode)
        self.start()

    def remove(self) -> None:
        """Stop it if it runs and delete its folder."""
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- administration over the trusted socket -------------------------------------------------------

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run ``sql`` as the superuser; its output, unaligned and without headers."""
        where = ["-h", str(self.socket_dir), "-p", str(self.port), "-U", USER, "-d", database]
        done = subprocess.run(
            [str(self.bin / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", *where, "-c", sql],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {done.stderr.strip()} ({sql})")
        return done.stdout

    def schema(self, database: str) -> str:
        """``pg_dump --schema-only`` of a database: every object's definition, in a fixed order."""
        where = ["-h", str(self.socket_dir), "-p", str(self.port), "-U", USER, "-d", database]
        done = subprocess.run(
            [str(self.bin / "pg_dump"), "--schema-only", "--no-owner", *where],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_dump failed: {done.stderr.strip()}")
        # Less the random key of each dump's \restrict guard (pg_dump 15.14 and later).
        return "".join(
            line for line in done.stdout.splitlines(True) if not line.startswith(("\\restrict", "\\unrestrict"))
        )

    def create_database(self, template: str = "template0") -> str:
        """A new, empty database (or a copy of ``template``); its name."""
        name = f"t{os.getpid()}_{next(self._names)}"
        self.psql(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return name

    def drop_database(self, name: str) -> None:
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    # -- how clients reach it ---------------------------------------------------------------------------

    def url(self, database: str, *, driver: str = "postgresql+asyncpg") -> str:
        """The URL an application would use: TCP on loopback, with the password in it."""
        return f"{driver}://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"


@contextlib.contextmanager
def running(*, durable: bool = False) -> Iterator[PostgresServer]:
    """A started server, stopped and removed on leaving, also at interpreter exit if the block never ends."""
    server = PostgresServer(durable=durable)
    atexit.register(server.remove)
    try:
        yield server.start()
    finally:
        server.remove()
        atexit.unregister(server.remove)


if __name__ == "__main__":
    with running() as server:
        print(server.url("postgres"), flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
