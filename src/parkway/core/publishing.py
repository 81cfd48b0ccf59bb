"""Publishing an event: one transaction records it, resumes its waiters, starts its subscribers.

This is the transactional outbox: the event row (with its id, for
de-duplication), the delivery tasks for every matching parked wait, and the
start tasks of every subscribed workflow commit together or not at all.
Deliveries are tasks aimed at one run and one wait; the subscription they
consume is deleted here, so a second matching event does not count the run as
resumed again.

One path: :func:`publish` -> :func:`publish_in_tx` -> :func:`deliver` (record
the event, take the waits it matches) -> the subscribers' starts. A publish
that starts nothing needs only :func:`deliver`, which a store that fuses it
(the ``"fused"`` capability) does in one statement sent with the ``COMMIT``.
``ctx.publish`` goes through :func:`publish_in_tx` too, in the commit of the
run that publishes.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Collection
from typing import Any, cast

import orjson

from parkway import _json, limits
from parkway.core import accumulate, cancel_on, fleet
from parkway.core.conflicts import again_on_conflict
from parkway.core.handover import HandOver, handing_over
from parkway.core.runs import insert_run
from parkway.core.runtime import Runtime
from parkway.errors import (
    ConcurrencyLimitError,
    InvalidEventError,
    InvalidInputError,
    RoutingError,
    SerializationError,
    StoreError,
    describe,
    shown,
)
from parkway.events import Delivery, Event, PublishResult
from parkway.ids import new_id
from parkway.matching import matches, payload_digest
from parkway.registry import WorkflowDef
from parkway.store.base import (
    FUSED,
    EventDelivery,
    EventRecord,
    FusedTx,
    NewTask,
    SubscriptionRecord,
    Tx,
)
from parkway.store.subscriptions import WaitKey
from parkway.store.vocabulary import TaskKind, WaitKind

log = logging.getLogger("parkway.events")


def prepare(rt: Runtime, event: Event, *, edge_checked: bool = False) -> tuple[Event, bytes]:
    """Validate and route an event; give it an id. Returns it and its encoded payload.

    ``edge_checked``: the caller held its fields to the edge's limits already
    (:func:`checked`), as ``Engine.publish`` does; else they are checked here
    (``ctx.publish`` checks some of them only).

    Raises:
        InvalidInputError: A field is malformed (named in the message).
        SerializationError: The payload is not JSON-serialisable.
        RoutingError: The event extractor failed.
    """
    if not edge_checked:
        event = checked(event)
    payload = _json.dumps(event.payload, f"the payload of event {event.name!r}")
    domain, subject = route(rt, event)
    routed = Event(
        event.name,
        event.payload,
        id=event.id or new_id(),
        domain=domain,
        subject=subject,
    )
    return routed, payload


def checked(event: Event) -> Event:
    """The event with its fields held to the edge's limits, as plain strings (a str
    subclass's methods are the caller's).

    Raises:
        InvalidInputError: A field is malformed (named in the message).
    """
    event = Event(
        limits.name(event.name, "event name"),
        event.payload,
        # (Any length: the ids a run publishes under are composed from its own.)
        id=limits.optional_reference(event.id, "event id", field="id"),
        domain=limits.domain(event.domain, "event domain"),
        subject=limits.subject(event.subject, "event subject"),
    )
    if event.subject == "*":
        raise InvalidEventError("event subject '*' is reserved for wildcard waits; name a subject")
    return event


def route(rt: Runtime, event: Event) -> tuple[str, str | None]:
    """The event's own domain/subject win; else the extractor's; else ``("default", None)``."""
    domain, subject = event.domain, event.subject
    extractor = rt.event_extractor
    if extractor is not None and (domain is None or subject is None):
        try:
            routed = extractor(event)
        except Exception as exc:
            raise RoutingError(
                f"event_extractor raised {type(exc).__name__}: {describe(exc)} for event "
                f"{event.name!r} (id {event.id!r})"
            ) from exc
        if not (isinstance(routed, tuple | list) and len(routed) == 2):
            raise RoutingError(
                f"event_extractor must return a (domain, subject) pair, got {shown(routed)} "
                f"for event {event.name!r} (id {event.id!r})"
            )
        ext_domain, ext_subject = routed
        for what, value in (("domain", ext_domain), ("subject", ext_subject)):
            if value is not None and (not isinstance(value, str) or not value or value == "*"):
                raise RoutingError(
                    f"event_extractor returned {what} {shown(value)} for event {event.name!r}; "
                    "use a non-empty string or None"
                )
        domain = domain if domain is not None else ext_domain
        subject = subject if subject is not None else ext_subject
    return domain or "default", subject


async def publish(rt: Runtime, event: Event) -> PublishResult:
    """Publish ``event`` (see ``Engine.publish``): all of it is one transaction, done
    again if the store rolls it back for a conflict (nothing of it was saved).
    ``event`` comes from :func:`checked`: its fields were held to the edge's limits
    where it entered."""
    event, data = prepare(rt, event, edge_checked=True)
    result, alone = await again_on_conflict(lambda: _publish(rt, event, data))
    if not alone and not result.duplicate:  # accumulators get tasks too, without touching anyone
        rt.after_commit()
    return result


async def _publish(rt: Runtime, event: Event, data: bytes) -> tuple[PublishResult, bool]:
    """One attempt of :func:`publish`: its result, and whether it was the delivery alone."""
    with handing_over(rt) as hand_over:
        if not rt.paused and not rt.registry.subscribers(event.name):
            # Nothing to start and no flow disabled: the delivery alone, as one
            # store operation where the store fuses it (unless it declines).
            delivered = await _deliver_alone(rt, event, data, hand_over)
            if delivered is not None:
                return delivered, True
        async with rt.store.transaction() as tx:
            result = await publish_in_tx(rt, tx, event, data, rt.now())
            for run_id in result.resumed[:1] or result.started[:1]:
                await hand_over(tx, run_id)
    return result, False


async def publish_in_tx(
    rt: Runtime, tx: Tx, event: Event, payload: bytes, now: float
) -> PublishResult:
    """Record ``event`` and act on it inside ``tx``. ``event`` comes from :func:`prepare`."""
    record = _record(event, payload, now)
    # The payload was validated by prepare(): encode without the NaN scan.
    envelope = orjson.dumps(rt.telemetry.stamp(event.to_dict()))
    delivery = await deliver(rt, tx, record, event.payload, envelope)
    if delivery.outcome == "duplicate":
        return PublishResult(duplicate=True, event_id=record.id)
    taken = list(delivery.waits)
    subscribers = rt.registry.subscribers(event.name)
    for wf in subscribers:
        if wf.resume_rule is not None:  # (before any start: a run started now waits on nothing)
            taken += await wf.resume_rule(tx, event, now)
    started = []
    for wf in subscribers:
        if wf.debounce is not None or wf.batch is not None:
            await accumulate.accumulate(rt, tx, wf, event, envelope, now)
            continue
        run_id = await start_event_run(rt, tx, wf, event, envelope)
        if run_id is not None:
            started.append(run_id)
    if taken or started:
        assert event.id is not None  # (given by prepare)
        resumed = [run_id for run_id, _ in taken]
        await fleet.link(tx, event.id, record.published_at, started, resumed[len(delivery.waits) :])
    return published(event, taken, started)


async def deliver(
    rt: Runtime,
    tx: Tx,
    record: EventRecord,
    payload: Any,
    envelope: bytes,
    *,
    lease: dict[str, Any] | None = None,
) -> EventDelivery:
    """:func:`deliver_event` with this engine's settings: the retention, the
    disabled flows, and whether the store fuses it.

    ``lease``: the terms of a hand-over (:meth:`HandOver.terms`), given only when
    nothing follows in the transaction: only then may the store fuse the
    delivery (its outcome known at commit, or declined: ``outcome`` ``None``,
    nothing written; the caller goes on the usual way).
    """
    fused = lease is not None and FUSED in rt.store.capabilities and not rt.paused
    return await deliver_event(
        tx,
        record,
        payload,
        envelope,
        fused=fused,
        fresh_after=record.published_at - rt.settings.event_retention,
        paused=rt.paused,
        **(lease or {}),
    )


async def deliver_event(
    tx: Tx,
    record: EventRecord,
    payload: Any,
    envelope: bytes,
    *,
    fresh_after: float,
    fused: bool = False,
    paused: Collection[str] = (),
    owner: str | None = None,
    wall_now: float = 0.0,
    lease_until: float = 0.0,
) -> EventDelivery:
    """Record the event (unless its id was seen at or after ``fresh_after``: then
    ``"duplicate"``, nothing written) and take every event wait its ``payload``
    matches (see :func:`take_event_waits`), each with a delivery task carrying
    ``envelope``. With ``owner``, lease the first run delivered to, as
    ``tx.runs.lease`` would.

    ``fused``: the store's one-operation version (``tx.events.deliver``, on a
    store with the ``"fused"`` capability): the same, sent with the ``COMMIT``,
    or declined (nothing written); it takes no ``paused``.
    """
    if fused:
        fused_tx = cast(FusedTx, tx)
        return await fused_tx.events.deliver(
            record,
            payload,
            envelope,
            fresh_after=fresh_after,
            owner=owner,
            wall_now=wall_now,
            lease_until=lease_until,
        )
    # An id seen within the retention is a duplicate; past it, a new event.
    digest = functools.partial(payload_digest, payload)
    if await tx.events.record(record, fresh_after, digest=digest) is not None:
        return EventDelivery("duplicate", known=True)
    waits = await take_event_waits(tx, record, payload, envelope, paused)
    if waits:  # (the fused statement links them itself)
        await fleet.link(tx, record.id, record.published_at, (), [run_id for run_id, _ in waits])
    await cancel_on.take(tx, record, payload)
    lease = None
    if owner is not None and waits:
        lease = await tx.runs.lease(
            waits[0][0],
            owner=owner,
            now=record.published_at,
            wall_now=wall_now,
            lease_until=lease_until,
        )
    return EventDelivery("published", waits, known=True, lease=lease)


async def take_event_waits(
    tx: Tx, event: EventRecord, payload: Any, envelope: bytes, paused: Collection[str] = ()
) -> list[tuple[str, str]]:
    """Take the event waits ``event`` matches (``payload``: its payload decoded), each
    with a delivery task carrying ``envelope``; their ``(run id, wait)``, in order.

    Shape by shape, the waits indexed under the payload's digest (the oldest
    first); of those, each whose match rule holds (the digest narrows, the rule
    decides, and guards against collisions), whose deadline and expiry have not
    passed, and whose run is not of a workflow in ``paused`` (a disabled flow's
    runs keep waiting, for a later event).
    """
    now = event.published_at
    taken: list[tuple[str, str]] = []
    for shape in await tx.subscriptions.shapes(event.domain, event.name):
        digest = payload_digest(payload, shape)
        if digest is None:
            continue
        subs = await tx.subscriptions.find(
            WaitKey(
                domain=event.domain,
                name=event.name,
                shape=shape,
                digest=digest,
                subject=event.subject,
                kind=WaitKind.EVENT,
            )
        )
        for sub in subs:
            if sub.expires_at < now or not matches(_json.loads(sub.match), payload):
                continue
            if sub.deadline is not None and now > sub.deadline:
                continue  # the wait's timeout passed first; its timer will say so
            if paused:
                run = await tx.runs.get(sub.run_id)
                if run is not None and run.workflow in paused:
                    continue
            await tx.subscriptions.delete(sub.run_id, sub.pos)
            await tx.tasks.add([NewTask(sub.run_id, now, TaskKind.DELIVERY, sub.pos, envelope)])
            taken.append((sub.run_id, sub.wait))
    return taken


async def _deliver_alone(
    rt: Runtime, event: Event, data: bytes, hand_over: HandOver
) -> PublishResult | None:
    """A publish that starts nothing: :func:`deliver` alone, through the senders'
    committer (``None``: the store declined; nothing was written)."""
    envelope = orjson.dumps(rt.telemetry.stamp(event.to_dict()))  # (prepare() validated it)

    async def job(tx: Tx) -> EventDelivery:
        hand_over.forget()  # (run again on its own after a batch that failed: that lease was void)
        record = _record(event, data, rt.now())
        delivery = await deliver(rt, tx, record, event.payload, envelope, lease=hand_over.terms())
        hand_over.took(delivery.lease)
        return delivery

    assert event.id is not None
    delivery = await rt.send(job, order=event.id)
    if not delivery.waits:
        hand_over.forget()  # nothing was leased: the place is for what comes next
    if not delivery.known:
        raise StoreError(
            f"event {event.name!r} (id {event.id!r}): the store did not say what it did with it"
        )
    if delivery.outcome is None:
        return None
    if delivery.outcome == "duplicate":
        return PublishResult(duplicate=True, event_id=event.id)
    if delivery.waits:
        rt.after_commit()
    return published(event, delivery.waits)


async def register_wait(
    tx: Tx, sub: SubscriptionRecord, since: float | None, consumed: frozenset[str], now: float
) -> None:
    """Register a ``wait_for_event`` (in the commit of the run that parks on it), with
    the ``since_start`` look-back if asked (``since``): the earliest matching event
    published since then that the run has not ``consumed`` is delivered instead.

    The look-back runs in the same transaction as the registration: an event
    committed before it is found by the look-back, one committed after it finds
    the subscription. Nothing falls between the two.
    """
    if since is not None:
        match = _json.loads(sub.match)
        for event in await tx.events.since(sub.domain, sub.name, since):
            if event.id in consumed:
                continue
            if sub.subject != "*" and event.subject != sub.subject:
                continue
            payload = _json.loads(event.payload)
            if matches(match, payload):
                envelope = Event(
                    event.name, payload, id=event.id, domain=event.domain, subject=event.subject
                )
                body = _json.dumps(envelope.to_dict())
                await tx.tasks.add([NewTask(sub.run_id, now, TaskKind.DELIVERY, sub.pos, body)])
                return
    await tx.subscriptions.add(sub)


def _record(event: Event, payload: bytes, now: float) -> EventRecord:
    assert event.id is not None and event.domain is not None
    return EventRecord(event.id, event.name, event.domain, event.subject, payload, now)


def published(
    event: Event, taken: list[tuple[str, str]], started: list[str] | None = None
) -> PublishResult:
    """The result of a publish that took the waits ``taken`` (``(run id, wait)``, in
    order) and started the runs ``started``."""
    assert event.id is not None
    started = started or []
    resumed = list(dict.fromkeys(run_id for run_id, _ in taken))
    return PublishResult(
        started=started,
        resumed=resumed,
        deliveries=[Delivery(run_id, wait, event.subject) for run_id, wait in taken],
        duplicate=False,
        touched=len(started) + len(resumed),
        event_id=event.id,
    )


async def start_event_run(
    rt: Runtime,
    tx: Tx,
    wf: WorkflowDef,
    event: Event,
    envelope: bytes,
    *,
    payload: Any = None,
    run_id: str | None = None,
) -> str | None:
    """Start ``wf`` for ``event`` unless a rule says no; return the run id or ``None``."""
    assert event.domain is not None
    if wf.start_rule is not None:  # the workflow names its run, or declines (JSON flows)
        run_id = await wf.start_rule(tx, event, rt.now())
        if run_id is None:
            return None
    run_id = run_id or f"evt:{event.id}:{wf.name}"
    if await tx.runs.get(run_id) is not None:
        return None
    if wf.unique_per_subject and await tx.runs.active(wf.name, event.domain, event.subject):
        log.info(
            "event %s: %s already has an active run for subject %r; not starting another",
            event.id,
            wf.name,
            event.subject,
        )
        return None
    try:
        value = wf.check_input(event.payload if payload is None else payload)
        data = _json.dumps(value, f"the input of workflow {wf.name!r}")
    except (InvalidInputError, SerializationError) as exc:
        # A rejected subscriber never starts and blocks nobody else.
        log.warning("event %s: %s rejected its input: %s", event.id, wf.name, exc)
        return None
    try:
        await insert_run(
            rt,
            tx,
            wf.name,
            wf.version,
            run_id,
            data,
            domain=event.domain,
            subject=event.subject,
            trigger=envelope,
        )
    except ConcurrencyLimitError as exc:  # (refused before anything of it was written)
        log.info("event %s: %s", event.id, exc)
        return None
    except InvalidInputError as exc:  # its admission key is missing from the input
        log.warning("event %s: %s rejected its input: %s", event.id, wf.name, exc)
        return None
    return run_id
