"""The schema's revisions: which one is newest, how a database's is judged, and the Alembic scripts that move it.

Shared by both databases' migration runners (:mod:`sessionstore.sqlite.migrate`,
:mod:`sessionstore.postgres.migrate`) and by ``sessionstore check``. Alembic is
imported only inside the functions that need the scripts: opening a database at
:data:`HEAD` reads :data:`HEAD` and nothing more.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import NotADatabaseError, SchemaError, SchemaOutOfDateError, SchemaTooNewError

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory
    from sqlalchemy.engine import Connection

__all__ = [
    "HEAD",
    "FORKS_SINCE",
    "HOLDS_SINCE",
    "OBJECTS_AT_HEAD",
    "OBJECTS_AT_HEAD_POSTGRESQL",
    "ROLES_SINCE",
    "SUBAGENTS_SINCE",
    "USAGE_SINCE",
    "Direction",
    "behind",
    "check_direction",
    "head",
    "history",
    "judge_revision",
    "reaches",
    "not_upgraded",
    "objects_at_head",
    "refuse_unknown",
    "resolve",
    "run_revisions",
    "script_location",
    "script_directory",
    "upgrade_command",
]

HEAD = "0015"
"""The newest schema revision (``migrations/versions``), known without Alembic so that opening a database at
head imports nothing more; a test fails if it falls behind the scripts."""


# What a read of an older database may ask for, by the revision that made it: a read asks whether the database
# reaches that revision (``reaches``), never whether it is at HEAD, so a file from an earlier release is read with
# everything it has (cli.md: reading works on older files too).
ROLES_SINCE = "0003"  # events.role, text and text_path
SUBAGENTS_SINCE = "0006"  # sessions.parent, and session_overview with every column it lists (derived titles)
HOLDS_SINCE = "0007"  # sessions.held_by
USAGE_SINCE = "0010"  # the events' token columns, the settings table (the retention policy)
FORKS_SINCE = "0012"  # sessions.forked_from, forked_at and branch_of, and session_overview's columns for them


def reaches(revision: str | None, since: str) -> bool:
    """Whether a database at ``revision`` has what revision ``since`` made (ids are four digits, in order)."""
    return revision is not None and revision >= since


def upgrade_command(where: object) -> str:
    """The command that brings the database ``where`` to :data:`HEAD`: every message that asks for it names it."""
    return f"sessionstore db upgrade --db {where}"


def behind(where: object, revision: str | None, does: str = "writes") -> SchemaError:
    """A command refused on a database at another revision than :data:`HEAD` (``does``: what it would do)."""
    return SchemaError(
        f"{where} is at schema revision {revision!r}, this sessionstore {does} {HEAD!r};"
        f" run `{upgrade_command(where)}` first"
    )


def not_ours(where: object, populated: bool) -> NotADatabaseError:
    """A database with no sessionstore schema, as every command and storage that reads one says it: empty, it
    names the command that gives it the schema; holding another program's tables, it is left alone, and the
    message says how to name or make a sessionstore database instead."""
    if not populated:
        return NotADatabaseError(f"{where} has no sessionstore schema yet; give it one with `{upgrade_command(where)}`")
    return NotADatabaseError(
        f"{where} is not a sessionstore database: it holds other tables and no sessionstore schema revision, and was"
        " left untouched; name a sessionstore database with --db, or make a new one with"
        " `sessionstore db upgrade --db NEW.db`"
    )


def not_upgraded(where: object, revision: str, target: str) -> SchemaOutOfDateError:
    """An older database a storage opened with ``auto_upgrade`` off."""
    return SchemaOutOfDateError(
        f"{where} is at schema revision {revision}, older than this sessionstore's {target}, and auto-upgrade"
        f" is off; upgrade it with: {upgrade_command(where)}"
    )


def judge_revision(
    tables: Iterable[str], versions: Callable[[], Sequence[Sequence[object]]], where: object
) -> tuple[str | None, bool]:
    """``(revision, has_other_tables)``, the rule for either database: ``tables`` are the database's table names,
    ``versions()`` reads the rows of ``alembic_version`` (asked only when it exists). A database recording
    several revisions (a branched history this code never writes) is refused as too new."""
    names = set(tables)
    populated = bool(names - {"alembic_version", "sqlite_sequence"})
    if "alembic_version" not in names:
        return None, populated
    rows = versions()
    if len(rows) > 1:
        heads = ", ".join(sorted(str(row[0]) for row in rows))
        raise SchemaTooNewError(f"{where} records several schema revisions ({heads}); it is refused and left untouched")
    return (str(rows[0][0]) if rows else None), populated


OBJECTS_AT_HEAD = (
    "0001.COUNT_CHANGES",
    "0008.TRANSCRIPT",
    "0012.SESSION_OVERVIEW",
    "0008.EVENTS_FTS",
    "0005.INDEXING",
    "0010.USAGE",
)
"""The views, triggers and full-text index a file at :data:`HEAD` has, named as their revisions define them
(``migrations/sqlobjects.py``). A revision that replaces one names its new definition here."""
OBJECTS_AT_HEAD_POSTGRESQL = (
    "0001.PG_COUNT_CHANGES",
    "0002.PG_FUNCTIONS",
    "0008.PG_TRANSCRIPT",
    "0012.PG_SESSION_OVERVIEW",
    "0009.SEARCH_WORDS",
    "0010.USAGE",
    "0011.PG_OWNERS",
    "0013.PG_FORK_KEY",
    "0015.PG_WORDS",
)
"""The same for a PostgreSQL database (functions, triggers, views, policies, and the search words' tables and index:
revision 0015)."""

# Alembic's ``context`` and ``op`` are process-wide proxies, swapped in and out
# around each run: two threads migrating two databases at once (of either kind)
# would tear them. (Two processes are kept apart by SQLite's lock, see locked,
# or PostgreSQL's advisory lock.)
_ALEMBIC = threading.Lock()

Direction = Literal["upgrade", "downgrade"]


def script_location() -> Path:
    """The Alembic script directory: inside the installed package, else the repository's ``migrations/``."""
    here = Path(__file__).resolve().parent.parent  # the package
    for candidate in (here / "migrations", here.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise SchemaError(f"the migration scripts are missing from this installation (looked in {here})")


def script_directory(location: Path | None = None) -> ScriptDirectory:
    """The scripts at ``location`` (tests add a revision there), else this installation's."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(location or script_location()))


def known(scripts: ScriptDirectory, revision: str) -> bool:
    """Whether ``revision`` is one of the scripts' ids, exactly (``get_revision`` would take a prefix or ``x@head``)."""
    return any(script.revision == revision for script in scripts.walk_revisions())


def resolve(scripts: ScriptDirectory, revision: str) -> str | None:
    """A revision argument, ``head``, ``base`` or an id, as an id; ``None`` for base.

    Not Alembic's relative forms: ``-1`` would count from the scripts' head, not from the file.
    """
    if revision == "base":
        return None
    if revision == "head":
        return head_of(scripts)
    if not known(scripts, revision):
        names = ", ".join(reversed([script.revision for script in scripts.walk_revisions()]))
        raise SchemaError(f"no schema revision {revision!r}; known: base, {names}, head")
    return revision


def head_of(scripts: ScriptDirectory) -> str:
    heads = scripts.get_heads()
    if len(heads) != 1:
        raise SchemaError(f"the migration scripts have {len(heads)} heads ({', '.join(heads)}); expected one")
    return heads[0]


def lineage(scripts: ScriptDirectory, revision: str | None) -> set[str | None]:
    """``revision`` and every revision it was built on, down to base (``None``)."""
    return {None, *(script.revision for script in scripts.iterate_revisions(revision, "base"))}


def refuse_unknown(scripts: ScriptDirectory, path: object, revision: str | None, populated: bool) -> None:
    """Refuse, untouched, a file these scripts cannot move: written by a newer version, or not a sessionstore one."""
    if revision is not None and not known(scripts, revision):
        raise SchemaTooNewError(
            f"{path} is at schema revision {revision!r}, which this sessionstore does not know (it was probably "
            "written by a newer version); it is refused and left untouched. Upgrade sessionstore to open it."
        )
    if revision is None and populated:
        raise SchemaError(
            f"{path} has tables but no sessionstore schema revision: it is not a sessionstore database "
            "(or its alembic_version table was emptied); it was left untouched"
        )


def check_direction(
    scripts: ScriptDirectory, where: object, found: str | None, target: str | None, direction: Direction
) -> None:
    """Refuse a move the wrong way (an upgrade to a revision the database is already past, or the reverse)."""
    ahead = target in lineage(scripts, found)  # the database is past the target
    if ahead != (direction == "downgrade"):
        hint = "downgrade" if ahead else "upgrade"
        raise SchemaError(f"{where} is at {found or 'base'}; to reach {target or 'base'}, {hint} it")


def run_revisions(conn: Connection, scripts: ScriptDirectory, target: str | None, direction: Direction) -> None:
    """Alembic's upgrade or downgrade to ``target`` on ``conn``, inside the caller's transaction and lock.

    One run at a time in this process: Alembic's ``context`` and ``op`` are process-wide (see ``_ALEMBIC``).
    """
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", scripts.dir)
    config.attributes["connection"] = conn
    config.attributes["configure_logger"] = False
    with _ALEMBIC:
        if direction == "upgrade":
            command.upgrade(config, target or "base")
        else:
            command.downgrade(config, target or "base")


def objects_at_head(*, scripts: Path | None = None, postgresql: bool = False) -> dict[str, str]:
    """Each object a file at head has (view, trigger, full-text table), by name: the statement that makes it.

    What ``sessionstore check`` compares a file with, and what ``check --repair`` runs to put one back. With
    ``postgresql``, a PostgreSQL database's (functions, triggers, views, the search index), keyed
    ``"KIND name"``: a function and its trigger share a name.
    """
    # The revisions' own module (shipped as sessionstore.migrations, a package the type checker is not given).
    sqlobjects: Any = importlib.import_module("sessionstore.migrations.sqlobjects")
    directory = script_directory(scripts)
    objects: dict[str, str] = {}
    for name in OBJECTS_AT_HEAD_POSTGRESQL if postgresql else OBJECTS_AT_HEAD:
        for statement in sqlobjects.find(directory, name, sqlobjects.SQLObject).create(directory):
            words = statement.split(None, 4)
            if postgresql:
                if words[0] == "CREATE":  # CREATE FUNCTION f(...) / TRIGGER t / VIEW v / INDEX i
                    objects[f"{words[1]} {words[2].split('(')[0]}"] = statement
                continue
            if words[0] == "CREATE":  # CREATE VIEW x / CREATE TRIGGER x / CREATE VIRTUAL TABLE x (not its 'rebuild')
                objects[words[3] if words[1] == "VIRTUAL" else words[2]] = statement
    return objects


def history(*, scripts: Path | None = None) -> list[tuple[str, str | None, str]]:
    """Every revision, newest first: ``(revision, down_revision, message)``."""
    out: list[tuple[str, str | None, str]] = []
    for script in script_directory(scripts).walk_revisions():
        down = script.down_revision
        if isinstance(down, Sequence) and not isinstance(down, str):
            down = ",".join(down)
        out.append((script.revision, down, script.doc))
    return out


def head(*, scripts: Path | None = None) -> str:
    """The newest revision the scripts know."""
    return head_of(script_directory(scripts))
