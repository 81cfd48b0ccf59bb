"""The memory store's journals (``tx.journal``): each run's entries, and its steps'
failed attempts."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from parkway.store.base import AttemptRecord, JournalEntry
from parkway.store.memory.state import _copy, _Part, _restore


class MemoryJournal(_Part):
    """Journals by run, then position; every change undone with the transaction."""

    async def read(self, run_id: str) -> list[JournalEntry]:
        entries = self._s.journal.get(run_id, {})
        return [_copy(entries[p]) for p in sorted(entries)]

    async def put(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        book = self._s.journal.setdefault(run_id, {})
        for entry in entries:
            previous = book.get(entry.pos)
            book[entry.pos] = _copy(entry)
            self._undo.append(_restore(book, entry.pos, previous))

    async def outline(self, run_id: str) -> list[tuple[int, str]]:
        entries = self._s.journal.get(run_id, {})
        return [(p, entries[p].state) for p in sorted(entries)]

    async def copy(self, source_id: str, run_id: str, before: int | None) -> None:
        await self.put(
            run_id,
            [
                e
                for e in await self.read(source_id)
                if (before is None or e.pos < before) and e.state != "pending"
            ],
        )

    async def clear(self, run_id: str) -> None:
        old = self._s.journal.pop(run_id, None)
        if old is not None:
            self._undo.append(lambda: self._s.journal.__setitem__(run_id, old))
        attempts = self._s.attempts.pop(run_id, None)
        if attempts is not None:
            self._undo.append(lambda: self._s.attempts.__setitem__(run_id, attempts))

    async def add_attempts(self, attempts: Sequence[AttemptRecord]) -> None:
        for record in attempts:
            book = self._s.attempts.setdefault(record.run_id, {})
            key = (record.pos, record.attempt)
            if key not in book:
                book[key] = record
                self._undo.append(functools.partial(book.pop, key, None))

    async def attempts(self, run_id: str) -> list[AttemptRecord]:
        book = self._s.attempts.get(run_id, {})
        return [book[key] for key in sorted(book)]
