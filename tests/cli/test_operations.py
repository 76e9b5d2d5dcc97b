"""The operations behind the command, from Python: records, transfer and admin, beside an open storage."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from uuid import UUID

import pytest
from _clitools import Spec, conversation, fingerprint, write_db, write_db_async

from sessionstore import ModelMessage, SQLiteStorage, UnknownEvent, UserMessage, admin, reads, records, transfer
from sessionstore.backend import open_backend
from sessionstore.errors import ImportFileError, NoSuchSessionError, UsageError
from sessionstore.reads import SHORTEST_RETENTION
from sessionstore.sqlite.search import fts_query
from sessionstore.storage import derive_title


async def test_functions_work_beside_an_open_storage(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    (sid,) = await write_db_async(db, [Spec(conversation())])
    async with SQLiteStorage(db) as storage:
        history = await storage.get_history(UUID(hex=sid))  # cached by the storage
        with open_backend(db).reading() as conn:
            assert reads.resolve(conn, sid[:5].upper()) == sid
            assert reads.resolve(conn, str(UUID(hex=sid))[:13]) == sid  # dashed UUID form
        assert admin.set_title(db, sid[:6], "Renamed") == sid
        assert (await storage.load_session(UUID(hex=sid))).title == "Renamed"  # type: ignore[union-attr]
        (summary,) = records.list_sessions(db)
        assert (summary.title, summary.events) == ("Renamed", 6)
        hits = records.search(db, "expects UTC")
        assert [(h.session_id, h.position, h.type) for h in hits] == [(sid, 4, "model_message")]
        # The unknown event stays byte-for-byte what was stored, and the storage still decodes it.
        events = records.read_session(db, sid).events
        assert events[-1].type == "myapp.handoff" and events[-1].payload == '{"to_agent":"reviewer"}'
        assert isinstance(history[-1], UnknownEvent)

        assert admin.delete_sessions(db, [sid[:8]]) == [(sid, 0)]
        assert await storage.get_history(UUID(hex=sid)) == []  # the storage sees the delete, cache or not
        with pytest.raises(NoSuchSessionError, match="no session matches"), open_backend(db).reading() as conn:
            reads.resolve(conn, sid[:8])


async def test_import_into_an_open_storage_is_visible_to_it(tmp_path: Path) -> None:
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    (sid,) = await write_db_async(src, [Spec([UserMessage("hi"), ModelMessage("hello")], title="Greeting")])
    dump = tmp_path / "one.jsonl"
    assert transfer.export_sessions(src, dump) == 1
    async with SQLiteStorage(dst) as storage:
        seen: list[tuple[int, int]] = []
        result = transfer.import_sessions(dst, dump, progress=lambda done, total: seen.append((done, total)))
        assert (result.added, result.events, seen) == (1, 2, [(1, 1)])
        assert await storage.get_history(UUID(hex=sid)) == [UserMessage("hi"), ModelMessage("hello")]
        record = await storage.load_session(UUID(hex=sid))
        assert record is not None and (record.title, record.released) == ("Greeting", True)


def _export_lines(tmp_path: Path) -> list[str]:
    db = tmp_path / "src.db"
    write_db(db, [Spec([UserMessage("a"), ModelMessage("b")])])
    out = tmp_path / "good.jsonl"
    transfer.export_sessions(db, out)
    return out.read_text().splitlines()


# A time that exists with its offset but not in UTC (before year 1 once converted).
YEAR_ONE = '"created_at":"0001-01-01T00:00:00+05:00"'


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda lines: ["not json", *lines[1:]], "line 1: not a JSON object"),
        (lambda lines: lines[1:], "line 1: not a sessionstore export"),
        (lambda lines: ['{"format": "sessionstore-export", "version": 4}', *lines[1:]], "format version 4"),
        (lambda lines: [*lines, lines[1]], "appears twice"),
        (lambda lines: [lines[0], lines[1], lines[3], lines[2]], "line 4: position must be an integer above 1 and "),
        # Values the storage itself would refuse are refused here too, each naming its line.
        # NaN and infinities (also 1e999, a number past a double) are not JSON values: one rule, one message.
        *(
            (
                lambda lines, bad=bad: [lines[0], lines[1].replace('"meta":{}', f'"meta":{{"x":{bad}}}')],
                f"line 2: the line holds {re.escape(bad)}, which is not a finite number",
            )
            for bad in ("NaN", "Infinity", "1e999", "-1E400")
        ),
        *(
            (
                lambda lines, bad=bad: [*lines[:2], lines[2].replace('"payload":"{', f'"payload":"{{\\"x\\":{bad},')],
                f"line 3: the payload holds {re.escape(bad)}, which is not a finite number",
            )
            for bad in ("NaN", "-Infinity", "1e999", "-1e999")
        ),
        (lambda lines: [lines[0], lines[1].replace('"cwd":"/work"', '"cwd":"/w\\ud800"')], "line 2: .*lone surrogate"),
        (lambda lines: [*lines[:2], lines[2].replace('"position":0', f'"position":{2**63 - 1}')], "below 2\\*\\*31"),
        (lambda lines: [lines[0], lines[1].replace("+00:00", "", 1)], "line 2: created_at must be .* UTC offset"),
        (lambda lines: [lines[0], re.sub('"created_at":"[^"]*"', YEAR_ONE, lines[1])], "line 2: .* out of range"),
        (
            lambda lines: [lines[0], '{"kind": "session", "meta": ' + "[" * 100_000 + "]" * 100_000 + "}"],
            "line 2: the line nests too deeply",
        ),
        (lambda lines: [lines[0], lines[2]], "line 2: an event must follow the line of its session"),
        (lambda lines: [*lines[:2], lines[2].replace('"kind":"event"', '"kind":"evnt"')], "kind must be"),
        (
            lambda lines: [*lines[:2], lines[2].replace('"payload":"{', '"payload":"x{')],
            "the payload is not valid JSON",
        ),
        (lambda lines: [*lines[:2], lines[2].replace('"position"', '"extra":1,"position"')], "unknown event fields"),
        (lambda lines: [lines[0], lines[1].replace('"released":true', '"released":"yes"')], "released must be a bool"),
        (lambda lines: [lines[0], lines[1].replace('"created_at":"', '"created_at":"x')], "ISO 8601"),
        (lambda lines: [], "is empty"),
    ],
)
def test_a_bad_export_is_refused_with_the_line_and_reason(tmp_path: Path, edit: object, message: str) -> None:
    lines = _export_lines(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(edit(lines)) + "\n")  # type: ignore[operator]
    target = tmp_path / "dst.db"
    write_db(target, [Spec([UserMessage("keep me")])])
    before = fingerprint(target)
    with pytest.raises(ImportFileError, match=message) as caught:
        transfer.import_sessions(target, bad)
    assert "nothing was imported" in str(caught.value)
    assert fingerprint(target) == before


def test_a_line_too_long_is_refused_before_it_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _export_lines(tmp_path)
    monkeypatch.setattr(transfer, "MAX_LINE", 1000)  # the real bound is 64 Mi characters; the rule is the same
    bad = tmp_path / "long.jsonl"
    bad.write_text("\n".join([*lines, lines[2].replace('"created_at"', '"pad":"' + "x" * 2000 + '","created_at"')]))
    with pytest.raises(ImportFileError, match="line 5: the line is longer than 1,000 characters"):
        transfer.import_sessions(tmp_path / "dst.db", bad)
    assert not (tmp_path / "dst.db").exists()


def test_export_keeps_every_record_field(tmp_path: Path) -> None:
    db = tmp_path / "src.db"
    write_db(db, [Spec([UserMessage("a")], cwd="/x", meta={"client": "zed", "n": [1, 2]}, title="T")])
    out = tmp_path / "dump.jsonl"
    transfer.export_sessions(db, out)
    header, session, event = (json.loads(line) for line in out.read_text().splitlines())
    assert header == {"format": "sessionstore-export", "version": 3}
    assert set(session) == {
        "kind",
        "session_id",
        "cwd",
        "additional_directories",
        "mcp_servers",
        "meta",
        "title",
        "created_at",
        "updated_at",
        "released",
        "parent_id",
    }
    assert (session["cwd"], session["meta"], session["title"]) == ("/x", {"client": "zed", "n": [1, 2]}, "T")
    assert set(event) == {
        "kind",
        "session_id",
        "position",
        "type",
        "payload",
        "role",
        "text",
        "text_path",
        "created_at",
    }


def test_small_helpers() -> None:
    assert admin.parse_age("30d") == timedelta(days=30)
    assert admin.parse_age("1.5h") == timedelta(minutes=90)
    assert admin.parse_age(" 2W ") == timedelta(weeks=2)
    assert admin.parse_age("12 H") == timedelta(hours=12)
    assert admin.parse_age("0s") == timedelta(0)  # prune's: every session no live process holds
    for bad in ("30", "d", "-1d", "3 days", "", "1e3d", "99999999999d"):
        with pytest.raises(UsageError, match=f"^not an age: {re.escape(repr(bad))} \\(a number and a unit"):
            admin.parse_age(bad)
    with pytest.raises(UsageError, match=r"^not an age: '0d' \(.* from 1s to "):
        admin.parse_age("0d", SHORTEST_RETENTION)
    assert fts_query('build-red? "quoted" x:y') == '"build" "red" "quoted" "x" "y"'
    assert fts_query("?!") == ""
    assert derive_title("  two\nlines  ") == "two lines"
    assert derive_title(" \t\n ") is None
    long = derive_title("word " * 40)
    assert long is not None and len(long) == 80 and long == ("word " * 40)[:79] + "…"
