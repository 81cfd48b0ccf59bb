"""Messages: point-to-point correlation by name and business key.

``correlate(name, key)`` hands a message to exactly one receiver, decided in
one transaction: the run parked on ``wait_for_message(name, key)`` (there is
at most one: a second is refused), else a new run of the workflow declared
with ``on_message=name`` (at most one active run per key), else the buffer,
for ``ttl``. A buffered message is consumed by the next wait on its
``(name, key)``, oldest first, atomically with registering that wait; one
whose TTL passes becomes a dead letter, kept and listed, never dropped.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, cast

from parkway import _json
from parkway.core.conflicts import again_on_conflict
from parkway.core.handover import HandOver, handing_over
from parkway.core.runs import insert_run
from parkway.core.runtime import Runtime
from parkway.errors import (
    CorrelationError,
    InvalidInputError,
    MessageNotFoundError,
    SerializationError,
    StoreError,
)
from parkway.events import CorrelationResult, MessageInfo
from parkway.models import _dt
from parkway.registry import WorkflowDef
from parkway.store.base import (
    FUSED,
    MESSAGE_TASK,
    FusedTx,
    MessageDelivery,
    MessageRecord,
    NewTask,
    SubscriptionRecord,
    TaskRecord,
    Tx,
)
from parkway.store.vocabulary import TaskKind

log = logging.getLogger("parkway.messages")

EXPIRED_REASON = "its ttl passed before any run waited for it"


def envelope(
    name: str,
    key: str,
    payload: bytes | None,
    message_id: str | None,
    trace: dict[str, str] | None = None,
) -> bytes:
    """A message as its run's task carries it (``trace``: the sender's trace context)."""
    body = {"name": name, "key": key, "payload": _json.loads(payload), "message_id": message_id}
    return _json.dumps(body if trace is None else {**body, "trace": trace})


async def correlate(
    rt: Runtime,
    name: str,
    key: str,
    payload: bytes,
    *,
    message_id: str | None,
    ttl: float,
) -> CorrelationResult:
    """Hand a message to exactly one receiver (see ``Engine.correlate``), done again
    if the store rolls it back for a conflict (nothing of it was saved)."""
    result, alone = await again_on_conflict(
        lambda: _correlate(rt, name, key, payload, message_id, ttl)
    )
    if not alone and result.run_id is not None:
        rt.after_commit()
    return result


async def _correlate(
    rt: Runtime, name: str, key: str, payload: bytes, message_id: str | None, ttl: float
) -> tuple[CorrelationResult, bool]:
    """One attempt of :func:`correlate`: its result, and whether it was the delivery alone."""
    with handing_over(rt) as hand_over:
        if rt.registry.message_starter(name) is None:
            # Most messages find their run waiting: then the delivery is one store
            # operation, which a store that fuses it sends with the COMMIT. Only a
            # message nobody waits for takes the transaction below (buffer, or refuse).
            delivered = await _deliver_alone(rt, name, key, payload, message_id, hand_over)
            if delivered is not None:
                return delivered, True
        async with rt.store.transaction() as tx:
            result = await correlate_in_tx(
                rt,
                tx,
                name=name,
                key=key,
                payload=payload,
                message_id=message_id,
                ttl=ttl,
                now=rt.now(),
            )
            if result.run_id is not None:
                await hand_over(tx, result.run_id)
    return result, False


async def correlate_in_tx(
    rt: Runtime,
    tx: Tx,
    *,
    name: str,
    key: str,
    payload: bytes,
    message_id: str | None,
    ttl: float,
    now: float,
    dedup: bool = True,
) -> CorrelationResult:
    """Deliver, start, buffer or refuse one message, inside ``tx``.

    Raises:
        CorrelationError: ``ttl`` is 0 and nobody can receive it now.
    """
    body = envelope(name, key, payload, message_id, rt.telemetry.carrier())
    delivery = await deliver(rt, tx, name, key, body, now, message_id=message_id, dedup=dedup)
    if delivery.outcome == "duplicate":
        return CorrelationResult("duplicate")
    if delivery.outcome == "delivered":
        return CorrelationResult("delivered", delivery.run_id)
    starter = rt.registry.message_starter(name)
    if starter is not None and await tx.runs.active(starter.name, "default", key) is None:
        run_id = await start_message_run(rt, tx, starter, name, key, payload)
        await _remember(tx, message_id, now)
        return CorrelationResult("started", run_id)
    if ttl <= 0:
        raise CorrelationError(
            f"no run waits for message {name!r} with key {key!r} and ttl=0 forbids buffering; "
            "the receiver may not be waiting yet (retry later or give a ttl), may have "
            "completed already, or the key may be wrong"
        )
    buffered = await tx.messages.add(
        MessageRecord(0, name, key, payload, message_id, "buffered", None, now, now + ttl)
    )
    # Remembered as of its expiry: a repeat is a duplicate for as long as the first
    # copy is buffered, and for event_retention after that.
    await _remember(tx, message_id, now + ttl)
    return CorrelationResult("buffered", id=buffered)


async def deliver(
    rt: Runtime,
    tx: Tx,
    name: str,
    key: str,
    body: bytes,
    now: float,
    *,
    message_id: str | None,
    dedup: bool = True,
    lease: dict[str, Any] | None = None,
) -> MessageDelivery:
    """:func:`deliver_message` with this engine's settings (the retention; whether
    the store fuses it). Without ``dedup``, ``message_id`` is not checked.

    ``lease``: the terms of a hand-over, given only when nothing follows in the
    transaction: only then may the store fuse the delivery (its outcome known at
    commit).
    """
    fused = lease is not None and dedup and FUSED in rt.store.capabilities
    return await deliver_message(
        tx,
        name,
        key,
        body,
        now,
        message_id=message_id if dedup else None,
        remember=message_id,
        fresh_after=now - rt.settings.event_retention,
        fused=fused,
        **(lease or {}),
    )


async def deliver_message(
    tx: Tx,
    name: str,
    key: str,
    body: bytes,
    now: float,
    *,
    message_id: str | None,
    fresh_after: float,
    remember: str | None = None,
    fused: bool = False,
    owner: str | None = None,
    wall_now: float = 0.0,
    lease_until: float = 0.0,
) -> MessageDelivery:
    """A message (``body``: its :func:`envelope`) straight to the run waiting for it.

    Unless ``message_id`` was seen at or after ``fresh_after`` (then
    ``"duplicate"``, nothing written), take the wait for ``(name, key)`` as
    ``tx.messages.take_wait`` would (not one whose deadline has passed), give its
    run a :data:`MESSAGE_TASK` task carrying ``body`` due at ``now``, and
    remember ``message_id`` (or ``remember``) as seen at ``now``. With ``owner``,
    also lease the run to it as ``tx.runs.lease`` would. With no wait, nothing is
    written (outcome ``None``).

    ``fused``: the store's one-operation version (``tx.messages.deliver``, on
    a store with the ``"fused"`` capability): the same, sent with the ``COMMIT``.
    """
    if fused:
        fused_tx = cast(FusedTx, tx)
        return await fused_tx.messages.deliver(
            name,
            key,
            body,
            now,
            message_id=message_id,
            fresh_after=fresh_after,
            owner=owner,
            wall_now=wall_now,
            lease_until=lease_until,
        )
    if message_id is not None:
        seen = await tx.messages.id_seen(message_id)
        if seen is not None and seen >= fresh_after:
            return MessageDelivery("duplicate", known=True)
    # (A wait whose timeout passed first stays, and the message goes to the buffer.)
    wait = await tx.messages.take_wait(name, key, now)
    if wait is None:
        return MessageDelivery(None, known=True)
    await tx.tasks.add([NewTask(wait.run_id, now, MESSAGE_TASK, wait.pos, body)])
    await _remember(tx, message_id or remember, now)
    lease = None
    if owner is not None:
        lease = await tx.runs.lease(
            wait.run_id, owner=owner, now=now, wall_now=wall_now, lease_until=lease_until
        )
    return MessageDelivery("delivered", wait.run_id, known=True, lease=lease)


async def _deliver_alone(
    rt: Runtime,
    name: str,
    key: str,
    data: bytes,
    message_id: str | None,
    hand_over: HandOver,
) -> CorrelationResult | None:
    """:func:`deliver` alone, through the senders' committer (``None``: no run waits)."""
    body = envelope(name, key, data, message_id, rt.telemetry.carrier())

    async def job(tx: Tx) -> MessageDelivery:
        hand_over.forget()  # (run again on its own after a batch that failed: that lease was void)
        delivery = await deliver(
            rt, tx, name, key, body, rt.now(), message_id=message_id, lease=hand_over.terms()
        )
        hand_over.took(delivery.lease)
        return delivery

    delivery = await rt.send(job, order=key)
    if not delivery.known:
        raise StoreError(
            f"message {name!r} with key {key!r}: the store did not say what it did with it"
        )
    if delivery.outcome == "duplicate":
        return CorrelationResult("duplicate")
    if delivery.outcome != "delivered" or delivery.run_id is None:
        hand_over.forget()  # nothing was leased: the place is for what comes next
        return None
    if not hand_over.handed:  # (its one task is for the run leased to this worker)
        rt.after_commit()
    return CorrelationResult("delivered", delivery.run_id)


