"""Housekeeping: sweeping what expired, and telling when an engine is idle.

The sweep drops subscriptions past their TTL (the safety net against
orphans), forgets event and message ids past ``event_retention`` (and the runs
each event started and resumed), forgets workers not seen for three lease periods, turns
buffered messages past their TTL into dead letters, and deletes the runs that
finished longer ago than their retention (``Engine(retention=...)``, or the
workflow's own ``@engine.workflow(retention=...)``) with everything kept for
them. The worker runs it every ``SWEEP_INTERVAL`` of engine time, so a manual
clock moved by a test sweeps too.
"""

from __future__ import annotations

import asyncio
import logging
import time

from parkway.core import messages, schedules
from parkway.core.runtime import Runtime

log = logging.getLogger("parkway")

# How often (engine time) expired subscriptions, old events and dead letters are swept.
SWEEP_INTERVAL = 60.0

# Finished runs deleted in one transaction, and at most in one sweep (per
# retention: the engine's, and each workflow's own): a sweep that finds a large
# backlog (the first one after retention was shortened, say) works it off over
# several sweeps, never holding the store for long.
RETENTION_BATCH = 500
RETENTION_BATCHES = 20


async def maybe_sweep(rt: Runtime) -> None:
    """Sweep if ``SWEEP_INTERVAL`` of engine time passed since the last sweep."""
    now = rt.now()
    if rt.last_sweep is None:
        rt.last_sweep = now
    if now - rt.last_sweep < SWEEP_INTERVAL:
        return
    rt.last_sweep = now
    try:
        await sweep(rt)
    except Exception:
        log.warning("sweep failed", exc_info=True)


async def sweep(rt: Runtime) -> int:
    """Drop expired subscriptions, dead-letter expired messages, forget old ids."""
    now = rt.now()
    retention = rt.settings.event_retention
    async with rt.store.transaction() as tx:
        count = await tx.subscriptions.sweep(now)
        await tx.events.prune(now - retention)
        await tx.messages.prune_ids(now - retention)
        await messages.expire(tx, now)
        await tx.workers.prune(time.time())  # (by the wall clock, as leases)
    if count:
        log.info("swept %d expired subscriptions", count)
    deleted = await sweep_finished(rt, now)
    if deleted:
        log.info("deleted %d finished runs past their retention", deleted)
    return count


def retention_plans(rt: Runtime, now: float) -> list[tuple[float, str | None, list[str]]]:
    """What the retention sweep deletes: ``(ended before, workflow, excluded)`` each,
    the engine's retention for every workflow without one of its own (``workflow``
    ``None``), then each workflow's own (``None``, for ever: nothing)."""
    own: dict[str, float | None] = {}
    for name in rt.registry.names(internal=True):
        wf = rt.registry.latest(name)
        if wf.own_retention:
            own[name] = wf.retention
    plans: list[tuple[float, str | None, list[str]]] = []
    if rt.settings.retention is not None:
        plans.append((now - rt.settings.retention, None, sorted(own)))
    plans += [(now - kept, name, []) for name, kept in own.items() if kept is not None]
    return plans


async def sweep_finished(rt: Runtime, now: float) -> int:
    """Delete finished runs past their retention, in bounded batches; how many."""
    deleted = 0
    for before, workflow, exclude in retention_plans(rt, now):
        for _ in range(RETENTION_BATCHES):
            async with rt.store.transaction() as tx:
                ids = await tx.runs.expired(
                    before, workflow=workflow, exclude=exclude, limit=RETENTION_BATCH
                )
                await tx.runs.delete(ids)
            for run_id in ids:  # (its id may be used again by a new run)
                rt.results.forget(run_id)
            deleted += len(ids)
            if len(ids) < RETENTION_BATCH:
                break
    return deleted


async def idle(rt: Runtime, timeout: float) -> None:
    """Return once no task is due and no run is in flight (see ``Engine.idle``)."""
    deadline = time.monotonic() + timeout
    if rt.worker is not None:
        await maybe_sweep(rt)  # so that time moved by a test clock sweeps at once
        # ...and fires the schedule ticks it reached, before the tasks are looked at.
        await schedules.maybe_fire(rt, fresh=True)
    while True:
        worker = rt.worker
        busy = worker is not None and worker.busy
        if not busy and not await rt.store.has_due(rt.now()):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"the engine was still busy after {timeout:g}s")
        if worker is not None:
            await worker.wait_progress(0.005)
        else:
            await asyncio.sleep(0.005)
