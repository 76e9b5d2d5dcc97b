"""An AG2 chat agent an editor launches over stdio (ACP), with its sessions kept in one SQLite file.

Run::

    python -m sessionstore.ag2.example --model test    # no provider, no key: echoes each prompt
    python -m sessionstore.ag2.example --model openai:gpt-4o-mini
    python -m sessionstore.ag2.example --db ~/.local/share/myagent/sessions.db --model anthropic:claude-sonnet-4-5

The editor (Zed, or any ACP client) starts it and speaks ACP on stdin/stdout;
logs go to stderr. Sessions can be listed, loaded and resumed from the editor
after restarts, and read with ``sessionstore list`` / ``show`` / ``search``
(the default ``--db`` is the same file those commands read by default).

The model: ``--model test`` needs no provider (:class:`EchoConfig`, AG2's
scripted test model answering each prompt by echoing it), to try durable
sessions before configuring one. ``--model PROVIDER:MODEL`` is built as AG2's
config class for the provider (``openai`` is ``ag2.config.OpenAIConfig(model=MODEL)``, and so on; the
provider's extra must be installed, e.g. ``pip install "ag2[openai]"``, and its
usual environment variable holds the key, e.g. ``OPENAI_API_KEY``). Anything
more particular (a base URL, a temperature, a custom client) goes through
``--model-factory MODULE:FUNCTION``: a function taking no arguments and
returning an AG2 model config, imported from the Python path. The tests use
that hook to plug in a scripted model.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ag2 import Agent, Context
from ag2.events import BaseEvent, ModelRequest, ModelResponse, TextInput
from ag2.testing import TestClient, TestConfig

from ..cli import default_db_path
from .agent import DurableACPAgent

__all__ = ["PROVIDERS", "TEST_MODEL", "EchoConfig", "build_parser", "main", "model_from_factory", "model_from_spec"]

PROVIDERS = {
    "anthropic": ("AnthropicConfig", "anthropic"),
    "bedrock": ("BedrockConfig", "bedrock"),
    "dashscope": ("DashScopeConfig", "dashscope"),
    "gemini": ("GeminiConfig", "gemini"),
    "mistral": ("MistralConfig", "mistral"),
    "ollama": ("OllamaConfig", "ollama"),
    "openai": ("OpenAIConfig", "openai"),
    "openai-responses": ("OpenAIResponsesConfig", "openai"),
    "vertexai": ("VertexAIConfig", "gemini"),
    "xai": ("XAIConfig", "xai"),
    "zai": ("ZAIConfig", "zai"),
}
"""``--model`` provider names: the ``ag2.config`` class each builds, and the AG2 extra that class needs."""

DEFAULT_PROMPT = "You are a helpful assistant working in the user's editor. Answer concisely."

TEST_MODEL = "test"
"""``--model test``: :class:`EchoConfig`."""


def _text(request: ModelRequest) -> str:
    return "".join(part.content for part in request.parts if isinstance(part, TextInput))


def echo(messages: Sequence[BaseEvent]) -> str:
    """The test model's reply: the prompt echoed, and which prompt of the session it is (with the first).

    The model is given the whole stored history, so after a restart and a load the count goes on: the reply
    itself shows the session came back.
    """
    prompts = [m for m in messages if isinstance(m, ModelRequest)]
    if not prompts:
        return "Echo (the test model, no provider): nothing to echo."
    reply = f'Echo (the test model, no provider): "{_text(prompts[-1])}"'
    if len(prompts) > 1:
        reply += f' (prompt {len(prompts)} in this session; the first was "{_text(prompts[0])}")'
    return reply


class _EchoClient(TestClient):
    """AG2's scripted test client, its script written for each call from what the model is given."""

    __test__ = False

    async def __call__(self, messages: Sequence[BaseEvent], context: Context, **kwargs: Any) -> ModelResponse:
        self.events = iter([echo(messages)])
        return await super().__call__(messages, context, **kwargs)


class EchoConfig(TestConfig):
    """``--model test``: AG2's ``TestConfig``, answering every prompt by echoing it; no provider, no key.

    ``TestConfig`` plays a fixed script from its start on every ACP turn (each turn creates a new client), so a
    script cannot follow a conversation; this one writes each reply from the conversation instead.
    """

    __test__ = False

    def __init__(self) -> None:
        super().__init__(model=TEST_MODEL)

    def create(self) -> TestClient:
        return _EchoClient()


def model_from_spec(spec: str) -> Any:
    """AG2's model config for ``PROVIDER:MODEL`` (or ``test``); ``ValueError`` saying what is wrong otherwise."""
    if spec == TEST_MODEL:
        return EchoConfig()
    provider, sep, model = spec.partition(":")
    if not sep or not provider or not model:
        raise ValueError(f"--model takes PROVIDER:MODEL (e.g. openai:gpt-4o-mini) or test, got {spec!r}")
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}; one of: {', '.join(PROVIDERS)}")
    class_name, extra = PROVIDERS[provider]
    config_class = getattr(importlib.import_module("ag2.config"), class_name)
    try:
        return config_class(model=model)
    except ImportError as exc:  # AG2 stands in a placeholder that raises this when the extra is missing
        raise ValueError(f"the {provider} provider needs its AG2 extra: pip install 'ag2[{extra}]' ({exc})") from None


def model_from_factory(target: str) -> Any:
    """Call ``MODULE:FUNCTION`` (no arguments) for the model config; ``ValueError`` if it cannot be found."""
    module_name, sep, function_name = target.partition(":")
    if not sep or not module_name or not function_name:
        raise ValueError(f"--model-factory takes MODULE:FUNCTION, got {target!r}")
    try:
        factory = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load the model factory {target!r}: {exc}") from exc
    config = factory()
    if not callable(getattr(config, "create", None)):
        raise ValueError(f"{target} returned {config!r}, which is not an AG2 model config (it has no create())")
    return config


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sessionstore.ag2.example",
        description="An AG2 agent served over ACP on stdio, its sessions kept in one SQLite file.",
    )
    parser.add_argument(
        "--db", type=Path, help=f"the sessions file (default: $SESSIONSTORE_DB, else {default_db_path()})"
    )
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument(
        "--model",
        metavar="PROVIDER:MODEL",
        help=f"provider one of: {', '.join(PROVIDERS)}; or 'test' (no provider, no key: echoes each prompt)",
    )
    model.add_argument(
        "--model-factory",
        metavar="MODULE:FUNCTION",
        help="a function returning an AG2 model config, for anything --model cannot say (and for tests)",
    )
    parser.add_argument("--name", default="assistant", help="the agent's name, shown by the editor")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT, help="the system prompt")
    parser.add_argument(
        "--no-retain",
        action="store_true",
        help="delete a session's history when it is closed or the editor disconnects (default: keep it, released)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = model_from_spec(args.model) if args.model else model_from_factory(args.model_factory)
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    db = args.db.expanduser() if args.db is not None else default_db_path()
    agent = Agent(args.name, args.prompt, config=config)
    server = DurableACPAgent(agent, db, retain_history=not args.no_retain)
    asyncio.run(server.run_stdio())
    return 0


if __name__ == "__main__":
    sys.exit(main())
