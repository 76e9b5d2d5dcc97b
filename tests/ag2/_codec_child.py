"""Child process for the AG2 codec tests: a fresh interpreter that reads back what the test wrote.

Prints one JSON object on stdout. Modes:

``tables``                          AG2's event classes as ``import ag2, ag2.acp`` loads them, and which
                                    ones AG2Codec has no name for.
``read DB STREAM``                  decode the stream's history with AG2Codec and compare every event with
                                    the one ``_codec_samples.samples()`` builds here.
``canary DB STREAM DIR PAIRS``      with DIR (holding the canary module) on ``sys.path``, decode the stream's
                                    history and the (type, payload) pairs in the JSON file PAIRS; report
                                    whether the canary was imported or ran.
``control DIR``                     the same canary, handed to AG2's own ``deserialize_value``: shows it fires.
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
    import ag2
    import ag2.acp  # loads ACP's events
    from ag2.events import BaseEvent

    from sessionstore.ag2.codec import EVENT_NAMES

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

    def named(classes: list[type]) -> list[str]:
        return [f"{cls.__module__}.{cls.__qualname__}" for cls in classes]

    return {
        "ag2": ag2.__version__,
        "persistable": named(persistable),
        "transient": named(transient),
        "missing_persistable": named([c for c in persistable if c not in EVENT_NAMES]),
        "missing_transient": named([c for c in transient if c not in EVENT_NAMES]),
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


def main() -> None:
    mode, *args = sys.argv[1:]
    out = {"tables": tables, "read": read, "canary": canary, "control": control}[mode](*args)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
