"""A SQLite transaction's journals (``tx.journal``): each run's entries, and its steps'
failed attempts."""

from __future__ import annotations

from collections.abc import Sequence

from parkway.store.base import AttemptRecord, JournalEntry
from parkway.store.sqlite.statements import Q
from parkway.store.sqlite.transport import Part


class SQLiteJournal(Part):
    """Journals' statements on the transaction's connection."""

    async def read(self, run_id: str) -> list[JournalEntry]:
        return [JournalEntry(*row) for row in self._c.execute(Q["journal"], (run_id,))]

    async def put(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        self._c.executemany(
            Q["put_journal"],
            [
                (run_id, e.pos, e.kind, e.name, e.state, e.value, e.deadline, e.at, e.branch, e.seq)
                for e in entries
            ],
        )

    async def outline(self, run_id: str) -> list[tuple[int, str]]:
        return [(pos, state) for pos, state in self._c.execute(Q["journal_outline"], (run_id,))]

    async def copy(self, source_id: str, run_id: str, before: int | None) -> None:
        self._c.execute(Q["copy_journal"], (run_id, source_id, before))

    async def clear(self, run_id: str) -> None:
        self._c.execute(Q["clear_journal"], (run_id,))
        self._c.execute(Q["delete_run_attempts"], (run_id,))

    async def add_attempts(self, attempts: Sequence[AttemptRecord]) -> None:
        self._c.executemany(
            Q["add_attempts"],
            [
                (a.run_id, a.pos, a.step, a.attempt, a.error, a.started_at, a.ended_at)
                for a in attempts
            ],
        )

    async def attempts(self, run_id: str) -> list[AttemptRecord]:
        return [AttemptRecord(*row) for row in self._c.execute(Q["attempts"], (run_id,))]
