"""Schedules in the store: registering them, steering them, and firing their ticks.

A schedule's row (:class:`parkway.store.schedules.ScheduleRecord`) says where its
firing stands: ``last_tick``, the last tick handled (fired or skipped; at first
the moment it was registered), and ``next_at``, the tick due next. A worker fires
what is due in ONE transaction per batch: it takes the due rows (locked; on
PostgreSQL a row another worker holds is skipped), starts each tick's run (id
``sched:<schedule id>:<tick>``, so a start repeated by anyone is the same start)
and moves the row on. Two workers therefore never start a tick twice, and a
crash before the commit leaves the tick due for the next worker.

Which due ticks start a run: those after the firing worker came up are on time
and always do; those at or before it (they passed while no worker fired) follow
the schedule's ``catch_up``: ``"latest"`` the last of them, ``"all"`` every one,
oldest first, ``"none"`` none.

The worker learns when to look next from :func:`next_fire` (kept here for a
second, so that an idle worker does not read it on every turn of its loop) and
sleeps until then, as it does for its tasks' due times.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from parkway import _json
from parkway import schedules as spec
from parkway.core import cancel_on
from parkway.core.deadlines import add_deadline
from parkway.core.runs import new_run
from parkway.core.runtime import Runtime
from parkway.errors import InvalidInputError, InvalidScheduleError, ScheduleNotFoundError
from parkway.models import _dt
from parkway.registry import LATEST, WorkflowDef
from parkway.schedules import ScheduleInfo
from parkway.store.base import Tx
from parkway.store.schedules import ScheduleRecord

log = logging.getLogger("parkway.schedules")

# Ticks one firing transaction starts at most (catch_up="all" after a long
# downtime): the rest are due at once, in the next transaction.
FIRE_BATCH = 500
# Schedules one firing transaction takes at most.
SCHEDULES_PER_FIRE = 200
# How long a worker trusts the next fire time it read (wall seconds): other
# processes' changes (a schedule added elsewhere) are seen within this.
REFRESH = 1.0


class Firing:
    """One engine's state of firing: when its worker came up (engine time), and
    the next fire time last read, with when it was read (wall, monotonic)."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.next_at: float | None = None
        self.read_at: float | None = None
        # Decorator schedules declared while the engine was open, being written.
        self.pending: list[asyncio.Task[ScheduleInfo]] = []
        # One firing at a time in this process (the worker's loop, Engine.idle): a
        # second one would skip the rows the first holds and report nothing due
        # while the first's runs are not committed yet.
        self.lock = asyncio.Lock()

    def forget(self) -> None:
        """Something changed here: read the next fire time again."""
        self.read_at = None


def firing(rt: Runtime) -> Firing:
    """The runtime's firing state (made on first use)."""
    state = rt.extensions.get("schedules")
    if not isinstance(state, Firing):
        state = rt.extensions["schedules"] = Firing()
    return state


def declare(rt: Runtime, schedule_id: str, *definition: Any) -> None:
    """Write a schedule declared while the engine is open (a decorator's, which cannot
    await): in a task of its own, which every schedule operation waits for first.
    Registered as of now, however soon the task runs."""
    task = asyncio.get_running_loop().create_task(put(rt, schedule_id, *definition, now=rt.now()))
    firing(rt).pending.append(task)


async def settle(rt: Runtime) -> None:
    """Wait for the schedules being declared (see :func:`declare`)."""
    state = firing(rt)
    while state.pending:
        pending = list(state.pending)
        # (Each waiter waits for all of them: none reads the schedules half-written.)
        outcomes = await asyncio.gather(*pending, return_exceptions=True)
        for task, outcome in zip(pending, outcomes, strict=True):
            if task in state.pending:
                state.pending.remove(task)
                if isinstance(outcome, BaseException):
                    log.error(
                        "could not register a schedule declared while the engine was open",
                        exc_info=outcome,
                    )


def started(rt: Runtime) -> None:
    """This engine's worker came up: ticks from now on are on time."""
    state = firing(rt)
    state.since = rt.now()
    # (Made anew on this event loop: an engine may be opened again on another, as
    # the pytest plugin's app engine is, test after test.)
    state.lock = asyncio.Lock()
    state.forget()


# -- registering and steering ----------------------------------------------------------------


