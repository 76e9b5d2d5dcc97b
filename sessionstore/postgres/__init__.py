"""PostgreSQL: the same sessions, events, views and migrations in a database on a server.

``from sessionstore.postgres import PostgresStorage`` needs the ``postgres`` extra (asyncpg), which
``import sessionstore`` never loads; the storage is imported on first use of the name, so the modules beside it
(``connect``, ``migrate``, ``search``, ``backend``) can say "install the extra" rather than fail to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .storage import PostgresStorage

__all__ = ["PostgresStorage"]


def __getattr__(name: str) -> Any:
    if name == "PostgresStorage":
        from .storage import PostgresStorage

        return PostgresStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
