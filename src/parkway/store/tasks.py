"""A transaction's tasks: what is due for a run, and when (``tx.tasks``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from parkway.store.records import (
    NewTask,
    TaskRecord,
)


class Tasks(Protocol):
    """Tasks inside one transaction."""

    async def add(self, tasks: Sequence[NewTask]) -> None: ...

    async def due(self, run_id: str, now: float) -> list[TaskRecord]: ...

    async def delete(self, ids: Sequence[int]) -> None: ...

    async def delete_waits(
        self, run_id: str, pos: int | None = None, *, keep: Sequence[int] = ()
    ) -> None:
        """Delete the run's timer and delivery tasks (those aimed at a wait), or one wait's.

        Tasks whose id is in ``keep`` stay.
        """
        ...

    async def delete_run(self, run_id: str) -> None: ...

    async def defer(self, run_id: str, ids: Sequence[int]) -> None:
        """Move the run's tasks ``ids`` to the due time of its start task, or to
        :data:`DEFERRED` if it has none (it is queued): the run is not admitted yet."""
        ...

    async def wake_deferred(self, run_id: str, at: float) -> None:
        """The run's tasks at :data:`DEFERRED` become due at ``at`` (it is admitted)."""
        ...
