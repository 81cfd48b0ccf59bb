"""A transaction's updates: requests sent to a run and their answers (``tx.updates``)."""

from __future__ import annotations

from typing import Protocol

from parkway.store.records import (
    UpdateRecord,
)


class Updates(Protocol):
    """Updates inside one transaction."""

    async def add(self, update: UpdateRecord) -> UpdateRecord | None:
        """Record an update sent to a run, unless one with its ``(run_id, id)`` exists:
        then change nothing and return that one."""
        ...

    async def get(self, run_id: str, update_id: str) -> UpdateRecord | None: ...

    async def pending(self, run_id: str) -> list[UpdateRecord]:
        """The run's updates not handled yet, in the order they arrived."""
        ...

    async def finish(
        self, run_id: str, update_id: str, status: str, result: bytes | None, at: float
    ) -> None:
        """Record what became of a pending update (see :class:`UpdateRecord`)."""
        ...
