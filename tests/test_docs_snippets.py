"""Every Python snippet in the README and the documentation runs as written, as its own program."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SNIPPET = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def snippets() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for number, match in enumerate(SNIPPET.finditer(page.read_text()), 1):
            found.append((f"{page.relative_to(ROOT)}#{number}", match.group(1)))
    return found


def test_there_are_snippets_to_run() -> None:
    assert len(snippets()) >= 7


@pytest.mark.parametrize(("where", "code"), snippets(), ids=[where for where, _ in snippets()])
def test_a_snippet_runs_as_written(where: str, code: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    assert not re.search(r"^(await|async with|async for) ", code, re.M), f"{where}: top-level await does not run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if "PostgresStorage(" in code:
        env["DATABASE_URL"] = request.getfixturevalue("pg_url")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{where} failed:\n{done.stdout}\n{done.stderr}"
