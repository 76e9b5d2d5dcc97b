"""Provider SDK values (openai, anthropic, google-genai, AG-UI, A2A), written as plain JSON and rebuilt by the type
their event's field declares.

An event such as ``OpenAIReasoningEvent`` holds the SDK's own object (``item: ResponseReasoningItem``), and
AG2's mapper sends it back to the provider on the next turn, so it must come back exactly. These objects are
written as the JSON the API sent (a pydantic model as the fields it was given, its extra fields included; a
protobuf message as its bytes), with no class name in the data: reading rebuilds the class the event's field
declares in code, the way the SDKs build a response, without validating it again (the real APIs return values
the SDKs' own ``model_validate`` rejects, such as a web-search source ``{"type": "api"}``).

A field typed as a union (``ResponseFunctionWebSearch | McpCall | ...``) is rebuilt as the member whose literal
fields (``type: Literal["web_search_call"]``) the data matches, as the SDKs' discriminated unions are. When two
members would match the same data, the member's class name is kept with it (``{"$arm": [name, fields]}``) and
looked up among that field's declared members only.

Everything else (strings, numbers, bytes, datetimes, AG2's own values) goes through the JSON codec's tags.
"""

from __future__ import annotations

import base64
import dataclasses
import sys
import types
import typing
from collections.abc import Callable, Mapping, MutableMapping, MutableSequence, Sequence
from enum import Enum
from typing import Any, Final

from pydantic import BaseModel

from ..codec import _encode_value, _Undecodable

__all__ = ["ANY", "Arm", "Shape", "Shapes"]

Extend = Callable[[Any, str], Any]


class Arm:
    """A ``{"$arm": [name, fields]}`` tag as read, for the union around it to resolve."""

    __slots__ = ("body", "name")

    def __init__(self, name: str, body: Any) -> None:
        self.name = name
        self.body = body


class Shape:
    """How values of one declared type are written and rebuilt. This base is the JSON codec's own way (tags)."""

    __slots__ = ()

    def encode(self, value: Any, path: str, extend: Extend) -> Any:
        return _encode_value(value, path, extend)

    def build(self, raw: Any) -> Any:
        if isinstance(raw, Arm):
            raise _Undecodable("a $arm tag outside a union")
        return raw


ANY: Final = Shape()
"""A type this module adds nothing to: the value is written by what it is."""


def _escape(out: dict[str, Any]) -> Any:
    # A one-key object whose key starts with "$" would read back as a tag (as the JSON codec escapes dicts).
    if len(out) == 1 and next(iter(out)).startswith("$"):
        return {"$items": [[k, v] for k, v in out.items()]}
    return out


