"""The fleet: the workers that serve a store, the runs none of them serves, and the
events published lately with the runs each started and resumed.

A worker renews its row with its lease heartbeat (see :mod:`parkway.worker.loop`);
one not seen for three lease periods is taken for dead. A run with a task due
whose workflow and version no live worker serves is *unserved*: nothing will
advance it until such a worker starts (a deploy that stopped the last worker of
an old version too soon, say).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from parkway import _json
from parkway.core.runtime import Runtime
from parkway.models import EventInfo, WorkerInfo, _dt
from parkway.store.base import Tx
from parkway.store.events import EventFilter
from parkway.store.fleet import RESUMED, STARTED, WorkerRecord, served_by

# A worker not seen for this many of its lease periods is taken for dead.
LEASES_ALIVE = 3

# The most unserved runs one look reads (a gauge, and marks on a listing: a
# count past it says "at least").
UNSERVED_LIMIT = 10_000


async def live_workers(tx: Tx) -> list[WorkerRecord]:
    return await tx.workers.list(time.time())  # (by the wall clock, as leases)


async def workers(rt: Runtime) -> list[WorkerInfo]:
    """The workers seen within three of their lease periods, the longest running first."""
    async with rt.store.transaction(readonly=True) as tx:
        found = await live_workers(tx)
    return [_worker_info(w) for w in found]


def _worker_info(w: WorkerRecord) -> WorkerInfo:
    workflows = {name: list(versions) for name, versions in w.workflows.items()}
    return WorkerInfo(w.id, w.host, w.pid, _dt(w.started_at), _dt(w.last_seen), workflows)


async def unserved(rt: Runtime, *, limit: int = UNSERVED_LIMIT) -> list[str]:
    """The runs (ids, sorted) with a task due now, not paused, whose workflow and
    version no live worker serves."""
    async with rt.store.transaction(readonly=True) as tx:
        keys = served_by(await live_workers(tx))
        return await tx.runs.unserved(sorted(keys), rt.now(), limit)


async def events(
    rt: Runtime,
    *,
    name: str | None,
    subject: str | None,
    since: float | None,
    limit: int,
) -> list[EventInfo]:
    """The events still kept, newest first, with the runs each started and resumed."""
    async with rt.store.transaction(readonly=True) as tx:
        rows = await tx.events.list(
            EventFilter(name=name, subject=subject, since=since, limit=limit)
        )
        links = await tx.events.links([row[0] for row in rows]) if rows else []
    started: dict[str, list[str]] = {}
    resumed: dict[str, list[str]] = {}
    for link in links:
        into = started if link.how == STARTED else resumed
        into.setdefault(link.event_id, []).append(link.run_id)
    return [
        EventInfo(
            event_id,
            event_name,
            domain,
            event_subject,
            _json.loads(payload),
            _dt(published_at),
            started.get(event_id, []),
            resumed.get(event_id, []),
        )
        for event_id, event_name, domain, event_subject, payload, published_at in rows
    ]


async def link(
    tx: Tx, event_id: str, at: float, started: Sequence[str], resumed: Sequence[str]
) -> None:
    """Record, in the publish's transaction, the runs an event started and resumed."""
    if resumed:
        await tx.events.link(event_id, at, RESUMED, resumed)
    if started:
        await tx.events.link(event_id, at, STARTED, started)
