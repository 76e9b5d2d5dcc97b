"""Alembic's environment: how a revision reaches a database (a SQLite file or a PostgreSQL database).

Two ways in, one transaction each way. DDL is transactional on both databases,
so a whole upgrade (every revision it crosses) commits or rolls back as one: a
failed migration leaves the database as it was.

* Programmatic (the backends' migration runners): the caller hands over a sync
  ``Connection`` in ``config.attributes["connection"]``, already inside its
  ``BEGIN IMMEDIATE`` (the cross-process migration lock) and after its backup;
  the caller commits or rolls back.
* The ``alembic`` command line, from the repository root: ``-x db=PATH`` (or
  the ``SESSIONSTORE_DB`` environment variable) names the file, opened the way
  every sessionstore file is opened (:mod:`sessionstore.sqlite.connect`: the
  path is a file name, whatever characters it holds) under the same lock, and
  backed up first as ``sessionstore db`` backs it up when the command may move
  it (:func:`sessionstore.sqlite.migrate.backup_before_alembic`). A PostgreSQL
  URL (``-x db=postgresql+asyncpg://...``) names a database instead, migrated
  in one transaction under sessionstore's advisory lock
  (:mod:`sessionstore.postgres.migrate`). Each backend runs it its own way
  (``run_alembic``).

Views, triggers and FTS5 tables are made by revisions with the operations of
``sqlobjects.py``; they are not in the models' metadata, so virtual tables (and
PostgreSQL's full-text index over an expression) are kept out of
autogenerate's comparison (``alembic check``) here. So is a SQLite foreign key
written inline with its column (the only way ``ALTER TABLE ADD COLUMN`` takes
one, revision 0006): SQLAlchemy reads neither its name nor its ``ON DELETE``
there, and would report it as changed; the schema tests compare its text with
what the models write instead. So, on PostgreSQL, is the fork's foreign key,
checked at commit there (revision 0013) where the models say ``SET NULL``
(SQLite's); the schema tests compare it with what 0013 writes.
"""

from __future__ import annotations

import os
import re
from typing import Any

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.types import TypeDecorator

from sessionstore.backend import open_backend
from sessionstore.schema.models import Base

config = context.config
target_metadata = Base.metadata

if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    from logging.config import fileConfig

    fileConfig(config.config_file_name, disable_existing_loggers=False)


# PostgreSQL's full-text index is over an expression (the transcript's text), which the models cannot state.
_EXPRESSION_INDEXES = {"postgresql": {"events_fts"}}
# Tables one database alone has, which belong to its search index rather than to the models: PostgreSQL's words and
# their queue (revision 0015), as SQLite's FTS5 tables.
_DATABASE_TABLES = {"postgresql": {"events_words", "events_unindexed"}}
# Columns one database alone has, which no statement names (a default fills them), so not in the models: a
# session's owner, for PostgreSQL's row-level security (revision 0011).
_DATABASE_COLUMNS = {"postgresql": {("sessions", "owner")}}
# Foreign keys one database keeps otherwise than the models say, as (table, column): on PostgreSQL a fork's
# reference is checked at commit with no ON DELETE action (revision 0013's ForeignKey, which the schema tests
# compare instead), where row-level security can hide a fork from a delete.
_DATABASE_FOREIGN_KEYS = {"postgresql": {("sessions", "forked_from")}}


def _virtual_tables(connection: Connection) -> set[str]:
    if connection.dialect.name != "sqlite":
        return set()
    rows = connection.exec_driver_sql(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
    )
    return {str(row[0]) for row in rows}


def _include_name_for(virtual: set[str], indexes: set[str], columns: set[tuple[str, str]]) -> Any:
    """Autogenerate's filter: everything but virtual tables and their shadow tables (and the tables of
    ``_DATABASE_TABLES``, passed with them), expression indexes, and the columns one database alone has.

    Listing what to *exclude* (rather than including only the models' tables)
    keeps a stray table created by a revision visible as drift.
    """

    def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
        if type_ == "table" and name is not None:
            return not any(name == v or name.startswith(f"{v}_") for v in virtual)
        if type_ == "column":
            return (parent_names.get("table_name"), name) not in columns
        return not (type_ == "index" and name in indexes)

    return include_name


# A column definition that carries its own named foreign key: "parent INTEGER CONSTRAINT fk_... REFERENCES ...".
_INLINE_FOREIGN_KEY = re.compile(r"[(,]\s*(\w+) \w+ CONSTRAINT \w+ REFERENCES ")


def _inline_foreign_keys(connection: Connection) -> set[tuple[str, str]]:
    """SQLite: the ``(table, column)`` of each foreign key written inline with its column."""
    if connection.dialect.name != "sqlite":
        return set()
    rows = connection.exec_driver_sql("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL")
    return {(str(table), column) for table, sql in rows for column in _INLINE_FOREIGN_KEY.findall(str(sql))}


def _include_object_for(kept_out: set[tuple[str, str]]) -> Any:
    """Autogenerate's filter of objects: everything but the foreign keys ``kept_out`` names, as ``(table, column)``
    (both sides): those SQLite keeps inline, and those a database keeps its own way."""

    def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        if type_ != "foreign_key_constraint":
            return True
        columns = list(obj.column_keys)
        return not (len(columns) == 1 and (obj.table.name, columns[0]) in kept_out)

    return include_object


def _render_item(type_: str, obj: Any, autogen_context: Any) -> str | bool:
    # New revisions must not import the package's types (a revision is frozen,
    # the package moves on): render a TypeDecorator as the SQL type it stores.
    if type_ == "type" and isinstance(obj, TypeDecorator):
        return f"sa.{obj.impl_instance!r}"
    return False


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite's ALTER TABLE is limited: batch mode copies the table instead
        transactional_ddl=True,  # true of SQLite, and every run here is inside one explicit transaction
        compare_type=True,
        include_name=_include_name_for(
            _virtual_tables(connection) | _DATABASE_TABLES.get(connection.dialect.name, set()),
            _EXPRESSION_INDEXES.get(connection.dialect.name, set()),
            _DATABASE_COLUMNS.get(connection.dialect.name, set()),
        ),
        include_object=_include_object_for(
            _inline_foreign_keys(connection) | _DATABASE_FOREIGN_KEYS.get(connection.dialect.name, set())
        ),
        render_item=_render_item,
    )
    context.run_migrations()


def _database() -> str:
    db = context.get_x_argument(as_dictionary=True).get("db") or os.environ.get("SESSIONSTORE_DB")
    if not db:
        raise SystemExit("name the database: alembic -x db=PATH|URL ... (or set SESSIONSTORE_DB)")
    return db


def run_migrations_offline() -> None:
    db = context.get_x_argument(as_dictionary=True).get("db") or os.environ.get("SESSIONSTORE_DB")
    context.configure(
        url=open_backend(db).alembic_url if db else "sqlite://",
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
        transactional_ddl=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection: Connection | None = config.attributes.get("connection")
    if connection is not None:
        _run(connection)  # the caller's transaction, lock and backup
    else:
        # The database's own runner takes its lock and, for a file, its backup: `alembic downgrade base` drops
        # every session (PostgreSQL, where none is taken, refuses it while sessions are there, unless
        # -x force=1). A file is created private if missing, and committed only when every revision ran and no
        # row lost its parent.
        force = context.get_x_argument(as_dictionary=True).get("force", "") not in ("", "0", "false", "no")
        open_backend(_database()).run_alembic(_run, _destination, context.script, force=force)


def _destination() -> Any:
    """Where the command goes (head as its id, base as None); KeyError for one that goes nowhere (current)."""
    return context.get_revision_argument()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
