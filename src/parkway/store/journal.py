"""A transaction's journals: each run's entries, and its steps' failed attempts (``tx.journal``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from parkway.store.records import (
    AttemptRecord,
    JournalEntry,
)


class Journal(Protocol):
    """Journals inside one transaction."""

    async def read(self, run_id: str) -> list[JournalEntry]: ...

    async def put(self, run_id: str, entries: Sequence[JournalEntry]) -> None: ...

    async def clear(self, run_id: str) -> None: ...

    async def outline(self, run_id: str) -> list[tuple[int, str]]:
        """The run's journal as ``(pos, state)`` pairs in position order: what a fork
        decides on, without reading any entry's value."""
        ...

    async def copy(self, source_id: str, run_id: str, before: int | None) -> None:
        """Copy ``source_id``'s journal entries at positions below ``before`` (``None``:
        all) to ``run_id``, but the pending ones (an ``engine.fork``), in the store."""
        ...

    async def add_attempts(self, attempts: Sequence[AttemptRecord]) -> None:
        """Keep failed attempts of steps (one already kept, by run, position and
        attempt, is left as it is). ``tx.journal.clear`` and ``tx.runs.delete`` drop them."""
        ...

    async def attempts(self, run_id: str) -> list[AttemptRecord]:
        """The failed attempts kept for ``run_id``, by position then attempt."""
        ...