def prepare(
    rt: Runtime,
    schedule_id: Any,
    workflow: Any,
    cron: Any,
    *,
    input: Any,
    timezone: Any,
    catch_up: Any,
    wf: WorkflowDef | None,
) -> tuple[str, str, bytes]:
    """Validate a schedule before anything is written; its id, workflow name and
    encoded input. ``wf``: the workflow it starts, when this engine registers it.

    Raises:
        InvalidScheduleError: A field is malformed (``field`` names it).
    """
    schedule_id = spec.check_id(schedule_id)
    if not isinstance(workflow, str) or not workflow:
        raise InvalidScheduleError(
            f"workflow must be a workflow's name, got {workflow!r}", "workflow"
        )
    spec.check(cron, timezone, catch_up)
    if spec.next_tick(cron, timezone, rt.now()) is None:
        raise InvalidScheduleError(f"cron: {cron!r} has no tick in the next 50 years", "cron")
    if wf is not None:
        try:
            input = wf.check_input(input)
        except InvalidInputError as exc:
            raise InvalidScheduleError(str(exc), "input") from exc
    return schedule_id, workflow, spec.encode_input(input)


async def put(
    rt: Runtime,
    schedule_id: str,
    workflow: str,
    cron: str,
    timezone: str,
    catch_up: str,
    data: bytes,
    *,
    now: float | None = None,
) -> ScheduleInfo:
    """Add the schedule, or change the definition of the one with its id (which keeps
    its place: whether it is paused, its last tick, its last run). ``now``: when it
    was registered (default: now)."""
    now = rt.now() if now is None else now
    async with rt.store.transaction() as tx:
        old = await tx.schedules.get(schedule_id)
        if old is None:
            record = ScheduleRecord(
                id=schedule_id,
                workflow=workflow,
                cron=cron,
                timezone=timezone,
                catch_up=catch_up,
                input=data,
                paused=False,
                last_tick=now,
                next_at=spec.next_tick(cron, timezone, now),
                last_run_id=None,
                created_at=now,
                updated_at=now,
            )
            await tx.schedules.put(record)
        elif (old.workflow, old.cron, old.timezone, old.catch_up, old.input) != (
            workflow,
            cron,
            timezone,
            catch_up,
            data,
        ):
            record = ScheduleRecord(
                id=schedule_id,
                workflow=workflow,
                cron=cron,
                timezone=timezone,
                catch_up=catch_up,
                input=data,
                paused=old.paused,
                last_tick=old.last_tick,
                next_at=None if old.paused else spec.next_tick(cron, timezone, old.last_tick),
                last_run_id=old.last_run_id,
                created_at=old.created_at,
                updated_at=now,
            )
            await tx.schedules.put(record)
        else:
            record = old  # (an engine opening again with the same schedule: nothing to write)
    firing(rt).forget()
    rt.poke()
    return info(record)


async def remove(rt: Runtime, schedule_id: str) -> None:
    """Delete the schedule (the runs it started stay).

    Raises:
        ScheduleNotFoundError: No schedule has that id.
    """
    await settle(rt)
    async with rt.store.transaction() as tx:
        if not await tx.schedules.delete(schedule_id):
            raise ScheduleNotFoundError(schedule_id)
    firing(rt).forget()


async def pause(rt: Runtime, schedule_id: str) -> ScheduleInfo:
    """Stop the schedule's ticks until :func:`resume`; the ones that pass meanwhile
    are skipped."""
    await settle(rt)
    async with rt.store.transaction() as tx:
        record = await _found(tx, schedule_id)
        if not record.paused:
            record.paused, record.next_at, record.updated_at = True, None, rt.now()
            await tx.schedules.put(record)
    firing(rt).forget()
    return info(record)


async def resume(rt: Runtime, schedule_id: str) -> ScheduleInfo:
    """Let a paused schedule tick again, from its first tick after now (the ticks it
    was paused for are not caught up on). A schedule not paused is left as it is."""
    await settle(rt)
    now = rt.now()
    async with rt.store.transaction() as tx:
        record = await _found(tx, schedule_id)
        if record.paused:
            record.paused, record.updated_at = False, now
            record.last_tick = max(record.last_tick, now)
            record.next_at = spec.next_tick(record.cron, record.timezone, record.last_tick)
            await tx.schedules.put(record)
    firing(rt).forget()
    rt.poke()
    return info(record)


async def listing(rt: Runtime) -> list[ScheduleInfo]:
    """Every schedule, by id."""
    await settle(rt)
    async with rt.store.transaction(readonly=True) as tx:
        return [info(r) for r in await tx.schedules.list()]


async def _found(tx: Tx, schedule_id: str) -> ScheduleRecord:
    record = await tx.schedules.get(schedule_id)
    if record is None:
        raise ScheduleNotFoundError(schedule_id)
    return record


def info(record: ScheduleRecord) -> ScheduleInfo:
    """The public view of a schedule's row."""
    return ScheduleInfo(
        id=record.id,
        workflow=record.workflow,
        cron=record.cron,
        timezone=record.timezone,
        paused=record.paused,
        next_at=None if record.paused or record.next_at is None else _dt(record.next_at),
        last_run_id=record.last_run_id,
        catch_up=record.catch_up,
        input=_json.loads(record.input),
    )


