"""The package's shape: the layers point one way, no two modules import each other, and the design page's map
names every module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "sessionstore"

# Lowest first; a module may import its own layer or a lower one. Within layer 3, each database's package
# imports only itself and what is below.
LAYERS: list[set[str]] = [
    {"errors", "events"},
    {"codec", "storage", "batches", "schema"},
    {"reads", "durable", "stream", "registry"},
    {"sqlite", "postgres", "scratch"},
    {"backend"},
    {"records", "admin", "transfer", "migrate", "datasette"},
    {"cli", "demo", "ag2", "__init__"},
]


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path) -> set[str]:
    """The package's modules ``name`` imports (relative or absolute, at any depth of the file)."""
    package = name.split(".")[:-1]  # a module's package; for a package's __init__, the package itself
    known = modules()
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module and node.module.startswith("sessionstore"):
                target = node.module.removeprefix("sessionstore").lstrip(".")
            else:
                continue
            candidates = [f"{target}.{alias.name}".lstrip(".") for alias in node.names] + [target]
        elif isinstance(node, ast.Import):
            candidates = [
                a.name.removeprefix("sessionstore").lstrip(".") for a in node.names if a.name.startswith("sessionstore")
            ]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known and f"{candidate}.__init__" not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate:
                out.add(candidate if candidate in known else f"{candidate}.__init__")
    out.discard(name)
    return out


def layer(name: str) -> int:
    top = name.split(".")[0]
    for number, members in enumerate(LAYERS):
        if top in members:
            return number
    raise AssertionError(f"sessionstore/{name.replace('.', '/')}.py is in no layer of this test: place it")


def test_every_import_points_down_and_no_package_imports_the_other_database() -> None:
    wrong = []
    for name, path in modules().items():
        if name.startswith("migrations"):
            continue
        for target in imports(name, path):
            if target.startswith("migrations") or target == "__init__":
                continue
            if layer(target) > layer(name):
                wrong.append(f"{name} imports {target}, a higher layer")
            tops = {name.split(".")[0], target.split(".")[0]}
            if tops == {"sqlite", "postgres"}:
                wrong.append(f"{name} imports {target}: one database's package imports the other's")
    assert wrong == []


def test_no_two_modules_import_each_other_at_any_depth() -> None:
    graph = {name: imports(name, path) for name, path in modules().items()}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = {start}, [start]
        while todo:
            for nxt in graph.get(todo.pop(), set()):
                if nxt == goal:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    cycles = sorted({tuple(sorted((a, b))) for a in graph for b in graph[a] if reaches(b, a)})
    # A package's __init__ importing its own modules is how Python loads a package, not a cycle of ours.
    cycles = [(a, b) for a, b in cycles if not (a.endswith("__init__") or b.endswith("__init__"))]
    assert cycles == []


def test_the_design_page_maps_every_module() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    missing = [
        str(path.relative_to(PACKAGE))
        for name, path in modules().items()
        if not name.startswith(("migrations", "ag2"))
        and path.name != "__init__.py"
        and f"`{path.relative_to(PACKAGE)}`" not in design
        and f"{path.relative_to(PACKAGE)}`" not in design
    ]
    assert missing == []


def test_import_sessionstore_loads_no_postgresql_code_and_no_sqlalchemy() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, sessionstore; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert [m for m in loaded if m.startswith(("sessionstore.postgres", "sqlalchemy", "asyncpg", "alembic"))] == []
    assert "sessionstore.sqlite.storage" in loaded  # the test can fail: it sees what was loaded
