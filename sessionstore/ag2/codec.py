"""AG2's events as rows: the codec that makes :class:`~sessionstore.SQLiteStorage` an AG2 ``Storage``.

::

    storage = SQLiteStorage("agent.db", codec=AG2Codec())

What a row holds
    ``type`` is a stable name from the tables in ``tables.py`` (``ag2.model_response``, ``ag2.openai.reasoning``),
    written out there class by class: the name is stored data, so it must never follow a rename or a move inside
    AG2. Every event class of AG2 and of its optional extras has one (an extra's classes once its module is
    imported, which ``import ag2`` does for the provider clients that are installed). ``payload`` is a JSON object
    of the event's public instance attributes, exactly the keys AG2's own ``event_to_dict`` keeps, in their order,
    every one of them, defaults included (an AG2 upgrade may change a default; a row keeps meaning what it meant).
    Private attributes (``_serialized_arguments``, ``TaskFailed._content``) are caches AG2 derives again from the
    public ones; decoding resets them to their defaults, as a fresh event has them.

Values
    The JSON codec's tags (``$bytes``, ``$datetime``, ``$tuple``, ``$float``, ``$items``, ...) plus one-key tags
    for AG2's values, each naming its class from a closed table::

        {"$event": [name, {fields}]}        a nested event (the ModelMessage in a ModelResponse, the calls of a
                                            ToolCallsEvent), named as rows are
        {"$dataclass": [name, {fields}]}    Usage, ToolResult, BinaryResult, TaskSpec, ACPPlanEntry, A2UI's, eval's
        {"$object": [name, {slots}]}        eval's results (plain classes with __slots__)
        {"$enum": [name, value]}            BinaryType, Severity, FileProvider
        {"$pydantic": [name, {dump}]}       pydantic models the application registered
        {"$exception": [name, {"args": [...], ...}]}   see below
        {"$stored_value": [class, json]}    any other value a tool returned: see StoredValue
        {"$decimal": "1.50"}  {"$set": [...]}  {"$frozenset": [...]}  {"$path": [class, "/a/b"]}

    A provider SDK's value (the ``item`` of ``OpenAIReasoningEvent``, the ``block`` of an Anthropic server tool
    result, a Gemini ``Part``, an A2A protobuf message) is written as plain JSON, without a class name, and rebuilt
    as the type the event's field declares: see ``shapes.py``.

Safety
    Decoding looks every name up in this codec's tables and nowhere else: stored data never decides what is
    imported or constructed (AG2's own ``deserialize_value`` imports any class a payload names; it is never used
    here). Events and dataclasses are rebuilt without running their ``__init__``: what comes back is the stored
    state. A type name or payload this codec cannot decode comes back as a :class:`StoredUnknownEvent` (a subclass
    of AG2's ``UnknownEvent``, which AG2's model mappers and ACP replay skip) holding the row's exact text, and
    encoding it writes the same text back.

Exceptions
    Tool errors and failed tasks hold an ``Exception``. It is stored as its class (from a closed table: Python's
    built-in exceptions, ``ag2.exceptions``, ``acp.RequestError`` and registered ones), ``args``, notes and simple
    attributes, so ``type(error)`` and ``str(error)`` come back equal (AG2 compares tool errors by exactly those).
    An exception of any other class is stored as its nearest ancestor in the table, with its dotted class name
    kept as text (``_sessionstore_raised_as`` on the decoded exception): never imported, so never re-raised as
    itself. Tracebacks, ``__cause__`` and ``__context__`` are not kept (AG2 already renders the traceback into
    the tool result's text). AG2's own rule, a bare ``Exception(message)``, would make every stored tool error
    unequal to the one that was raised.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import re
import sys
import threading
import types
import typing
from collections.abc import Callable, Iterable, Mapping, MutableMapping, MutableSequence, Sequence
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from pathlib import Path, PosixPath, PurePath, PurePosixPath, PureWindowsPath, WindowsPath
from types import MappingProxyType
from typing import Any, Final, cast
from uuid import UUID

from ag2.acp.executor import CANCELLED_TOOL_RESULT
from ag2.annotations import Context as AG2Context
from ag2.compact import CompactionSummary
from ag2.events import (
    BaseEvent,
    BinaryInput,
    DataInput,
    FileIdInput,
    HumanInputRequest,
    HumanMessage,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextInput,
    ToolCallEvent,
    ToolErrorEvent,
    ToolResult,
    ToolResultEvent,
    ToolResultsEvent,
    UnknownEvent,
    UrlInput,
    UsageEvent,
)
from ag2.events.base import Field, FieldInfo
from ag2.events.conditions import OrCondition, TypeCondition
from ag2.history import HUMAN_INPUT_ABANDONED_TOOL_RESULT
from pydantic import BaseModel, PrivateAttr, RootModel
from pydantic_core import to_json

from ..codec import (
    NOT_MINE,
    Description,
    Tokens,
    _as_text,
    _decode_tag,
    _encode_value,
    _make_parser,
    _Undecodable,
    _utf8,
    payload_text,
)
from ..errors import EventEncodeError
from .shapes import ANY, Arm, Shape, Shapes
from .tables import (
    BUILTIN_EXCEPTIONS,
    DATACLASS_NAMES,
    ENUM_NAMES,
    EVENT_NAMES,
    EXCEPTION_NAMES,
    EXTRA_DATACLASSES,
    EXTRA_EVENTS,
    EXTRA_MODULES,
    EXTRA_OBJECTS,
    RESERVED_PREFIXES,
    loaded_extras,
)

__all__ = [
    "DATACLASS_NAMES",
    "ENUM_NAMES",
    "EVENT_NAMES",
    "EXCEPTION_NAMES",
    "AG2Codec",
    "StoredUnknownEvent",
    "StoredValue",
]

# Built-in exception state kept outside ``args`` (OSError's file names make its message).
_EXCEPTION_MEMBERS: Final = ((OSError, ("filename", "filename2")), (ImportError, ("name", "path")))

# Per thread (a storage may encode on its writer thread and on the event loop at once): exceptions being encoded.
_encoding = threading.local()

_RAISED_AS: Final = "_sessionstore_raised_as"
"""Attribute on a decoded exception that was stored as an ancestor: the dotted name of the class it was raised as."""

_EXTRA_VALUES: Final = frozenset(entry for table in (EXTRA_DATACLASSES, EXTRA_OBJECTS) for entry in table.values())

# Stored as they are: the JSON values no tag is ever needed for (a float only when finite).
_PLAIN_VALUES: Final = frozenset({str, int, bool, type(None)})
_isfinite: Final = math.isfinite


class StoredUnknownEvent(UnknownEvent):
    """A stored row this codec could not decode, kept as its exact text.

    A subclass of AG2's own ``UnknownEvent``, so everything in AG2 that passes over
    events it does not know (the model mappers, ACP's ``history_to_session_updates``)
    passes over it. ``type_name`` and ``payload`` are the row as stored, and encoding
    the event writes exactly them back: one process not understanding a row (written
    by a newer version, or naming a class it does not have) is no reason to change it.
    ``data`` is the payload's JSON object as plain JSON (tags left as they are), for
    reading; ``reason`` says why the row was not decoded.
    """

    payload: str = ""
    reason: str = Field(default="", compare=False)


class StoredValue(RootModel[Any]):
    """A value the codec could not rebuild as its own class: the JSON the model was given for it.

    A tool may return anything AG2 can serialize for the model: the application's own pydantic model, a
    dataclass, an object. The codec rebuilds AG2's classes, the provider SDKs' and the ones registered with
    :meth:`AG2Codec.register`; any other value is stored as pydantic's JSON of it (what AG2's default serializer
    sends the model) and comes back as this stand-in. Serialized again it gives the same JSON, so the model
    sees the same text after a restart. ``type_name`` is the dotted name of the class the value had, kept as
    text (never imported).
    """

    _type_name: str = PrivateAttr(default="")

    @property
    def type_name(self) -> str:
        return self._type_name

    @classmethod
    def of(cls, type_name: str, value: Any) -> StoredValue:
        stand_in = cls(value)
        stand_in._type_name = type_name
        return stand_in


# -- Plans: how one class is read and written, worked out once per class ------------------------------------------


class _EventPlan:
    """Fields of one AG2 event class, and how to rebuild an instance from its stored attributes.

    Built without ``__init__``: AG2's constructor applies defaults and coercions that
    would make the result differ from what was stored (``created_at`` would be now).
    """

    __slots__ = ("cls", "defaults", "fields", "private", "typed")

    def __init__(self, cls: type[BaseEvent], shapes: Shapes | None = None) -> None:
        self.cls = cls
        fields: dict[str, FieldInfo] = {}
        # The first definition along the reversed MRO gives the default, as AG2's __init__ does.
        for klass in reversed(cls.__mro__):
            own = vars(klass).get("_event_fields_")
            if own is None:
                if issubclass(klass, BaseEvent):
                    raise ValueError(f"cannot register {_qualified(cls)}: {_qualified(klass)} has no AG2 event fields")
                continue
            for name, spec in own.items():
                fields.setdefault(name, spec)
        for name in fields:
            found = inspect.getattr_static(cls, name, None)
            if not isinstance(found, FieldInfo) and hasattr(type(found), "__set__"):
                raise ValueError(
                    f"cannot register {_qualified(cls)}: its field {name!r} is hidden by {found!r}, so its value "
                    "is not kept in the instance's attributes, where events are read from"
                )
        self.fields = frozenset(name for name in fields if name[:1] != "_")
        self.defaults = [(name, spec) for name, spec in fields.items() if name[:1] != "_" and _has_default(spec)]
        self.private = [(name, spec) for name, spec in fields.items() if name[:1] == "_" and _has_default(spec)]
        # Fields holding a provider SDK's values, written and rebuilt by their declared type (see shapes.py). Only
        # AG2's own classes have them: an application's event declares values the codec stores by their tags.
        self.typed: dict[str, Shape] = {}
        if shapes is not None:
            for name, annotation in _field_annotations(cls, self.fields):
                shape = shapes.shape(annotation)
                if shape is not ANY:
                    self.typed[name] = shape

    def build(self, raw: dict[str, Any]) -> BaseEvent:
        if not raw.keys() <= self.fields:
            for key in raw.keys() - self.fields:
                # Attributes AG2 would also have kept (set on an instance, or a field a later AG2 removed); never
                # anything the class defines itself, or a private or special name.
                if not key.isidentifier() or key[:1] == "_" or hasattr(self.cls, key):
                    raise _Undecodable(f"{key!r} is not an attribute {self.cls.__name__} can hold")
        event = object.__new__(self.cls)
        values = event.__dict__
        values.update(raw)
        if not self.fields <= raw.keys():
            # A field AG2 added after the row was written: its default, as AG2 would make it.
            for name, spec in self.defaults:
                if name not in values:
                    values[name] = spec.get_default()
        for name, spec in self.private:
            values[name] = spec.get_default()
        for name, shape in self.typed.items():
            if name in raw:
                values[name] = shape.build(raw[name])
        return event


def _field_annotations(cls: type, fields: Iterable[str]) -> Iterable[tuple[str, Any]]:
    """(field, annotation) as the class that declares the field last along the MRO writes it."""
    for name in fields:
        for klass in cls.__mro__:
            annotations = vars(klass).get("__annotations__", {})
            if name in annotations:
                yield name, _resolve(annotations[name], klass)
                break


class _DataclassPlan:
    __slots__ = ("cls", "factories", "name_set", "names")

    def __init__(self, cls: type) -> None:
        self.cls = cls
        fields = dataclasses.fields(cls)
        self.names = tuple(f.name for f in fields)
        self.name_set = frozenset(self.names)
        # Defaults for a field added after the row was written.
        self.factories: dict[str, Callable[[], Any]] = {}
        for f in fields:
            if f.default is not dataclasses.MISSING:
                self.factories[f.name] = _constant(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                self.factories[f.name] = f.default_factory

    def encode(self, value: Any, path: str, extend: Callable[[Any, str], Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.names:
            item = getattr(value, name)
            kind = type(item)
            if kind in _PLAIN_VALUES or (kind is float and _isfinite(item)):
                out[name] = item
            else:
                out[name] = _encode_value(item, f"{path}.{name}", extend)
        return out

    def build(self, raw: Any) -> Any:
        if not isinstance(raw, dict) or not raw.keys() <= self.name_set:
            raise _Undecodable(f"not the fields of {self.cls.__name__}")
        # Without __init__ (ToolResult's takes *inputs, frozen ones refuse setattr): the stored state, set as-is.
        obj: Any = object.__new__(self.cls)
        for name in self.names:
            if name in raw:
                value = raw[name]
            elif name in self.factories:
                value = self.factories[name]()
            else:
                raise _Undecodable(f"{self.cls.__name__} is missing {name!r}")
            object.__setattr__(obj, name, value)
        return obj


class _ObjectPlan:
    """A plain class with ``__slots__`` (AG2's eval results): the slots it has set, rebuilt without ``__init__``."""

    __slots__ = ("cls", "slots")

    def __init__(self, cls: type) -> None:
        self.cls = cls
        slots: list[str] = []
        for klass in reversed(cls.__mro__):
            declared = vars(klass).get("__slots__", ())
            for slot in (declared,) if isinstance(declared, str) else declared:
                if slot not in ("__dict__", "__weakref__") and slot not in slots:
                    slots.append(slot)
        self.slots = tuple(slots)

    def encode(self, value: Any, path: str, extend: Callable[[Any, str], Any]) -> dict[str, Any]:
        missing = object()
        out: dict[str, Any] = {}
        for slot in self.slots:
            item = getattr(value, slot, missing)
            if item is not missing:
                out[slot] = _encode_value(item, f"{path}.{slot}", extend)
        return out

    def build(self, raw: Any) -> Any:
        if not isinstance(raw, dict) or not raw.keys() <= set(self.slots):
            raise _Undecodable(f"not the slots of {self.cls.__name__}")
        obj: Any = object.__new__(self.cls)
        for slot, item in raw.items():
            object.__setattr__(obj, slot, item)
        return obj


def _message(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:  # an application's __str__ that fails (or recurses) must not fail the write
        return type(error).__name__


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


def _has_default(spec: FieldInfo) -> bool:
    return spec._default is not Ellipsis or spec._default_factory is not Ellipsis


def _qualified(cls: Any) -> str:
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', repr(cls))}"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z][a-z])", "_", name.removesuffix("Event")).lower()


# -- The codec ------------------------------------------------------------------------------------------------------

_Encoder = Callable[[Any, str], Any]


class AG2Codec:
    """Stores AG2's events: ``SQLiteStorage(path, codec=AG2Codec())`` is an AG2 ``Storage``.

    ``extra`` maps an application's own classes to stable names of its own (not
    under ``ag2.``, ``acp.`` or ``sessionstore.``, kept for the built-in tables): AG2 event
    subclasses, and the dataclasses, pydantic models, enums and exception classes
    its events hold (a tool returning a pydantic model stores it in a
    ``DataInput``). :meth:`register` adds one later. A class the codec cannot store
    is refused there, with :class:`ValueError`, rather than on its first event.

    AG2's events are mutable, hence ``frozen_events = False``: the storage compares
    and caches their encoded text, never the objects. Encoding copies everything
    to text, and every decode builds new objects.
    """

    frozen_events = False
    context_annotation = AG2Context
    """How AG2 injects a subscriber's context: a storage gives its ``save_event`` this annotation, so AG2 can
    subscribe it directly (``MemoryStream(storage, persist_all=True)``)."""

    def __init__(self, extra: Mapping[type, str] | None = None) -> None:
        self._event_names: dict[type, str] = dict(EVENT_NAMES)
        self._events: dict[str, _EventPlan] = {n: _EventPlan(c, _SHAPES) for c, n in EVENT_NAMES.items()}
        self._dataclass_names: dict[type, str] = dict(DATACLASS_NAMES)
        self._dataclasses: dict[str, _DataclassPlan] = {n: _DataclassPlan(c) for c, n in DATACLASS_NAMES.items()}
        self._object_names: dict[type, str] = {}
        self._objects: dict[str, _ObjectPlan] = {}
        self._enum_names: dict[type, str] = dict(ENUM_NAMES)
        self._enums: dict[str, type[Enum]] = {name: cls for cls, name in ENUM_NAMES.items()}
        self._model_names: dict[type, str] = {}
        self._models: dict[str, type[BaseModel]] = {}
        self._exception_names: dict[type, str] = {**BUILTIN_EXCEPTIONS, **EXCEPTION_NAMES}
        self._exceptions: dict[str, type[BaseException]] = {n: c for c, n in self._exception_names.items()}
        # One encoder per value class met, so the class is inspected once, not once per value.
        self._encoders: dict[type, _Encoder] = {}
        self._builders: dict[str, Callable[[str, Any], Any]] = {
            "$event": self._build_event,
            "$dataclass": self._build_dataclass,
            "$object": self._build_object,
            "$enum": self._build_enum,
            "$pydantic": self._build_model,
            "$exception": self._build_exception,
            "$stored_value": StoredValue.of,
            "$arm": Arm,
            "$path": _build_path,
        }
        self._parse = _make_parser(self._object_hook)
        # The extras' modules not imported yet in this process: looked at again when a class or a name of theirs
        # is met (encoding or decoding may run on two threads at once, hence the lock).
        self._pending = set(EXTRA_MODULES)
        self._lock = threading.Lock()
        self._absorb()
        if extra:
            self._register(extra)

    def _absorb(self) -> bool:
        """Take in the classes of the extras whose modules have been imported since; whether any came."""
        with self._lock:
            found = loaded_extras(self._pending)
            for module, kind, name, cls in found:
                self._pending.discard(module)
                if kind == "event":
                    self._event_names[cls] = name
                    self._events[name] = _EventPlan(cls, _SHAPES)
                elif kind == "dataclass":
                    self._dataclass_names[cls] = name
                    self._dataclasses[name] = _DataclassPlan(cls)
                else:
                    self._object_names[cls] = name
                    self._objects[name] = _ObjectPlan(cls)
            if found:
                self._encoders.clear()  # a class met before its module was taken in
            return bool(found)

    def _absorbs(self, name: str, table: Mapping[str, tuple[str, str]]) -> bool:
        """For a stored name this codec does not know: whether its extra's module is imported now (and taken in)."""
        entry = table.get(name)
        return entry is not None and entry[0] in self._pending and self._absorb()

    def event_names(self) -> dict[type, str]:
        """Every event class this codec stores in this process, with its stored name: AG2's own, those of AG2's
        extras whose modules are imported (see ``sessionstore.ag2.tables``) and the application's registered ones."""
        self._absorb()
        return dict(self._event_names)

    # -- registration ---------------------------------------------------------------------------------------------

    def register(self, cls: type, name: str) -> None:
        """Store ``cls`` under ``name`` from now on (see ``extra``); :class:`ValueError` if it cannot be stored."""
        self._register({cls: name})

    def _register(self, extra: Mapping[type, str]) -> None:
        # Everything is checked before anything is added, so a refused batch leaves the codec as it was.
        taken = self._all_names()
        kinds: dict[type, str] = {}
        batch_names: dict[str, type] = {}
        for cls, name in extra.items():
            kind = _kind_of(cls)
            if not isinstance(name, str) or not name.strip() or name != name.strip():
                raise ValueError(f"cannot register {_qualified(cls)}: a name must be a non-empty string, got {name!r}")
            current = self._name_of(cls)
            if current is not None and current != name:
                raise ValueError(f"cannot register {_qualified(cls)} as {name!r}: it is already stored as {current!r}")
            if current == name:
                continue  # the same registration again
            owner = taken.get(name) or batch_names.get(name)
            if owner is not None:
                raise ValueError(f"cannot register {_qualified(cls)} as {name!r}: that name is {_qualified(owner)}'s")
            if name.startswith(RESERVED_PREFIXES):
                raise ValueError(
                    f"cannot register {_qualified(cls)} as {name!r}: names under ag2., acp. and sessionstore. are "
                    "kept for the classes this codec knows itself; use your application's prefix, e.g. 'myapp.'"
                )
            kinds[cls] = kind
            batch_names[name] = cls
        names = {cls: extra[cls] for cls in kinds}
        known = {
            "event": {*self._event_names, *(c for c, k in kinds.items() if k == "event")},
            "dataclass": {*self._dataclass_names, *(c for c, k in kinds.items() if k == "dataclass")},
            "enum": {*self._enum_names, *(c for c, k in kinds.items() if k == "enum")},
            "model": {*self._model_names, *(c for c, k in kinds.items() if k == "model")},
        }
        event_plans: dict[type, _EventPlan] = {}
        dataclass_plans: dict[type, _DataclassPlan] = {}
        for cls, kind in kinds.items():
            if kind == "event":
                event_plans[cls] = _EventPlan(cls)
                for field, annotation in _own_event_annotations(cls):
                    _check_annotation(cls, field, annotation, known)
            elif kind == "dataclass":
                dataclass_plans[cls] = _DataclassPlan(cls)
                for f in dataclasses.fields(cls):
                    _check_annotation(cls, f.name, _resolve(f.type, cls), known)
            elif kind == "enum":
                for member in cast("type[Enum]", cls):
                    try:
                        _encode_value(member.value, f"{cls.__name__}.{member.name}")
                    except EventEncodeError as exc:
                        raise ValueError(f"cannot register {_qualified(cls)}: {exc}") from None
        for cls, kind in kinds.items():
            name = names[cls]
            if kind == "event":
                self._event_names[cls] = name
                self._events[name] = event_plans[cls]
            elif kind == "dataclass":
                self._dataclass_names[cls] = name
                self._dataclasses[name] = dataclass_plans[cls]
            elif kind == "enum":
                self._enum_names[cls] = name
                self._enums[name] = cls
            elif kind == "model":
                self._model_names[cls] = name
                self._models[name] = cls
            else:
                self._exception_names[cls] = name
                self._exceptions[name] = cls
        self._encoders.clear()  # a class refused before may be registered now

    def _all_names(self) -> dict[str, type]:
        out: dict[str, type] = {}
        for table in (
            self._event_names,
            self._dataclass_names,
            self._object_names,
            self._enum_names,
            self._model_names,
            self._exception_names,
        ):
            out.update({name: cls for cls, name in table.items()})
        return out

    def _name_of(self, cls: type) -> str | None:
        for table in (
            self._event_names,
            self._dataclass_names,
            self._object_names,
            self._enum_names,
            self._model_names,
            self._exception_names,
        ):
            if cls in table:
                return table[cls]
        return None

    # -- Codec ------------------------------------------------------------------------------------------------------

    def encode(self, event: Any) -> tuple[str, str]:
        cls = type(event)
        type_name = self._event_names.get(cls)
        if type_name is None and cls.__module__ in self._pending and self._absorb():
            type_name = self._event_names.get(cls)
        if type_name is None:
            if isinstance(event, StoredUnknownEvent):
                # Written back exactly as it was read.
                if not (isinstance(event.type_name, str) and isinstance(event.payload, str)):
                    raise EventEncodeError("a StoredUnknownEvent's type_name and payload must be the stored text")
                return event.type_name, event.payload
            if not isinstance(event, BaseEvent):
                raise EventEncodeError(f"not an AG2 event: {_qualified(cls)} (AG2Codec stores ag2.events.BaseEvent)")
            raise EventEncodeError(_unregistered(cls, ""))
        try:
            fields = self._fields(event, "", self._events[type_name].typed)
        except RecursionError:
            raise EventEncodeError(f"{cls.__name__} is nested too deeply (or holds itself) to be stored") from None
        return type_name, payload_text(fields)

    def decode(self, type_name: str, payload: str) -> BaseEvent:
        plan = self._events.get(type_name)
        if plan is None and self._absorbs(type_name, EXTRA_EVENTS):
            plan = self._events.get(type_name)
        if plan is None:
            entry = EXTRA_EVENTS.get(type_name)
            if entry is not None:
                reason = f"{entry[0]} is not imported in this process (its AG2 extra is missing, or unused here)"
                return _unknown(type_name, payload, reason)
            return _unknown(type_name, payload, "type name not known to this codec")
        try:
            raw = self._parse(payload)
            if not isinstance(raw, dict):
                raise _Undecodable("payload is not a JSON object")
            return plan.build(raw)
        except Exception as exc:  # never raise: a registered pydantic model's validators may raise anything
            return _unknown(type_name, payload, f"{type(exc).__name__}: {exc}")

    def tokens(self, event: Any) -> Tokens | None:
        """The tokens a ``UsageEvent`` reports (AG2's floats, rounded), stored beside it; every kind counts once.

        A model call, a compaction's or a memory aggregation's call, and a subagent's ``subtask`` rollup are each
        tokens spent by this session: AG2 puts a subagent's own calls on the subagent's stream (its own session
        here) and only the rollup on the parent's, so a session's sum is its total, as ``ag2.UsageReport``
        reads it. ``total_tokens`` is not kept: it is input and output.
        """
        if not isinstance(event, UsageEvent):
            return None
        usage = event.usage
        return Tokens(
            *(
                _count(getattr(usage, name, None))
                for name in (
                    "prompt_tokens",
                    "completion_tokens",
                    "cache_read_input_tokens",
                    "cache_creation_input_tokens",
                    "thinking_tokens",
                )
            )
        )

    def describe(self, event: Any) -> Description:
        """The event's role and text for the transcript and search (the text is stored beside the payload).

        AG2 stores a tool call up to three times (in ``ModelResponse.tool_calls``, a
        ``ToolCallsEvent``, a loose ``ToolCallEvent``) and a result twice (a loose
        ``ToolResultEvent``, then inside a ``ToolResultsEvent``). The loose ones carry
        them here: one per call, emitted as each call runs (server-side builtin calls,
        client-run calls and final tools included, which the batches miss). The
        batches, ``ClientToolCallEvent`` and a response with no text get no role,
        except a batch holding the stand-in results AG2 writes when it repairs a turn
        that stopped mid-call: those exist nowhere else, so the batch tells them.
        """
        if isinstance(event, ModelRequest):
            return _parts("user", event.parts, "$.parts")
        if isinstance(event, ModelResponse):
            text = event.message.content if isinstance(event.message, ModelMessage) else None
            return _at("assistant", text, '$.message."$event"[1].content') if text else Description(None, None)
        if isinstance(event, ToolCallEvent):
            return Description("tool_call", _call_text(event))
        if isinstance(event, ToolErrorEvent):
            return Description("tool", _error_text(event))
        if isinstance(event, ToolResultEvent):
            result = event.result
            if isinstance(result, ToolResult):
                return _parts("tool", result.parts, '$.result."$dataclass"[1].parts')
            return Description("tool", _as_text(result))
        if isinstance(event, ToolResultsEvent):
            stand_ins = [_inputs_text(r.result.parts) for r in event.results if _is_stand_in(r)]
            return Description("tool", "\n".join(filter(None, stand_ins))) if stand_ins else Description(None, None)
        if isinstance(event, HumanMessage):
            return _at("user", event.content, "$.content")
        if isinstance(event, HumanInputRequest):  # the agent asking the person (ACP replays it as the agent's)
            return _at("assistant", event.content, "$.content")
        if isinstance(event, CompactionSummary):  # context given to the model, said by no one
            return _at("system", event.summary, "$.summary")
        return Description(None, None)

    # -- encoding ---------------------------------------------------------------------------------------------------

    def _fields(self, event: Any, path: str, typed: Mapping[str, Shape]) -> dict[str, Any]:
        # The hot loop of every write. Plain values (created_at, names, ids) are taken as they are and a
        # nested event or dataclass goes straight to its cached encoder; the rest is the JSON codec's. A field
        # holding a provider SDK's value (``typed``: only provider events have one) is written by its shape.
        encoders = self._encoders
        out: dict[str, Any] = {}
        for key, value in event.__dict__.items():
            if key[:1] == "_":
                continue
            kind = type(value)
            if kind in _PLAIN_VALUES or (kind is float and _isfinite(value)):
                out[key] = value
                continue
            where = f"{path}.{key}" if path else key
            if typed and key in typed:
                out[key] = typed[key].encode(value, where, self._extend)
                continue
            encoder = encoders.get(kind)
            if encoder is None or encoder is _not_mine:
                out[key] = _encode_value(value, where, self._extend)
            else:
                out[key] = encoder(value, where)
        return out

    def _extend(self, value: Any, path: str) -> Any:
        encoder = self._encoders.get(type(value))
        if encoder is None:
            if type(value).__module__ in self._pending:
                self._absorb()
            encoder = self._encoders[type(value)] = self._encoder_for(type(value))
        return encoder(value, path)

    def _encoder_for(self, cls: type) -> _Encoder:
        extend = self._extend
        name = self._event_names.get(cls)
        if name is not None:
            typed = self._events[name].typed
            return lambda value, path: {"$event": [name, self._fields(value, path, typed)]}
        name = self._dataclass_names.get(cls)
        if name is not None:
            plan = self._dataclasses[name]
            return lambda value, path: {"$dataclass": [name, plan.encode(value, path, extend)]}
        name = self._object_names.get(cls)
        if name is not None:
            objects = self._objects[name]
            return lambda value, path: {"$object": [name, objects.encode(value, path, extend)]}
        name = self._enum_names.get(cls)
        if name is not None:
            return lambda value, path: {"$enum": [name, _encode_value(value.value, path, extend)]}
        name = self._model_names.get(cls)
        if name is not None:
            return lambda value, path: {"$pydantic": [name, self._model_dump(value, path)]}
        if issubclass(cls, BaseException):
            return self._exception_encoder(cls)
        if cls is Decimal:
            return lambda value, path: {"$decimal": str(value)}
        if cls is set or cls is frozenset:
            tag = f"${cls.__name__}"
            return lambda value, path: {tag: _encode_value(_in_order(value), path, extend)}
        if cls in _PATHS:
            return lambda value, path: {"$path": [_PATHS[cls], str(value)]}
        if cls is StoredValue:
            return lambda value, path: {"$stored_value": [value.type_name, _encode_value(value.root, path, extend)]}
        if issubclass(cls, StoredUnknownEvent):
            return lambda value, path: _refuse(f"an undecoded row ({value.type_name!r}) cannot be stored at {path}")
        if issubclass(cls, BaseEvent):
            return lambda value, path: _refuse(_unregistered(cls, path))
        stand_in = lambda value, path: {  # noqa: E731
            "$stored_value": [_qualified(cls), _encode_value(_as_json(value), path, extend)]
        }
        if issubclass(cls, (Enum, BaseModel)) or dataclasses.is_dataclass(cls):
            return stand_in  # before the JSON types: a str enum is a str, but not one to flatten silently
        if issubclass(cls, (str, int, float, dict, list, tuple, bytes, bytearray, memoryview, date, UUID)):
            return _not_mine  # the JSON codec's values and tags
        # Anything else AG2 can hand a model (an application's own model, dataclass, enum or object): the JSON
        # the model was given for it, as a StoredValue.
        return stand_in

    def _model_dump(self, model: BaseModel, path: str) -> Any:
        # Python-mode dump (bytes stay bytes, datetimes stay datetimes, tagged below); enums and sets become
        # what pydantic validates them back from, so the model's own enums need no registration.
        return _encode_value(_plain(model.model_dump(mode="python", round_trip=True)), path, self._extend)

    def _exception_encoder(self, cls: type[BaseException]) -> _Encoder:
        name = self._exception_names.get(cls)
        raised_as = None
        if name is None:
            raised_as = _qualified(cls)
            name = next(self._exception_names[base] for base in cls.__mro__ if base in self._exception_names)
        members = [attr for base, attrs in _EXCEPTION_MEMBERS if issubclass(cls, base) for attr in attrs]

        def extend(value: Any, path: str) -> Any:
            # An exception's message is made of its args: a stand-in there would change what str() says.
            out = self._extend(value, path)
            if isinstance(out, dict) and "$stored_value" in out:
                raise EventEncodeError(f"cannot rebuild a {type(value).__name__} at {path}")
            return out

        def encode(error: BaseException, path: str) -> Any:
            # An exception reached again through its own args or attributes is a cycle: cut there.
            active = _encoding.__dict__.setdefault("exceptions", set())
            if id(error) in active:
                return {"$exception": [name, {"args": []}]}
            active.add(id(error))
            try:
                return {"$exception": [name, body(error, path)]}
            finally:
                active.discard(id(error))

        def body(error: BaseException, path: str) -> dict[str, Any]:
            try:
                args = _encode_value(list(error.args), f"{path}.args", extend)
            except (EventEncodeError, RecursionError):
                args = [_message(error)]  # its message, if not what made it
            out: dict[str, Any] = {"args": args}
            # Attributes of a class in the table; of another class, only the built-in state its message shows.
            attrs = {k: v for k, v in vars(error).items() if k[:1] != "_"} if raised_as is None else {}
            for attr in members:
                if getattr(error, attr, None) is not None:
                    attrs[attr] = getattr(error, attr)
            if attrs:
                try:
                    out["attrs"] = _encode_value(attrs, f"{path}.attrs", extend)
                except (EventEncodeError, RecursionError):
                    pass  # best effort: args carry the message
            notes = getattr(error, "__notes__", None)
            if isinstance(notes, list) and notes and all(isinstance(n, str) for n in notes):
                out["notes"] = list(notes)
            origin = raised_as or vars(error).get(_RAISED_AS)
            if isinstance(origin, str):
                out["raised_as"] = origin
            return out

        return encode

    # -- decoding ---------------------------------------------------------------------------------------------------

    def _object_hook(self, obj: dict[str, Any]) -> Any:
        # Innermost first: a tag's body is already decoded when its tag is seen.
        if len(obj) == 1:
            ((key, inner),) = obj.items()
            if key[:1] == "$":
                build = self._builders.get(key)
                if build is not None:
                    if not (isinstance(inner, list) and len(inner) == 2 and isinstance(inner[0], str)):
                        raise _Undecodable(f"bad {key} value")
                    return build(inner[0], inner[1])
                if key == "$decimal":
                    if not isinstance(inner, str):
                        raise _Undecodable("bad $decimal value")
                    return Decimal(inner)
                if key == "$set" or key == "$frozenset":
                    if not isinstance(inner, list):
                        raise _Undecodable(f"bad {key} value")
                    return set(inner) if key == "$set" else frozenset(inner)
                return _decode_tag(key, inner)
        return obj

    def _build_event(self, name: str, body: Any) -> Any:
        plan = self._events.get(name)
        if plan is None and self._absorbs(name, EXTRA_EVENTS):
            plan = self._events.get(name)
        if plan is None:
            raise _Undecodable(f"no event named {name!r}")
        if not isinstance(body, dict):
            raise _Undecodable(f"bad fields for {name!r}")
        return plan.build(body)

    def _build_dataclass(self, name: str, body: Any) -> Any:
        plan = self._dataclasses.get(name)
        if plan is None and self._absorbs(name, EXTRA_DATACLASSES):
            plan = self._dataclasses.get(name)
        if plan is None:
            raise _Undecodable(f"no dataclass named {name!r}")
        return plan.build(body)

    def _build_object(self, name: str, body: Any) -> Any:
        plan = self._objects.get(name)
        if plan is None and self._absorbs(name, EXTRA_OBJECTS):
            plan = self._objects.get(name)
        if plan is None:
            raise _Undecodable(f"no object class named {name!r}")
        return plan.build(body)

    def _build_enum(self, name: str, body: Any) -> Any:
        cls = self._enums.get(name)
        if cls is None:
            raise _Undecodable(f"no enum named {name!r}")
        return cls(body)

    def _build_model(self, name: str, body: Any) -> Any:
        cls = self._models.get(name)
        if cls is None:
            raise _Undecodable(f"no pydantic model named {name!r}")
        return cls.model_validate(body, strict=False)

    def _build_exception(self, name: str, body: Any) -> Any:
        cls = self._exceptions.get(name)
        if cls is None:
            raise _Undecodable(f"no exception named {name!r}")
        if not (isinstance(body, dict) and isinstance(body.get("args"), list)):
            raise _Undecodable(f"bad body for exception {name!r}")
        args = tuple(body["args"])
        error: BaseException | None = None
        if cls in BUILTIN_EXCEPTIONS:
            try:
                error = cls(*args)  # Python's own: lets OSError and friends set their fields
            except Exception:
                error = None
            if type(error) is not cls:
                error = None
        if error is None:
            # Without __init__: AG2's exceptions build their message there, and args already hold it.
            error = cls.__new__(cls, *args)
        error.args = args
        for key, value in (body.get("attrs") or {}).items():
            if not (isinstance(key, str) and key.isidentifier()) or key[:1] == "_":
                raise _Undecodable(f"bad attribute {key!r} for exception {name!r}")
            setattr(error, key, value)
        notes = body.get("notes")
        if notes is not None:
            if not (isinstance(notes, list) and all(isinstance(n, str) for n in notes)):
                raise _Undecodable("bad exception notes")
            error.__notes__ = list(notes)
        raised_as = body.get("raised_as")
        if raised_as is not None:
            if not isinstance(raised_as, str):
                raise _Undecodable("bad raised_as")
            setattr(error, _RAISED_AS, raised_as)
        return error


# -- helpers ----------------------------------------------------------------------------------------------------

_PATHS: Final[Mapping[type, str]] = MappingProxyType(
    {cls: cls.__name__ for cls in (PurePath, PurePosixPath, PureWindowsPath, Path, PosixPath, WindowsPath)}
)
_PATH_CLASSES: Final = {name: cls for cls, name in _PATHS.items()}


def _build_path(name: str, text: Any) -> PurePath:
    cls = _PATH_CLASSES.get(name)
    if cls is None or not isinstance(text, str):
        raise _Undecodable(f"bad $path value {name!r}")
    if cls is WindowsPath or cls is PosixPath:
        cls = Path  # the concrete class of this system (a PosixPath cannot be made on Windows, and back)
    path: PurePath = cls(text)
    return path


def _as_json(value: Any) -> Any:
    """What AG2's default serializer gives a model for ``value`` (pydantic's JSON), as JSON values."""
    try:
        return json.loads(to_json(value), parse_int=_parse_int)
    except Exception:  # pydantic cannot serialize it: AG2 could not send it to a model either; keep its repr
        return repr(value)


def _parse_int(digits: str) -> int:
    """An int from JSON's decimal text, of any length: pydantic writes ints Python will not read back whole
    (``sys.get_int_max_str_digits()``), so longer ones are read in pieces within that limit."""
    try:
        return int(digits)
    except ValueError:
        sign, digits = (-1, digits[1:]) if digits[:1] == "-" else (1, digits)
        value = 0
        for start in range(0, len(digits), 4000):
            piece = digits[start : start + 4000]
            value = value * 10 ** len(piece) + int(piece)
        return sign * value


def _in_order(items: set[Any] | frozenset[Any]) -> list[Any]:
    # Sorted when it can be, so the same set is always the same text (a storage compares texts to find changes).
    try:
        return sorted(items)
    except TypeError:
        return list(items)


_SHAPES: Final = Shapes(
    lambda cls: (
        issubclass(cls, (BaseEvent, BaseException))
        or cls in DATACLASS_NAMES
        or cls in ENUM_NAMES
        or (cls.__module__, cls.__qualname__) in _EXTRA_VALUES
    )
)
"""Shapes of the provider SDK types AG2's events declare; AG2's own classes are written by their tags."""


def _not_mine(value: Any, path: str) -> Any:
    return NOT_MINE


def _refuse(message: str) -> Any:
    raise EventEncodeError(message)


def _unregistered(cls: type, path: str) -> str:
    where = f" at {path}" if path else ""
    if isinstance(cls, type) and issubclass(cls, BaseEvent):
        what = "an AG2 event class"
    elif isinstance(cls, type) and (issubclass(cls, (BaseModel, Enum, BaseException)) or dataclasses.is_dataclass(cls)):
        what = "a class"
    else:
        return f"{_qualified(cls)}{where} is not something AG2Codec stores"
    example = f"{{{cls.__name__}: 'myapp.{_snake(cls.__name__)}'}}"
    return (
        f"{_qualified(cls)}{where} is not {what} this codec knows: register it under a stable name of your "
        f"own, AG2Codec(extra={example}) or codec.register({cls.__name__}, 'myapp.{_snake(cls.__name__)}')"
    )


def _unknown(type_name: str, payload: str, reason: str) -> StoredUnknownEvent:
    data: Any = None
    try:
        data = json.loads(payload)
    except Exception:  # any text at all may be stored; this is only for reading
        data = None
    if not isinstance(data, dict):
        data = {}
    stamp = data.get("created_at")
    event = StoredUnknownEvent(type_name=type_name, data=data, payload=payload, reason=reason)
    if isinstance(stamp, (int, float)) and not isinstance(stamp, bool):
        event.created_at = stamp
    return event


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return _plain(value.value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return [_plain(v) for v in value]
    return value


def _kind_of(cls: Any) -> str:
    if not isinstance(cls, type):
        raise ValueError(f"cannot register {cls!r}: not a class")
    if issubclass(cls, StoredUnknownEvent):
        raise ValueError(f"cannot register {_qualified(cls)}: undecoded rows are written back as they were read")
    if issubclass(cls, BaseEvent):
        return "event"
    if issubclass(cls, BaseModel):
        return "model"
    if issubclass(cls, Enum):
        return "enum"
    if dataclasses.is_dataclass(cls):
        return "dataclass"
    if issubclass(cls, BaseException):
        return "exception"
    raise ValueError(
        f"cannot register {_qualified(cls)}: AG2Codec stores AG2 event classes (ag2.events.BaseEvent subclasses) "
        "and, for the values their fields hold, dataclasses, pydantic models, enums and exception classes"
    )


def _own_event_annotations(cls: type) -> Iterable[tuple[str, Any]]:
    """(field, annotation) for the fields an application's classes declare (AG2's are covered by the tables)."""
    for klass in cls.__mro__:
        if klass in EVENT_NAMES or not (isinstance(klass, type) and issubclass(klass, BaseEvent)):
            continue
        annotations = vars(klass).get("__annotations__", {})
        for name in vars(klass).get("_event_fields_", {}):
            if name[:1] != "_" and name in annotations:
                yield name, _resolve(annotations[name], klass)


def _resolve(annotation: Any, owner: type) -> Any:
    """An annotation written as text, evaluated the way ``typing.get_type_hints`` does; the text if it cannot be."""
    if not isinstance(annotation, str):
        return annotation
    module = sys.modules.get(owner.__module__)
    try:
        # The class's own source text, in its module, as typing.get_type_hints evaluates it (never stored data).
        return eval(annotation, vars(module) if module else {}, dict(vars(owner)))
    except Exception:
        return annotation  # e.g. a name imported only under TYPE_CHECKING: the values are checked when stored


_PLAIN_ANNOTATIONS: Final = frozenset(
    {Any, object, None, type(None), str, int, float, bool, bytes, bytearray, dict, list, tuple}
    | {datetime, date, UUID, Decimal}
)
_CONTAINERS: Final = frozenset({list, tuple, dict, Sequence, MutableSequence, Mapping, MutableMapping})


def _check_annotation(owner: type, field: str, annotation: Any, known: dict[str, set[type]]) -> None:
    bad = _unsupported(annotation, known)
    if bad is not None:
        raise ValueError(f"cannot register {_qualified(owner)}: its field {field!r} is annotated {annotation!r}; {bad}")


def _unsupported(tp: Any, known: dict[str, set[type]]) -> str | None:
    """Why values of annotation ``tp`` cannot be stored, or None if they can (or cannot be told from it)."""
    if isinstance(tp, (str, typing.ForwardRef)):
        return None  # not resolvable here: each value is checked when it is stored
    if isinstance(tp, OrCondition):  # `SomeEvent | None`: on AG2's event classes `|` makes a stream filter
        return next(filter(None, (_unsupported(c, known) for c in tp.conditions)), None)
    if isinstance(tp, TypeCondition):
        expected = tp._expected_type
        alternatives = expected if isinstance(expected, tuple) else (expected,)
        return next(filter(None, (_unsupported(t, known) for t in alternatives)), None)
    try:
        if tp in _PLAIN_ANNOTATIONS:
            return None
    except TypeError:  # unhashable (a Literal of lists)
        pass
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unsupported(typing.get_args(tp)[0], known)
    if origin is typing.Literal or origin is typing.ClassVar:
        return None
    if origin is typing.Union or origin is types.UnionType or origin in _CONTAINERS:
        for arg in typing.get_args(tp):
            if arg is not Ellipsis:
                reason = _unsupported(arg, known)
                if reason is not None:
                    return reason
        return None
    if origin is not None:
        return f"a {getattr(origin, '__name__', origin)} cannot be stored and read back as itself"
    if isinstance(tp, typing.TypeVar):
        return f"the type variable {tp} says nothing about what is stored"
    if isinstance(tp, type):
        for kind, base in (("event", BaseEvent), ("model", BaseModel), ("enum", Enum)):
            if issubclass(tp, base):
                if tp in known[kind]:
                    return None
                return f"{_qualified(tp)} is not registered with this codec: register it too"
        if dataclasses.is_dataclass(tp):
            return None if tp in known["dataclass"] else f"{_qualified(tp)} is not registered: register it too"
        if issubclass(tp, BaseException):
            return None
        if getattr(tp, "_is_protocol", False):
            return None  # e.g. AG2's StandardDataclass: each value is checked when it is stored
    return f"a {getattr(tp, '__name__', tp)} cannot be stored and read back as itself"


# What AG2 writes in place of a result when it closes off a turn stopped mid-call (ag2.history and ag2.acp).
_STAND_INS = frozenset({CANCELLED_TOOL_RESULT, HUMAN_INPUT_ABANDONED_TOOL_RESULT})


def _is_stand_in(event: Any) -> bool:
    result = getattr(event, "result", None)
    return isinstance(result, ToolResult) and _inputs_text(result.parts) in _STAND_INS


def _at(role: str, text: Any, path: str) -> Description:
    """A text that sits in the payload as it is, at ``path``: the row keeps the path, not a second copy.

    Not for a string that needed \\u escapes (lone surrogates): SQLite would read it back as text that is
    not valid UTF-8.
    """
    if isinstance(text, str) and (text.isascii() or _utf8(text)):
        return Description(role, text, path)
    return Description(role, _as_text(text))


def _parts(role: str, parts: Any, path: str) -> Description:
    # One text part is found in the payload; several are joined for the transcript, one part a line.
    if isinstance(parts, list) and len(parts) == 1 and type(parts[0]) is TextInput:
        return _at(role, parts[0].content, f'{path}[0]."$event"[1].content')
    return Description(role, _inputs_text(parts))


def _inputs_text(parts: Any) -> str | None:
    if not isinstance(parts, list):
        return _as_text(parts)
    # One part a line: search must not run the words of two parts together.
    return "\n".join(_input_text(part) for part in parts) or None


def _input_text(part: Any) -> str:
    if isinstance(part, TextInput):
        return str(part.content)
    if isinstance(part, DataInput):
        return _data_text(part.data)
    if isinstance(part, BinaryInput):
        return f"[{_kind(part.kind)}]"
    if isinstance(part, UrlInput):
        return f"[{_kind(part.kind)}] {part.url}"
    if isinstance(part, FileIdInput):
        return f"[file] {part.filename or part.file_id}"
    return f"[{type(part).__name__}]"


def _kind(kind: Any) -> str:
    return str(kind.value) if isinstance(kind, Enum) else str(kind)


def _data_text(data: Any) -> str:
    if isinstance(data, str):
        return data
    if isinstance(data, BaseModel):
        try:
            return data.model_dump_json()
        except ValueError:  # bytes that are not UTF-8, say
            return json.dumps(_plain(data.model_dump()), ensure_ascii=False, default=str)
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        data = dataclasses.asdict(data)
    try:
        return json.dumps(data, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        pass
    try:
        return str(data)
    except ValueError:  # an int too long for Python's decimal text (sys.get_int_max_str_digits()); pydantic writes it
        return to_json(data).decode()


def _call_text(call: ToolCallEvent) -> str:
    arguments: Any = call.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return f"{call.name}({arguments})"
    if isinstance(arguments, dict):
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in arguments.items())
    else:
        shown = json.dumps(arguments, ensure_ascii=False, default=str)
    return f"{call.name}({shown})"


def _error_text(event: ToolErrorEvent) -> str | None:
    error = event.error
    if not isinstance(error, BaseException):
        result = event.result
        return _inputs_text(result.parts) if isinstance(result, ToolResult) else _as_text(error)
    origin = vars(error).get(_RAISED_AS)
    kind = origin.rsplit(".", 1)[-1] if isinstance(origin, str) else type(error).__name__
    message = _message(error)
    return f"{kind}: {message}" if message else kind


def _count(value: Any) -> int:
    """A token count as stored: whole, 0 when not reported (or not a finite count)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return min(round(value), 2**31 - 1)
    return 0
