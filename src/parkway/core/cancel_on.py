"""``cancel_on``: a published event cancels the runs that hold a matching condition.

A workflow's ``cancel_on=[CancelOn(event, match=..., subject=...)]`` becomes one
subscription per condition for each of its runs, registered in the transaction
that creates the run (or starts its new generation), indexed like a wait's:
under the event's name (prefixed, see :data:`CANCEL_PREFIX`), the match's shape
and digest, and the subject. So a publish finds the runs it cancels as it finds
the waits it resumes, at a cost that does not grow with the number of runs
holding such a condition. A found run gets a ``cancel`` task, which its worker
acts on as on ``engine.cancel``; the subscriptions go when the run ends.
"""

from __future__ import annotations

import logging
from typing import Any

from parkway import _json
from parkway.errors import InvalidInputError
from parkway.matching import check_match, match_digest, matches, payload_digest, shape_of
from parkway.registry import Registry, WorkflowDef
from parkway.store.base import EventRecord, NewTask, RunRecord, SubscriptionRecord, Tx
from parkway.store.records import CANCEL_PREFIX
from parkway.store.subscriptions import WaitKey
from parkway.store.vocabulary import TaskKind, WaitKind

log = logging.getLogger("parkway.events")

# A condition lives as long as its run (its subscriptions go when it ends); this
# safety net is only for one whose run is gone without ending (none should be).
CANCEL_TTL = 10 * 365.25 * 86400.0


def subscriptions(wf: WorkflowDef, run: RunRecord, now: float) -> list[SubscriptionRecord]:
    """The cancel conditions of ``run`` (a run of ``wf``), as subscriptions.

    Raises:
        InvalidInputError: A ``match`` function failed on the run's input.
    """
    out = []
    for index, condition in enumerate(wf.cancel_on):
        match = condition.match
        if callable(match):
            try:
                match = match(_json.loads(run.input))
                check_match(match)
            except Exception as exc:
                raise InvalidInputError(
                    f"cancel_on[{index}] match failed on the input: {exc}",
                    workflow=wf.name,
                    field=f"cancel_on[{index}].match",
                ) from exc
        subject = condition.subject or run.subject or "*"
        out.append(
            SubscriptionRecord(
                run_id=run.id,
                pos=-1 - index,
                kind=WaitKind.CANCEL,
                domain=run.domain,
                name=CANCEL_PREFIX + condition.event,
                subject=subject,
                shape=shape_of(match),
                digest=match_digest(match),
                match=None if match is None else _json.dumps(match),
                wait=f"cancel_on:{condition.event}",
                expires_at=now + CANCEL_TTL,
                created_at=now,
            )
        )
    return out


async def register(registry: Registry, tx: Tx, run: RunRecord, now: float) -> None:
    """Register the cancel conditions of a run just created (if its workflow has any)."""
    wf = registry.get(run.workflow, run.version)
    if wf is None or not wf.cancel_on:
        return
    for sub in subscriptions(wf, run, now):
        await tx.subscriptions.add(sub)


async def take(tx: Tx, event: EventRecord, payload: Any) -> list[str]:
    """Give every run whose cancel condition ``event`` meets a ``cancel`` task; their ids."""
    name = CANCEL_PREFIX + event.name
    now = event.published_at
    cancelled: list[str] = []
    for shape in await tx.subscriptions.shapes(event.domain, name):
        digest = payload_digest(payload, shape)
        if digest is None:
            continue
        subs = await tx.subscriptions.find(
            WaitKey(
                domain=event.domain,
                name=name,
                shape=shape,
                digest=digest,
                subject=event.subject,
                kind=WaitKind.CANCEL,
            )
        )
        for sub in subs:
            if sub.run_id in cancelled or not matches(_json.loads(sub.match), payload):
                continue
            await tx.tasks.add([NewTask(sub.run_id, now, TaskKind.CANCEL)])
            cancelled.append(sub.run_id)
            log.info("event %s (%s) cancels run %s", event.id, event.name, sub.run_id)
    return cancelled
