"""The PostgreSQL store's schedules (``tx.schedules``).

The firing transaction locks the due rows it takes (``FOR UPDATE SKIP LOCKED``):
a second worker firing at the same moment skips them rather than waiting, and
once the first commits their ``next_at`` has moved past the tick, so no tick is
started twice.
"""

from __future__ import annotations

import builtins

from parkway.store.postgres.transport import Part
from parkway.store.schedules import ScheduleRecord, schedule_record, schedule_row
from parkway.store.sqltext import load_queries

S = load_queries(__package__, "schedules.sql")


class PostgresSchedules(Part):
    """Schedules' statements over the transaction's transport."""

    async def get(self, schedule_id: str) -> ScheduleRecord | None:
        t = self._t
        row = await t._one(S["get_schedule" if t._ro else "get_schedule_locked"], (schedule_id,))
        return None if row is None else schedule_record(row)

    async def put(self, record: ScheduleRecord) -> None:
        await self._t._write(S["put_schedule"], schedule_row(record))

    async def delete(self, schedule_id: str) -> bool:
        return await self._t._one(S["delete_schedule"], (schedule_id,)) is not None

    async def list(self) -> builtins.list[ScheduleRecord]:
        return [schedule_record(row) for row in await self._t._all(S["list_schedules"])]

    async def due(self, now: float, limit: int) -> builtins.list[ScheduleRecord]:
        rows = await self._t._all(S["due_schedules"], (now, limit))
        return [schedule_record(row) for row in rows]

    async def next_at(self) -> float | None:
        row = await self._t._one(S["next_schedule_at"])
        return None if row is None or row[0] is None else float(row[0])
