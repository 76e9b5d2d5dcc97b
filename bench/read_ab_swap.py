"""A pytest plugin that runs the tests on one of ``read_ab.py``'s read paths: the candidates are tested, not only timed.

    READ_AB_PATH=aiosqlite PYTHONPATH=bench pytest -p read_ab_swap -p no:randomly tests/storage tests/reliability

``sessionstore.SQLiteStorage`` becomes the path's storage class before the tests import it, in the test process
only: a test that runs the storage in a child process tests today's.
"""

from __future__ import annotations

import os

import read_ab

import sessionstore
import sessionstore.sqlite

_chosen = read_ab.PATHS[os.environ.get("READ_AB_PATH", "aiosqlite")]
sessionstore.SQLiteStorage = _chosen  # type: ignore[misc]
sessionstore.sqlite.SQLiteStorage = _chosen  # type: ignore[misc]
