"""The engine's client calls on its work as a whole: sweeping, waiting until it is
idle, when it is next due, and its metrics."""

from __future__ import annotations

from parkway.client.base import State
from parkway.core import fleet, housekeeping
from parkway.core import schedules as core_schedules
from parkway.durations import Duration, to_seconds


async def sweep(state: State) -> int:
    """Sweep now: expired subscriptions, old ids, expired messages (the worker
    does it every minute of engine time). Returns the subscriptions dropped."""
    state.require_open()
    return await housekeeping.sweep(state.rt)


async def idle(state: State, timeout: Duration = 10) -> None:
    """Return once no task is due and no run is in flight.

    Args:
        timeout: Wall-clock time to wait at most (seconds, a ``timedelta`` or a
            string such as ``"10s"``).

    Raises:
        TimeoutError: Work was still due or in flight after ``timeout``.
        InvalidDurationError: ``timeout`` is not a duration.
    """
    state.require_open()
    await housekeeping.idle(state.rt, to_seconds(timeout, "timeout"))


async def next_due(state: State, *, after: float | None = None) -> float | None:
    """The earliest task due time or schedule tick in engine seconds (strictly
    after ``after``)."""
    due = await state.rt.next_due(after=after)
    tick = await core_schedules.next_fire(state.rt, fresh=True)
    if tick is not None and (after is None or tick > after):
        due = tick if due is None else min(due, tick)
    return due


async def render_metrics(state: State) -> tuple[bytes, str]:
    """This engine's metrics in Prometheus's text format, and its content type.

    The counters are this process's; the store's gauges (parked runs, the
    due-task backlog, the oldest due task's age, dead letters, the runs no
    live worker serves) are read now.

    Raises:
        MetricsDisabledError: The engine was not given ``metrics=``.
    """
    state.require_open()
    rt = state.rt

    async def unserved() -> int:
        return len(await fleet.unserved(rt))

    return await rt.telemetry.render_metrics(rt.store, rt.now(), unserved)
