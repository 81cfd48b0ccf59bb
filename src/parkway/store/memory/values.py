"""The memory store's run values and updates (``tx.values``, ``tx.updates``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from parkway.store.base import UpdateRecord
from parkway.store.memory.state import _copy, _Part
from parkway.store.records import UPDATE_PENDING


class MemoryValues(_Part):
    """Run values by run, then key."""

    async def put(self, run_id: str, values: Mapping[str, bytes], at: float) -> None:
        before = dict(self._s.values.get(run_id, {}))
        self._s.values.setdefault(run_id, {}).update(values)
        self._undo.append(lambda: self._s.values.__setitem__(run_id, before))

    async def of_runs(self, run_ids: Sequence[str]) -> dict[str, dict[str, bytes]]:
        return {r: dict(self._s.values[r]) for r in run_ids if self._s.values.get(r)}


class MemoryUpdates(_Part):
    """Updates by (run, id), numbered in the order they arrived."""

    async def add(self, update: UpdateRecord) -> UpdateRecord | None:
        key = (update.run_id, update.id)
        existing = self._s.updates.get(key)
        if existing is not None:
            return _copy(existing)
        record = _copy(update)
        record.seq, self._s.next_update = self._s.next_update, self._s.next_update + 1
        self._s.updates[key] = record
        self._undo.append(lambda: self._s.updates.pop(key, None))
        return None

    async def get(self, run_id: str, update_id: str) -> UpdateRecord | None:
        found = self._s.updates.get((run_id, update_id))
        return None if found is None else _copy(found)

    async def pending(self, run_id: str) -> list[UpdateRecord]:
        found = [
            _copy(u)
            for (r, _), u in self._s.updates.items()
            if r == run_id and u.status == UPDATE_PENDING
        ]
        return sorted(found, key=lambda u: u.seq)

    async def finish(
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
