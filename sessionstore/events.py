"""Conversation events and the registry that names them.

An event is a frozen dataclass registered under a *stable type name*: the name,
not the Python module path, is what goes on disk, so moving or renaming a class
never orphans stored history, and stored data never chooses what gets imported.

Applications add their own types by subclassing :class:`BaseEvent` with a
``type_name``::

    @dataclass(frozen=True)
    class Handoff(BaseEvent, type_name="myapp.handoff"):
        to_agent: str
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

__all__ = [
    "BaseEvent",
    "EventTypes",
    "ModelMessage",
    "SystemMessage",
    "ToolCall",
    "TokenUsage",
    "Tokens",
    "ToolResult",
    "UnknownEvent",
    "UserMessage",
    "default_event_types",
]


class EventTypes:
    """A two-way map between stable type names and event classes.

    The codec looks names up here and nowhere else; a name that is not
    registered decodes to :class:`UnknownEvent`, never to an import.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, type[BaseEvent]] = {}
        self._by_class: dict[type[BaseEvent], str] = {}

    def register(self, cls: type[BaseEvent], type_name: str) -> None:
        if not type_name or not isinstance(type_name, str):
            raise ValueError("an event type name must be a non-empty string")
        if not (isinstance(cls, type) and issubclass(cls, BaseEvent)):
            # Refused here, not when a row of it is first read: the codec builds
            # events from their dataclass fields and would fail on decode instead.
            raise ValueError(f"cannot register {cls!r} as {type_name!r}: event types subclass sessionstore.BaseEvent")
        taken = self._by_name.get(type_name)
        if taken is not None and taken is not cls and taken.__qualname__ != cls.__qualname__:
            # Re-registering the same class (a module reloaded in a test) is fine;
            # two different classes sharing a name would decode one as the other.
            raise ValueError(f"event type name {type_name!r} is already used by {taken.__qualname__}")
        self._by_name[type_name] = cls
        self._by_class[cls] = type_name

    def name_of(self, cls: type[BaseEvent]) -> str | None:
        return self._by_class.get(cls)

    def lookup(self, type_name: str) -> type[BaseEvent] | None:
        return self._by_name.get(type_name)

    def names(self) -> list[str]:
        return sorted(self._by_name)


default_event_types = EventTypes()


@dataclass(frozen=True)
class BaseEvent:
    """Base of every stored event.

    Events are frozen: a stored event is a fact, and :meth:`SQLiteStorage.set_history`
    relies on an unchanged object being the same object to write only what changed.
    ``metadata`` is free-form and keyword-only on every event.
    """

    metadata: dict[str, Any] = field(default_factory=dict, kw_only=True)

    type_name: ClassVar[str] = ""

    def __init_subclass__(cls, type_name: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if type_name is not None:
            cls.type_name = type_name
            # @dataclass (without slots=True) decorates this same class object in
            # place, so registering it before the decorator runs is safe.
            default_event_types.register(cls, type_name)


@dataclass(frozen=True)
class UserMessage(BaseEvent, type_name="user_message"):
    """What the person typed."""

    content: str


@dataclass(frozen=True)
class ModelMessage(BaseEvent, type_name="model_message"):
    """What the model answered, as text."""

    content: str


@dataclass(frozen=True)
class SystemMessage(BaseEvent, type_name="system_message"):
    """Instructions given to the model rather than said by anyone."""

    content: str


@dataclass(frozen=True)
class ToolCall(BaseEvent, type_name="tool_call"):
    """The model asking for a tool to be run."""

    call_id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResult(BaseEvent, type_name="tool_result"):
    """What a tool gave back for the call with the same ``call_id``."""

    call_id: str
    content: Any = None
    is_error: bool = False


class Tokens(NamedTuple):
    """Tokens spent, by kind: what :meth:`Codec.tokens <sessionstore.codec.Codec.tokens>` says of a usage event,
    and what a session's or a turn's usage events add up to (summed in SQL: ``events.input_tokens``...).

    ``input`` counts the prompt as the provider reports it (some include the cached part, some do not),
    ``cache_read`` and ``cache_write`` the prompt tokens read from and written to the provider's cache,
    ``reasoning`` the thinking tokens (most providers count them in ``output`` too).
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0

    @property
    def total(self) -> int:
        """Input and output: what a provider bills, before the cache's discounts."""
        return self.input + self.output


@dataclass(frozen=True)
class TokenUsage(BaseEvent, type_name="token_usage"):
    """Tokens a model call spent, for an application without AG2 (whose ``UsageEvent`` AG2's codec reads).

    An event of its own, not a field of :class:`ModelMessage`: a call that only asks for tools, or a compaction's,
    spends tokens with no message to carry them, and every stored message stays as it was. Not part of the
    transcript (no role); its tokens are stored beside it, so ``list``, ``show`` and the ``usage`` view add them up.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    model: str | None = None

    @property
    def tokens(self) -> Tokens:
        return Tokens(
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
            self.reasoning_tokens,
        )


@dataclass(frozen=True)
class UnknownEvent(BaseEvent):
    """A stored event this process cannot decode, kept exactly as it was stored.

    Either its type name is not registered here (written by a newer version or
    another application) or its payload does not fit the registered class. It
    carries the raw text, so writing it back stores the same bytes: nothing is
    dropped because one process did not understand it.
    """

    stored_type: str
    payload: str
    reason: str = field(default="", compare=False)
