"""A team on one PostgreSQL database, made by running the setup docs/postgresql.md shows (its ``sh`` block under
"Each person sees only their own sessions", as it is): a role owning the schema (the administrator), a group
holding the grants, ann and bob in it, and carol granted the owner role.

Used by the row-level security tests and ``bench/pg_rls.py``. Roles belong to the whole server, so each team's
names carry a prefix of their own (the docs' names, made unique), and :meth:`Team.remove` drops them (and the
database) again.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pg_server import USER, PostgresServer

DOCS = Path(__file__).resolve().parents[2] / "docs" / "postgresql.md"
SECTION = "## Each person sees only their own sessions"
# The docs' names for each member of the team, and their passwords.
NAMES = {"owner": "agents_admin", "group": "agent_users", "ann": "ann", "bob": "bob", "carol": "carol"}
PASSWORDS = {"owner": "admin-secret", "ann": "ann-secret", "bob": "bob-secret", "carol": "carol-secret"}
_NAMED = re.compile(r"\b(agents_admin|agent_users|agents|ann|bob|carol)\b")
_TEAMS = itertools.count()


def setup_script() -> str:
    """The docs' setup, as a person would paste it into a shell."""
    section = DOCS.read_text().split(SECTION, 1)[1]
    found = re.search(r"^```sh\n(.*?)^```", section, re.S | re.M)
    assert found is not None, f"{DOCS} has no sh block under {SECTION!r}"
    return found.group(1)


@dataclass
class Team:
    server: PostgresServer
    prefix: str

    @property
    def database(self) -> str:
        return f"{self.prefix}_agents"

    def role(self, who: str) -> str:
        """The role of ``who``: ``owner``, ``group``, ``ann``, ``bob`` or ``carol`` (an administrator)."""
        return f"{self.prefix}_{NAMES[who]}"

    def url(self, who: str, *, driver: str = "postgresql+asyncpg") -> str:
        password = PASSWORDS[who].replace(NAMES[who], self.role(who)) if who != "owner" else PASSWORDS[who]
        return f"{driver}://{self.role(who)}:{password}@127.0.0.1:{self.server.port}/{self.database}"

    def create(self) -> Team:
        """The docs' setup, run by ``sh`` with psql reaching this server as its superuser and the installed
        ``sessionstore`` on the PATH: the roles, the database, its schema (upgraded by its owner), the grants."""
        script = _NAMED.sub(lambda m: f"{self.prefix}_{m.group(1)}", setup_script())
        script = script.replace("@db.internal/", f"@127.0.0.1:{self.server.port}/")
        path = os.pathsep.join([str(self.server.bin), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        env = {**os.environ, "PATH": path, "PGHOST": str(self.server.socket_dir), "PGPORT": str(self.server.port)}
        env = {**env, "PGUSER": USER}
        env.pop("SESSIONSTORE_DB", None)
        done = subprocess.run(["sh", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"the docs' setup failed:\n{done.stdout}\n{done.stderr}"
        return self

    def remove(self) -> None:
        self.server.drop_database(self.database)
        for who in ("carol", "bob", "ann", "group", "owner"):
            self.server.psql(f"DROP ROLE IF EXISTS {self.role(who)}")


def team(server: PostgresServer) -> Team:
    """A new team on ``server``, set up as the docs say."""
    return Team(server, f"t{os.getpid()}_{next(_TEAMS)}").create()
