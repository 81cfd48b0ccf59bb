"""Durations: a ``timedelta``, a number of seconds, or a string like ``"250ms"``."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from parkway.errors import InvalidDurationError
from parkway.limits import MAX_DURATION_SECONDS

Duration = timedelta | float | int | str

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
# ASCII digits only: \d would also read "٣s" as three seconds.
_PATTERN = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d|w)\s*")
# The same, as the JSON Schema of a duration string.
DURATION_PATTERN = r"^\s*[0-9]+(\.[0-9]+)?\s*(ms|s|m|h|d|w)\s*$"


def to_seconds(value: Duration, field: str = "duration") -> float:
    """Convert a duration to seconds.

    Args:
        value: A ``timedelta``, a non-negative number of seconds, or a string made
            of a number and one unit among ``ms s m h d w``; at most 100 years
            (:data:`parkway.limits.MAX_DURATION_SECONDS`).
        field: The name reported in the error when ``value`` is not a duration.

    Raises:
        InvalidDurationError: ``value`` is negative, not finite, longer than 100
            years, or not understood.
    """
    if isinstance(value, bool):
        raise InvalidDurationError(value, field)
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int):
        # Compared as an int: float() of a huge one raises OverflowError.
        if value > MAX_DURATION_SECONDS:
            raise _too_long(value, field)
        if value < 0:  # (-10**400 too: float() of it would raise OverflowError)
            raise InvalidDurationError(value, field)
        seconds = float(value)
    elif isinstance(value, float):
        seconds = value
    elif isinstance(value, str):
        match = _PATTERN.fullmatch(value)
        if not match:
            raise InvalidDurationError(value, field)
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    else:
        raise InvalidDurationError(value, field)
    if not math.isfinite(seconds) and seconds > 0:
        raise _too_long(value, field)
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidDurationError(value, field)
    if seconds > MAX_DURATION_SECONDS:
        raise _too_long(value, field)
    return seconds


def _too_long(value: object, field: str) -> InvalidDurationError:
    return InvalidDurationError(
        value,
        field,
        detail=f"is longer than the longest duration allowed, 100 years "
        f"({MAX_DURATION_SECONDS:,} seconds)",
    )
