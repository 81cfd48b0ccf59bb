"""``{{trigger.payload.products[0].product_id}}`` placeholders in flow params.

The rules (docs/guides/flows.md, "Templates"):

- A placeholder is ``{{ path }}``; whitespace inside the braces is allowed and
  ``{{}}`` (nothing, or only whitespace, inside) is left as it is.
- A path is a root (``trigger``, ``event``, ``state``) followed by ``.key`` and
  ``[i]`` parts. A ``.0`` part also indexes a list.
- Values are resolved recursively through dicts and lists; dict keys are not.
- A string that is exactly one placeholder takes the resolved value, with its
  type (``None`` if the path is missing).
- Placeholders inside a longer string are interpolated; if any of them is
  missing, ``null`` or not a scalar, the whole value is ``None``. Numbers are
  printed as JavaScript prints them (``42.0`` -> ``"42"``, ``1e21`` ->
  ``"1e+21"``), booleans as ``true`` / ``false``, as omega-flow does.

``trigger`` and ``event`` are payloads, but an event also has an envelope
(``name``, ``payload``, ``subject``...). When the payload has no key named by
the path's first part, the envelope is consulted, so both
``{{trigger.total}}`` and ``{{trigger.payload.products[0]}}`` find the
starting event's payload fields.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

ROOTS: Final = ("trigger", "event", "state")

# "{{ ... }}" without braces inside; the inside is checked separately so errors can say why.
PLACEHOLDER: Final = re.compile(r"\{\{([^{}]*)\}\}")
_KEY = r"[^\s.\[\]{}]+"
_PATH: Final = re.compile(rf"{_KEY}(?:\.{_KEY}|\[\d+\])*")
_PART: Final = re.compile(rf"\.({_KEY})|\[(\d+)\]")


class _Missing:
    """The value of a path that leads nowhere (distinct from JSON ``null``)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Scope:
    """What templates are resolved against.

    Attributes:
        values: Each root's value (``trigger`` and ``event`` payloads, ``state``).
        envelopes: For some roots, the whole event, consulted when the payload
            lacks the path's first key.
        node_state: Each node's state by node id, consulted for ``state.<id>.<key>``
            when ``values["state"][id]`` (a named Action's return value) lacks ``key``.
    """

    values: Mapping[str, Any]
    envelopes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    node_state: Mapping[str, Any] = field(default_factory=dict)


def parse_path(text: str) -> Path | None:
    """``"trigger.products[0].id"`` -> ``("trigger", "products", 0, "id")``; ``None`` if invalid."""
    text = text.strip()
    if not _PATH.fullmatch(text):
        return None
    root = re.match(_KEY, text)
    assert root is not None
    parts: list[str | int] = [root.group(0)]
    for match in _PART.finditer(text, root.end()):
        key, index = match.groups()
        parts.append(key if key is not None else int(index))
    return tuple(parts)


def placeholders(text: str) -> Iterator[str]:
    """The non-empty expressions of the placeholders in ``text``, stripped, in order."""
    for match in _placeholders(text)[0]:
        yield match.group(1).strip()


