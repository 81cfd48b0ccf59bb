"""JSON encoding of everything parkway stores, with errors that name the path at fault.

A caller's value (a payload, an input, a result: what :func:`dumps` is given
with a ``what`` naming it) nests at most :data:`parkway.limits.MAX_DEPTH`
levels. The engine wraps such values in envelopes of its own (an event, a
delivery, a journal entry) and the encoder gives up at 254 levels: a value
that passed at 254 would fail later, inside the engine.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import re
import uuid
from collections.abc import Iterator
from typing import Any

import orjson

from parkway.errors import SerializationError, shown
from parkway.limits import MAX_DEPTH

# orjson encodes at most this many levels of nesting (and raises past it).
_ENCODER_DEPTH = 254
# A value wrapped in this many lists encodes iff it is at most MAX_DEPTH deep.
_WRAP = _ENCODER_DEPTH - MAX_DEPTH
_SURROGATE = re.compile("[\ud800-\udfff]")
# What orjson encodes natively besides the JSON types (their insides are its business).
_NATIVE = (datetime.date, datetime.time, uuid.UUID, enum.Enum)


def dumps(value: Any, what: str | None = None) -> bytes:
    """Encode ``value`` as JSON bytes, or raise :class:`SerializationError` naming the path.

    Args:
        value: What to encode.
        what: What the value is, for the error (``"the payload of event 'x'"``): a
            caller's value, held to ``MAX_DEPTH`` levels. Without it, a value of
            the engine's own (an envelope around a caller's), held to the
            encoder's 254.

    Raises:
        SerializationError: ``value`` holds something that is not JSON (a set, NaN,
            a key that is not a string, an integer outside 64 bits, a lone
            surrogate), nests too deep, or refers to itself.
    """
    try:
        encoded = orjson.dumps(value)
    except TypeError as exc:
        path, detail = _find_bad(value, limit=_ENCODER_DEPTH if what is None else MAX_DEPTH)
        raise SerializationError(what or "value", path, detail or str(exc)) from exc
    # Fewer brackets than the limit cannot nest past it: most values stop here.
    if (
        what is not None
        and encoded.count(b"[") + encoded.count(b"{") > MAX_DEPTH
        and _too_deep(value)
    ):
        path, detail = _find_bad(value, limit=MAX_DEPTH)
        raise SerializationError(what, path, detail or f"nested deeper than {MAX_DEPTH} levels")
    # orjson writes NaN/Infinity as null, which would silently change the value.
    # (It encoded: no deeper than the encoder's limit, and holds no cycle.) Most
    # nulls are Nones: a walk that builds no paths tells, and only a value that
    # holds one is walked again for where.
    if b"null" in encoded and _holds_non_finite(value):
        path, detail = _find_bad(value, nan_only=True, limit=_ENCODER_DEPTH)
        if detail:
            raise SerializationError(what or "value", path, detail)
    return encoded


def _holds_non_finite(root: Any) -> bool:
    """Whether ``root`` (a value that encodes) holds a NaN or an infinity, in the
    containers :func:`_find_bad` walks."""
    stack = [root]
    while stack:
        value = stack.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                return True
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return False


def loads(data: bytes | str | None) -> Any:
    """Decode JSON bytes (``None`` stays ``None``)."""
    if data is None:
        return None
    return orjson.loads(data)


# The fewest digits an integer outside [-2**63, 2**64 - 1] is written with.
_LONG_DIGITS = re.compile(rb"[0-9]{19}")
_MIN_INT, _MAX_INT = -(2**63), 2**64 - 1


class _Wide:
    """An integer literal outside 64 bits, as the document wrote it."""

    def __init__(self, text: str) -> None:
        self.text = text


def _integer(text: str) -> int | _Wide:
    # (Over 20 digits it cannot fit: int() is not even tried, it refuses 4,300 digits.)
    if len(text.lstrip("-")) > 20:
        return _Wide(text)
    number = int(text)
    return number if _MIN_INT <= number <= _MAX_INT else _Wide(text)


def wide_integer(raw: bytes | str) -> tuple[list[str | int], str] | None:
    """Where the JSON document ``raw`` (one :func:`loads` took) writes an integer
    outside 64 bits, and that integer (cut short past 40 digits); ``None``: nowhere.

    orjson reads such an integer as a float, which would change the value
    silently; the standard library's parser keeps each integer's text, so it
    tells such an integer from a float written as one. Only a document with 19
    digits in a row can hold one: most are not parsed twice.
    """
    data = raw.encode() if isinstance(raw, str) else raw
    if _LONG_DIGITS.search(data) is None:
        return None
    try:
        document = json.loads(data, parse_int=_integer)
    except (RecursionError, ValueError):
        # Deeper than any payload may be (or not JSON at all): refused as such later.
        return None
    stack: list[tuple[list[str | int], Any]] = [([], document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, _Wide):
            digits = len(value.text.lstrip("-"))
            text = value.text if digits <= 40 else f"{value.text[:20]}... ({digits} digits)"
            return path, text
        if isinstance(value, dict):
            stack.extend(([*path, key], item) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend(([*path, index], item) for index, item in enumerate(value))
    return None


def _too_deep(value: Any) -> bool:
    """Whether ``value`` (which encodes) nests deeper than ``MAX_DEPTH``: the encoder,
    in C, counts the levels far faster than a walk in Python would."""
    wrapped = value
    for _ in range(_WRAP):
        wrapped = [wrapped]
    try:
        orjson.dumps(wrapped)
    except TypeError:
        return True
    return False


def _find_bad(root: Any, nan_only: bool = False, limit: int = MAX_DEPTH) -> tuple[str, str]:
    """The path of the first value the encoder refuses, and why (``""``: none found).

    A walk with a stack of its own, not recursion: the value may nest 100,000
    levels deep or hold itself.
    """
    detail = _leaf_problem(root, nan_only)
    if detail or not _is_container(root):
        return "$", detail
    stack: list[tuple[Iterator[tuple[str, Any]], int]] = [(_children(root, "$"), id(root))]
    on_path = {id(root)}
    while stack:
        children, ident = stack[-1]
        for path, child in children:
            detail = _leaf_problem(child, nan_only)
            if detail:
                return path, detail
            if not _is_container(child):
                continue
            if id(child) in on_path:
                return path, "the value contains itself (a reference cycle)"
            if len(stack) >= limit:
                return path, f"nested deeper than {limit} levels"
            on_path.add(id(child))
            stack.append((_children(child, path), id(child)))
            break
        else:
            stack.pop()
            on_path.discard(ident)
    return "$", ""


class _BadKey(Exception):
    def __init__(self, path: str, detail: str) -> None:
        self.path, self.detail = path, detail


def _children(container: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(container, dict):
        for key, item in container.items():
            if not isinstance(key, str):
                yield (
                    path,
                    _BadKey(path, f"key {shown(key)} is a {type(key).__name__}, not a string"),
                )
                return
            if _SURROGATE.search(key):
                yield path, _BadKey(path, f"key {shown(key)} holds a lone surrogate")
                return
            yield f"{path}.{key}", item
    else:
        for index, item in enumerate(container):
            yield f"{path}[{index}]", item


def _is_container(value: Any) -> bool:
    return isinstance(value, dict | list | tuple)


def _leaf_problem(value: Any, nan_only: bool) -> str:
    """Why the encoder refuses ``value`` itself (not what it holds); ``""``: it does not."""
    if isinstance(value, _BadKey):
        return value.detail
    if isinstance(value, float):
        return "" if math.isfinite(value) else f"{value} is not a finite number"
    if nan_only or value is None or isinstance(value, bool) or _is_container(value):
        return ""
    if isinstance(value, int):
        if -(2**63) <= value < 2**64:
            return ""
        return f"the integer {shown(value)} is outside the 64-bit range JSON is stored with"
    if isinstance(value, str):
        bad = _SURROGATE.search(value)
        return "" if bad is None else f"a string with a lone surrogate (U+{ord(bad.group()):04X})"
    if isinstance(value, _NATIVE) or dataclasses.is_dataclass(value):
        return ""
    return f"a {type(value).__name__} object"
