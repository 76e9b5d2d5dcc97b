"""An ACP agent process for the tests: DurableACPAgent over stdio, the scripted model, two tools.

Usage: ``python _acp_agent.py DB [--no-retain] [--page-size N]``, with the
scripted model's files in ``SESSIONSTORE_TEST_SCRIPT`` / ``SESSIONSTORE_TEST_RECORDING``
and, for the blocking tool, a folder in ``SESSIONSTORE_TEST_GATE``.

Tools:
* ``lookup(word)``: a dictionary entry (its text is what the tests search for in the file);
* ``wait_for_gate(label)``: writes ``GATE/started``, then waits (up to a minute) for ``GATE/open``: a tool
  call the test can kill the process in the middle of.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from _acp_model import scripted_model
from ag2 import Agent

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("--no-retain", action="store_true")
    parser.add_argument("--page-size", type=int, default=50)
    args = parser.parse_args()
    agent = Agent("helper", "You answer questions about fruit.", config=scripted_model(), tools=[lookup, wait_for_gate])
    server = DurableACPAgent(agent, args.db, retain_history=not args.no_retain, list_page_size=args.page_size)
    asyncio.run(server.run_stdio())


if __name__ == "__main__":
    main()