# -- firing ----------------------------------------------------------------------------------


async def next_fire(rt: Runtime, *, fresh: bool = False) -> float | None:
    """The earliest next tick of the schedules not paused (engine seconds), or ``None``:
    read again if asked, if something changed in this process, or after
    :data:`REFRESH` seconds."""
    state = firing(rt)
    if state.pending:
        await settle(rt)
    wall = time.monotonic()
    if fresh or state.read_at is None or wall - state.read_at >= REFRESH:
        try:
            async with rt.store.transaction(readonly=True) as tx:
                state.next_at = await tx.schedules.next_at()
        except Exception:  # the store is down: the worker's loop goes on, and asks again
            log.warning("could not read the next schedule tick", exc_info=True)
            return None
        state.read_at = wall
    return state.next_at


async def maybe_fire(rt: Runtime, *, fresh: bool = False) -> int:
    """Fire the schedules due now, if any (by :func:`next_fire`); the runs started."""
    due = await next_fire(rt, fresh=fresh)
    if due is None or due > rt.now():
        return 0
    try:
        async with firing(rt).lock:
            return await fire_due(rt)
    except Exception:
        log.warning("firing schedules failed; retrying", exc_info=True)
        return 0


async def fire_due(rt: Runtime) -> int:
    """Start the runs of every due tick, a transaction per batch; the runs started."""
    state = firing(rt)
    if state.since is None:
        state.since = rt.now()
    total = 0
    while True:
        now = rt.now()
        more = False
        started_here = 0
        async with rt.store.transaction() as tx:
            for record in await tx.schedules.due(now, SCHEDULES_PER_FIRE):
                fired, full = await _fire(rt, tx, record, now, state.since)
                started_here += fired
                more = more or full
        state.forget()
        if started_here:
            total += started_here
            rt.after_commit()
        if not more:
            return total


async def _fire(
    rt: Runtime, tx: Tx, record: ScheduleRecord, now: float, since: float
) -> tuple[int, bool]:
    """Start the schedule's due ticks (at most :data:`FIRE_BATCH`) and move its row on.
    Returns the runs started and whether due ticks are left for another batch."""
    ticks, cursor, next_at = plan(record, now, since)
    wf = rt.registry.get(record.workflow, LATEST)
    version = wf.version if wf is not None else LATEST
    started = 0
    for tick in ticks:
        run_id = spec.run_id(record.id, tick)
        run = new_run(rt, record.workflow, version, run_id, record.input)
        if wf is not None and (wf.cancel_on or wf.timeout is not None):
            if await tx.runs.get(run_id) is None:
                await tx.runs.start(run, now)
                await cancel_on.register(rt.registry, tx, run, now)
                await add_deadline(tx, run, wf.timeout)
        else:
            await tx.runs.start(run, now)  # (idempotent: a tick started already stays as it is)
        record.last_run_id = run_id
        started += 1
    record.last_tick, record.next_at, record.updated_at = cursor, next_at, now
    await tx.schedules.put(record)
    if ticks:
        log.debug("schedule %r started %d run(s), next at %s", record.id, started, next_at)
    return started, next_at is not None and next_at <= now


def plan(
    record: ScheduleRecord, now: float, since: float
) -> tuple[list[float], float, float | None]:
    """What firing the schedule at ``now`` does, for a worker up since ``since``: the
    ticks to start, oldest first, the last tick handled, and the next tick due."""
    cron, zone, cursor = record.cron, record.timezone, record.last_tick
    fire: list[float] = []
    if record.catch_up != "all" and cursor < since:
        # The ticks at or before ``since`` passed while no worker fired them: the
        # last of them is found without walking through all (a long downtime).
        missed = _last_at_or_before(cron, zone, min(since, now))
        if missed is not None and missed > cursor:
            if record.catch_up == "latest":
                fire.append(missed)
            cursor = missed
    for tick in spec.ticks(cron, zone, cursor):
        if tick > now or len(fire) >= FIRE_BATCH:
            return fire, (fire[-1] if fire else cursor), tick
        fire.append(tick)
    return fire, (fire[-1] if fire else cursor), None  # (no tick left in 50 years)


def _last_at_or_before(cron: str, zone: str, at: float) -> float | None:
    """The expression's last tick at or before ``at``."""
    # (Forward from a little before, so that daylight-saving days are walked the way
    # the firing walks them; widening the window, so that an expression ticking every
    # second walks a minute, not the whole downtime.)
    for back in (60.0, 3_600.0, 86_400.0, 32 * 86_400.0, 366 * 86_400.0, 50 * 366 * 86_400.0):
        last = None
        for tick in spec.ticks(cron, zone, at - back):
            if tick > at:
                break
            last = tick
        if last is not None:
            return last
    return None
