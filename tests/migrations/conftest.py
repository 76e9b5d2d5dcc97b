"""Fixtures for the migration tests: files at a given revision, filled with realistic data."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from migration_data import FILLERS

from sessionstore import migrate


@pytest.fixture
def built(tmp_path: Path) -> Callable[[str], Path]:
    """``built(revision)``: a new file migrated to ``revision`` and filled with that revision's data."""

    def build(revision: str, name: str = "agent.db") -> Path:
        path = tmp_path / name
        migrate.upgrade(path, revision)
        with contextlib.closing(sqlite3.connect(path)) as conn:
            FILLERS[revision](conn)
            conn.commit()
        return path

    return build
