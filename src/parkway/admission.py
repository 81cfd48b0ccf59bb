"""Admission: how many runs of a workflow may be active (``Concurrency``) or
start per period (``RateLimit``) per key value, and the order queued runs start
in (priority, then arrival).

What the options are and how a key value is read from a run's input; the store
enforces them, in the transaction that starts a run (see
:mod:`parkway.core.admission`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from parkway.durations import Duration, to_seconds
from parkway.errors import InvalidArgumentError, InvalidInputError, describe, shown
from parkway.limits import MAX_INT, MIN_INT

WHEN_FULL = ("queue", "skip", "cancel_oldest")

# Priorities are stored as 64-bit integers (BIGINT / SQLite INTEGER).
PRIORITY_RANGE = (MIN_INT, MAX_INT)

KeySpec = str | Callable[[Any], str] | None


def _check_limit(limit: object, owner: str) -> int:
    # Bounded at construction: a limit is stored as a 64-bit integer on every backend.
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_INT:
        raise InvalidArgumentError(
            f"{owner} limit must be a whole number from 1 to 2**63 - 1, got {shown(limit)}",
            field="limit",
        )
    return limit


def _check_key(key: object, owner: str) -> None:
    if key is None or callable(key):
        return
    if not isinstance(key, str) or not key:
        raise InvalidArgumentError(
            f"{owner} key must be an input field name, a callable input -> str, or None; "
            f"got {shown(key)}",
            field="key",
        )


@dataclass(frozen=True)
class Concurrency:
    """At most ``limit`` active runs (started and not ended, parked ones included)
    of the workflow per key value.

    Args:
        limit: The most active runs per key value (a positive int).
        key: The name of a field of the input, a callable ``input -> str``, or
            ``None``: one limit for the whole workflow.
        when_full: What a start finds when the limit is full: ``"queue"`` (the run
            waits ``pending`` and starts when a slot frees, in priority then
            arrival order), ``"skip"`` (it is not created: ``engine.start`` raises
            :class:`~parkway.ConcurrencyLimitError`, an event start is left out of
            ``PublishResult.started``), or ``"cancel_oldest"`` (the oldest active
            run of the key is cancelled to make room).

    Raises:
        InvalidArgumentError: An argument is malformed (the error names it).
    """

    limit: int
    key: KeySpec = None
    when_full: str = "queue"

    def __post_init__(self) -> None:
        _check_limit(self.limit, "Concurrency")
        _check_key(self.key, "Concurrency")
        if self.when_full not in WHEN_FULL:
            raise InvalidArgumentError(
                f"Concurrency when_full must be one of {', '.join(WHEN_FULL)}; "
                f"got {shown(self.when_full)}",
                field="when_full",
            )


@dataclass(frozen=True)
class RateLimit:
    """At most ``limit`` runs of the workflow start per ``period`` per key value.

    In any window of ``period``, no more than ``limit`` runs of one key start;
    the others wait ``pending`` and start as the window allows (each is given
    its start time when it arrives; nothing is dropped).

    Args:
        limit: The most starts per period and key value (a positive int).
        period: The window (a duration: ``"1m"``, seconds, a ``timedelta``).
        key: As :class:`Concurrency`'s.

    Raises:
        InvalidArgumentError: An argument is malformed (the error names it).
    """

    limit: int
    period: Duration
    key: KeySpec = None

    def __post_init__(self) -> None:
        _check_limit(self.limit, "RateLimit")
        _check_key(self.key, "RateLimit")
        if self.seconds <= 0:
            raise InvalidArgumentError(
                f"RateLimit period must be positive, got {shown(self.period)}", field="period"
            )

    @property
    def seconds(self) -> float:
        """The period in seconds."""
        return to_seconds(self.period, "period")


def key_of(spec: KeySpec, value: Any, workflow: str) -> str:
    """The key value of a run with input ``value`` under ``spec`` (``""``: no key).

    Raises:
        InvalidInputError: The input has no such field, or the callable failed or
            returned something other than a string (the error names the key).
    """
    if spec is None:
        return ""
    if callable(spec):
        try:
            found = spec(value)
        except Exception as exc:
            raise InvalidInputError(
                f"the admission key function raised {type(exc).__name__}: {describe(exc)}",
                workflow=workflow,
                field="key",
            ) from exc
        if not isinstance(found, str):
            raise InvalidInputError(
                f"the admission key function must return a str, got {shown(found)}",
                workflow=workflow,
                field="key",
            )
        return found
    if not isinstance(value, dict) or spec not in value:
        raise InvalidInputError(
            f"the input has no field {shown(spec)}, the workflow's admission key",
            workflow=workflow,
            field=spec,
        )
    found = value[spec]
    return found if isinstance(found, str) else json.dumps(found, sort_keys=True)


def check_priority(priority: object) -> int:
    """``priority`` as given, if it is an int (not a bool) in the 64-bit range.

    Raises:
        InvalidArgumentError: It is not (the error names ``priority``).
    """
    low, high = PRIORITY_RANGE
    if not isinstance(priority, int) or isinstance(priority, bool) or not low <= priority <= high:
        raise InvalidArgumentError(
            f"priority must be an int (64-bit), got {shown(priority)}", field="priority"
        )
    return priority
