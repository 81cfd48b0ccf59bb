"""The engine's client calls that publish: events published, messages correlated, the
waits they find (subscriptions), and the messages buffered or dead."""

from __future__ import annotations

from typing import Any

from parkway import _json, limits
from parkway.client.base import State
from parkway.core import messages as core_messages
from parkway.core import publishing
from parkway.durations import Duration, to_seconds
from parkway.errors import InvalidArgumentError, shown
from parkway.events import (
    CorrelationResult,
    Event,
    MessageInfo,
    PublishResult,
    SubscriptionInfo,
    check_message,
)
from parkway.models import _dt
from parkway.store.vocabulary import EntryKind


async def publish(
    state: State,
    name: str | Event,
    payload: Any = None,
    *,
    id: str | None = None,
    domain: str | None = None,
    subject: str | None = None,
) -> PublishResult:
    """Publish an event: start its subscribed workflows, resume its matching waiters.

    All of it is one transaction. Pass a name and fields, or an :class:`Event`.

    Raises:
        InvalidEventError: A field is malformed (the message names it).
        SerializationError: The payload is not JSON-serialisable.
        RoutingError: The engine's event extractor failed on this event.
    """
    state.require_open()
    if isinstance(name, Event):
        event = name
    else:
        event = Event(name, payload, id=id, domain=domain, subject=subject)
    limits.optional_identifier(event.id, "event id", field="id")
    event = publishing.checked(event)
    published = publishing.publish(state.rt, event)
    return await state.rt.telemetry.call("publish", published, name=event.name)


async def subscriptions(
    state: State, run_id: str | None = None, name: str | None = None
) -> list[SubscriptionInfo]:
    """Live subscriptions (one per waiting run), oldest first."""
    state.require_open()
    run_id = limits.optional_reference(run_id, "run id", field="run_id")
    name = limits.optional_reference(name, "name", field="name")
    async with state.rt.store.transaction(readonly=True) as tx:
        subs = await tx.subscriptions.list(run_id=run_id, name=name)
    out = []
    for sub in subs:
        is_message = sub.kind == EntryKind.MESSAGE
        out.append(
            SubscriptionInfo(
                run_id=sub.run_id,
                kind=sub.kind,
                domain=sub.domain,
                name=sub.name,
                subject=None if is_message else sub.subject,
                match=_json.loads(sub.match),
                key=sub.subject if is_message else None,
                expires_at=_dt(sub.expires_at),
            )
        )
    return out


async def correlate(
    state: State,
    name: str,
    key: str,
    payload: Any = None,
    *,
    message_id: str | None = None,
    ttl: Duration | None = None,
) -> CorrelationResult:
    """Hand a message to exactly one receiver, chosen by ``(name, key)``.

    The run waiting on ``wait_for_message(name, key)`` gets it; else a workflow
    declared with ``on_message=name`` starts a run for the key; else it is
    buffered for ``ttl`` (default ``message_ttl``) for the next such wait.

    Raises:
        CorrelationError: ``ttl=0`` and no receiver now.
        InvalidMessageError: ``name``, ``key`` or ``message_id`` is malformed.
        InvalidDurationError: ``ttl`` is malformed.
    """
    state.require_open()
    name, key = check_message(name, key)
    message_id = limits.optional_identifier(message_id, "message_id", field="message_id")
    seconds = state.rt.settings.message_ttl if ttl is None else to_seconds(ttl, "ttl")
    data = _json.dumps(payload, f"the payload of message {shown(name)}")
    correlated = core_messages.correlate(
        state.rt, name, key, data, message_id=message_id, ttl=seconds
    )
    return await state.rt.telemetry.call("correlate", correlated, name=name)


async def messages(state: State, status: str | None = None) -> list[MessageInfo]:
    """Buffered messages and dead letters (``status="expired"``), oldest first."""
    state.require_open()
    if status is not None and status not in ("buffered", "expired"):
        raise InvalidArgumentError(
            f"message status must be 'buffered' or 'expired', got {shown(status)}"
        )
    return await core_messages.listing(state.rt, status)


async def retry_message(state: State, id: int, *, ttl: Duration | None = None) -> CorrelationResult:
    """Correlate a buffered message or dead letter again (an operator's action).

    Without a receiver it is buffered again for ``ttl``; with ``ttl=0`` and
    no receiver, ``CorrelationError`` is raised and the message stays as it was.

    Raises:
        MessageNotFoundError: No buffered message or dead letter has that id.
    """
    state.require_open()
    id = limits.message_id(id)
    seconds = state.rt.settings.message_ttl if ttl is None else to_seconds(ttl, "ttl")
    return await core_messages.retry(state.rt, id, seconds)


async def discard_message(state: State, id: int) -> None:
    """Delete a buffered message or dead letter for good.

    Raises:
        MessageNotFoundError: No buffered message or dead letter has that id.
    """
    state.require_open()
    id = limits.message_id(id)
    await core_messages.discard(state.rt, id)
