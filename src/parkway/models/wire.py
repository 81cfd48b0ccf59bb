"""One definition per wire shape: a record's JSON form is derived from its dataclass.

A public record (``RunInfo``, ``PublishResult``, ...) is a dataclass, and its
fields are the one place its shape is written: :meth:`Wire.to_dict` encodes
them by their declared types (a ``datetime`` as ISO 8601 text, an enum as its
value, an ``ErrorInfo`` or a nested record as its dict, a tuple as a list), and
the HTTP API's response schemas are generated from the same fields
(``parkway.http.responses``). What a field's type cannot say is said in its
metadata, with :func:`wire`: a field kept out of the JSON form, its closed set
of values, its description, or an encoder of its own.
"""

from __future__ import annotations

import enum
import functools
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from datetime import datetime
from typing import Any

# The key of a field's metadata that :func:`wire` fills.
WIRE = "parkway.wire"

Encoder = Callable[[Any], Any]


def wire(
    *,
    hidden: bool = False,
    choices: tuple[str, ...] | None = None,
    description: str | None = None,
    encode: Encoder | None = None,
) -> Mapping[str, Any]:
    """A field's metadata for its JSON form (``field(metadata=wire(...))``).

    Args:
        hidden: Left out of the JSON form (and of the HTTP response).
        choices: The only values it takes (the HTTP schema's enum).
        description: What it is, for the HTTP schema (else its docstring's
            ``Attributes:`` entry).
        encode: Its JSON form, where its type does not say it.
    """
    spec = {"hidden": hidden, "choices": choices, "description": description, "encode": encode}
    return {WIRE: spec}


def spec_of(field_metadata: Mapping[str, Any]) -> dict[str, Any]:
    """What :func:`wire` said of a field (empty: nothing)."""
    spec: dict[str, Any] = field_metadata.get(WIRE, {})
    return spec


class Wire:
    """A dataclass whose :meth:`to_dict` is derived from its fields."""

    def to_dict(self) -> dict[str, Any]:
        """The record as a plain JSON-friendly dict (times as ISO 8601 text)."""
        cls = type(self)
        write = _WRITERS.get(cls) or _writer(cls)
        return write(self)


class _Subscriptable(Wire):
    """Lets a record be read as ``info.status`` or ``info["status"]`` alike."""

    def __getitem__(self, key: str) -> Any:
        if key not in {f.name for f in fields(self)}:  # type: ignore[arg-type]
            raise KeyError(key)
        return getattr(self, key)


# Each record class's to_dict, compiled once from its plan.
_WRITERS: dict[type, Callable[[Any], dict[str, Any]]] = {}


def _writer(cls: type) -> Callable[[Any], dict[str, Any]]:
    """``cls``'s to_dict as one dict display, as ``dataclasses`` writes ``__init__``:
    a publish writes an event's envelope each time, and a loop over the fields
    would cost more on that path."""
    env: dict[str, Any] = {}
    items = []
    for index, (name, encode) in enumerate(plan(cls)):
        if encode is None:
            items.append(f"{name!r}: self.{name}")
        else:
            env[f"_encode{index}"] = encode
            items.append(f"{name!r}: _encode{index}(self.{name})")
    exec(f"def to_dict(self):\n    return {{{', '.join(items)}}}\n", env)
    write: Callable[[Any], dict[str, Any]] = env["to_dict"]
    _WRITERS[cls] = write
    return write


@functools.cache
def plan(cls: type) -> tuple[tuple[str, Encoder | None], ...]:
    """The fields of ``cls``'s JSON form, in order, each with its encoder (``None``:
    the value as it is). Worked out once per class, from the declared types."""
    assert is_dataclass(cls), cls
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    out = []
    for f in fields(cls):
        spec = spec_of(f.metadata)
        if spec.get("hidden"):
            continue
        out.append((f.name, spec.get("encode") or encoder(hints[f.name])))
    return tuple(out)


def encoder(hint: Any) -> Encoder | None:
    """How a value of type ``hint`` is written as JSON (``None``: as it is)."""
    if hint is Any or hint in (str, int, float, bool, type(None)):
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        kinds = [a for a in args if a is not type(None)]
        inner = encoder(kinds[0]) if len(kinds) == 1 else _any
        return None if inner is None else functools.partial(_optional, inner)
    if origin in (list, tuple):
        item = encoder(args[0]) if args else None
        return list if item is None else functools.partial(_items, item)
    if origin is dict:
        value = encoder(args[1]) if len(args) == 2 else None
        return None if value is None else functools.partial(_mapping, value)
    if hint is datetime or (isinstance(hint, type) and issubclass(hint, enum.Enum)):
        return _any
    if isinstance(hint, type) and hasattr(hint, "to_dict"):
        return _any
    return None


def _optional(inner: Encoder, value: Any) -> Any:
    return None if value is None else inner(value)


def _items(item: Encoder, values: Any) -> list[Any]:
    return [item(v) for v in values]


def _mapping(encode: Encoder, values: dict[Any, Any]) -> dict[Any, Any]:
    return {k: encode(v) for k, v in values.items()}


def _any(value: Any) -> Any:
    """A time, an enum or a record, written by what it is (a caller may have given
    the plain value its type stands for: a status as its string, say)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    return value.to_dict() if hasattr(value, "to_dict") else value


def times_as_text(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Dicts whose values may be datetimes (a run's waits): those as ISO 8601 text."""
    return [
        {k: v.isoformat() if isinstance(v, datetime) else v for k, v in item.items()}
        for item in items
    ]
