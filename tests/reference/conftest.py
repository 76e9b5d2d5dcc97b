"""Run the reference suite once per storage the package ships.

The suite builds ``SessionStore()`` without a storage in most tests, so the
backend is swapped where the registry gets its default; the test file itself
stays exactly as written upstream, imports mapped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import uuid4

import pytest

from sessionstore import MemoryStorage, SQLiteStorage, Storage, registry

BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Callable[[], Storage]]] = {
    "memory": lambda _request, _tmp: MemoryStorage,
    # A fresh file for every store the test builds.
    "sqlite": lambda _request, tmp: lambda: SQLiteStorage(tmp / f"{uuid4().hex}.db"),
    # A database of the test's own (sessions are told apart by their random ids).
    "postgres": lambda request, _tmp: _postgres(request.getfixturevalue("pg_url")),
}


def _postgres(url: str) -> Callable[[], Storage]:
    from sessionstore.postgres import PostgresStorage

    return lambda: PostgresStorage(url)


@pytest.fixture(autouse=True, params=sorted(BACKENDS))
def storage_backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(registry, "default_storage_factory", BACKENDS[request.param](request, tmp_path))
    yield request.param
