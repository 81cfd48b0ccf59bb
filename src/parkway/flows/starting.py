"""What a published event does to a flow, decided inside the publish transaction.

**Starting.** The start node's :meth:`~parkway.flows.NodeModel.start_events`
name the events that start the flow (``None``: any event of its domain). One
run per ``(domain, flow id, subject)`` at a time, with run ids
``flow:<flow id>:<domain>:<subject>`` and then ``...:2``, ``...:3`` for later
runs of the same subject (``every_rematch``).

**Resuming from the own subject.** A ``Trigger`` / ``TriggerOrTimeout`` with
``match.subjectId`` waits on another subject (``product:456``), but omega-flow
also offers every event of the run's own subject to the node it is parked on.
So the flow also listens to those events' names: when one arrives in a subject
whose run of the flow waits for that name on another subject, the run's wait
is taken, as the publish takes the waits it finds by subject. The wait keeps
its one subscription (``engine.subscriptions()`` shows the other subject);
the publish lists a run resumed this way in ``PublishResult.resumed`` as any
other (see :func:`resume_rule`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING

import orjson

from parkway import _json
from parkway.flows.builtin import Trigger
from parkway.flows.loader import FlowDefinition
from parkway.matching import matches
from parkway.store.base import ENDED, NewTask
from parkway.store.vocabulary import EntryKind, TaskKind

if TYPE_CHECKING:
    from parkway.events import Event
    from parkway.store.base import RunRecord, Tx

log = logging.getLogger("parkway.flows")


def run_id_base(flow_id: str, domain: str, subject: str | None) -> str:
    """The id of the first run of a flow for a subject (later runs add ``:2``, ``:3``...)."""
    return f"flow:{flow_id}:{domain}" if subject is None else f"flow:{flow_id}:{domain}:{subject}"


def _nth(base: str, n: int) -> str:
    return base if n == 1 else f"{base}:{n}"


async def _latest(tx: Tx, base: str) -> tuple[int, RunRecord] | None:
    """The newest run numbered from ``base`` and its number (runs are never renumbered)."""
    found = await tx.runs.get(base)
    if found is None:
        return None
    low, high = 1, 2
    while (run := await tx.runs.get(_nth(base, high))) is not None:  # double...
        low, found, high = high, run, high * 2
    while high - low > 1:  # ...then bisect between the last found and the first missing
        middle = (low + high) // 2
        run = await tx.runs.get(_nth(base, middle))
        if run is None:
            high = middle
        else:
            low, found = middle, run
    return low, found


def own_subject_events(flow: FlowDefinition) -> frozenset[str]:
    """Names of the events that may resume a run from its own subject while its wait
    listens to another one (triggers with ``match.subjectId``)."""
    return frozenset(
        model.params["event"]
        for model in flow.nodes.values()
        if isinstance(model, Trigger) and model.id != flow.start and model.own_subject_too()
    )


async def resume_in_own_subject(
    tx: Tx, flow: FlowDefinition, event: Event, now: float
) -> list[tuple[str, str]]:
    """Take the wait of the subject's run of ``flow`` for ``event``'s name on another
    subject; its ``(run id, wait)`` if it took one."""
    if event.subject is None:
        return []
    assert event.domain is not None
    run_id = await tx.runs.active(flow.id, event.domain, event.subject)
    if run_id is None:
        return []
    for sub in await tx.subscriptions.list(run_id=run_id, name=event.name):
        if sub.kind != EntryKind.EVENT or sub.subject in (event.subject, "*"):
            continue  # the publish finds those waits by subject itself
        if sub.expires_at < now or (sub.deadline is not None and now > sub.deadline):
            continue
        if not matches(_json.loads(sub.match), event.payload):
            continue
        log.info(
            "flow %r: %s in its own subject %r resumes run %s (waiting on %r)",
            flow.id,
            event.name,
            event.subject,
            run_id,
            sub.subject,
        )
        await tx.subscriptions.delete(sub.run_id, sub.pos)
        envelope = orjson.dumps(event.to_dict())
        await tx.tasks.add([NewTask(sub.run_id, now, TaskKind.DELIVERY, sub.pos, envelope)])
        return [(sub.run_id, sub.wait)]
    return []


def resume_rule(
    flow: FlowDefinition, domain: str, resuming: Collection[str]
) -> Callable[[Tx, Event, float], Awaitable[list[tuple[str, str]]]]:
    """Resume, inside the publish transaction, a run of ``flow`` parked on another
    subject by ``event`` of one of the ``resuming`` names in its own subject."""

    async def resume(tx: Tx, event: Event, now: float) -> list[tuple[str, str]]:
        if event.domain != domain or event.name not in resuming:
            return []
        return await resume_in_own_subject(tx, flow, event, now)

    return resume


def start_rule(
    flow: FlowDefinition, domain: str
) -> Callable[[Tx, Event, float], Awaitable[str | None]]:
    """Decide, inside the publish transaction, whether ``event`` starts a run of ``flow``.

    Returns the new run's id, or ``None``: the event is of another domain or
    does not start the flow; the subject already has an active run;
    ``one_time`` and the subject had a run; ``every_rematch`` and the last run
    started less than ``interval`` ago.
    """
    starts = flow.start_events

    async def admit(tx: Tx, event: Event, now: float) -> str | None:
        if event.domain != domain:
            return None
        if starts is not None and event.name not in starts:
            return None
        subject = event.subject
        active = await tx.runs.active(flow.id, domain, subject)
        if active is not None:
            log.info(
                "flow %r: subject %r has active run %s; not starting", flow.id, subject, active
            )
            return None
        base = run_id_base(flow.id, domain, subject)
        latest = await _latest(tx, base)
        if latest is None:
            return base
        number, run = latest
        if flow.frequency == "one_time":
            log.info("flow %r runs once per subject; %r had run %s", flow.id, subject, run.id)
            return None
        if run.status not in ENDED or now < run.created_at + flow.interval:
            log.info(
                "flow %r: run %s of subject %r started less than %gs ago; not starting",
                flow.id,
                run.id,
                subject,
                flow.interval,
            )
            return None
        return _nth(base, number + 1)

    return admit
