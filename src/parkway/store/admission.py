"""A transaction's admission rows (``tx.admission``): concurrency and rate limits.

A slot row per (workflow, key) with its counters, each limited run's entry
(queued, or holding a slot), and each rate-limited key's ring of start times
(see :mod:`parkway.core.admission`).
"""

from __future__ import annotations

from typing import Protocol

from parkway.store.records import (
    FlowEntry,
    FlowSlot,
)


class Admission(Protocol):
    """Admission inside one transaction."""

    async def slot(self, workflow: str, key: str) -> FlowSlot:
        """The key's counters, its row created if missing and locked until the
        transaction ends (PostgreSQL: a row lock; SQLite and memory: their one
        writer), so no other transaction changes that key meanwhile."""
        ...

    async def put_slot(self, workflow: str, key: str, slot: FlowSlot) -> None:
        """Store the key's counters (its row was read by ``tx.admission.slot``)."""
        ...

    async def enter(
        self, run_id: str, workflow: str, key: str, priority: int, *, queued: bool
    ) -> None:
        """Record ``run_id`` under the key: ``queued`` (waiting for a slot) or holding
        one. Arrival order is the store's (a sequence)."""
        ...

    async def entry(self, run_id: str) -> FlowEntry | None:
        """The run's entry, if it is under a limit (a plain read: no lock)."""
        ...

    async def leave(self, run_id: str) -> FlowEntry | None:
        """Remove the run's entry and return it as it was (``None``: it had none), read
        under the key's lock (``tx.admission.slot``, taken first): an entry read before
        it may have been dequeued since."""
        ...

    async def next(self, workflow: str, key: str) -> str | None:
        """The key's queued run to start next (highest priority, then first arrived),
        now marked as holding a slot; ``None`` if none waits. An index lookup, whatever
        the length of the queue."""
        ...

    async def oldest(self, workflow: str, key: str) -> str | None:
        """The key's run holding a slot that arrived first, if any (an index lookup)."""
        ...

    async def rate_mark(self, workflow: str, key: str, slot: int) -> float | None:
        """The start time kept in place ``slot`` of the key's ring (``None``: empty)."""
        ...

    async def put_rate_mark(self, workflow: str, key: str, slot: int, at: float) -> None: ...
