"""The PostgreSQL store's schedules (a part of :class:`parkway.store.postgres.tx.PostgresTx`).

The firing transaction locks the due rows it takes (``FOR UPDATE SKIP LOCKED``):
a second worker firing at the same moment skips them rather than waiting, and
once the first commits their ``next_at`` has moved past the tick, so no tick is
started twice.
"""

from __future__ import annotations

from parkway.store.postgres.runs import RunOps
from parkway.store.schedules import ScheduleRecord, schedule_record, schedule_row
from parkway.store.sqltext import load_queries

S = load_queries(__package__, "schedules.sql")


class ScheduleOps(RunOps):
    """Schedules' statements over the transaction's transport."""

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        query = S["get_schedule" if self._ro else "get_schedule_locked"]
        row = await self._one(query, (schedule_id,))
        return None if row is None else schedule_record(row)

    async def put_schedule(self, record: ScheduleRecord) -> None:
        await self._write(S["put_schedule"], schedule_row(record))

    async def delete_schedule(self, schedule_id: str) -> bool:
        return await self._one(S["delete_schedule"], (schedule_id,)) is not None

    async def list_schedules(self) -> list[ScheduleRecord]:
        return [schedule_record(row) for row in await self._all(S["list_schedules"])]

    async def due_schedules(self, now: float, limit: int) -> list[ScheduleRecord]:
        rows = await self._all(S["due_schedules"], (now, limit))
        return [schedule_record(row) for row in rows]

    async def next_schedule_at(self) -> float | None:
        row = await self._one(S["next_schedule_at"])
        return None if row is None or row[0] is None else float(row[0])
