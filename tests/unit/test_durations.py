"""Durations, through the public places that take one.

A duration is a ``timedelta``, a number of seconds, or a string such as
``"250ms" "10s" "1m" "2h" "1d" "1w"``. ``ManualClock.advance`` takes one and
moves engine time by exactly that much, so it measures how each is read.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from parkway import Engine, InvalidDurationError, ParkwayError, Retry
from parkway.testing import ManualClock

START = datetime(2030, 1, 1, tzinfo=UTC)


async def advanced_by(duration) -> timedelta:
    clock = ManualClock(start=START)
    await clock.advance(duration)
    return clock.datetime() - START


@pytest.mark.parametrize(
    ("duration", "expected"),
    [
        ("250ms", timedelta(milliseconds=250)),
        ("10s", timedelta(seconds=10)),
        ("1m", timedelta(minutes=1)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1w", timedelta(weeks=1)),
        ("0s", timedelta(0)),
        (90, timedelta(seconds=90)),
        (0.5, timedelta(milliseconds=500)),
        (0, timedelta(0)),
        (timedelta(minutes=3, seconds=2), timedelta(seconds=182)),
    ],
    ids=repr,
)
async def test_valid_durations(duration, expected: timedelta) -> None:
    assert await advanced_by(duration) == expected


@pytest.mark.parametrize(
    "bad",
    [
        "5 parsecs",
        "",
        "s",
        "1y",
        "-1s",
        "ten seconds",
        -1,
        -0.5,
        math.inf,
        math.nan,
        True,
        None,
        [1],
        timedelta(seconds=-1),
    ],
    ids=repr,
)
async def test_invalid_durations_are_refused(bad) -> None:
    clock = ManualClock(start=START)
    with pytest.raises(InvalidDurationError) as exc_info:
        await clock.advance(bad)
    assert isinstance(exc_info.value, ParkwayError)
    assert isinstance(exc_info.value, ValueError)
    assert repr(bad) in str(exc_info.value)
    assert clock.datetime() == START  # time did not move


def test_invalid_duration_message_names_the_option_and_the_forms() -> None:
    with pytest.raises(InvalidDurationError) as exc_info:
        Engine("memory://", message_ttl="5 parsecs")
    message = str(exc_info.value)
    assert "message_ttl" in message
    assert "'5 parsecs'" in message
    for example in ('"250ms"', '"10s"', '"1d"'):
        assert example in message


@pytest.mark.parametrize("option", ["message_ttl", "event_retention"])
@pytest.mark.parametrize("value", ["30m", 1800, timedelta(minutes=30)], ids=repr)
def test_engine_duration_options_accept_every_form(option: str, value) -> None:
    Engine("memory://", **{option: value})  # constructing does not open anything


@pytest.mark.parametrize("field", ["backoff", "max_backoff"])
def test_retry_durations(field: str) -> None:
    other = {"max_backoff": {"backoff": "100ms"}, "backoff": {}}[field]  # (backoff <= cap)
    Retry(**{field: "250ms"}, **other)
    Retry(**{field: timedelta(seconds=2)}, **other)
    with pytest.raises(InvalidDurationError, match=field):
        Retry(**{field: "5 parsecs"})


def test_manual_clock_start() -> None:
    assert ManualClock(start=START).datetime() == START
    naive = ManualClock(start=datetime(2030, 1, 1))  # naive = UTC
    assert naive.datetime() == START
    now = datetime.now(UTC)
    assert abs(ManualClock().datetime() - now) < timedelta(seconds=5)
