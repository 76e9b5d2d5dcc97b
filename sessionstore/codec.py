"""The JSON codec: events to (type name, JSON text) and back, losslessly.

Payloads are plain JSON objects of the event's fields, so ``json_extract(payload,
'$.content')`` works in the ``sqlite3`` shell. Values JSON has no type for are
tagged as one-key objects: ``{"$bytes": base64}``, ``{"$datetime": iso}`` (in a
named zone, or on the second pass of a repeated hour, ``{"$datetime": [iso,
zone, fold]}``), ``{"$date": iso}``, ``{"$uuid": str}``, ``{"$tuple": [...]}``,
``{"$float": "nan"}`` (NaN and infinities: SQLite's JSON functions reject bare
``NaN``), ``{"$bytearray": base64}``, ``{"$int": hex}`` (an int of more digits than
Python writes in decimal, ``sys.get_int_max_str_digits()``; hex has no such limit)
and ``{"$items": [[key, value], ...]}`` for dicts with non-string
keys, and for a user dict that itself looks like a tag (one key starting with
``$``), so nothing is ambiguous.

Decoding never imports anything and never instantiates a class that is not in
the :class:`~sessionstore.events.EventTypes` it was given. Anything it cannot
decode becomes an :class:`~sessionstore.events.UnknownEvent` holding the raw text.

The codec is pluggable: a storage takes any object with ``encode``/``decode``
(see :class:`Codec`).
"""

from __future__ import annotations

import base64
import dataclasses
import gc
import json
import math
import re
import sys
from collections.abc import Callable, Iterable
from datetime import date, datetime
from typing import Any, NamedTuple, Protocol, cast
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import EventEncodeError
from .events import (
    BaseEvent,
    EventTypes,
    ModelMessage,
    SystemMessage,
    Tokens,
    TokenUsage,
    ToolCall,
    ToolResult,
    UnknownEvent,
    UserMessage,
    default_event_types,
)

__all__ = [
    "ROLES",
    "TOKEN_COLUMNS",
    "Codec",
    "Description",
    "JsonCodec",
    "Tokens",
    "call_text",
    "decode_all",
    "describe_row",
    "token_columns",
    "legacy_description",
    "payload_text",
]


class Codec(Protocol):
    """What a storage needs to turn events into rows and back.

    ``frozen_events`` says whether the codec's events can change after they are
    made. When they cannot (frozen dataclasses), a storage may keep the objects
    it wrote and hand them out again, and treat the same object as an unchanged
    event. When they can (AG2's events are mutable), it keeps and compares their
    encoded text instead, so what it reports is always what the file holds.
    """

    frozen_events: bool

    def encode(self, event: Any) -> tuple[str, str]:
        """Return ``(type_name, payload_text)``; raise :class:`EventEncodeError` if it cannot."""
        ...

    def decode(self, type_name: str, payload: str) -> Any:
        """Return the event; never raise: undecodable data becomes an unknown event holding the text."""
        ...

    def describe(self, event: Any) -> Description:
        """The event's role and text, as the transcript shows it and full-text search finds it.

        Stored beside the payload (``events.role``, ``events.text``,
        ``events.text_path``), so the views, the index and the command line
        never need to know a codec's JSON. A plain ``(role, text)`` tuple is
        accepted too.
        """
        ...

    # Optional (a codec without it stores no usage): ``tokens(event) -> Tokens | None``, the tokens a usage event
    # says were spent, stored beside it (``events.input_tokens``...) so SQL adds them up; ``None`` for any other
    # event. A method of its own rather than a fourth field of Description, whose three are unpacked as they are.
    # Optional too: ``decode_rows(rows) -> list``, a whole history's ``(type_name, payload)`` rows decoded at once,
    # exactly as ``decode`` would decode each (a storage reading a history calls it where the codec has it).


ROLES = ("user", "assistant", "system", "tool_call", "tool")
"""The roles a transcript row may have: who said it, or a tool call and its result."""


