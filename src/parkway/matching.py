"""The match rule of ``wait_for_event`` and the index keys that make publish O(shapes).

A ``match`` dict is satisfied when every key it names is present in the
payload with a deep-equal value. Deep-equal is JSON equality: objects by
keys and values, arrays element by element, numbers by value (``1 == 1.0``),
and booleans apart from numbers (``true != 1``).

A parked wait is indexed by its *shape* (the sorted keys it matches on) and
the *digest* of the values it wants. A publish computes, for each distinct
shape registered under the event's name, the digest of the payload's values
at those keys, and looks up exactly that index entry. The work per publish
grows with the number of shapes, not with the number of parked runs.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from parkway import _json, limits
from parkway.errors import InvalidInputError, ParkwayError

NO_SHAPE = ""


def check_match(value: Any) -> dict[str, Any] | None:
    """A ``wait_for_event`` match: ``None`` or a dict of payload field names to
    JSON values (at most :data:`parkway.limits.MAX_DEPTH` levels, keys together at most
    :data:`parkway.limits.MAX_MATCH_KEYS_LENGTH` characters).

    Raises:
        ParkwayError: It is not a dict of non-empty names.
        InvalidInputError: A key holds a control character, or the keys are too long.
        SerializationError: A value is not JSON, or nests too deep.
    """
    if value is None:
        return None
    # (A plain ParkwayError for what is not a dict of names: as before these limits.)
    if not isinstance(value, dict):
        raise ParkwayError(
            f"match must be a dict of payload keys to expected values, got {type(value).__name__}"
        )
    total = 0
    for item in value:
        if not isinstance(item, str) or not item:
            raise ParkwayError(f"match keys must be non-empty strings, got {item!r}")
        limits.text(item, "match key", field="match", max_length=limits.MAX_MATCH_KEYS_LENGTH)
        total += len(item)
    if total > limits.MAX_MATCH_KEYS_LENGTH:
        raise InvalidInputError(
            f"the keys of match are {total} characters long together; "
            f"at most {limits.MAX_MATCH_KEYS_LENGTH} are allowed",
            field="match",
        )
    _json.dumps(value, "match")
    return value


def shape_of(match: dict[str, Any] | None) -> str:
    """The index shape of a match: its sorted keys, as JSON ('' for no match)."""
    if not match:
        return NO_SHAPE
    return orjson.dumps(sorted(match)).decode()


def keys_of(shape: str) -> list[str]:
    """The keys a shape names."""
    return orjson.loads(shape) if shape else []


def digest_of(values: list[Any]) -> str:
    """A digest of values, equal for deep-equal values."""
    if not values:
        return ""
    canonical = orjson.dumps([_normal(v) for v in values], option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(canonical, digest_size=12).hexdigest()


def match_digest(match: dict[str, Any] | None) -> str:
    """The digest a wait with this match is indexed under."""
    if not match:
        return ""
    return digest_of([match[k] for k in sorted(match)])


def payload_digest(payload: Any, shape: str) -> str | None:
    """The digest of ``payload`` under ``shape``, or ``None`` if a key is missing."""
    keys = keys_of(shape)
    if not keys:
        return ""
    if not isinstance(payload, dict):
        return None
    values = []
    for key in keys:
        if key not in payload:
            return None
        values.append(payload[key])
    return digest_of(values)


def matches(match: dict[str, Any] | None, payload: Any) -> bool:
    """The match rule: every key of ``match`` deep-equals the payload's value."""
    if not match:
        return True
    if not isinstance(payload, dict):
        return False
    return all(key in payload and deep_equal(value, payload[key]) for key, value in match.items())


def deep_equal(a: Any, b: Any) -> bool:
    """JSON equality (numbers by value, booleans apart from numbers)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    return bool(a == b)


def _normal(value: Any) -> Any:
    # Integral floats hash like ints so that 1.0 finds a wait for 1 (within the
    # range of ints the JSON encoder takes, -2**63 to 2**64 - 1; beyond, they stay floats).
    if isinstance(value, float) and value.is_integer() and -(2**63) <= value < 2**64:
        return int(value)
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normal(v) for v in value]
    return value
