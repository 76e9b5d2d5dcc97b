"""Fixtures for the command-line tests: the installed script as a subprocess, and the same entry point in-process."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from _clitools import TIMEOUT, Call, Result, Run, child_env, script_path

from sessionstore.cli import main


@pytest.fixture
def sessionstore() -> Run:
    """Run the installed ``sessionstore`` script; returns the finished process (text output)."""
    exe = script_path()

    def run(*args: object, env: dict[str, str] | None = None, input: str | None = None) -> Any:
        return subprocess.run(
            [exe, *map(str, args)],
            capture_output=True,
            text=True,
            env=env or child_env(),
            input=input,
            timeout=TIMEOUT,
        )

    return run


@pytest.fixture
def call(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Call:
    """The same commands in this process (fast): for the many cases that need no fresh interpreter."""
    monkeypatch.delenv("SESSIONSTORE_DB", raising=False)

    def run(*args: object) -> Result:
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
