"""``sessionstore datasette``: Datasette on a file, with the two settings it cannot read from the file itself.

``datasette agent.db`` alone finds the search index, its phrases and the facets (revision 0008). Two things only
settings can say, and this command passes them:

* ``searchmode: raw`` on the transcript and the events: their search box takes FTS5's own syntax (``test_par*``,
  ``OR``, ``NOT``, ``NEAR(...)``, ``"phrases"``) rather than words only (Datasette's default quotes each word);
* ``label_column: session_id`` on ``sessions``: every hit's link to its session reads the session's id. Datasette
  1.0 picks that column itself; 0.65 picks a column named ``title``, which is ``None`` until a title is set.

Datasette keys settings by the database's name, which it takes from the file's name, so they are made for the file
at hand and handed over through a pipe (``--metadata /dev/fd/N``): nothing is written beside the file. 1.0 moves
these two from metadata to its configuration itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from .backend import Database, open_backend
from .errors import UsageError
from .schema.revisions import HEAD, behind

__all__ = ["command", "serve", "settings"]

SEARCHED = ("transcript", "events")
"""The pages whose search box revision 0008 gives an index (``events_fts``)."""


def settings(path: Path) -> dict[str, Any]:
    """Datasette's metadata for the file ``path``: the database under the name Datasette gives it (its stem)."""
    tables: dict[str, Any] = {table: {"searchmode": "raw"} for table in SEARCHED}
    tables["sessions"] = {"label_column": "session_id"}
    return {"databases": {path.stem: {"tables": tables}}}


def command(path: Path, metadata: str, extra: Sequence[str] = ()) -> list[str]:
    """The command that serves ``path`` with the metadata file ``metadata``: this interpreter's Datasette when it
    has one, else the ``datasette`` on the PATH (installed apart, with pipx say)."""
    if importlib.util.find_spec("datasette") is not None:
        program = [sys.executable, "-m", "datasette"]
    elif found := shutil.which("datasette"):
        program = [found]
    else:
        raise UsageError("Datasette is not installed: pip install datasette")
    return [*program, "serve", str(path), "--metadata", metadata, *extra]


def serve(db: Database, extra: Sequence[str] = ()) -> NoReturn:
    """Run Datasette on the file ``db`` in place of this process (``extra``: Datasette's own options)."""
    backend = open_backend(db)
    if not backend.files:
        raise UsageError(f"Datasette serves a SQLite file; {backend.name} is a server's database")
    path = backend.files[0]
    with backend.reading() as conn:
        revision = backend.revision(conn)
    if revision != HEAD:
        raise behind(backend.name, revision, "serves Datasette")
    read, write = os.pipe()
    text = json.dumps(settings(path)).encode()
    os.write(write, text)  # a few hundred bytes: within any pipe's buffer, so this never blocks
    os.close(write)
    os.set_inheritable(read, True)
    argv = command(path, f"/dev/fd/{read}", extra)
    os.execv(argv[0], argv)