class Description(NamedTuple):
    """What :meth:`Codec.describe` says of an event.

    ``role`` is one of :data:`ROLES`, or ``None`` for an event that is not part
    of the conversation (bookkeeping, telemetry, a second copy of a tool call).
    ``text`` is what a person reads, or ``None``. ``path``, when given, is the
    JSON path (``$.content``) at which that text sits, as a string, in the
    payload: the row then keeps the path instead of a second copy of the text,
    which would otherwise double the file's size.
    """

    role: str | None
    text: str | None
    path: str | None = None


_TEXT_PATH = re.compile(r'\$(?:\.(?:"[^"]*"|[^."\[\]]+)|\[\d+\])*')


def is_text_path(path: object) -> bool:
    """Whether ``path`` is a JSON path as :class:`Description` takes it: ``$`` then ``.key``, ``."key"`` or
    ``[n]`` steps. Anything else would make SQLite's ``json_extract`` fail in every query that reads the row."""
    return isinstance(path, str) and _TEXT_PATH.fullmatch(path) is not None


class _Undecodable(Exception):
    pass


NOT_MINE: Any = object()
"""What an ``extend`` hook of :func:`_encode_value` returns for a value it leaves to the JSON codec."""

# Values an ``extend`` hook is never asked about: the JSON types themselves.
_JSON_TYPES = frozenset({type(None), bool, int, float, str, dict, list})
# Values that are their own JSON value (no float: it is checked for NaN): taken as they are, with no call.
_PLAIN = frozenset({type(None), bool, int, str})


