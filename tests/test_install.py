"""Every install command the README and the docs give works as written, from a clean checkout.

Was: the docs said ``pip install 'sessionstore[ag2]'``, which fails in a fresh environment (sessionstore is not on
PyPI). Here the checkout's files (what a clone holds) become a git repository of their own; its sdist and wheel are
built as a user builds them (``python -m build``, isolated) and each is installed in a fresh virtual environment
outside the checkout, as is the git URL with extras; the demo and ``sessionstore --help`` run from there.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 600.0  # downloads on a cold cache; only stops a hang


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def fresh_env() -> dict[str, str]:
    """The environment of a person's shell: nothing of this test run's interpreter or database leaks in."""
    drop = ("PYTHONPATH", "SESSIONSTORE_DB", "VIRTUAL_ENV", "PYTHONHOME")
    return {k: v for k, v in os.environ.items() if k not in drop} | {"PYTHONDONTWRITEBYTECODE": "1"}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The files a clone of this working tree holds (tracked, or new and not ignored), committed in a repository of
    their own: a clean checkout, and the target of a ``git+file://`` URL."""
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO)
    clean = tmp_path_factory.mktemp("clean") / "sessionstore"
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the working tree is not in a clone of it
            (clean / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clean / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    run(["git", "init", "-q"], cwd=clean)
    run(["git", "add", "-A"], cwd=clean)
    run([*git, "commit", "-qm", "clean checkout"], cwd=clean)
    yield clean


def new_venv(where: Path) -> Path:
    venv.create(where, with_pip=True)
    return where / "bin"


def try_install(bin_dir: Path, requirement: str, work: Path) -> str:
    """Install ``requirement`` in a fresh environment, then do there what the README's first command does."""
    env = fresh_env()
    run([str(bin_dir / "pip"), "install", "-q", "--disable-pip-version-check", requirement], cwd=work, env=env)
    run([str(bin_dir / "python"), "-m", "sessionstore.demo", "write", "demo.db"], cwd=work, env=env)
    resumed = run([str(bin_dir / "python"), "-m", "sessionstore.demo", "resume", "demo.db"], cwd=work, env=env)
    assert "resumed " in resumed and "Why is the build red?" in resumed
    helped = run([str(bin_dir / "sessionstore"), "--help"], cwd=work, env=env)
    assert helped.startswith("usage: sessionstore")
    where = run([str(bin_dir / "python"), "-c", "import sessionstore; print(sessionstore.__file__)"], cwd=work, env=env)
    assert where.startswith(str(bin_dir.parent)), where  # the installed copy, not the checkout
    return where


def test_the_wheel_the_sdist_and_a_git_url_with_extras_install_and_run(checkout: Path, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(dist), str(checkout)], cwd=tmp_path)
    (wheel,) = dist.glob("sessionstore-*.whl")
    (sdist,) = dist.glob("sessionstore-*.tar.gz")
    url = f"sessionstore[ag2,postgres] @ git+file://localhost{checkout}"  # as the install section writes it

    jobs = {"wheel": str(wheel), "sdist": str(sdist), "git": url}
    folders = {name: tmp_path / name for name in jobs}
    for folder in folders.values():
        (folder / "work").mkdir(parents=True)
    # Three environments at once: they mostly wait on pip's downloads and unpacking.
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {
            name: pool.submit(lambda n=name: try_install(new_venv(folders[n] / "venv"), jobs[n], folders[n] / "work"))
            for name in jobs
        }
        for future in futures.values():
            future.result()

    # The extras came with the git URL: the AG2 adapter and PostgreSQL's driver import there.
    python = str(folders["git"] / "venv" / "bin" / "python")
    out = run([python, "-c", "import sessionstore.ag2, sessionstore.postgres, asyncpg; print('ok')"], tmp_path)
    assert out.strip() == "ok"


def documented_installs() -> list[tuple[str, str]]:
    """Every ``pip install`` command in the README and the docs, with the page it is on."""
    found = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for command in re.findall(r"pip install [^`\n&#]*", page.read_text()):
            found.append((page.name, command.strip()))
    return found


# The forms of installing sessionstore that the test above proves: the checkout (``.``, with extras, editable or
# not), a git URL with extras, a built wheel. Anything else that names sessionstore (``sessionstore[ag2]`` from an
# index, say) fails the test below.
CHECKOUT = re.compile(r"\.(\[(?P<extras>[\w,]+)\])?")
GIT_URL = re.compile(r"sessionstore\[(?P<extras>[\w,]+)\] @ git\+file://localhost/path/to/sessionstore")
WHEEL = re.compile(r"dist/sessionstore-\*\.whl")


def test_every_documented_install_of_sessionstore_is_a_form_tested_above() -> None:
    extras = {"ag2", "postgres", "test"}
    ours = 0
    for page, command in documented_installs():
        for target in shlex.split(command.removeprefix("pip install ")):
            if target.startswith("-"):
                continue
            match = CHECKOUT.fullmatch(target) or GIT_URL.fullmatch(target) or WHEEL.fullmatch(target)
            if match is None:
                assert "sessionstore" not in target, f"{page}: `{command}` is not a form tests/test_install.py proves"
                continue  # another project's package, from PyPI (ag2[openai], say)
            ours += 1
            named = set(filter(None, (match.groupdict().get("extras") or "").split(",")))
            assert named <= extras, f"{page}: `{command}` names an extra sessionstore does not have"
    assert ours >= 7  # the README's two, the install section's four, AG2's and PostgreSQL's
