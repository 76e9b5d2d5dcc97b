"""What an ACP client is told when a prompt fails: one line saying why, with no secret in it.

AG2 answers a failed turn with JSON-RPC's bare "Internal error" (the cause only in
``data`` and in a traceback on the agent's stderr), while the person at the editor
needs the cause: a missing key, the provider's 401, a file another process holds
locked. Provider messages quote what they were sent, though (a key echoed back, a
URL with a password or a ``?key=``), so every message is redacted before it leaves:
the values of the model config's credential fields and of the environment's
credential variables, and anything shaped like a credential.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import StorageError

__all__ = ["MASK", "describe_failure", "known_secrets", "redact"]

MASK = "***"
MAX_REASON = 500
"""Characters of the cause a message keeps (a provider's error body can be a page long)."""
MIN_SECRET = 6
"""Shorter values are not masked where they appear (a 3-letter 'key' would blank out words)."""

_SECRET_NAME = re.compile(r"key|token|secret|passw|credential|auth|signature", re.IGNORECASE)

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # A password in a URL: scheme://user:password@host
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@", re.IGNORECASE), rf"\g<1>{MASK}@"),
    # Credentials as query parameters: ?key=, &api_key=, &token=, &password=, &sig=, ...
    (
        re.compile(
            r"([?&;](?:[a-z0-9_.-]*(?:key|token|secret|passw|signature|credential)[a-z0-9_.-]*|sig|auth)=)[^&#\s'\"]+",
            re.IGNORECASE,
        ),
        rf"\g<1>{MASK}",
    ),
    # HTTP authorization values: Bearer <token>, Basic <base64>
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{6,}", re.IGNORECASE), rf"\g<1> {MASK}"),
    # Key shapes the providers use (OpenAI, Anthropic, Google, xAI, Groq, Hugging Face, AWS access key ids)
    (
        re.compile(
            r"\b(?:sk-[A-Za-z0-9_-]{8,}|AIza[0-9A-Za-z_-]{20,}|xai-[A-Za-z0-9_-]{8,}|gsk_[A-Za-z0-9]{8,}"
            r"|hf_[A-Za-z0-9]{8,}|A[KS]IA[0-9A-Z]{16})"
        ),
        MASK,
    ),
)


def known_secrets(config: object, environ: Mapping[str, str] | None = None) -> set[str]:
    """Values never to show: the model config's credential fields and headers, and credential variables.

    A config field or environment variable is a credential by its name (``api_key``, ``OPENAI_API_KEY``,
    ``AWS_SECRET_ACCESS_KEY``, ``auth_token``, ``password``...); a header by ``Authorization`` or ``*key*``.
    """
    found: set[str] = set()
    for name, value in _fields(config):
        _collect(name, value, found)
    for name, value in (os.environ if environ is None else environ).items():
        if _SECRET_NAME.search(name):
            _collect(name, value, found)
    return {value for value in found if len(value) >= MIN_SECRET}


def _fields(config: object) -> Iterable[tuple[str, Any]]:
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return [(f.name, getattr(config, f.name, None)) for f in dataclasses.fields(config)]
    return list(getattr(config, "__dict__", {}).items())


def _collect(name: str, value: Any, found: set[str]) -> None:
    getter = getattr(value, "get_secret_value", None)  # pydantic's SecretStr
    if callable(getter):
        value = getter()
    if isinstance(value, str):
        if _SECRET_NAME.search(name):
            found.add(value)
            found.update(part for part in value.split() if len(part) >= MIN_SECRET)  # "Bearer <token>"
    elif isinstance(value, Mapping):  # default_headers, extra_headers, ...
        for key, item in value.items():
            if isinstance(key, str):
                _collect(key, item, found)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every known secret and everything shaped like a credential replaced by ``***``."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= MIN_SECRET:
            text = text.replace(secret, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _http_status(exc: BaseException) -> int | None:
    """The provider's HTTP status: ``status_code`` (OpenAI's, Anthropic's, Mistral's SDKs) or ``code`` (Google's)."""
    for name in ("status_code", "code"):
        value = getattr(exc, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def _provider_message(exc: BaseException) -> str | None:
    """The message in a provider's error body, kept parsed as ``body`` (OpenAI, Anthropic) or ``details`` (Google)."""
    body = getattr(exc, "body", None)
    if not isinstance(body, Mapping):
        body = getattr(exc, "details", None)
    if isinstance(body, Mapping):
        error = body.get("error")
        for holder in (error, body):
            if isinstance(holder, Mapping) and isinstance(holder.get("message"), str) and holder["message"]:
                return str(holder["message"])
    return None


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def describe_failure(
    exc: BaseException, *, secrets: Iterable[str] = (), prompt_kept: bool = True
) -> tuple[str, dict[str, Any]]:
    """The message and ``data`` of the ACP error a failed prompt is answered with.

    The message is one line: ``Prompt failed: <why>``, and, when the prompt could not be stored either, says so
    (normally it is in the session, so a retry or a later load finds it). ``data`` keeps AG2's keys (``reason``,
    ``type``) and adds ``status`` (the provider's HTTP status, when there is one) and ``promptKept``.
    """
    kind = type(exc).__name__
    status = _http_status(exc)
    detail = _provider_message(exc) or str(exc) or kind
    if isinstance(exc, StorageError):
        why = f"the session could not be stored ({kind}): {detail}"
    elif status is not None:
        why = f"the model provider answered HTTP {status} ({kind}): {detail}"
    else:
        why = f"{kind}: {detail}"
    reason = _one_line(redact(why, secrets))
    message = f"Prompt failed: {reason}"
    if not prompt_kept:
        message += " (the prompt could not be stored in the session either)"
    data: dict[str, Any] = {"reason": reason, "type": kind, "promptKept": prompt_kept}
    if status is not None:
        data["status"] = status
    return message, data
