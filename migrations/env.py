"""Alembic's environment: how a revision reaches a database file.

Two ways in, one transaction each way. SQLite's DDL is transactional, so a
whole upgrade (every revision it crosses) commits or rolls back as one: a
failed migration leaves the file as it was.

* Programmatic (``sessionstore.migrate``): the caller hands over a sync
  ``Connection`` in ``config.attributes["connection"]``, already inside its
  ``BEGIN IMMEDIATE`` (the cross-process migration lock) and after its backup;
  the caller commits or rolls back.
* The ``alembic`` command line, from the repository root: ``-x db=PATH`` (or
  the ``SESSIONSTORE_DB`` environment variable) names the file, reached through
  the async engine (``sqlite+aiosqlite``) and ``connection.run_sync``.

Views, triggers and FTS5 tables are made by revisions with the operations of
``sqlobjects.py``; they are not in the models' metadata, so virtual tables are
kept out of autogenerate's comparison (``alembic check``) here.
"""

from __future__ import annotations

import asyncio
import os
import stat
from typing import Any

from alembic import context
from sqlalchemy import event, pool
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.types import TypeDecorator

from sessionstore.models import Base

config = context.config
target_metadata = Base.metadata

if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    from logging.config import fileConfig

    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _virtual_tables(connection: Connection) -> set[str]:
    rows = connection.exec_driver_sql(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
    )
    return {str(row[0]) for row in rows}


def _include_name_for(virtual: set[str]) -> Any:
    """Autogenerate's filter: everything but virtual tables and their shadow tables.

    Listing what to *exclude* (rather than including only the models' tables)
    keeps a stray table created by a revision visible as drift.
    """

    def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
        if type_ == "table" and name is not None:
            return not any(name == v or name.startswith(f"{v}_") for v in virtual)
        return True

    return include_name


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
        include_name=_include_name_for(_virtual_tables(connection)),
        render_item=_render_item,
    )
    context.run_migrations()


def _transactional(engine: Engine) -> None:
    """One explicit ``BEGIN IMMEDIATE`` per run: DDL stays inside it, and two runs queue for the lock."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None  # the driver must not open or commit transactions itself
        cursor = dbapi_connection.cursor()
        # Off while tables are rebuilt (batch mode drops and renames them): with
        # it on, dropping ``sessions`` would cascade-delete every event.
        cursor.execute("PRAGMA foreign_keys = OFF")
        cursor.execute("PRAGMA busy_timeout = 30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _database_path() -> str:
    path = context.get_x_argument(as_dictionary=True).get("db") or os.environ.get("SESSIONSTORE_DB")
    if not path:
        raise SystemExit("name the database file: alembic -x db=PATH ... (or set SESSIONSTORE_DB)")
    return os.path.expanduser(path)


def _run_in_transaction(connection: Connection) -> None:
    with connection.begin():
        _run(connection)
        if connection.exec_driver_sql("PRAGMA foreign_key_check").first() is not None:
            raise RuntimeError("the migration left rows that break a foreign key; rolled back")


async def _run_async(path: str) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}", poolclass=pool.NullPool)
    _transactional(engine.sync_engine)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run_in_transaction)
    finally:
        await engine.dispose()


def run_migrations_offline() -> None:
    context.configure(
        url="sqlite://",
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
        path = _database_path()
        if not os.path.exists(path):
            # A new file is private from its first byte, as SQLiteStorage creates it.
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, stat.S_IRUSR | stat.S_IWUSR))
        asyncio.run(_run_async(path))


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