async def _remember(tx: Tx, message_id: str | None, now: float) -> None:
    if message_id is not None:
        await tx.messages.remember_id(message_id, now)


async def start_message_run(
    rt: Runtime, tx: Tx, wf: WorkflowDef, name: str, key: str, payload: bytes | None
) -> str:
    """Start ``wf`` for message ``(name, key)``: ids ``msg:<name>:<key>``, then ``:2``, ``:3``."""
    base = f"msg:{name}:{key}"
    run_id, n = base, 1
    while await tx.runs.get(run_id) is not None:
        n += 1
        run_id = f"{base}:{n}"
    value = wf.check_input(_json.loads(payload))
    data = _json.dumps(value, f"the input of workflow {wf.name!r}")
    await insert_run(rt, tx, wf.name, wf.version, run_id, data, domain="default", subject=key)
    return run_id


async def after_run_ends(
    rt: Runtime, tx: Tx, workflow: str, version: str, key: str | None, now: float
) -> None:
    """A message-started run ended: the oldest buffered message for its key starts the next."""
    wf = rt.registry.get(workflow, version)
    if wf is None or wf.on_message is None or key is None:
        return
    starter = rt.registry.message_starter(wf.on_message)
    if starter is None or await tx.runs.active(starter.name, "default", key) is not None:
        return
    while (message := await tx.messages.oldest(wf.on_message, key, now)) is not None:
        try:
            await start_message_run(rt, tx, starter, wf.on_message, key, message.payload)
        except (InvalidInputError, SerializationError) as exc:
            # Rejected input must not block the key: dead-letter it, try the next one.
            reason = f"rejected by workflow {starter.name!r}: {exc}"
            await tx.messages.update(message.id, "expired", reason, message.expires_at)
            log.warning("message %r key %r (id %s): %s", message.name, key, message.id, reason)
            continue
        await tx.messages.delete(message.id)
        return