def _encode_value(value: Any, path: str, extend: Callable[[Any, str], Any] | None = None) -> Any:
    """``value`` as a JSON value, tagged where JSON has no type for it.

    ``extend`` lets another codec (sessionstore.ag2) store its framework's types
    with its own tags: it is asked first about every value that is not exactly a
    JSON type (so a ``str`` enum is its to tag, not flattened to a string here),
    at every depth, and returns the tagged value or :data:`NOT_MINE`.
    """
    if extend is not None and type(value) not in _JSON_TYPES:
        out = extend(value, path)
        if out is not NOT_MINE:
            return out
    # Order matters: bool is an int, datetime is a date.
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            out = {k: v if type(v) in _PLAIN else _encode_value(v, f"{path}.{k}", extend) for k, v in value.items()}
            if len(out) == 1 and next(iter(out)).startswith("$"):
                return {"$items": [[k, v] for k, v in out.items()]}
            return out
        return {"$items": [[_encode_value(k, path, extend), _encode_value(v, path, extend)] for k, v in value.items()]}
    if isinstance(value, list):
        return [_encode_value(v, f"{path}[{i}]", extend) for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return {"$tuple": [_encode_value(v, f"{path}[{i}]", extend) for i, v in enumerate(value)]}
    if isinstance(value, bytearray):  # a type of its own: AG2 sends a bytearray to a model unlike bytes
        return {"$bytearray": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (bytes, memoryview)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, datetime):
        zone = value.tzinfo
        if isinstance(zone, ZoneInfo) or value.fold:
            # The offset alone would come back as a fixed offset: a named zone (and which of two
            # repeated wall times, the fold) is kept too, so the datetime comes back as it was.
            return {"$datetime": [value.isoformat(), zone.key if isinstance(zone, ZoneInfo) else None, value.fold]}
        return {"$datetime": value.isoformat()}
    if isinstance(value, date):
        return {"$date": value.isoformat()}
    if isinstance(value, UUID):
        return {"$uuid": str(value)}
    raise EventEncodeError(
        f"cannot store a {type(value).__name__} at {path}: only JSON values, bytes, "
        "datetimes, dates, UUIDs and tuples round-trip"
    )


def _object_hook(obj: dict[str, Any]) -> Any:
    # Called by the JSON parser for every object, innermost first, so a tag's
    # inner value is already decoded when its tag is seen.
    if len(obj) == 1:
        ((key, inner),) = obj.items()
        if key[:1] == "$":
            return _decode_tag(key, inner)
    return obj


def _decode_tag(tag: str, inner: Any) -> Any:
    try:
        if tag == "$bytes":
            return base64.b64decode(inner, validate=True)
        if tag == "$bytearray":
            return bytearray(base64.b64decode(inner, validate=True))
        if tag == "$int" and isinstance(inner, str):
            return int(inner, 16)
        if tag == "$datetime":
            if isinstance(inner, list) and len(inner) == 3:
                return _zoned(*inner)
            return datetime.fromisoformat(inner)
        if tag == "$date":
            return date.fromisoformat(inner)
        if tag == "$uuid":
            return UUID(inner)
        if tag == "$tuple" and isinstance(inner, list):
            return tuple(inner)
        if tag == "$float" and inner in ("nan", "inf", "-inf"):
            return float(inner)
        if tag == "$items" and isinstance(inner, list):
            return {_hashable(k): v for k, v in inner}
    except (TypeError, ValueError) as exc:
        raise _Undecodable(f"bad {tag} value: {exc}") from exc
    raise _Undecodable(f"unknown tag {tag!r}")


def _make_parser(object_hook: Callable[[dict[str, Any]], Any]) -> Callable[[str], Any]:
    """A payload parser whose tags are read by ``object_hook`` (this module's, or one extending it)."""
    parse_tagged = json.JSONDecoder(object_hook=object_hook).decode
    parse_plain = json.JSONDecoder().decode
    # scan_once is set by JSONDecoder.__init__ (the C scanner) but not declared on the class.
    scan_tagged = cast(Any, json.JSONDecoder(object_hook=object_hook)).scan_once
    scan_plain = cast(Any, json.JSONDecoder()).scan_once

    def parse(payload: str) -> Any:
        # Every tag is an object key starting with "$": text without a "$" has none,
        # and skips a Python call per object (a one-character test runs as memchr,
        # ten times as fast as testing for '"$'). The C scanner is called directly
        # (it is what json.loads runs, minus two regex passes for surrounding white
        # space); anything unusual goes through the full decoder for its error.
        tagged = "$" in payload
        try:
            value, end = (scan_tagged if tagged else scan_plain)(payload, 0)
        except StopIteration:
            end = -1
        if end == len(payload):
            return value
        return parse_tagged(payload) if tagged else parse_plain(payload)

    return parse


_parse = _make_parser(_object_hook)


def _zoned(iso: str, key: str | None, fold: int) -> datetime:
    when = datetime.fromisoformat(iso)
    if key is None:
        return when.replace(fold=1 if fold else 0)
    try:
        zone = ZoneInfo(key)  # a name in the system's time zone database: never a path or a module
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise _Undecodable(f"unknown time zone {key!r}") from exc
    # The wall time, its zone and its fold are the datetime as Python held it (even a wall time a
    # clock change skipped); the offset in the text is for people and SQL reading the row.
    return when.replace(tzinfo=zone, fold=1 if fold else 0)


def _hashable(key: Any) -> Any:
    if isinstance(key, (list, dict)):
        raise _Undecodable("a dict key decoded to an unhashable value")
    return key


def quick_ready() -> None:
    """Import msgspec, which :meth:`JsonCodec.decode_rows` parses with once it is imported (~8 ms, once per
    process): for a storage to call as it opens, on its own thread, before it reads anything.

    Decoding never imports it: not ``import sessionstore`` (which stays as light as it was), nor a read, so no
    read (on the event loop, perhaps) pays the import. Until it is imported, every row goes :meth:`JsonCodec.decode`'s
    way, which gives the same events.
    """
    import msgspec.json
    import msgspec.structs  # noqa: F401


class JsonCodec:
    """The default codec. ``types`` is the registry it may instantiate from."""

    frozen_events = True

    def __init__(self, types: EventTypes | None = None) -> None:
        self._types = types if types is not None else default_event_types
        self._plans: dict[str, _Plan] = {}  # by type name
        self._layouts: dict[type[BaseEvent], tuple[str, list[tuple[str, Any]]]] = {}

    @property
    def types(self) -> EventTypes:
        return self._types

    def encode(self, event: BaseEvent) -> tuple[str, str]:
        if isinstance(event, UnknownEvent):
            # Written back exactly as it was read: one process not understanding
            # an event is no reason to change it.
            return event.stored_type, event.payload
        if not isinstance(event, BaseEvent):
            raise EventEncodeError(f"not an event: {type(event).__name__} (subclass sessionstore.BaseEvent)")
        cls = type(event)
        layout = self._layouts.get(cls)
        if layout is None:
            type_name = self.types.name_of(cls)
            if type_name is None:
                raise EventEncodeError(
                    f"{cls.__qualname__} has no registered type name: declare it with "
                    f"class {cls.__name__}(BaseEvent, type_name='...')"
                )
            layout = self._layouts[cls] = (type_name, _layout(cls))
        type_name, fields_layout = layout
        fields: dict[str, Any] = {}
        for name, default in fields_layout:
            value = getattr(event, name)
            if default is not _NO_DEFAULT and type(value) is type(default) and value == default:
                continue  # smaller rows; decoding restores the default
            if type(value) in _PLAIN:
                fields[name] = value
                continue
            try:
                fields[name] = _encode_value(value, name)
            except RecursionError:
                raise EventEncodeError(
                    f"{cls.__name__}.{name} is nested too deeply (or holds itself) to be stored"
                ) from None
        return type_name, payload_text(fields)

    def decode(self, type_name: str, payload: str) -> BaseEvent:
        plan = self._plans.get(type_name)
        if plan is None:
            cls = self._types.lookup(type_name)
            if cls is None:  # not cached: the application may register it later
                return UnknownEvent(stored_type=type_name, payload=payload, reason="type name not registered")
            plan = self._plans[type_name] = _Plan(cls)
        try:
            raw = _parse(payload)
            if not isinstance(raw, dict):
                raise _Undecodable("payload is not a JSON object")
            if not raw.keys() <= plan.names:
                raise _Undecodable(f"fields not in {type_name}: {sorted(set(raw) - plan.names)}")
            return plan.build(raw)
        except (_Undecodable, ValueError, TypeError, RecursionError) as exc:
            return UnknownEvent(stored_type=type_name, payload=payload, reason=str(exc))

    def decode_rows(self, rows: Iterable[tuple[str, str]]) -> list[BaseEvent]:
        """``[decode(type_name, payload) for ...]``, the same events, faster: a payload with no tag (no ``$``) of
        a class its plan builds directly is parsed by msgspec into its fields (:func:`_quick`); any other, or one
        that fails there, goes the way of :meth:`decode`, which then says what is wrong with it."""
        decode = self.decode
        # A subclass decodes its own way: each row goes through it. Without msgspec imported (quick_ready), every
        # row goes the long way too: it is never imported here, in the middle of a read.
        if type(self).decode is not JsonCodec.decode or "msgspec" not in sys.modules:
            return [decode(type_name, payload) for type_name, payload in rows]
        plans = self._plans
        out: list[BaseEvent] = []
        append = out.append
        for type_name, payload in rows:
            plan = plans.get(type_name)
            event = None if plan is None or "$" in payload else plan.quick(payload)
            append(decode(type_name, payload) if event is None else event)
        return out

    def tokens(self, event: Any) -> Tokens | None:
        return event.tokens if isinstance(event, TokenUsage) else None

    def describe(self, event: Any) -> Description:
        if isinstance(event, (UserMessage, ModelMessage, SystemMessage)):
            return _content(_MESSAGE_ROLES[type(event)], event.content)
        if isinstance(event, ToolCall):
            return Description("tool_call", call_text(event.name, event.arguments))
        if isinstance(event, ToolResult):
            return _content("tool", event.content)
        return Description(None, None)


TOKEN_COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
"""The columns of :class:`~sessionstore.events.Tokens`' fields, in its order (revision 0010)."""
_NO_TOKENS: dict[str, int | None] = dict.fromkeys(TOKEN_COLUMNS)


def token_columns(codec: Codec, event: Any) -> dict[str, int | None]:
    """The event's token columns: what the codec's ``tokens`` says, all ``None`` when it says nothing (or has no
    ``tokens``). Counts are whole and not negative: anything else is :class:`EventEncodeError`."""
    tokens = getattr(codec, "tokens", None)
    said = None if tokens is None else tokens(event)
    if said is None:
        return _NO_TOKENS
    values = tuple(said)
    if len(values) != len(TOKEN_COLUMNS) or not all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31 for v in values
    ):
        raise EventEncodeError(
            f"{type(codec).__name__}.tokens gave {said!r} for a {type(event).__name__}: five whole numbers of tokens"
            " from 0 to 2**31 - 1 (sessionstore.Tokens) are stored"
        )
    return dict(zip(TOKEN_COLUMNS, values, strict=True))


