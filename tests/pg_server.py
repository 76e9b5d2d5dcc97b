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

* Replication (the high-availability tests alone, through :func:`replicated`): :meth:`PostgresServer.standby` is a
  hot standby made with ``pg_basebackup -R`` from a started server, streaming from it over its socket;
  :meth:`PostgresServer.synchronous` makes the primary wait for it at every commit (``synchronous_standby_names``,
  ``synchronous_commit=on``); :meth:`PostgresServer.kill` ends every process of a server with SIGKILL, as the
  loss of its machine would, and :meth:`PostgresServer.promote` makes a standby the primary.

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
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["PostgresServer", "ServerUnavailable", "bindir", "multi_host_url", "replicated"]

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

    def __init__(self, *, durable: bool = False, settings: Mapping[str, str] | None = None) -> None:
        self.bin = bindir()
        self.durable = durable
        self.settings = dict(settings or {})  # more -c options at every start (a standby's cluster_name)
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
            options += "".join(f" -c {name}={value}" for name, value in self.settings.items())
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
        if self.postmaster() is not None:
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", mode, "-w", "-t", "60")

    def postmaster(self) -> int | None:
        """The pid of the server's postmaster while it runs (None once stopped or killed)."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if _alive(pid) else None

    def kill(self) -> None:
        """SIGKILL every process of the server at once (postmaster, backends, WAL sender), as the loss of its
        machine ends them: nothing is flushed or said to a client or a standby on the way out. Its folder (and the
        stale postmaster.pid) stays, as after a crash."""
        postmaster = self.postmaster()
        if postmaster is None:
            return
        children = _children(postmaster)
        if os.getpgid(postmaster) == postmaster:  # pg_ctl starts it in a process group of its own: one kill
            os.killpg(postmaster, signal.SIGKILL)
        for pid in [postmaster, *children]:  # and any child outside that group
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in [postmaster, *children]):
            if time.monotonic() > deadline:
                raise ServerUnavailable(f"the server's processes outlived SIGKILL: {children}")
            time.sleep(0.005)

    def promote(self) -> None:
        """Make this standby the primary (``pg_ctl promote``); returns once it accepts writes."""
        self._run("pg_ctl", "promote", "-D", str(self.data), "-w", "-t", "60")

    def standby(self, name: str = "standby") -> PostgresServer:
        """A hot standby of this started server, not started yet: ``pg_basebackup -R`` (its data and the
        ``primary_conninfo`` that streams from this server's socket), named ``name`` (its ``cluster_name``, the
        application name its WAL receiver gives, which the primary's ``synchronous_standby_names`` refers to)."""
        replica = PostgresServer(durable=self.durable, settings={**self.settings, "cluster_name": name})
        replica.password = self.password  # the same cluster: the same roles
        where = ["-h", str(self.socket_dir), "-p", str(self.port), "-U", USER]
        self._run("pg_basebackup", "-D", str(replica.data), "-R", "-X", "stream", "-c", "fast", *where)
        return replica

    def synchronous(self, name: str, *, timeout: float = 60) -> None:
        """Make every commit here wait for standby ``name`` (``synchronous_standby_names``; ``synchronous_commit``
        is on, its default: until the standby has the commit on its disk), once it streams in sync.

        Set after the standby's base backup was taken, so the standby does not inherit it: promoted, it commits
        alone (else it would wait for a standby of its own)."""
        self.psql(f"ALTER SYSTEM SET synchronous_standby_names = '{name}'")
        self.psql("SELECT pg_reload_conf()")
        deadline = time.monotonic() + timeout
        query = f"SELECT sync_state FROM pg_stat_replication WHERE application_name = '{name}'"
        while self.psql(query).strip() != "sync":
            if time.monotonic() > deadline:
                raise ServerUnavailable(f"standby {name} never became synchronous: {self.psql(query)!r}")
            time.sleep(0.05)

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


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped by its parent, does not; without /proc, as
    on macOS, a zombie counts as running)."""
    if not Path("/proc/self").exists():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        return _stat(Path(f"/proc/{pid}"))[0] != "Z"
    except (OSError, IndexError):
        return False


def _stat(proc: Path) -> list[str]:
    """The fields of /proc/PID/stat after the command's name (which is in parentheses and may hold anything)."""
    return (proc / "stat").read_text().rpartition(")")[2].split()


def _children(parent: int) -> list[int]:
    """The pids whose parent is ``parent`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int(_stat(entry)[1]) == parent:
                    found.append(int(entry.name))
    return found


def multi_host_url(servers: list[PostgresServer], database: str, *, attrs: str = "read-write") -> str:
    """One URL naming every server (``postgresql://user:password@h1:p1,h2:p2/db?target_session_attrs=...``): a
    client connects to the first that answers as ``attrs`` asks (``read-write``: the primary, whichever it is)."""
    first = servers[0]
    hosts = ",".join(f"127.0.0.1:{server.port}" for server in servers)
    return f"postgresql://{USER}:{first.password}@{hosts}/{database}?target_session_attrs={attrs}"


@contextlib.contextmanager
def replicated(database: str, *, prepare: Any = None) -> Iterator[tuple[PostgresServer, PostgresServer]]:
    """A primary and a synchronous streaming standby, both removed on leaving: ``(primary, standby)``.

    ``database`` is created on the primary first and ``prepare(primary)`` run (the schema), before the standby's
    base backup, so the standby starts with both."""
    with running() as primary:
        primary.psql(f'CREATE DATABASE "{database}" TEMPLATE template0')
        if prepare is not None:
            prepare(primary)
        standby = primary.standby()
        atexit.register(standby.remove)
        try:
            standby.start()
            primary.synchronous("standby")
            yield primary, standby
        finally:
            standby.remove()
            atexit.unregister(standby.remove)


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
