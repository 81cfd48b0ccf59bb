"""The store's part of flow control (a part of the :class:`parkway.store.base.Tx`
protocol): a slot row per (workflow, key) with its counters, each limited run's
entry (queued, or holding a slot), and each rate-limited key's ring of start times.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from parkway.store.records import FlowEntry, FlowSlot


class FlowTx(Protocol):
    """Admission's operations inside a transaction (see :mod:`parkway.core.admission`)."""

    # A key's slot row is the lock every change of that key's runs takes first
    # (flow_slot), so starts, ends and dequeues of one key are serialised across
    # processes while other keys go on in parallel.

    async def flow_slot(self, workflow: str, key: str) -> FlowSlot:
        """The key's counters, its row created if missing and locked until the
        transaction ends (PostgreSQL: a row lock; SQLite and memory: their one
        writer), so no other transaction changes that key meanwhile."""
        ...

    async def put_flow_slot(self, workflow: str, key: str, slot: FlowSlot) -> None:
        """Store the key's counters (its row was read by :meth:`flow_slot`)."""
        ...

    async def flow_enter(
        self, run_id: str, workflow: str, key: str, priority: int, *, queued: bool
    ) -> None:
        """Record ``run_id`` under the key: ``queued`` (waiting for a slot) or holding
        one. Arrival order is the store's (a sequence)."""
        ...

    async def flow_entry(self, run_id: str) -> FlowEntry | None:
        """The run's entry, if it is under a limit (a plain read: no lock)."""
        ...

    async def flow_leave(self, run_id: str) -> FlowEntry | None:
        """Remove the run's entry and return it as it was (``None``: it had none), read
        under the key's lock (:meth:`flow_slot`, taken first): an entry read before
        it may have been dequeued since."""
        ...

    async def flow_next(self, workflow: str, key: str) -> str | None:
        """The key's queued run to start next (highest priority, then first arrived),
        now marked as holding a slot; ``None`` if none waits. An index lookup, whatever
        the length of the queue."""
        ...

    async def flow_oldest(self, workflow: str, key: str) -> str | None:
        """The key's run holding a slot that arrived first, if any (an index lookup)."""
        ...

    async def rate_mark(self, workflow: str, key: str, slot: int) -> float | None:
        """The start time kept in place ``slot`` of the key's ring (``None``: empty)."""
        ...

    async def put_rate_mark(self, workflow: str, key: str, slot: int, at: float) -> None: ...
    async def defer_tasks(self, run_id: str, ids: Sequence[int]) -> None:
        """Move the run's tasks ``ids`` to the due time of its start task, or to
        :data:`DEFERRED` if it has none (it is queued): the run is not admitted yet."""
        ...

    async def wake_deferred(self, run_id: str, at: float) -> None:
        """The run's tasks at :data:`DEFERRED` become due at ``at`` (it is admitted)."""
        ...
