"""Fixtures for the migration tests: files at a given revision, filled with realistic data."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from migration_data import FILLERS

from sessionstore import migrate
from sessionstore.schema import revisions as schema_revisions


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


@pytest.fixture
def scripts_with(tmp_path: Path) -> Callable[..., Path]:
    """``scripts_with(name=source, ...)``: a copy of the migration scripts with more revision files."""

    def make(**revisions: str) -> Path:
        scripts = tmp_path / "scripts"
        shutil.copytree(schema_revisions.script_location(), scripts, ignore=shutil.ignore_patterns("__pycache__"))
        for name, source in revisions.items():
            (scripts / "versions" / f"{name}.py").write_text(textwrap.dedent(source))
        return scripts

    return make
