"""The memory store's run values and updates (a part of :class:`parkway.store.memory.MemoryTx`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

from parkway.store.base import (
    AttemptRecord,
    UpdateRecord,
)
from parkway.store.memory.state import _copy, _State
from parkway.store.records import UPDATE_PENDING


class _ValuesAndUpdates:
    """Run values and updates (a part of :class:`MemoryTx`)."""

    _s: _State
    _undo: list[Callable[[], object]]

    async def put_values(self, run_id: str, values: Mapping[str, bytes], at: float) -> None:
        before = dict(self._s.values.get(run_id, {}))
        self._s.values.setdefault(run_id, {}).update(values)
        self._undo.append(lambda: self._s.values.__setitem__(run_id, before))

    async def run_values(self, run_ids: Sequence[str]) -> dict[str, dict[str, bytes]]:
        return {r: dict(self._s.values[r]) for r in run_ids if self._s.values.get(r)}

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

    async def add_update(self, update: UpdateRecord) -> UpdateRecord | None:
        key = (update.run_id, update.id)
        existing = self._s.updates.get(key)
        if existing is not None:
            return _copy(existing)
        record = _copy(update)
        record.seq, self._s.next_update = self._s.next_update, self._s.next_update + 1
        self._s.updates[key] = record
        self._undo.append(lambda: self._s.updates.pop(key, None))
        return None

    async def get_update(self, run_id: str, update_id: str) -> UpdateRecord | None:
        found = self._s.updates.get((run_id, update_id))
        return None if found is None else _copy(found)

    async def pending_updates(self, run_id: str) -> list[UpdateRecord]:
        found = [
            _copy(u) for (r, _), u in self._s.updates.items()
            if r == run_id and u.status == UPDATE_PENDING
        ]  # fmt: skip
        return sorted(found, key=lambda u: u.seq)

    async def finish_update(
        self, run_id: str, update_id: str, status: str, result: bytes | None, at: float
    ) -> None:
        key = (run_id, update_id)
        old = self._s.updates.get(key)
        if old is None:
            return
        new = _copy(old)
        new.status, new.result, new.finished_at = status, result, at
        self._s.updates[key] = new
        self._undo.append(lambda: self._s.updates.__setitem__(key, old))
