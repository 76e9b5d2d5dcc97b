"""The terminal shows text, never control sequences from stored data.

A title, a cwd, a message, a tool's output or a type name may hold escape
sequences (written by a careless tool, or by someone who wants the person
reading the transcript to see something else): a screen clear, a clipboard
write (OSC 52), a hyperlink (OSC 8), a C1 CSI, a bidirectional override. The
installed command prints each as a visible escape, in every output, JSON too.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from _clitools import Run, Spec, write_db

from sessionstore import ModelMessage, ToolCall, ToolResult, UserMessage

HOSTILE = {
    "clear": "\x1b[2J\x1b[H",
    "clipboard": "\x1b]52;c;cm0gLXJmIH4=\x07",
    "link": "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "csi": "\x9b31m",
    "bidi": "\u202eexe.txt",
    "bell": "\x07",
}
FORBIDDEN = ("\x1b", "\x07", "\x9b", "\u202e")


def hostile(word: str) -> str:
    return word + "".join(HOSTILE.values()) + word


def test_nothing_stored_reaches_the_terminal_as_a_control_sequence(sessionstore: Run, tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    events = [
        UserMessage(hostile("prompt")),
        ToolCall(call_id="c1", name=hostile("tool"), arguments={"path": hostile("argument")}),
        ToolResult(call_id="c1", content=hostile("output")),
        ModelMessage(hostile("answer")),
    ]
    (sid,) = write_db(db, [Spec(events, cwd=hostile("/cwd"), title=hostile("title"))])
    with sqlite3.connect(db) as conn:  # a type name edited by hand
        conn.execute(
            "INSERT INTO events (session, position, type, payload, created_at)"
            " SELECT session, 99, ?, '{}', created_at FROM events LIMIT 1",
            (hostile("type"),),
        )
    outputs: list[subprocess.CompletedProcess[str]] = [
        sessionstore("--db", db, "list"),
        sessionstore("--db", db, "show", sid[:8]),
        sessionstore("--db", db, "show", sid[:8], "--all"),
        sessionstore("--db", db, "search", "answer"),
        sessionstore("--db", db, "stats"),
        sessionstore("--db", db, "list", "--json"),
        sessionstore("--db", db, "show", sid[:8], "--json"),
        sessionstore("--db", hostile("/no/such"), "list"),  # an error naming a path
    ]
    for done in outputs:
        for stream in (done.stdout, done.stderr):
            assert not any(char in stream for char in FORBIDDEN), (done.args, stream)
    shown = outputs[1].stdout
    assert "title    title\\x1b[2J\\x1b[H\\x1b]52;c;cm0gLXJmIH4=\\x07" in shown  # visible, escaped
    assert "\\u202eexe.txt" in shown
    assert "\\x1b" in outputs[2].stdout and "\\x1b" in outputs[4].stdout  # the type name, in show --all and stats
    assert outputs[7].returncode == 1 and "\\x1b" in outputs[7].stderr
    # JSON stays JSON, and holds the stored text exactly.
    listed = json.loads(outputs[5].stdout)
    assert listed[0]["title"] == hostile("title") and listed[0]["cwd"] == hostile("/cwd")
    transcript = json.loads(outputs[6].stdout)
    assert transcript["events"][3]["text"] == hostile("answer")
