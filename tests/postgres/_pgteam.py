"""A team on one PostgreSQL database, as docs/postgresql.md sets one up: a role that owns the schema (the
administrator), a group role holding the grants, two people in it, and a third person granted the owner role.

Used by the row-level security tests and ``bench/pg_rls.py``. Roles belong to the whole server, so their names
carry a prefix of their own and :meth:`Team.remove` drops them (and the database) again.
"""

from __future__ import annotations

import itertools
import os
import secrets
from dataclasses import dataclass, field

from pg_server import PostgresServer

_TEAMS = itertools.count()

# The grants a person needs (docs/postgresql.md shows the same lines): rows of the two tables (the policies say
# which), the views, the schema's revision, and the sequences that number new rows.
GRANTS = (
    "GRANT SELECT, INSERT, UPDATE, DELETE ON sessions, events TO {group};"
    " GRANT SELECT ON session_overview, transcript, alembic_version TO {group};"
    " GRANT USAGE ON SEQUENCE sessions_id_seq, events_id_seq TO {group}"
)


@dataclass
class Team:
    server: PostgresServer
    database: str
    prefix: str
    password: str = field(default_factory=lambda: secrets.token_hex(8))

    def role(self, who: str) -> str:
        """The role of ``who``: ``owner``, ``ann``, ``bob``, ``carol`` (the administrator) or ``agents`` (the group)."""
        return f"{self.prefix}_{who}"

    def url(self, who: str, *, driver: str = "postgresql+asyncpg") -> str:
        return f"{driver}://{self.role(who)}:{self.password}@127.0.0.1:{self.server.port}/{self.database}"

    def create(self) -> Team:
        """The roles and the database, owned by the owner role (the schema is the owner's to make: ``upgrade``)."""
        role, password = self.role, self.password
        self.server.psql(
            f"CREATE ROLE {role('owner')} LOGIN PASSWORD '{password}';"
            f" CREATE ROLE {role('agents')} NOLOGIN;"
            f" CREATE ROLE {role('ann')} LOGIN PASSWORD '{password}' IN ROLE {role('agents')};"
            f" CREATE ROLE {role('bob')} LOGIN PASSWORD '{password}' IN ROLE {role('agents')};"
            f" CREATE ROLE {role('carol')} LOGIN PASSWORD '{password}' IN ROLE {role('owner')}"
        )
        self.server.psql(f'CREATE DATABASE "{self.database}" OWNER {role("owner")} TEMPLATE template0')
        return self

    def grant(self) -> None:
        """The people's grants, once the owner has upgraded the database."""
        self.server.psql(GRANTS.format(group=self.role("agents")), self.database)

    def remove(self) -> None:
        self.server.drop_database(self.database)
        for who in ("carol", "bob", "ann", "agents", "owner"):
            self.server.psql(f"DROP ROLE IF EXISTS {self.role(who)}")


def team(server: PostgresServer) -> Team:
    number = next(_TEAMS)
    prefix = f"t{os.getpid()}_{number}"
    return Team(server, f"{prefix}_team", prefix).create()
