"""The project's port of the reference suite differs from upstream only in its imports."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent
UPSTREAM = HERE.parent.parent / "shared" / "spec" / "reference_test_sessions.py"
PORT = HERE / "reference" / "test_reference_sessions.py"

MAPPING = [
    ("from ag2.acp.sessions import (", "from sessionstore import ("),
    ("from ag2.context import StreamId", "from sessionstore import StreamId"),
    ("from ag2.events import BaseEvent, ModelMessage", "from sessionstore import BaseEvent, ModelMessage"),
    ("from ag2.history import MemoryStorage", "from sessionstore import MemoryStorage"),
    ('logger="ag2.acp.sessions"', 'logger="sessionstore.registry"'),
]


@pytest.mark.skipif(not UPSTREAM.exists(), reason="the shared reference suite sits beside the checkout only in CI")
def test_port_equals_upstream_with_imports_mapped() -> None:
    text = UPSTREAM.read_text()
    for old, new in MAPPING:
        assert old in text
        text = text.replace(old, new)
    assert PORT.read_text() == text


def test_port_runs_all_56_behaviours() -> None:
    source = PORT.read_text()
    assert source.count("    async def test_") + source.count("    def test_") + source.count("\ndef test_") == 56
