"""A transaction's events (``tx.events``): the published events kept for
de-duplication, accumulation and browsing, and what each started and resumed."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from parkway.store.fleet import EventLink
from parkway.store.records import (
    EventDelivery,
    EventRecord,
)


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which events ``Events.list`` returns, newest first."""

    name: str | None = None
    subject: str | None = None
    since: float | None = None
    limit: int = 100


class Events(Protocol):
    """Events inside one transaction."""

    async def record(
        self,
        event: EventRecord,
        fresh_after: float,
        *,
        digest: Callable[[str], str | None] | None = None,
    ) -> EventRecord | None:
        """Record the event, unless one with its id was published at or after
        ``fresh_after``: then change nothing and return that one. An older one
        with its id is replaced (its id is free again).

        ``digest(shape)``: the event payload's digest under a match shape (see
        :mod:`parkway.matching`), so a store may read ahead the event waits that
        the publish looks for next (``tx.subscriptions.find``).
        """
        ...

    async def get(self, event_id: str) -> EventRecord | None: ...

    async def insert(self, event: EventRecord) -> None: ...

    async def delete(self, event_id: str) -> None: ...

    async def since(self, domain: str, name: str, since: float) -> list[EventRecord]: ...

    async def prune(self, before: float) -> int: ...

    async def list(
        self, query: EventFilter
    ) -> builtins.list[tuple[str, str, str, str | None, bytes | None, float]]:
        """Events (``id, name, domain, subject, payload, published_at``), newest
        first, of that name and subject (``None``: any), published at or after
        ``since``."""
        ...

    async def link(self, event_id: str, at: float, how: str, run_ids: Sequence[str]) -> None:
        """Record that event ``event_id`` (published at ``at``) started or resumed
        ``run_ids``; links go with their event (``tx.events.prune``)."""
        ...

    async def links(self, event_ids: Sequence[str]) -> builtins.list[EventLink]:
        """The runs those events started and resumed, in the order linked."""
        ...


class FusedEvents(Events, Protocol):
    """The events of a store with the ``"fused"`` capability
    (see :class:`parkway.store.base.FusedTx`)."""

    async def deliver(
        self,
        event: EventRecord,
        payload: Any,
        envelope: bytes,
        *,
        fresh_after: float,
        owner: str | None = None,
        wall_now: float = 0.0,
        lease_until: float = 0.0,
    ) -> EventDelivery:
        """A publish that only resumes waits (no workflow starts for it).

        Unless the event's id was seen at or after ``fresh_after`` (then
        ``"duplicate"``, nothing written), record it as ``tx.events.record``
        would and take every event wait its ``payload`` (``event.payload``
        decoded) matches, as :func:`parkway.core.publishing.take_event_waits` does:
        each gets a delivery task carrying ``envelope`` due at ``event.published_at``. With
        ``owner``, also lease the first run to it as ``tx.runs.lease`` would.
        A store may decline (say, because the waits' match shapes are not the
        ones it expected), writing nothing. What it did may be known only once
        the transaction has committed, so that a store can send all of it with
        the ``COMMIT``.
        """
        ...