async def rebuffer(
    rt: Runtime,
    tx: Tx,
    run_id: str,
    now: float,
    *,
    pos: int | None = None,
    keep: frozenset[int] = frozenset(),
    only: frozenset[int] | None = None,
    tasks: list[TaskRecord] | None = None,
) -> set[int]:
    """Buffer again the message deliveries of ``run_id`` (at ``pos``) that it will not take.

    Called before a run's delivery tasks are deleted (its wait timed out or was
    replaced, the run ended or started a new generation): ``correlate`` said
    "delivered", so the message must not vanish. ``keep`` lists tasks the run consumed;
    ``only`` limits it to these tasks; ``tasks`` are all the run's tasks, if the
    caller has just read them. Returns the ids of the tasks buffered again (deleted).
    """
    if tasks is None:
        tasks = await tx.tasks.due(run_id, float("inf"))
    done: set[int] = set()
    for task in tasks:
        if task.kind != MESSAGE_TASK or task.id in keep or (pos is not None and task.pos != pos):
            continue
        if only is not None and task.id not in only:
            continue
        body = _json.loads(task.payload)
        payload = _json.dumps(body["payload"])
        await tx.messages.add(
            MessageRecord(
                0,
                body["name"],
                body["key"],
                payload,
                body.get("message_id"),
                "buffered",
                None,
                now,
                now + rt.settings.message_ttl,
            )
        )
        await tx.tasks.delete([task.id])
        done.add(task.id)
        log.warning(
            "message %r key %r reached run %s after it stopped waiting; buffered again",
            body["name"],
            body["key"],
            run_id,
        )
    return done