class _Model(Shape):
    """A pydantic model: the fields it was given (``model_fields_set``) and its extra fields, by name."""

    __slots__ = ("_fields", "_shapes", "cls", "extra", "literals", "required")

    def __init__(self, cls: type[BaseModel], shapes: Shapes) -> None:
        self.cls = cls
        self._shapes = shapes
        self._fields: dict[str, Shape] | None = None  # worked out on first use: models refer to themselves
        self.extra = cls.model_config.get("extra") == "allow"
        fields = cls.__pydantic_fields__
        self.required = frozenset(name for name, f in fields.items() if f.is_required())
        # The fields a discriminated union tells its members apart by.
        self.literals: dict[str, tuple[Any, ...]] = {}
        for name, f in fields.items():
            values = _literal_values(f.annotation)
            if values is not None:
                self.literals[name] = values

    @property
    def fields(self) -> dict[str, Shape]:
        if self._fields is None:
            self._fields = {n: self._shapes.shape(f.annotation) for n, f in self.cls.__pydantic_fields__.items()}
        return self._fields

    def encode(self, value: Any, path: str, extend: Extend) -> Any:
        if type(value) is not self.cls:
            return _encode_value(value, path, extend)  # a subclass or a raw value the SDK left as it came
        fields = self.fields
        given = value.__pydantic_fields_set__
        out: dict[str, Any] = {}
        for name, item in value.__dict__.items():
            if name in given:
                out[name] = fields[name].encode(item, f"{path}.{name}", extend)
        for name, item in (getattr(value, "__pydantic_extra__", None) or {}).items():
            out[name] = _encode_value(item, f"{path}.{name}", extend)
        return _escape(out)

    def matches(self, raw: dict[str, Any]) -> bool:
        """Whether ``raw`` can be this member of a union: every literal field it has holds one of its values."""
        for name, values in self.literals.items():
            if name in raw:
                if raw[name] not in values:
                    return False
            elif name in self.required:
                return False
        return True

    def fits(self, raw: dict[str, Any]) -> bool:
        """A closer match, for a tie: every required field present, and no key the model would not keep."""
        return self.required <= raw.keys() and (self.extra or raw.keys() <= self.cls.__pydantic_fields__.keys())

    def build(self, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return Shape.build(self, raw)  # as the SDKs leave a value they cannot construct
        fields = self.fields
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for name, item in raw.items():
            if name in fields:
                values[name] = fields[name].build(item)
            else:
                extra[name] = Shape.build(self, item)
        return _construct(self.cls, values, extra)


def _construct(cls: type[BaseModel], given: dict[str, Any], extra: dict[str, Any]) -> BaseModel:
    """``cls`` holding ``given`` without validation, as the SDKs construct a response (pydantic's ``model_construct``,
    by field name only): fields not given take their default, or None when required, as the openai and anthropic
    SDKs leave a field the API left out."""
    values: dict[str, Any] = {}
    for name, f in cls.__pydantic_fields__.items():
        if name in given:
            values[name] = given[name]
        elif f.is_required():
            values[name] = None
        else:
            values[name] = f.get_default(call_default_factory=True, validated_data=values)
    model = cls.__new__(cls)
    object.__setattr__(model, "__dict__", values)
    object.__setattr__(model, "__pydantic_fields_set__", set(given))
    if not cls.__pydantic_root_model__:
        object.__setattr__(model, "__pydantic_extra__", extra if cls.model_config.get("extra") == "allow" else None)
        object.__setattr__(model, "__pydantic_private__", None)
    if cls.__pydantic_post_init__:
        model.model_post_init(None)
    return model


class _Proto(Shape):
    """A protobuf message: its wire bytes, which its own parser reads back exactly."""

    __slots__ = ("cls",)

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def encode(self, value: Any, path: str, extend: Extend) -> Any:
        if type(value) is not self.cls:
            return _encode_value(value, path, extend)
        message: Any = value  # (mypy narrows a value compared by type to object)
        data: bytes = message.SerializeToString(deterministic=True)
        return {"$bytes": base64.b64encode(data).decode("ascii")}

    def build(self, raw: Any) -> Any:
        if isinstance(raw, bytes):
            return self.cls.FromString(raw)  # type: ignore[attr-defined]
        return Shape.build(self, raw)


class _Enum(Shape):
    __slots__ = ("cls",)

    def __init__(self, cls: type[Enum]) -> None:
        self.cls = cls

    def encode(self, value: Any, path: str, extend: Extend) -> Any:
        if type(value) is self.cls:
            return _encode_value(value.value, path, extend)
        return _encode_value(value, path, extend)

    def build(self, raw: Any) -> Any:
        try:
            return self.cls(raw)
        except (ValueError, TypeError):
            return Shape.build(self, raw)  # a value a later API added: kept as it came, as the SDKs do


class _Dataclass(Shape):
    """A dataclass an SDK model holds: its fields, rebuilt without ``__init__``."""

    __slots__ = ("_fields", "_shapes", "cls")

    def __init__(self, cls: type, shapes: Shapes) -> None:
        self.cls = cls
        self._shapes = shapes
        self._fields: dict[str, Shape] | None = None

    @property
    def fields(self) -> dict[str, Shape]:
        if self._fields is None:
            hints = _hints(self.cls)
            self._fields = {f.name: self._shapes.shape(hints.get(f.name, Any)) for f in dataclasses.fields(self.cls)}
        return self._fields

    def encode(self, value: Any, path: str, extend: Extend) -> Any:
        if type(value) is not self.cls:
            return _encode_value(value, path, extend)
        return _escape({n: s.encode(getattr(value, n), f"{path}.{n}", extend) for n, s in self.fields.items()})

    def build(self, raw: Any) -> Any:
        if not (isinstance(raw, dict) and raw.keys() == self.fields.keys()):
            return Shape.build(self, raw)
        obj: Any = object.__new__(self.cls)
        for name, shape in self.fields.items():
            object.__setattr__(obj, name, shape.build(raw[name]))
        return obj


class _Sequence(Shape):
    __slots__ = ("item",)

    def __init__(self, item: Shape) -> None:
        self.item = item

    def encode(self, value: Any, path: str, extend: Extend) -> Any:
        if type(value) is list:
            return [self.item.encode(v, f"{path}[{i}]", extend) for i, v in enumerate(value)]
        if type(value) is tuple:
            return {"$tuple": [self.item.encode(v, f"{path}[{i}]", extend) for i, v in enumerate(value)]}
        return _encode_value(value, path, extend)

    def build(self, raw: Any) -> Any:
        if isinstance(raw, list):
            return [self.item.build(v) for v in raw]
        if isinstance(raw, tuple):
            return tuple(self.item.build(v) for v in raw)
        return Shape.build(self, raw)


class _Mapping(Shape):
    __slots__ = ("item",)

    def __init__(self, item: Shape) -> None:
        self.item = item

    def encode(self, value: Any, path: str, extend: Extend) -> Any:
        if type(value) is dict and all(type(k) is str for k in value):
            return _escape({k: self.item.encode(v, f"{path}.{k}", extend) for k, v in value.items()})
        return _encode_value(value, path, extend)

    def build(self, raw: Any) -> Any:
        if isinstance(raw, dict):
            return {k: self.item.build(v) for k, v in raw.items()}
        return Shape.build(self, raw)


class _Optional(Shape):
    """``X | None``."""

    __slots__ = ("item",)

    def __init__(self, item: Shape) -> None:
        self.item = item

    def encode(self, value: Any, path: str, extend: Extend) -> Any:
        return None if value is None else self.item.encode(value, path, extend)

    def build(self, raw: Any) -> Any:
        return None if raw is None else self.item.build(raw)


class _Union(Shape):
    """``A | B | None``: a value is written by its own member's shape; reading picks the member the data matches."""

    __slots__ = ("by_class", "by_name", "enums", "mapping", "models", "protos", "sequence")

    def __init__(self, members: list[Shape]) -> None:
        classed = [m for m in members if isinstance(m, (_Model, _Proto, _Dataclass, _Enum))]
        self.by_class: dict[type, Shape] = {m.cls: m for m in classed}
        self.by_name: dict[str, Shape] = {m.cls.__qualname__: m for m in classed}
        self.models = [m for m in members if isinstance(m, _Model)]
        self.protos = [m for m in members if isinstance(m, _Proto)]
        self.enums = [m for m in members if isinstance(m, _Enum)]
        self.sequence = next((m for m in members if isinstance(m, _Sequence)), None)
        self.mapping = next((m for m in members if isinstance(m, _Mapping)), None)

    def pick(self, raw: dict[str, Any]) -> _Model | None:
        matching = [m for m in self.models if m.matches(raw)]
        if len(matching) > 1:
            matching = [m for m in matching if m.fits(raw)] or matching
        return matching[0] if matching else None

    def encode(self, value: Any, path: str, extend: Extend) -> Any:
        member = self.by_class.get(type(value))
        if member is None:
            if self.sequence is not None and type(value) in (list, tuple):
                return self.sequence.encode(value, path, extend)
            if self.mapping is not None and type(value) is dict:
                return self.mapping.encode(value, path, extend)
            return _encode_value(value, path, extend)
        out = member.encode(value, path, extend)
        if isinstance(member, _Model) and not (isinstance(out, dict) and self.pick(out) is member):
            return {"$arm": [type(value).__qualname__, out]}  # the data alone would pick another member
        if isinstance(member, _Proto) and len(self.protos) > 1:
            return {"$arm": [type(value).__qualname__, out]}  # bytes alone do not say which message
        return out

    def build(self, raw: Any) -> Any:
        if isinstance(raw, Arm):
            member = self.by_name.get(raw.name)
            if member is None:
                raise _Undecodable(f"{raw.name!r} is not a member of the union this field declares")
            return member.build(raw.body)
        if isinstance(raw, dict):
            model = self.pick(raw)
            if model is not None:
                return model.build(raw)
            return self.mapping.build(raw) if self.mapping is not None else raw
        if isinstance(raw, (list, tuple)) and self.sequence is not None:
            return self.sequence.build(raw)
        if isinstance(raw, bytes) and self.protos:
            return self.protos[0].build(raw)
        if isinstance(raw, (str, int, float)):
            for enum in self.enums:
                built = enum.build(raw)
                if built is not raw:
                    return built
        return raw


_SEQUENCES: Final = frozenset({list, tuple, set, frozenset, Sequence, MutableSequence})
_MAPPINGS: Final = frozenset({dict, Mapping, MutableMapping})


class Shapes:
    """The shapes of declared types, worked out once per type.

    ``plain(cls)`` says whether a class is one the codec stores by its own tags (AG2's events and values, and the
    classes an application registered): such a class is never rebuilt from a declaration.
    """

    def __init__(self, plain: Callable[[type], bool]) -> None:
        self._plain = plain
        self._cache: dict[Any, Shape] = {}

    def shape(self, annotation: Any) -> Shape:
        try:
            found = self._cache.get(annotation)
        except TypeError:  # unhashable (a Literal of lists)
            return ANY
        if found is None:
            found = self._cache[annotation] = ANY  # a type that refers to itself is ANY until worked out
            found = self._cache[annotation] = self._work_out(annotation)
        return found

    def _work_out(self, tp: Any) -> Shape:
        tp = _unwrap(tp)
        origin = typing.get_origin(tp)
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        if origin is typing.Union or origin is types.UnionType:
            members = [self.shape(a) for a in args if a is not type(None)]
            if all(m is ANY for m in members):
                return ANY
            if len(members) == 1:
                return _Optional(members[0])
            return _Union(members)
        if origin in _SEQUENCES:
            item = self.shape(args[0]) if len(args) == 1 or (origin is tuple and len(set(args)) == 1) else ANY
            return ANY if item is ANY or origin in (set, frozenset) else _Sequence(item)
        if origin in _MAPPINGS:
            item = self.shape(args[1]) if len(args) == 2 else ANY
            return ANY if item is ANY else _Mapping(item)
        if origin is not None or not isinstance(tp, type) or self._plain(tp):
            return ANY
        if issubclass(tp, BaseModel) and tp is not BaseModel and "__pydantic_fields__" in vars(tp):
            return _Model(tp, self)
        if _is_protobuf(tp):
            return _Proto(tp)
        if issubclass(tp, Enum):
            return _Enum(tp)
        if dataclasses.is_dataclass(tp):
            return _Dataclass(tp, self)
        return ANY


def _unwrap(tp: Any) -> Any:
    while True:
        if typing.get_origin(tp) is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif hasattr(tp, "__value__") and not isinstance(tp, type):  # a TypeAliasType
            tp = tp.__value__
        elif hasattr(tp, "__supertype__"):  # a NewType
            tp = tp.__supertype__
        else:
            return tp


def _literal_values(annotation: Any) -> tuple[Any, ...] | None:
    """The values of ``Literal[...]`` (or ``Literal[...] | None``), else None."""
    tp = _unwrap(annotation)
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        values: list[Any] = []
        for arg in typing.get_args(tp):
            if arg is type(None):
                values.append(None)
                continue
            inner = _literal_values(arg)
            if inner is None:
                return None
            values.extend(inner)
        return tuple(values)
    return None


def _is_protobuf(cls: type) -> bool:
    # By name: protobuf is imported only by the applications that use it (A2A, xAI).
    return any(base.__name__ == "Message" and base.__module__ == "google.protobuf.message" for base in cls.__mro__)


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, vars(sys.modules.get(cls.__module__, types.ModuleType("_"))))
    except Exception:  # a name only imported for type checkers: those fields are written by what they hold
        return {}
