"""An ACP agent process for the tests: DurableACPAgent over stdio, the scripted model, two tools.

Usage: ``python _acp_agent.py DB [--no-retain] [--page-size N] [--subagents]``, with the
scripted model's files in ``SESSIONSTORE_TEST_SCRIPT`` / ``SESSIONSTORE_TEST_RECORDING``
and, for the blocking tool, a folder in ``SESSIONSTORE_TEST_GATE``.

Tools:
* ``lookup(word)``: a dictionary entry (its text is what the tests search for in the file);
* ``wait_for_gate(label)``: writes ``GATE/started``, then waits (up to a minute) for ``GATE/open``: a tool
  call the test can kill the process in the middle of;
* with ``--subagents``, ``task_researcher(objective)``: AG2's own subagent tool (``subagent_tool``) running a
  ``researcher`` agent, which has one of its own, ``task_checker``, running a ``checker``; and
  ``consult_advisor(question)``: a tool that runs an ``advisor`` agent on a new stream of the session's
  storage, handing it nothing of the turn's (no dependencies). Each subagent plays its own script, beside the
  main one: ``researcher.script.json`` / ``researcher.recording.jsonl``, and the same for the others.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _acp_model import RECORDING_ENV, SCRIPT_ENV, ScriptedConfig, scripted_model
from ag2 import Agent, Context
from ag2.stream import MemoryStream
from ag2.tools.subagents import subagent_tool
from ag2.tools.subagents.subagent_tool import SubagentTool

from sessionstore.ag2 import DurableACPAgent

GATE_ENV = "SESSIONSTORE_TEST_GATE"

ENTRIES = {
    "kumquat": "a small orange citrus fruit eaten whole, peel and all (glossary entry 7)",
    "loquat": "a yellow fruit of the rose family, sweet and tangy",
}


def lookup(word: str) -> str:
    """Look a word up in the glossary."""
    return f"{word}: {ENTRIES.get(word, 'not in the glossary')}"


async def wait_for_gate(label: str) -> str:
    """Wait until the operator opens the gate."""
    gate = Path(os.environ[GATE_ENV])
    (gate / "started").write_text(label)
    for _ in range(600):
        if (gate / "open").exists():
            return f"gate opened for {label}"
        await asyncio.sleep(0.1)
    return f"gate stayed shut for {label}"


def subagent_model(name: str) -> ScriptedConfig:
    """A subagent's scripted model: its script and recording beside the main ones, named after it."""
    script, recording = Path(os.environ[SCRIPT_ENV]), Path(os.environ[RECORDING_ENV])
    return ScriptedConfig(script.with_name(f"{name}.script.json"), recording.with_name(f"{name}.recording.jsonl"))


def researcher_tool() -> SubagentTool:
    checker = Agent("checker", "You check facts.", config=subagent_model("checker"))
    researcher = Agent(
        "researcher",
        "You research orchards.",
        config=subagent_model("researcher"),
        tools=[subagent_tool(checker, description="Have a fact checked.")],
    )
    return subagent_tool(researcher, description="Delegate research about the orchard.")


async def consult_advisor(ctx: Context, question: str) -> str:
    """Ask the advisor."""
    advisor = Agent("advisor", "You advise.", config=subagent_model("advisor"))
    reply = await advisor.ask(question, stream=MemoryStream(storage=ctx.stream.history.storage))
    return reply.body or ""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("--no-retain", action="store_true")
    parser.add_argument("--page-size", type=int, default=50)
    parser.add_argument("--subagents", action="store_true")
    args = parser.parse_args()
    tools: list[Callable[..., Any] | SubagentTool] = [lookup, wait_for_gate]
    if args.subagents:
        tools += [researcher_tool(), consult_advisor]
    agent = Agent("helper", "You answer questions about fruit.", config=scripted_model(), tools=tools)
    server = DurableACPAgent(agent, args.db, retain_history=not args.no_retain, list_page_size=args.page_size)
    asyncio.run(server.run_stdio())


if __name__ == "__main__":
    main()
