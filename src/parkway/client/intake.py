"""The engine's client operations on events and messages: publish, correlate, dead letters."""

from __future__ import annotations

from typing import Any

from parkway import _json, limits
from parkway.client.base import Facade
from parkway.core import housekeeping, publishing
from parkway.core import messages as core_messages
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
from parkway.store.vocabulary import WaitKind


class IntakeOperations(Facade):
    """Publishing events, correlating messages, and the subscriptions and dead letters."""

    async def publish(
        self,
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
        self._require_open()
        if isinstance(name, Event):
            event = name
        else:
            event = Event(name, payload, id=id, domain=domain, subject=subject)
        limits.optional_identifier(event.id, "event id", field="id")
        event = publishing.checked(event)
        published = publishing.publish(self._rt, event)
        return await self._rt.telemetry.call("publish", published, name=event.name)

    async def subscriptions(
        self, run_id: str | None = None, name: str | None = None
    ) -> list[SubscriptionInfo]:
        """Live subscriptions (one per waiting run), oldest first."""
        self._require_open()
        run_id = limits.optional_reference(run_id, "run id", field="run_id")
        name = limits.optional_reference(name, "name", field="name")
        async with self._rt.store.transaction(readonly=True) as tx:
            subs = await tx.list_subscriptions(run_id=run_id, name=name)
        out = []
        for sub in subs:
            is_message = sub.kind == WaitKind.MESSAGE
            out.append(
                SubscriptionInfo(
                    run_id=sub.run_id, kind=sub.kind, domain=sub.domain, name=sub.name,
                    subject=None if is_message else sub.subject,
                    match=_json.loads(sub.match), key=sub.subject if is_message else None,
                    expires_at=_dt(sub.expires_at),
                )
            )  # fmt: skip
        return out

    async def correlate(
        self,
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
        self._require_open()
        name, key = check_message(name, key)
        message_id = limits.optional_identifier(message_id, "message_id", field="message_id")
        seconds = self._rt.settings.message_ttl if ttl is None else to_seconds(ttl, "ttl")
        data = _json.dumps(payload, f"the payload of message {shown(name)}")
        correlated = core_messages.correlate(
            self._rt, name, key, data, message_id=message_id, ttl=seconds
        )
        return await self._rt.telemetry.call("correlate", correlated, name=name)

    async def messages(self, status: str | None = None) -> list[MessageInfo]:
        """Buffered messages and dead letters (``status="expired"``), oldest first."""
        self._require_open()
        if status is not None and status not in ("buffered", "expired"):
            raise InvalidArgumentError(
                f"message status must be 'buffered' or 'expired', got {shown(status)}"
            )
        return await core_messages.listing(self._rt, status)

    async def retry_message(self, id: int, *, ttl: Duration | None = None) -> CorrelationResult:
        """Correlate a buffered message or dead letter again (an operator's action).

        Without a receiver it is buffered again for ``ttl``; with ``ttl=0`` and
        no receiver, ``CorrelationError`` is raised and the message stays as it was.

        Raises:
            MessageNotFoundError: No buffered message or dead letter has that id.
        """
        self._require_open()
        id = limits.message_id(id)
        seconds = self._rt.settings.message_ttl if ttl is None else to_seconds(ttl, "ttl")
        return await core_messages.retry(self._rt, id, seconds)

    async def discard_message(self, id: int) -> None:
        """Delete a buffered message or dead letter for good.

        Raises:
            MessageNotFoundError: No buffered message or dead letter has that id.
        """
        self._require_open()
        id = limits.message_id(id)
        await core_messages.discard(self._rt, id)

    async def sweep(self) -> int:
        """Sweep now: expired subscriptions, old ids, expired messages (the worker
        does it every minute of engine time). Returns the subscriptions dropped."""
        self._require_open()
        return await housekeeping.sweep(self._rt)
