"""The memory store's schedules (a part of :class:`parkway.store.memory.MemoryTx`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from parkway.store.schedules import ScheduleRecord


class MemorySchedules:
    """Schedules in a dict; every change undone if the transaction fails. (The store's
    one lock serialises transactions, so a due schedule is never another's.)"""

    _schedules: dict[str, ScheduleRecord]
    _undo: list[Callable[[], object]]

    def _keep(self, schedule_id: str) -> None:
        before = self._schedules.get(schedule_id)
        if before is None:
            self._undo.append(lambda: self._schedules.pop(schedule_id, None))
        else:
            self._undo.append(lambda: self._schedules.__setitem__(schedule_id, before))

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        found = self._schedules.get(schedule_id)
        return None if found is None else dataclasses.replace(found)

    async def put_schedule(self, record: ScheduleRecord) -> None:
        self._keep(record.id)
        self._schedules[record.id] = dataclasses.replace(record)

    async def delete_schedule(self, schedule_id: str) -> bool:
        if schedule_id not in self._schedules:
            return False
        self._keep(schedule_id)
        del self._schedules[schedule_id]
        return True

    async def list_schedules(self) -> list[ScheduleRecord]:
        return [dataclasses.replace(self._schedules[k]) for k in sorted(self._schedules)]

    async def due_schedules(self, now: float, limit: int) -> list[ScheduleRecord]:
        due = [
            s for s in self._schedules.values()
            if not s.paused and s.next_at is not None and s.next_at <= now
        ]  # fmt: skip
        due.sort(key=lambda s: (s.next_at, s.id))
        return [dataclasses.replace(s) for s in due[:limit]]

    async def next_schedule_at(self) -> float | None:
        times = [
            s.next_at for s in self._schedules.values() if not s.paused and s.next_at is not None
        ]
        return min(times, default=None)