def walk(value: Any, field_name: str) -> Iterator[tuple[str, str]]:
    """``(field, expression)`` for every placeholder in ``value``, recursively."""
    if isinstance(value, str):
        for expression in placeholders(value):
            yield field_name, expression
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from walk(item, f"{field_name}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from walk(item, f"{field_name}[{i}]")


def lookup(path: Path, scope: Scope) -> Any:
    """The value at ``path``, or :data:`MISSING`."""
    root, rest = path[0], path[1:]
    if not isinstance(root, str) or root not in scope.values:
        return MISSING
    found = descend(scope.values[root], rest)
    if found is MISSING and rest and root in scope.envelopes:
        first = rest[0]
        payload = scope.values[root]
        if not (isinstance(payload, dict) and first in payload):
            found = descend(scope.envelopes[root], rest)
    node = rest[0] if rest else None
    if found is MISSING and root == "state" and len(rest) >= 2 and isinstance(node, str):
        # state.<id>.<key> that a named Action's return value lacks: the node's own state.
        own = scope.values[root].get(node) if isinstance(scope.values[root], dict) else None
        if node in scope.node_state and not (isinstance(own, dict) and rest[1] in own):
            found = descend(scope.node_state[node], rest[1:])
    return found


def descend(value: Any, parts: Path) -> Any:
    """``value`` at ``parts`` (keys and list indices), or :data:`MISSING`."""
    for part in parts:
        if isinstance(value, dict):
            if not isinstance(part, str) or part not in value:
                return MISSING
            value = value[part]
        elif isinstance(value, list):
            if isinstance(part, str):
                if not part.isdigit():
                    return MISSING
                part = int(part)
            if part >= len(value):
                return MISSING
            value = value[part]
        else:
            return MISSING
    return value


def evaluate(expression: str, scope: Scope) -> Any:
    """The value of one placeholder's expression (a path), or :data:`MISSING`."""
    path = parse_path(expression)
    if path is None:
        return MISSING
    return lookup(path, scope)


def resolve(value: Any, scope: Scope) -> Any:
    """``value`` with every placeholder resolved (see the module docstring for the rules).

    The result shares nothing mutable with ``scope``.
    """
    if isinstance(value, str):
        return _resolve_str(value, scope)
    if isinstance(value, dict):
        return {key: resolve(item, scope) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, scope) for item in value]
    return value


def _placeholders(text: str) -> tuple[list[re.Match[str]], bool]:
    """The non-empty placeholders of ``text``, and whether it is exactly one of them."""
    matches = [m for m in PLACEHOLDER.finditer(text) if m.group(1).strip()]
    return matches, len(matches) == 1 and matches[0].span() == (0, len(text))


def _resolve_str(text: str, scope: Scope) -> Any:
    matches, single = _placeholders(text)
    if not matches:
        return text
    if single:
        found = evaluate(matches[0].group(1), scope)
        return None if found is MISSING else copy.deepcopy(found)
    out: list[str] = []
    last = 0
    for match in matches:
        found = evaluate(match.group(1), scope)
        piece = scalar_text(found)
        if piece is None:
            return None
        out.append(text[last : match.start()])
        out.append(piece)
        last = match.end()
    out.append(text[last:])
    return "".join(out)


def scalar_text(value: Any) -> str | None:
    """How a scalar reads inside a string, as JavaScript's ``String(value)`` spells it
    (``true``, ``42`` for ``42.0``); ``None`` for anything else.

    Integers are printed exactly, also past 2**53 where JavaScript would round them.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int):
        return str(value)
    if isinstance(value, float):
        return js_number(value)
    return None


def js_number(value: float) -> str:
    """``value`` as JavaScript's ``Number.prototype.toString()`` prints it.

    The digits are the shortest that read back as ``value`` (Python's ``repr``
    chooses them the same way); the ECMAScript rules then place the point or
    switch to an exponent (below 1e-6 and from 1e21 on).
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"  # -0 too
    if value < 0:
        return "-" + js_number(-value)
    _, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    digits = list(digit_tuple)
    while len(digits) > 1 and digits[-1] == 0:
        digits.pop()
        exponent += 1
    text = "".join(map(str, digits))
    k = len(digits)
    n = exponent + k  # the point sits after n digits
    if k <= n <= 21:
        return text + "0" * (n - k)
    if 0 < n <= 21:
        return f"{text[:n]}.{text[n:]}"
    if -6 < n <= 0:
        return "0." + "0" * -n + text
    mantissa = text if k == 1 else f"{text[0]}.{text[1:]}"
    return f"{mantissa}e{'+' if n >= 1 else '-'}{abs(n - 1)}"


def unresolved(value: Any, scope: Scope) -> list[str]:
    """The placeholders that make ``value`` (or part of it) resolve to ``None``."""
    if isinstance(value, dict):
        return [t for item in value.values() for t in unresolved(item, scope)]
    if isinstance(value, list):
        return [t for item in value for t in unresolved(item, scope)]
    if not isinstance(value, str):
        return []
    matches, single = _placeholders(value)
    out = []
    for match in matches:
        found = evaluate(match.group(1), scope)
        if found is MISSING or found is None or (not single and scalar_text(found) is None):
            out.append(match.group(0))
    return out
