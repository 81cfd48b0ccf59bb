"""Event intake: one transaction records the event, resumes its waiters, starts its subscribers.

This is the transactional outbox of DESIGN principle 1: the event row (with
its id, for de-duplication), the delivery tasks for every matching parked
wait, and the start tasks of every subscribed workflow commit together or not
at all. Deliveries are tasks aimed at one run and one wait; the subscription
they consume is deleted here, so a second matching event does not count the
run as resumed again.
"""

from __future__ import annotations

import functools
import logging
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from parkway import _json, limits
from parkway.errors import InvalidInputError, ParkwayError, RoutingError, SerializationError
from parkway.events import Delivery, Event, PublishResult
from parkway.matching import payload_digest
from parkway.store.base import EventRecord, Tx, take_event_waits

if TYPE_CHECKING:
    from parkway.engine import Engine

log = logging.getLogger("parkway.events")


def prepare(engine: Engine, event: Event) -> tuple[Event, bytes]:
    """Validate and route an event; give it an id. Returns it and its encoded payload.

    Raises:
        ParkwayError: A field is malformed (named in the message).
        RoutingError: The event extractor failed.
    """
    limits.name(event.name, "event name")
    # (Any length: the ids a run publishes under are composed from its own.)
    limits.optional_reference(event.id, "event id", field="id")
    limits.domain(event.domain, "event domain")
    limits.subject(event.subject, "event subject")
    if event.subject == "*":
        raise ParkwayError("event subject '*' is reserved for wildcard waits; name a subject")
    payload = _json.dumps(event.payload, f"the payload of event {event.name!r}")
    domain, subject = route(engine, event)
    routed = Event(
        event.name,
        event.payload,
        id=event.id or uuid.uuid4().hex,
        domain=domain,
        subject=subject,
    )
    return routed, payload


def route(engine: Engine, event: Event) -> tuple[str, str | None]:
    """The event's own domain/subject win; else the extractor's; else ``("default", None)``."""
    domain, subject = event.domain, event.subject
    extractor = engine.event_extractor
    if extractor is not None and (domain is None or subject is None):
        try:
            routed = extractor(event)
        except Exception as exc:
            raise RoutingError(
                f"event_extractor raised {type(exc).__name__}: {exc} for event "
                f"{event.name!r} (id {event.id!r})"
            ) from exc
        if not (isinstance(routed, tuple | list) and len(routed) == 2):
            raise RoutingError(
                f"event_extractor must return a (domain, subject) pair, got {routed!r} "
                f"for event {event.name!r} (id {event.id!r})"
            )
        ext_domain, ext_subject = routed
        for what, value in (("domain", ext_domain), ("subject", ext_subject)):
            if value is not None and (not isinstance(value, str) or not value or value == "*"):
                raise RoutingError(
                    f"event_extractor returned {what} {value!r} for event {event.name!r}; "
                    "use a non-empty string or None"
                )
        domain = domain if domain is not None else ext_domain
        subject = subject if subject is not None else ext_subject
    return domain or "default", subject


async def publish_in_tx(
    engine: Engine, tx: Tx, event: Event, payload: bytes, now: float
) -> PublishResult:
    """Record ``event`` and act on it inside ``tx``. ``event`` comes from :func:`prepare`."""
    assert event.id is not None and event.domain is not None
    record = EventRecord(event.id, event.name, event.domain, event.subject, payload, now)
    # An id seen within the retention is a duplicate; past it, a new event.
    digest = functools.partial(payload_digest, event.payload)
    if await tx.record_event(record, now - engine.event_retention, digest=digest) is not None:
        return PublishResult(duplicate=True, event_id=event.id)
    # The payload was validated by prepare(): encode without the NaN scan.
    envelope = orjson.dumps(event.to_dict())
    taken = await take_event_waits(tx, record, event.payload, envelope, engine._paused_workflows)
    started = []
    for wf in engine._registry.subscribers(event.name):
        if wf.debounce is not None or wf.batch is not None:
            from parkway.accumulate import accumulate

            await accumulate(engine, tx, wf, event, envelope, now)
            continue
        run_id = await start_event_run(engine, tx, wf, event, envelope)
        if run_id is not None:
            started.append(run_id)
    return published(event, taken, started)


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
    engine: Engine,
    tx: Tx,
    wf: Any,
    event: Event,
    envelope: bytes,
    *,
    payload: Any = None,
    run_id: str | None = None,
) -> str | None:
    """Start ``wf`` for ``event`` unless a rule says no; return the run id or ``None``."""
    assert event.domain is not None
    if wf.start_rule is not None:  # the workflow names its run, or declines (JSON flows)
        run_id = await wf.start_rule(tx, event, engine._clock.now())
        if run_id is None:
            return None
    run_id = run_id or f"evt:{event.id}:{wf.name}"
    if await tx.get_run(run_id) is not None:
        return None
    if wf.unique_per_subject and await tx.active_run(wf.name, event.domain, event.subject):
        log.info(
            "event %s: %s already has an active run for subject %r; not starting another",
            event.id, wf.name, event.subject,
        )  # fmt: skip
        return None
    try:
        value = wf.check_input(event.payload if payload is None else payload)
        data = _json.dumps(value, f"the input of workflow {wf.name!r}")
    except (InvalidInputError, SerializationError) as exc:
        # A rejected subscriber never starts and blocks nobody else.
        log.warning("event %s: %s rejected its input: %s", event.id, wf.name, exc)
        return None
    await engine._insert_run(
        tx, wf, run_id, data, domain=event.domain, subject=event.subject, trigger=envelope
    )
    return run_id
