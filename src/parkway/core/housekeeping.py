"""Housekeeping: sweeping what expired, and telling when an engine is idle.

The sweep drops subscriptions past their TTL (the safety net against
orphans), forgets event and message ids past ``event_retention``, and turns
buffered messages past their TTL into dead letters. The worker runs it every
``SWEEP_INTERVAL`` of engine time, so a manual clock moved by a test sweeps too.
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
        count = await tx.sweep_subscriptions(now)
        await tx.prune_events(now - retention)
        await tx.prune_message_ids(now - retention)
        await messages.expire(tx, now)
    if count:
        log.info("swept %d expired subscriptions", count)
    return count


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
