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

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from parkway import _json, limits
from parkway.errors import CorrelationError, InvalidInputError, SerializationError
from parkway.store.base import (
    MESSAGE_TASK,
    MessageRecord,
    NewTask,
    SubscriptionRecord,
    TaskRecord,
    Tx,
)

if TYPE_CHECKING:
    from parkway.engine import Engine

log = logging.getLogger("parkway.messages")

EXPIRED_REASON = "its ttl passed before any run waited for it"


@dataclass(frozen=True)
class CorrelationResult:
    """What ``correlate`` did with a message.

    Attributes:
        outcome: ``"delivered"`` (to a waiting run), ``"started"`` (a new run),
            ``"buffered"`` (kept for a later wait) or ``"duplicate"`` (its
            ``message_id`` was seen already; nothing was done).
        run_id: The run that got it or was started, else ``None``.
    """

    outcome: str
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "run_id": self.run_id}


@dataclass(frozen=True)
class MessageInfo:
    """A buffered message or a dead letter.

    Attributes:
        id: Its id, for ``retry_message`` and ``discard_message``.
        status: ``"buffered"`` or ``"expired"`` (a dead letter).
        reason: Why it is a dead letter.
    """

    id: int
    name: str
    key: str
    payload: Any
    message_id: str | None
    status: str
    reason: str | None
    received_at: datetime
    expires_at: datetime

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["received_at"] = self.received_at.isoformat()
        out["expires_at"] = self.expires_at.isoformat()
        return out


def check(name: Any, key: Any) -> None:
    """Validate a message name and key at the edge."""
    limits.name(name, "message name")
    limits.key(key)


def envelope(name: str, key: str, payload: bytes | None, message_id: str | None) -> bytes:
    return _json.dumps(
        {"name": name, "key": key, "payload": _json.loads(payload), "message_id": message_id}
    )


async def correlate_in_tx(
    engine: Engine,
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
    if message_id is not None and dedup:
        seen = await tx.message_id_seen(message_id)
        if seen is not None and seen >= now - engine.event_retention:
            return CorrelationResult("duplicate")
    # (A wait whose timeout passed first stays, and the message goes to the buffer.)
    wait = await tx.take_message_wait(name, key, now)
    if wait is not None:
        body = envelope(name, key, payload, message_id)
        await tx.add_tasks([NewTask(wait.run_id, now, MESSAGE_TASK, wait.pos, body)])
        await _remember(tx, message_id, now)
        return CorrelationResult("delivered", wait.run_id)
    starter = engine._registry.message_starter(name)
    if starter is not None and await tx.active_run(starter.name, "default", key) is None:
        run_id = await start_message_run(engine, tx, starter, name, key, payload)
        await _remember(tx, message_id, now)
        return CorrelationResult("started", run_id)
    if ttl <= 0:
        raise CorrelationError(
            f"no run waits for message {name!r} with key {key!r} and ttl=0 forbids buffering; "
            "the receiver may not be waiting yet (retry later or give a ttl), may have "
            "completed already, or the key may be wrong"
        )
    await tx.add_message(
        MessageRecord(0, name, key, payload, message_id, "buffered", None, now, now + ttl)
    )
    # Remembered as of its expiry: a repeat is a duplicate for as long as the first
    # copy is buffered, and for event_retention after that.
    await _remember(tx, message_id, now + ttl)
    return CorrelationResult("buffered")


async def _remember(tx: Tx, message_id: str | None, now: float) -> None:
    if message_id is not None:
        await tx.remember_message_id(message_id, now)


async def start_message_run(
    engine: Engine, tx: Tx, wf: Any, name: str, key: str, payload: bytes | None
) -> str:
    """Start ``wf`` for message ``(name, key)``: ids ``msg:<name>:<key>``, then ``:2``, ``:3``."""
    base = f"msg:{name}:{key}"
    run_id, n = base, 1
    while await tx.get_run(run_id) is not None:
        n += 1
        run_id = f"{base}:{n}"
    value = wf.check_input(_json.loads(payload))
    data = _json.dumps(value, f"the input of workflow {wf.name!r}")
    await engine._insert_run(tx, wf, run_id, data, domain="default", subject=key)
    return run_id


async def after_run_ends(engine: Engine, tx: Tx, workflow: str, version: str, key: str | None,
                         now: float) -> None:  # fmt: skip
    """A message-started run ended: the oldest buffered message for its key starts the next."""
    wf = engine._registry.get(workflow, version)
    if wf is None or wf.on_message is None or key is None:
        return
    starter = engine._registry.message_starter(wf.on_message)
    if starter is None or await tx.active_run(starter.name, "default", key) is not None:
        return
    while (message := await tx.oldest_message(wf.on_message, key, now)) is not None:
        try:
            await start_message_run(engine, tx, starter, wf.on_message, key, message.payload)
        except (InvalidInputError, SerializationError) as exc:
            # Rejected input must not block the key: dead-letter it, try the next one.
            reason = f"rejected by workflow {starter.name!r}: {exc}"
            await tx.update_message(message.id, "expired", reason, message.expires_at)
            log.warning("message %r key %r (id %s): %s", message.name, key, message.id, reason)
            continue
        await tx.delete_message(message.id)
        return


async def rebuffer(
    engine: Engine,
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
        tasks = await tx.due_tasks(run_id, float("inf"))
    done: set[int] = set()
    for task in tasks:
        if task.kind != MESSAGE_TASK or task.id in keep or (pos is not None and task.pos != pos):
            continue
        if only is not None and task.id not in only:
            continue
        body = _json.loads(task.payload)
        payload = _json.dumps(body["payload"])
        await tx.add_message(
            MessageRecord(
                0, body["name"], body["key"], payload, body.get("message_id"), "buffered",
                None, now, now + engine.message_ttl,
            )
        )  # fmt: skip
        await tx.delete_tasks([task.id])
        done.add(task.id)
        log.warning(
            "message %r key %r reached run %s after it stopped waiting; buffered again",
            body["name"], body["key"], run_id,
        )  # fmt: skip
    return done


@dataclass
class MessageWait:
    """A ``wait_for_message`` to register at commit, consuming a buffered message first."""

    sub: SubscriptionRecord

    async def register(self, tx: Tx, now: float) -> None:
        sub = self.sub
        holder = await tx.message_wait(sub.name, sub.subject)
        if holder is not None and holder.run_id != sub.run_id:
            # Lost a race to another run: wake this one so its replay raises
            # DuplicateSubscriptionError where the workflow can see it.
            await tx.add_tasks([NewTask(sub.run_id, now, "wake", sub.pos)])
            return
        message = await tx.oldest_message(sub.name, sub.subject, now)
        if message is not None:
            await tx.delete_message(message.id)
            body = envelope(message.name, message.key, message.payload, message.message_id)
            await tx.add_tasks([NewTask(sub.run_id, now, MESSAGE_TASK, sub.pos, body)])
            return
        if holder is None:
            await tx.add_subscription(sub)


def info(message: MessageRecord) -> MessageInfo:
    from parkway.models import _dt

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
    """Turn buffered messages past their TTL into dead letters, with a warning each."""
    expired = await tx.expire_messages(now, EXPIRED_REASON)
    for message in expired:
        log.warning(
            "message %r key %r (id %s) expired unconsumed; kept as a dead letter: "
            "retry it with engine.retry_message(%s) or discard it",
            message.name, message.key, message.id, message.id,
        )  # fmt: skip
    return expired
