"""JSON encoding of everything parkway stores, with errors that name the path at fault."""

from __future__ import annotations

import math
from typing import Any

import orjson

from parkway.errors import SerializationError


def dumps(value: Any, what: str = "value") -> bytes:
    """Encode ``value`` as JSON bytes, or raise :class:`SerializationError` naming the path."""
    try:
        encoded = orjson.dumps(value)
    except TypeError as exc:
        path, detail = _find_bad(value, "$")
        raise SerializationError(what, path, detail or str(exc)) from exc
    # orjson writes NaN/Infinity as null, which would silently change the value.
    if b"null" in encoded:
        path, detail = _find_bad(value, "$", nan_only=True)
        if detail:
            raise SerializationError(what, path, detail)
    return encoded


def loads(data: bytes | str | None) -> Any:
    """Decode JSON bytes (``None`` stays ``None``)."""
    if data is None:
        return None
    return orjson.loads(data)


def _find_bad(value: Any, path: str, nan_only: bool = False) -> tuple[str, str]:
    if value is None or isinstance(value, bool | int | str):
        return path, ""
    if isinstance(value, float):
        return (path, f"{value} is not a finite number") if not math.isfinite(value) else (path, "")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return path, f"key {key!r} is a {type(key).__name__}, not a string"
            found, detail = _find_bad(item, f"{path}.{key}", nan_only)
            if detail:
                return found, detail
        return path, ""
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found, detail = _find_bad(item, f"{path}[{index}]", nan_only)
            if detail:
                return found, detail
        return path, ""
    if nan_only:  # orjson encodes datetimes, UUIDs, dataclasses...: those are fine
        return path, ""
    return path, f"a {type(value).__name__} object"
