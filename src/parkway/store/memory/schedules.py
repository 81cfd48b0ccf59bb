"""The memory store's schedules (``tx.schedules``)."""

from __future__ import annotations

import builtins
import dataclasses

from parkway.store.memory.state import _Part
from parkway.store.schedules import ScheduleRecord


class MemorySchedules(_Part):
    """Schedules in a dict; every change undone if the transaction fails. (The store's
    one lock serialises transactions, so a due schedule is never another's.)"""

    def _keep(self, schedule_id: str) -> None:
        schedules = self._s.schedules
        before = schedules.get(schedule_id)
        if before is None:
            self._undo.append(lambda: schedules.pop(schedule_id, None))
        else:
            self._undo.append(lambda: schedules.__setitem__(schedule_id, before))

    async def get(self, schedule_id: str) -> ScheduleRecord | None:
        found = self._s.schedules.get(schedule_id)
        return None if found is None else dataclasses.replace(found)

    async def put(self, record: ScheduleRecord) -> None:
        self._keep(record.id)
        self._s.schedules[record.id] = dataclasses.replace(record)

    async def delete(self, schedule_id: str) -> bool:
        if schedule_id not in self._s.schedules:
            return False
        self._keep(schedule_id)
        del self._s.schedules[schedule_id]
        return True

    async def list(self) -> builtins.list[ScheduleRecord]:
        schedules = self._s.schedules
        return [dataclasses.replace(schedules[k]) for k in sorted(schedules)]

    async def due(self, now: float, limit: int) -> builtins.list[ScheduleRecord]:
        due = [
            s
            for s in self._s.schedules.values()
            if not s.paused and s.next_at is not None and s.next_at <= now
        ]
        due.sort(key=lambda s: (s.next_at, s.id))
        return [dataclasses.replace(s) for s in due[:limit]]

    async def next_at(self) -> float | None:
        times = [
            s.next_at for s in self._s.schedules.values() if not s.paused and s.next_at is not None
        ]
        return min(times, default=None)