def describe_row(codec: Codec, event: Any) -> dict[str, str | int | None]:
    """The event's role, text and text_path columns, from the codec's description, and its token columns
    (:func:`token_columns`): a new dict, which the caller may add to.

    The text is stored only where no path says where it is in the payload; text
    that UTF-8 cannot hold (lone surrogates) is stored with replacement
    characters: it is for reading and searching, the payload keeps it exactly.
    """
    counted = token_columns(codec, event)
    role, text, *rest = codec.describe(event)
    path = rest[0] if rest else None
    if path is not None:
        if path not in _PATHS_SEEN:
            if not is_text_path(path):
                raise EventEncodeError(
                    f"{type(codec).__name__}.describe gave the text path {path!r} for a {type(event).__name__}:"
                    " not a JSON path such as $.content"
                )
            if len(_PATHS_SEEN) < 1024:  # a codec making up paths as it goes still gets each one checked
                _PATHS_SEEN.add(path)
        text = None
    elif text is not None and not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    row: dict[str, str | int | None] = {"role": role, "text": text, "text_path": path}
    row.update(counted)
    return row


_PATHS_SEEN: set[str] = set()
"""Text paths :func:`describe_row` has found well-formed: a codec gives the same few for every event of a kind
(``$.content``), and the check is a regular expression."""


