"""The event envelope, and what a publish or a correlate did (their JSON form is
derived from their fields: :mod:`parkway.models.wire`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from parkway import limits
from parkway.durations import Duration
from parkway.models.wire import Wire, wire


@dataclass
class Event(Wire):
    """Something that happened, named, about one subject of one domain.

    Args:
        name: What happened (``"order.created"``).
        payload: JSON-serialisable data.
        id: A unique id; a repeat within ``event_retention`` is a duplicate.
        domain: The event's domain; wins over the engine's ``event_extractor``.
        subject: The business entity it is about (``"product:456"``).
    """

    name: str
    payload: Any = None
    id: str | None = field(default=None, kw_only=True)
    domain: str | None = field(default=None, kw_only=True)
    subject: str | None = field(default=None, kw_only=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        """Rebuild from :meth:`to_dict` output."""
        return cls(
            data["name"],
            data.get("payload"),
            id=data.get("id"),
            domain=data.get("domain"),
            subject=data.get("subject"),
        )


@dataclass(frozen=True)
class Delivery(Wire):
    """An event copy on its way to one parked run.

    Attributes:
        run_id: The run it resumes.
        wait: Which wait of that run it is for (``wait_for_event:<name>#<position>``).
        source_subject: The subject the event was published about.
    """

    run_id: str
    wait: str
    source_subject: str | None


@dataclass(frozen=True)
class PublishResult(Wire):
    """What one publish did.

    Attributes:
        started: Ids of the runs it started.
        resumed: Ids of the parked runs it resumes.
        deliveries: One :class:`Delivery` per resumed wait.
        duplicate: The event id was seen within ``event_retention``; nothing was done.
        touched: Runs started plus runs resumed.
    """

    started: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    duplicate: bool = False
    touched: int = 0
    event_id: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PublishResult:
        return cls(
            started=list(data.get("started", [])),
            resumed=list(data.get("resumed", [])),
            deliveries=[Delivery(**d) for d in data.get("deliveries", [])],
            duplicate=bool(data.get("duplicate")),
            touched=int(data.get("touched", 0)),
            event_id=data.get("event_id"),
        )


@dataclass(frozen=True)
class SubscriptionInfo(Wire):
    """A live subscription: one parked run waiting for an event or a message.

    Attributes:
        run_id: The waiting run.
        kind: ``"event"`` or ``"message"``.
        domain: The domain it listens in.
        name: The event or message name.
        subject: The subject it listens to (``"*"`` for any); ``None`` for messages.
        match: The payload fields it requires, or ``None``.
        key: The correlation key (messages), else ``None``.
        expires_at: When the safety-net TTL removes it.
    """

    run_id: str
    kind: str = field(metadata=wire(choices=("event", "message")))
    domain: str
    name: str
    subject: str | None
    match: dict[str, Any] | None
    key: str | None
    expires_at: datetime

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


@dataclass(frozen=True)
class CancelOn:
    """Cancel a run (as ``engine.cancel``) when ``event`` is published while it is active.

    Args:
        event: The event name.
        match: Payload fields the event must deep-equal: a dict, or a function of
            the run's input returning the dict (called once, when the run starts).
            ``None``: any payload.
        subject: Whose events: ``None``, the run's own subject (any subject if it
            has none); ``"*"``, any subject of its domain; or another subject.
    """

    event: str
    match: dict[str, Any] | Callable[[Any], dict[str, Any] | None] | None = field(
        default=None, kw_only=True
    )
    subject: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class Debounce:
    """Start one run per quiet window, with the last payload.

    Args:
        window: Quiet time after the last event before the run starts.
        key: A payload field: debounce separately per value of it.
        max_wait: Start at the latest this long after the first event, even if
            events keep coming.
    """

    window: Duration
    key: str | None = None
    max_wait: Duration | None = None


@dataclass(frozen=True)
class Batch:
    """Start one run per batch: ``{"events": [payloads in publish order]}``.

    Args:
        max_size: Start as soon as this many events are collected.
        within: Start at the latest this long after the batch's first event.
        key: A payload field: batch separately per value of it.
    """

    max_size: int
    within: Duration
    key: str | None = None


@dataclass(frozen=True)
class CorrelationResult(Wire):
    """What ``correlate`` did with a message.

    Attributes:
        outcome: ``"delivered"`` (to a waiting run), ``"started"`` (a new run),
            ``"buffered"`` (kept for a later wait) or ``"duplicate"`` (its
            ``message_id`` was seen already; nothing was done).
        run_id: The run that got it or was started, else ``None``.
        id: ``"buffered"`` only: the id of the buffered message (for
            ``engine.retry_message``, ``engine.discard_message``; a retried message
            buffered again has a new one). Not in :meth:`to_dict`, whose shape is
            the documented one.
    """

    outcome: str = field(metadata=wire(choices=("delivered", "started", "buffered", "duplicate")))
    run_id: str | None = None
    id: int | None = field(default=None, compare=False, metadata=wire(hidden=True))


@dataclass(frozen=True)
class MessageInfo(Wire):
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
    status: str = field(metadata=wire(choices=("buffered", "expired")))
    reason: str | None
    received_at: datetime
    expires_at: datetime

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


def check_message(name: Any, key: Any) -> tuple[str, str]:
    """Validate a message name and key at the edge (see :mod:`parkway.limits`);
    they come back as plain strings."""
    return limits.name(name, "message name"), limits.key(key)