async def register_wait(tx: Tx, sub: SubscriptionRecord, now: float) -> None:
    """Register a ``wait_for_message`` (in the commit of the run that parks on it),
    consuming the oldest buffered message for its ``(name, key)`` instead if there
    is one: decided with the registration, so no message falls between the two."""
    holder = await tx.messages.wait(sub.name, sub.subject)
    if holder is not None and holder.run_id != sub.run_id:
        # Lost a race to another run: wake this one so its replay raises
        # DuplicateSubscriptionError where the workflow can see it.
        await tx.tasks.add([NewTask(sub.run_id, now, TaskKind.WAKE, sub.pos)])
        return
    message = await tx.messages.oldest(sub.name, sub.subject, now)
    if message is not None:
        await tx.messages.delete(message.id)
        body = envelope(message.name, message.key, message.payload, message.message_id)
        await tx.tasks.add([NewTask(sub.run_id, now, MESSAGE_TASK, sub.pos, body)])
        return
    if holder is None:
        await tx.subscriptions.add(sub)


def info(message: MessageRecord) -> MessageInfo:
    """The public view of a buffered message or dead letter."""
    return MessageInfo(
        id=message.id,
        name=message.name,
        key=message.key,
        payload=_json.loads(message.payload),
        message_id=message.message_id,
        status=message.status,
        reason=message.reason,
        received_at=_dt(message.received_at),
        expires_at=_dt(message.expires_at),
    )


async def expire(tx: Tx, now: float) -> list[MessageRecord]:
    """Turn buffered messages past their TTL into dead letters, with a warning each
    (the worker's housekeeping does it: see ``parkway.core.housekeeping``)."""
    expired = await tx.messages.expire(now, EXPIRED_REASON)
    for message in expired:
        log.warning(
            "message %r key %r (id %s) expired unconsumed; kept as a dead letter: "
            "`parkway messages retry %s` correlates it again, `parkway messages discard %s` "
            "deletes it",
            message.name,
            message.key,
            message.id,
            message.id,
            message.id,
        )
    return expired


def as_of(message: MessageRecord, now: float) -> MessageRecord:
    """``message`` as it stands at ``now``: a buffered one past its TTL is a dead letter,
    whether or not the housekeeping has marked it yet."""
    if message.status == "buffered" and message.expires_at <= now:
        return dataclasses.replace(message, status="expired", reason=EXPIRED_REASON)
    return message


async def listing(rt: Runtime, status: str | None) -> list[MessageInfo]:
    """Buffered messages and dead letters (``status="expired"``), oldest first.

    A read: messages past their TTL are shown as the dead letters they are, but
    marking them (and logging it, once) is the worker's housekeeping's, not that
    of whichever process lists first."""
    now = rt.now()
    async with rt.store.transaction(readonly=True) as tx:
        if status is None:
            records = await tx.messages.list(None)
        else:
            records = await tx.messages.list("buffered")
            if status == "expired":
                records += await tx.messages.list("expired")
    shown = [as_of(m, now) for m in records]
    if status is not None:
        shown = sorted((m for m in shown if m.status == status), key=lambda m: m.id)
    return [info(m) for m in shown]


async def retry(rt: Runtime, message_id: int, ttl: float) -> CorrelationResult:
    """Correlate a buffered message or dead letter again (see ``Engine.retry_message``)."""
    async with rt.store.transaction() as tx:
        message = await tx.messages.get(message_id)
        if message is None:
            raise MessageNotFoundError(message_id)
        await tx.messages.delete(message_id)
        result = await correlate_in_tx(
            rt,
            tx,
            name=message.name,
            key=message.key,
            payload=message.payload or b"null",
            message_id=message.message_id,
            ttl=ttl,
            now=rt.now(),
            dedup=False,
        )
    if result.run_id is not None:
        rt.after_commit()
    return result


async def discard(rt: Runtime, message_id: int) -> None:
    """Delete a buffered message or dead letter for good."""
    async with rt.store.transaction() as tx:
        if await tx.messages.get(message_id) is None:
            raise MessageNotFoundError(message_id)
        await tx.messages.delete(message_id)