def decode_all(codec: Codec, rows: Iterable[tuple[str, str]]) -> list[Any]:
    """Every row decoded (by the codec's ``decode_rows`` where it has one, else row by row), with the cyclic garbage
    collector paused meanwhile.

    A long history makes tens of thousands of objects at once, which sets off
    full collections in the middle of decoding: for 10,000 events, 95 ms at worst
    instead of 20 ms. None of them can be garbage before they are returned, and
    they outlive the call (the caller holds them, the read cache keeps them): a pass
    of the young generations over them would free nothing and only move them on.
    So when the decoding alone filled the youngest generation past its threshold
    (a pass would start at the next allocation), everything young goes straight to
    the oldest generation, where the collector's full passes look at it as they
    would have after two young ones: ``gc.freeze()`` then ``gc.unfreeze()``, two
    list splices and no traversal (3 ms less for 10,000 events). Not while the
    application keeps objects frozen itself: those stay frozen.
    """
    decode_rows = getattr(codec, "decode_rows", None)
    paused = gc.isenabled()
    gc.disable()
    try:
        if decode_rows is not None:
            return cast(list[Any], decode_rows(rows))
        decode = codec.decode
        return [decode(type_name, payload) for type_name, payload in rows]
    finally:
        if paused:
            if gc.get_count()[0] > gc.get_threshold()[0] and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


