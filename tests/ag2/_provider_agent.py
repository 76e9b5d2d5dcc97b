"""An ACP agent process for the provider replay tests: a real AG2 provider client answered from a cassette.

Usage: ``python _provider_agent.py CONVERSATION DB``, with the request recording named by
``SESSIONSTORE_TEST_REQUESTS`` (see ``_provider_http``): ``DurableACPAgent(agent, DB).run_stdio()``.

``CONVERSATION`` picks the model config (``_provider_http.FACTORIES``, with its cassette) and the tools the
conversation uses: the local ``lookup`` tool everywhere, plus the provider's hosted tools. The reference run
builds the same agent in the test process (``build_agent``) and serves it with AG2's own ``ACPAgent``.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from _acp_agent import lookup
from _provider_http import FACTORIES
from ag2 import Agent
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


def build_agent(conversation: str, requests: Path | None = None) -> Agent:
    """The conversation's agent; its provider's HTTP recorded to ``requests`` (default: as the environment says)."""
    return Agent("helper", SYSTEM_PROMPT, config=FACTORIES[conversation](requests), tools=tools(conversation))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("conversation", choices=sorted(FACTORIES))
    parser.add_argument("db")
    args = parser.parse_args()
    asyncio.run(DurableACPAgent(build_agent(args.conversation), args.db).run_stdio())


if __name__ == "__main__":
    main()
