"""Schedules as values: what a schedule is, its ticks, and the ids of its runs.

A schedule starts one run of a workflow at each tick of a cron expression, read
in a time zone. The cron expressions and their daylight-saving behaviour are
:mod:`cronsim`'s (Debian cron's rules, see ``docs/guides/schedules.md``); this module
only validates, computes ticks as engine seconds, and names the runs
(``sched:<schedule id>:<tick as ISO 8601 UTC>``), so that starting a tick's run
twice, from any process, is the same start.

Pure: no store, no clock. The core (:mod:`parkway.core.schedules`) fires them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from parkway import _json, limits
from parkway.errors import InvalidInputError, InvalidScheduleError, SerializationError, shown
from parkway.models import _Subscriptable

# What a schedule does about the ticks that passed while no worker fired them.
CATCH_UP = ("latest", "all", "none")
RUN_PREFIX = "sched:"
# A tick in a run id: ISO 8601 in UTC, to the second (cron's finest unit).
_TICK = re.compile(r"^sched:.+:(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00)$", re.S)


@dataclass(frozen=True)
class Schedule:
    """When a workflow runs by itself: ``@engine.workflow(schedule=Schedule(...))``.

    Args:
        cron: A cron expression: five fields (minute hour day month weekday), or
            six with seconds first; ``L``, ``#`` and names as :mod:`cronsim` reads them.
        timezone: An IANA time zone name the expression is read in (``"UTC"``,
            ``"Europe/Paris"``).
        catch_up: What the first worker up after downtime starts for the ticks
            that passed meanwhile: ``"latest"`` (one run, for the last of them),
            ``"all"`` (one run each, oldest first) or ``"none"``.
        input: The JSON input of every run it starts.

    Raises:
        InvalidScheduleError: A field is malformed (``field`` names it).
    """

    cron: str
    timezone: str = "UTC"
    catch_up: str = "latest"
    input: Any = None

    def __post_init__(self) -> None:
        check(self.cron, self.timezone, self.catch_up)


@dataclass(frozen=True)
class ScheduleInfo(_Subscriptable):
    """A schedule as :meth:`parkway.Engine.schedules` lists it.

    Attributes:
        id: The schedule's id (a decorator schedule's is its workflow's name).
        workflow: The workflow it starts.
        cron: Its cron expression.
        timezone: The time zone the expression is read in.
        paused: Whether it is paused (it then starts nothing, and ``next_at`` is ``None``).
        next_at: Its next tick (an aware UTC ``datetime``), or ``None``.
        last_run_id: The id of the run its last fired tick started, or ``None``.
        catch_up: ``"latest"``, ``"all"`` or ``"none"``.
        input: The input of the runs it starts.
    """

    id: str
    workflow: str
    cron: str
    timezone: str
    paused: bool
    next_at: datetime | None
    last_run_id: str | None
    catch_up: str = "latest"
    input: Any = None


def check(cron: Any, timezone: Any, catch_up: Any) -> tzinfo:
    """Validate a schedule's fields; return its time zone.

    Raises:
        InvalidScheduleError: One is malformed; ``field`` names it.
    """
    if not isinstance(cron, str) or not cron.strip():
        raise InvalidScheduleError(
            f"cron must be a cron expression string, got {shown(cron)}", "cron"
        )
    if not isinstance(timezone, str) or not timezone.strip():
        raise InvalidScheduleError(
            f"timezone must be an IANA time zone name such as 'Europe/Paris', got "
            f"{shown(timezone)}",
            "timezone",
        )
    if catch_up not in CATCH_UP:
        raise InvalidScheduleError(
            f"catch_up must be one of {', '.join(map(repr, CATCH_UP))}, got {shown(catch_up)}",
            "catch_up",
        )
    zone = zone_of(timezone)
    try:
        CronSim(cron, datetime.now(zone))
    except (CronSimError, ValueError, KeyError) as exc:  # (cronsim's errors, and a few raw)
        raise InvalidScheduleError(
            f"cron: {shown(cron)} is not a cron expression: {exc}", "cron"
        ) from exc
    return zone


def zone_of(timezone: str) -> tzinfo:
    """The time zone named ``timezone`` (``UTC`` is :data:`datetime.UTC`)."""
    if timezone.upper() in ("UTC", "Z", "ETC/UTC"):
        return UTC
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise InvalidScheduleError(
            f"timezone: {shown(timezone)} is not a known IANA time zone name", "timezone"
        ) from exc


def check_id(value: Any, *, field: str = "id") -> str:
    """A schedule id: a name (not blank, at most 128 characters, printable).

    Raises:
        InvalidScheduleError: It is not such a string.
    """
    try:
        return limits.name(value, "schedule id", field=field)
    except InvalidInputError as exc:
        raise InvalidScheduleError(str(exc).removeprefix("invalid input: "), field) from exc


def encode_input(value: Any) -> bytes:
    """The schedule's input as JSON.

    Raises:
        InvalidScheduleError: It is not JSON (``field`` is ``"input"``).
    """
    try:
        return _json.dumps(value, "the schedule's input")
    except SerializationError as exc:
        raise InvalidScheduleError(str(exc), "input") from exc


def ticks(cron: str, timezone: str, after: float) -> Iterator[float]:
    """The expression's ticks strictly after ``after`` (engine seconds), in order."""
    zone = zone_of(timezone)
    start = datetime.fromtimestamp(after, UTC).astimezone(zone)
    for tick in CronSim(cron, start):
        yield tick.timestamp()


def next_tick(cron: str, timezone: str, after: float) -> float | None:
    """The first tick strictly after ``after``, or ``None`` if it has none left."""
    return next(ticks(cron, timezone, after), None)


def run_id(schedule_id: str, tick: float) -> str:
    """The id of the run a tick starts: the same for every process that starts it."""
    return f"{RUN_PREFIX}{schedule_id}:{tick_text(tick)}"


def tick_text(tick: float) -> str:
    """A tick as ISO 8601 UTC, to the second (``2026-03-08T07:00:00+00:00``)."""
    return datetime.fromtimestamp(int(tick), UTC).isoformat()


def tick_of(run_id: str) -> datetime | None:
    """The tick a schedule's run was started for (from its id), else ``None``."""
    if not run_id.startswith(RUN_PREFIX):
        return None
    found = _TICK.match(run_id)
    return None if found is None else datetime.fromisoformat(found.group(1))


__all__ = ["CATCH_UP", "Schedule", "ScheduleInfo", "check", "run_id", "tick_of", "ticks"]