_LEGACY = JsonCodec()


def legacy_description(type_name: str, payload: str) -> Description:
    """The role and text of an event stored without them (a file before revision 0003, an export of version 1).

    Only sessionstore's own event types existed then, so its codec describes them.
    """
    return _LEGACY.describe(_LEGACY.decode(type_name, payload))


def call_text(name: str, arguments: Any) -> str:
    """A tool call as a transcript shows it: ``name(key=value, ...)``, values as JSON."""
    if isinstance(arguments, dict):
        return f"{name}({', '.join(f'{key}={_as_json(value)}' for key, value in arguments.items())})"
    return f"{name}({_as_json(arguments)})"


def _content(role: str, content: Any) -> Description:
    # A string, list or dict content is found in the payload at $.content (SQLite
    # reads a list or dict there as its compact JSON, which is what _as_text
    # gives); other values are short and stored as their text. A string that
    # needed \u escapes (lone surrogates) is not kept as a path: SQLite would
    # read it back as text that is not valid UTF-8.
    if isinstance(content, (dict, list)) or (isinstance(content, str) and (content.isascii() or _utf8(content))):
        return Description(role, _as_text(content), "$.content")
    return Description(role, _as_text(content))


def payload_text(fields: dict[str, Any]) -> str:
    """Encoded fields as the compact JSON text of a payload.

    Lone surrogates cannot be stored as UTF-8 text; ``\\u`` escapes can, and
    ``json.loads`` gives the same string back, so such a payload is written in ASCII.
    """
    try:
        text = _dumps(fields)
    except ValueError:  # Python refuses to write an int of more than sys.get_int_max_str_digits() digits
        fields = _long_ints_tagged(fields)
        text = _dumps(fields)
    return text if text.isascii() or _utf8(text) else _dumps_ascii(fields)


