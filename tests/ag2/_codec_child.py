"""Child process for the AG2 codec tests: a fresh interpreter that reads back what the test wrote.

Prints one JSON object on stdout. Modes:

``tables``                          every AG2 module imported (or, where its extra is missing, read), its
                                    event classes, and which ones AG2Codec has no name for.
``read DB STREAM``                  decode the stream's history with AG2Codec and compare every event with
                                    the one ``_codec_samples.samples()`` builds here.
``canary DB STREAM DIR PAIRS``      with DIR (holding the canary module) on ``sys.path``, decode the stream's
                                    history and the (type, payload) pairs in the JSON file PAIRS; report
                                    whether the canary was imported or ran.
``control DIR``                     the same canary, handed to AG2's own ``deserialize_value``: shows it fires.
``without DB STREAM MODULE``        read and rewrite the stream with ``MODULE`` (an SDK) impossible to import.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
from pathlib import Path
from uuid import UUID


def tables() -> dict[str, object]:
    """Every AG2 module this install has, imported; every event class they define, and which AG2Codec lacks.

    Modules whose optional dependencies are missing fail to import; their source is read instead (every class
    deriving from an event class, by name), so an event class in an extra the test extra does not install is
    reported too rather than silently unseen.
    """
    import ast
    import importlib
    import pkgutil
    import warnings

    import ag2
    from ag2.events import BaseEvent

    from sessionstore.ag2 import AG2Codec

    failed: dict[str, str] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module in pkgutil.walk_packages(ag2.__path__, "ag2."):
            try:
                importlib.import_module(module.name)
            except Exception as exc:  # an extra that is not installed: its source is read below
                failed[module.name] = f"{type(exc).__name__}: {exc}"

    seen: list[type] = []

    def walk(cls: type) -> None:
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.append(sub)
                walk(sub)

    walk(BaseEvent)
    ours = [cls for cls in seen if cls.__module__.split(".")[0] == "ag2"]
    persistable = [cls for cls in ours if not getattr(cls, "__transient__", False)]
    transient = [cls for cls in ours if getattr(cls, "__transient__", False)]

    # Classes in AG2's source deriving (by name, at any depth) from an event class.
    root = Path(ag2.__file__).parent
    event_names = {"BaseEvent"} | {cls.__name__ for cls in ours}
    in_source: dict[str, str] = {}
    trees = {path: ast.parse(path.read_text()) for path in root.rglob("*.py")}
    grew = True
    while grew:
        grew = False
        for path, tree in trees.items():
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in in_source:
                    bases = {getattr(b, "id", None) or getattr(b, "attr", None) for b in node.bases}
                    if bases & (event_names | set(in_source)):
                        in_source[node.name] = str(path.relative_to(root))
                        grew = True

    known = AG2Codec().event_names()

    def named(classes: list[type]) -> list[str]:
        return [f"{cls.__module__}.{cls.__qualname__}" for cls in classes]

    def unknown(cls: type) -> bool:
        return cls not in known

    return {
        "ag2": ag2.__version__,
        "persistable": named(persistable),
        "transient": named(transient),
        "missing_persistable": named([c for c in persistable if unknown(c)]),
        "missing_transient": named([c for c in transient if unknown(c)]),
        "unloaded": sorted(f"{name} ({where})" for name, where in in_source.items() if name not in event_names),
        "failed_modules": failed,
        "known": {f"{cls.__module__}.{cls.__qualname__}": name for cls, name in known.items()},
    }


def read(db: str, stream: str) -> dict[str, object]:
    from _codec_samples import EXTRA, IDENTITY_COMPARED, differences, samples

    from sessionstore import SQLiteStorage
    from sessionstore.ag2 import AG2Codec

    codec = AG2Codec(extra=EXTRA)

    async def history() -> list[object]:
        async with SQLiteStorage(db, codec=codec) as storage:
            return list(await storage.get_history(UUID(stream)))

    decoded = asyncio.run(history())
    with sqlite3.connect(db) as conn:
        stored = conn.execute(
            "SELECT e.type, e.payload FROM events e JOIN sessions s ON s.id = e.session "
            "WHERE s.session_id = ? ORDER BY e.position",
            (UUID(stream).hex,),
        ).fetchall()
    expected = samples()
    report = []
    for want, got, row in zip(expected, decoded, stored, strict=True):
        report.append(
            {
                "class": type(want).__name__,
                "type": row[0],
                "same_class": type(got) is type(want),
                "equal": got == want if not isinstance(want, IDENTITY_COMPARED) else None,
                "differences": differences(want, got),
                "rewritten_as_stored": list(codec.encode(got)) == list(row),
            }
        )
    return {"count": len(decoded), "expected": len(expected), "events": report}


def canary(db: str, stream: str, folder: str, pairs_file: str) -> dict[str, object]:
    sys.path.insert(0, folder)
    from sessionstore import SQLiteStorage
    from sessionstore.ag2 import AG2Codec

    codec = AG2Codec()

    async def history() -> list[object]:
        async with SQLiteStorage(db, codec=codec) as storage:
            return list(await storage.get_history(UUID(stream)))

    events = asyncio.run(history())
    events += [codec.decode(t, p) for t, p in json.loads(Path(pairs_file).read_text())]
    return {
        "imported": sorted(name for name in sys.modules if name.startswith("ss_canary")),
        "ran": Path(os.environ["CANARY_MARKER"]).exists(),
        "a2a_imported": "ag2.a2a.events" in sys.modules,
        "decoded": [[type(e).__name__, getattr(e, "type_name", None), getattr(e, "reason", None)] for e in events],
    }


def control(folder: str) -> dict[str, object]:
    sys.path.insert(0, folder)
    from ag2.events._serialization import deserialize_value

    value = deserialize_value({"__dataclass__": "ss_canary.Boom", "data": {}})
    return {
        "imported": sorted(name for name in sys.modules if name.startswith("ss_canary")),
        "ran": Path(os.environ["CANARY_MARKER"]).exists(),
        "value": type(value).__name__,
    }


def without(db: str, stream: str, blocked: str) -> dict[str, object]:
    """Read and rewrite the stream in a process where ``blocked`` (an SDK) cannot be imported, as when its AG2
    extra is not installed."""
    import importlib.abc

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: object, target: object = None) -> None:
            if name == blocked or name.startswith(blocked + "."):
                raise ImportError(f"No module named {name!r} (blocked by the test)")
            return None

    sys.meta_path.insert(0, Block())
    from sessionstore import SQLiteStorage
    from sessionstore.ag2 import AG2Codec

    async def rewrite() -> list[object]:
        async with SQLiteStorage(db, codec=AG2Codec()) as storage:
            events = list(await storage.get_history(UUID(stream)))
            await storage.set_history(UUID(stream), events)  # what AG2 does when it repairs a turn
            return events

    events = asyncio.run(rewrite())
    return {
        "decoded": [[type(e).__name__, getattr(e, "type_name", None), getattr(e, "reason", "")] for e in events],
        "sdk_imported": sorted(name for name in sys.modules if name == blocked or name.startswith(blocked + ".")),
    }


def main() -> None:
    mode, *args = sys.argv[1:]
    out = {"tables": tables, "read": read, "canary": canary, "control": control, "without": without}[mode](*args)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
