"""The fields of the HTTP API's requests, as the engine's limits have them: a bad one
is answered with 422 naming it (``loc: ["body", "ttl"]``), in the engine's own words,
before the engine is touched."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BeforeValidator,
    PlainValidator,
    StrictStr,
    WithJsonSchema,
)

from parkway import limits
from parkway.durations import DURATION_PATTERN, to_seconds
from parkway.errors import InvalidDurationError, InvalidInputError
from parkway.limits import MAX_DURATION_SECONDS


def _duration(value: Any) -> float | None:
    if value is None:
        return None
    try:
        if not isinstance(value, int | float | str):  # a bool is an int: refused by to_seconds
            raise InvalidDurationError(value, "ttl")
        return to_seconds(value, "ttl")
    except InvalidDurationError as exc:
        if "100 years" in str(exc):
            raise ValueError("longer than the longest duration allowed, 100 years") from None
        raise ValueError(
            'not a duration; give seconds (30) or a string such as "250ms", "10s", "1m", '
            '"2h", "1d" or "1w"'
        ) from None


def not_wildcard(value: str | None) -> str | None:
    if value == "*":
        raise ValueError("'*' is reserved for wildcard waits; name the subject")
    return value


def _limited(check: Callable[..., Any]) -> AfterValidator:
    """The engine's own check of a field (parkway.limits), as a pydantic validator:
    the HTTP API refuses exactly what the Python API refuses, with the same words."""

    def validate(value: str) -> str:
        try:
            check(value, "value")
        except InvalidInputError as exc:
            raise ValueError(str(exc).removeprefix("invalid input: value ")) from None
        return value

    return AfterValidator(validate)


def _schema(max_length: int | None, pattern: str) -> WithJsonSchema:
    constraints: dict[str, Any] = {"type": "string", "minLength": 1, "pattern": pattern}
    if max_length is not None:
        constraints["maxLength"] = max_length
    return WithJsonSchema(constraints)


# Fields as the engine's limits have them (lengths, no control characters, not blank).
Name = Annotated[
    StrictStr, _limited(limits.name), _schema(limits.MAX_NAME_LENGTH, limits.NAME_PATTERN)
]
Key = Annotated[
    StrictStr, _limited(limits.key), _schema(limits.MAX_KEY_LENGTH, limits.NAME_PATTERN)
]
Id = Annotated[
    StrictStr, _limited(limits.identifier), _schema(limits.MAX_ID_LENGTH, limits.TEXT_PATTERN)
]
Subject = Annotated[
    StrictStr, _limited(limits.subject), _schema(limits.MAX_SUBJECT_LENGTH, limits.TEXT_PATTERN)
]
Domain = Annotated[
    StrictStr, _limited(limits.domain), _schema(limits.MAX_DOMAIN_LENGTH, limits.TEXT_PATTERN)
]
# A filter: any length (ids the engine composes may be longer than those given).
Filter = Annotated[StrictStr, _limited(limits.reference), _schema(None, limits.TEXT_PATTERN)]


def _iso_text(value: Any) -> Any:
    # A time in a body is ISO 8601 text, as the schema says: pydantic alone would
    # also take a number (seconds since 1970) and a JSON client's typo with it.
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 time, as text")
    return value


IsoTime = Annotated[datetime, BeforeValidator(_iso_text)]

# What the document promises: an RFC 3339 date-time (pydantic alone also reads
# "0.5" as seconds since 1970), an integer, a number, each as JSON writes it
# (pydantic alone also reads "5_0" as 50).
_DATE_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}.*", re.DOTALL)
_INTEGER = re.compile(r"-?[0-9]+")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")


def _written(pattern: re.Pattern[str], what: str) -> BeforeValidator:
    def check(value: Any) -> Any:
        if not isinstance(value, str) or pattern.fullmatch(value) is None:
            raise ValueError(f"must be {what}")
        return value

    return BeforeValidator(check)


QueryTime = Annotated[
    AwareDatetime,
    _written(_DATE_TIME, "an ISO 8601 date-time with its zone, e.g. 2026-01-31T12:00:00Z"),
]
QueryInt = Annotated[int, _written(_INTEGER, "a whole number in ASCII digits")]
QueryNumber = Annotated[float, _written(_NUMBER, "a number such as 1 or 0.5")]


def _json_number(value: Any) -> Any:
    # A number in a body is a JSON number, as the schema says: pydantic alone also
    # takes true (as 1) and "5".
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number")
    return value


BodyNumber = Annotated[float, BeforeValidator(_json_number)]
# One validator for the whole union, so that a bad ttl is one error at ["body", "ttl"].
Seconds = Annotated[
    float | None,
    PlainValidator(_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0, "maximum": MAX_DURATION_SECONDS},
                {"type": "string", "pattern": DURATION_PATTERN},
                {"type": "null"},
            ],
            "description": 'Seconds (30), or a duration such as "250ms", "10s", "5m", "1h"; '
            "at most 100 years.",
        }
    ),
]
