"""One rule for a time shown to a person: UTC, with the zone written, in every tool.

The demo printed UTC while the command line printed local time, so one instant read two ways. Here the machine's
zone is 14 hours ahead of UTC (the date differs too), and the demo, ``list``, ``show``, ``prune`` and the real
``sqlite3`` shell must all show the instant the file stores, as the same text.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from _clitools import TIMEOUT, Run, child_env, sqlite3_shell

AHEAD = child_env(TZ="Pacific/Kiritimati")  # UTC+14 all year


def demo(*args: object) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "sessionstore.demo", *map(str, args)],
        capture_output=True,
        text=True,
        env=AHEAD,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_demo_the_command_line_and_sqlite3_show_one_instant_as_one_text(tmp_path: Path, sessionstore: Run) -> None:
    db = tmp_path / "demo.db"
    demo("write", db)
    query = "SELECT session_id, created_at, updated_at FROM sessions;"
    sid, created, updated = sqlite3_shell(db, query).split("|")
    time.sleep(1.0)  # the resume below restamps the session a second after its events were written
    assert f"{sid}  {updated[:19]} UTC" in demo("resume", db)  # its list, printed before it resumes the session
    sid, created, updated = sqlite3_shell(db, query).split("|")  # resuming it stamped it again
    seconds, minutes = updated[:19] + " UTC", updated[:16] + " UTC"

    listed = sessionstore("--db", db, "list", env=AHEAD)
    assert listed.returncode == 0, listed.stderr
    assert f"{sid[:12]}  {minutes}" in listed.stdout
    shown = sessionstore("--db", db, "show", sid, env=AHEAD)
    assert f"created  {created[:19]} UTC   updated {seconds}" in shown.stdout, shown.stdout
    # Each event's line (user, tool call, tool result, assistant) starts with its own time, as the view has it.
    written = sqlite3_shell(db, f"SELECT created_at FROM transcript WHERE session_id = '{sid}' ORDER BY position;")
    events = [line for line in shown.stdout.splitlines() if line[:2] == "20"]
    assert [line[:23] for line in events] == [when[:19] + " UTC" for when in written.splitlines()]
    assert len(events) == 4
    time.sleep(1.1)
    pruned = sessionstore("--db", db, "prune", "--older-than", "1s", env=AHEAD)
    assert f"{sid[:12]}  {minutes}" in pruned.stdout
    # None of them read the stored time as local time (14 hours later, another date).
    for out in (listed.stdout, shown.stdout, pruned.stdout):
        assert "+14" not in out and out.count(" UTC") >= 1
