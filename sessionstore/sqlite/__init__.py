"""SQLite: a sessionstore database in one file.

:class:`SQLiteStorage` (the storage, over the write lane), and what it stands on:
``connect`` (the file's settings), ``migrate`` (its schema), ``lane`` (the writes),
``holds`` (which process holds a session), ``reads`` and ``search`` (FTS5), and
``backend`` (the file as the commands use it).
"""

from .storage import SQLiteStorage

__all__ = ["SQLiteStorage"]
