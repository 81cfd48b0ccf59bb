"""Durations: a ``timedelta``, a number of seconds, or a string like ``"250ms"``."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from parkway.errors import InvalidDurationError

Duration = timedelta | float | int | str

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")


def to_seconds(value: Duration, field: str = "duration") -> float:
    """Convert a duration to seconds.

    Args:
        value: A ``timedelta``, a non-negative number of seconds, or a string made
            of a number and one unit among ``ms s m h d w``.
        field: The name reported in the error when ``value`` is not a duration.

    Raises:
        InvalidDurationError: ``value`` is negative, not finite, or not understood.
    """
    if isinstance(value, bool):
        raise InvalidDurationError(value, field)
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        match = _PATTERN.match(value)
        if not match:
            raise InvalidDurationError(value, field)
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    else:
        raise InvalidDurationError(value, field)
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidDurationError(value, field)
    return seconds
