"""An ACP agent process for the provider replay tests: a real AG2 provider client answered from a cassette.

Usage: ``python _provider_agent.py CONVERSATION DB [--memory]``, with the cassette and the request
recording named by ``SESSIONSTORE_TEST_CASSETTE`` / ``SESSIONSTORE_TEST_REQUESTS`` (see ``_provider_http``).

``CONVERSATION`` picks the model config (``_provider_http.FACTORIES``) and the tools the cassette's
conversation uses: the local ``lookup`` tool everywhere, plus the provider's hosted tools. The agent is
``DurableACPAgent(agent, DB)``; with ``--memory`` it is AG2's own ``ACPAgent`` with its in-memory storage
(the reference: what AG2 sends when nothing is stored anywhere and nothing restarts).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from _acp_agent import lookup
from _provider_http import FACTORIES
from ag2 import Agent
from ag2.acp import ACPAgent
from ag2.tools import CodeExecutionTool, WebSearchTool

from sessionstore.ag2 import DurableACPAgent

SYSTEM_PROMPT = "You answer questions about fruit."


def tools(conversation: str) -> list[Any]:
    hosted: dict[str, list[Any]] = {
        "openai": [],
        "openai-responses": [WebSearchTool()],
        "anthropic": [WebSearchTool(max_uses=3), CodeExecutionTool()],
        "gemini": [CodeExecutionTool(), WebSearchTool()],
        "gemini-minted-ids": [],
    }
    return [lookup, *hosted[conversation]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("conversation", choices=sorted(FACTORIES))
    parser.add_argument("db")
    parser.add_argument("--memory", action="store_true")
    args = parser.parse_args()
    agent = Agent("helper", SYSTEM_PROMPT, config=FACTORIES[args.conversation](), tools=tools(args.conversation))
    server = ACPAgent(agent) if args.memory else DurableACPAgent(agent, args.db)
    asyncio.run(server.run_stdio())


if __name__ == "__main__":
    main()
