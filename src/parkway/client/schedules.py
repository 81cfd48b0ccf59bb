"""The engine's client calls on schedules: add, remove, pause, resume, list."""

from __future__ import annotations

from typing import Any

from parkway import limits
from parkway.client.base import State
from parkway.core import schedules as core_schedules
from parkway.errors import InvalidInputError, InvalidScheduleError, shown
from parkway.registry import LATEST, WorkflowDef
from parkway.schedules import ScheduleInfo


async def add_schedule(
    state: State,
    id: str,
    workflow: Any,
    cron: str,
    *,
    input: Any = None,
    timezone: str = "UTC",
    catch_up: str = "latest",
) -> ScheduleInfo:
    """Start ``workflow`` at each tick of ``cron`` (read in ``timezone``), from the
    first tick after now; exactly one run per tick whichever workers are up.

    Each run's id is ``sched:<id>:<tick as ISO 8601 UTC>`` and its
    ``ctx.scheduled_at`` the tick. An ``id`` that exists has its definition
    replaced, keeping its place (paused or not, its last tick).

    Args:
        id: The schedule's id.
        workflow: The workflow's name, or the registered function.
        cron: Five fields (minute hour day month weekday), or six with seconds first.
        input: The JSON input of every run.
        timezone: An IANA time zone name.
        catch_up: After downtime: ``"latest"`` (one run, for the last missed
            tick), ``"all"`` (every missed tick, oldest first) or ``"none"``.

    Returns:
        The schedule as :meth:`schedules` lists it.

    Raises:
        InvalidScheduleError: A field is malformed, or no workflow of that name is
            registered here (``field`` names it); nothing was written.
    """
    state.require_open()
    wf, name = _scheduled_workflow(state, workflow)
    schedule_id, name, data = core_schedules.prepare(
        state.rt, id, name, cron, input=input, timezone=timezone, catch_up=catch_up, wf=wf
    )
    return await core_schedules.put(state.rt, schedule_id, name, cron, timezone, catch_up, data)


def _scheduled_workflow(state: State, workflow: Any) -> tuple[WorkflowDef | None, str]:
    """The registered workflow a schedule starts (``None``: a client engine, which
    need not register what it schedules, names one it does not know)."""
    name = (
        workflow
        if isinstance(workflow, str)
        else getattr(workflow, "__parkway_workflow__", workflow)
    )
    try:
        name = limits.name(name, "workflow name", field="workflow")
    except InvalidInputError as exc:
        raise InvalidScheduleError(str(exc).removeprefix("invalid input: "), "workflow") from exc
    wf = state.rt.registry.get(name, LATEST)
    if wf is None and not state.starts_by_name:
        known = ", ".join(sorted(state.rt.registry.names())) or "none"
        raise InvalidScheduleError(
            f"workflow: no workflow named {shown(name)} is registered (registered: {known})",
            "workflow",
        )
    return wf, name


async def remove_schedule(state: State, id: str) -> None:
    """Delete the schedule; the runs it started stay.

    Raises:
        ScheduleNotFoundError: No schedule has that id.
    """
    state.require_open()
    await core_schedules.remove(state.rt, _reference(id))


async def pause_schedule(state: State, id: str) -> ScheduleInfo:
    """Stop the schedule's ticks; the ones that pass while it is paused are skipped.

    Raises:
        ScheduleNotFoundError: No schedule has that id.
    """
    state.require_open()
    return await core_schedules.pause(state.rt, _reference(id))


async def resume_schedule(state: State, id: str) -> ScheduleInfo:
    """Let a paused schedule tick again, from its first tick after now.

    Raises:
        ScheduleNotFoundError: No schedule has that id.
    """
    state.require_open()
    return await core_schedules.resume(state.rt, _reference(id))


async def schedules(state: State) -> list[ScheduleInfo]:
    """Every schedule on the store (decorator ones and dynamic ones), by id."""
    state.require_open()
    return await core_schedules.listing(state.rt)


def _reference(value: Any) -> str:
    try:
        return limits.reference(value, "schedule id", field="id")
    except InvalidInputError as exc:
        raise InvalidScheduleError(str(exc).removeprefix("invalid input: "), "id") from exc