def _long_ints_tagged(value: Any) -> Any:
    """Encoded ``value`` with every int Python will not write in decimal as ``{"$int": hex}``.

    Only on the rare write that holds one (a tool computing a factorial), so the usual write pays nothing.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            str(value)
        except ValueError:
            return {"$int": hex(value)}
        return value
    if isinstance(value, dict):
        return {k: _long_ints_tagged(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_long_ints_tagged(v) for v in value]
    return value


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_MESSAGE_ROLES: dict[type[BaseEvent], str] = {UserMessage: "user", ModelMessage: "assistant", SystemMessage: "system"}


def _as_json(value: Any) -> str:
    # Compact, as SQLite's JSON functions write it: text computed in SQL from a
    # stored payload (the 0003 migration's) reads the same.
    try:
        encoded = _encode_value(value, "value")
    except (EventEncodeError, ValueError):
        return repr(value)
    try:
        return _dumps(encoded)
    except ValueError:  # an int too long for decimal text (see payload_text)
        return _dumps(_long_ints_tagged(encoded))


def _as_text(value: Any) -> str | None:
    """A value as transcript text: strings as they are, anything else as JSON, ``None`` as no text."""
    if value is None or isinstance(value, str):
        return value
    return _as_json(value)


class _Plan:
    """How to build one event class from decoded fields, worked out once per class.

    A plain frozen dataclass's ``__init__`` only assigns its fields (through
    ``object.__setattr__``, one call each), so its instance dict is filled
    directly: reading a long history is dominated by this step. A class with
    ``__post_init__``, ``InitVar``s or slots is built through its ``__init__``.
    """

    def __init__(self, cls: type[BaseEvent]) -> None:
        self.cls = cls
        fields = dataclasses.fields(cls)
        self.names = frozenset(f.name for f in fields if f.init)
        self.required = frozenset(
            f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        self.defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
        self.factories = [(f.name, f.default_factory) for f in fields if f.default_factory is not dataclasses.MISSING]
        # InitVars only matter to a __post_init__, so checking for one covers them.
        init_only = any(f.init is False for f in fields)
        self.direct = not (hasattr(cls, "__post_init__") or hasattr(cls, "__slots__") or init_only)
        # What JsonCodec.decode_rows builds with: made on its first payload (decode alone never imports msgspec).
        self.quick: Callable[[str], BaseEvent | None] = self._first_quick if self.direct else _not_quick

    def _first_quick(self, payload: str) -> BaseEvent | None:
        self.quick = _quick(self)
        return self.quick(payload)

    def build(self, raw: dict[str, Any]) -> BaseEvent:
        if not self.direct:
            return self.cls(**raw)
        if not self.required <= raw.keys():
            raise _Undecodable(f"missing fields: {sorted(self.required - raw.keys())}")
        event = object.__new__(self.cls)
        values = event.__dict__
        values.update(self.defaults)
        for name, factory in self.factories:
            if name not in raw:
                values[name] = factory()
        values.update(raw)
        return event


def _not_quick(payload: str) -> None:
    return None


def _quick(plan: _Plan) -> Callable[[str], BaseEvent | None]:
    """``plan``'s event from a payload without tags, or ``None`` for :meth:`JsonCodec.decode` to judge (text that
    is not one JSON object of the class's fields, each required one present).

    msgspec parses the payload straight into a struct of the class's fields (typed ``Any``, so every value is
    what ``json`` would give: a test holds it to that; a field not the class's refused), whose dict becomes the
    event's own ``__dict__``, as :meth:`_Plan.build` fills one: 10,000 events in 0.4x the time of ``json``'s
    scanner and :meth:`_Plan.build`. Called only once msgspec is imported (:func:`quick_ready`).
    """
    import msgspec

    fields: list[Any] = []
    for name in sorted(plan.names):
        if name in plan.defaults:
            fields.append((name, Any, plan.defaults[name]))
        else:
            factory = dict(plan.factories).get(name)
            fields.append((name, Any) if factory is None else (name, Any, msgspec.field(default_factory=factory)))
    try:  # gc=False: a struct lives only until its dict is taken
        shape = msgspec.defstruct("Fields", fields, kw_only=True, forbid_unknown_fields=True, gc=False)
    except Exception:  # a field msgspec will not have (it refuses a name such as "__x"): the long way
        return _not_quick
    parse = msgspec.json.Decoder(shape).decode
    # ValueError: a str that UTF-8 cannot hold (a lone surrogate), which no row read from SQLite is.
    failed = (msgspec.DecodeError, ValueError, RecursionError)
    cls, as_dict = plan.cls, msgspec.structs.asdict
    new, set_attribute = object.__new__, object.__setattr__

    def quick(payload: str) -> BaseEvent | None:
        try:
            values = as_dict(parse(payload))
        except failed:
            return None
        event = new(cls)
        set_attribute(event, "__dict__", values)
        return event

    return quick


_NO_DEFAULT: Any = object()
# Factories whose result is the same empty value every time, so a field equal to
# it can be left out of the payload and rebuilt on decoding.
_PURE_FACTORIES: tuple[Any, ...] = (dict, list, tuple, str, set, frozenset)
# Without the circular-reference check: the tree handed over is built fresh by _encode_value (a value holding
# itself fails there, as too deep), and the check costs a sixth of the dump.
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False).encode
_dumps_ascii = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False, check_circular=False).encode


def _layout(cls: type[BaseEvent]) -> list[tuple[str, Any]]:
    """(field name, default to leave out) in payload order: the event's own fields first,
    metadata last (rows read better that way)."""
    out = []
    for f in sorted(dataclasses.fields(cls), key=lambda f: f.name == "metadata"):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory in _PURE_FACTORIES:
            default = cast(Any, f.default_factory)()
        else:
            default = _NO_DEFAULT
        out.append((f.name, default))
    return out
