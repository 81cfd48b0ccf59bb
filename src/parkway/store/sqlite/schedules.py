"""The SQLite store's schedules (``tx.schedules``).

A writing transaction holds SQLite's write lock from its ``BEGIN IMMEDIATE``, so
the schedules it reads as due are no other transaction's until it commits: two
workers on one file never fire one tick twice.
"""

from __future__ import annotations

import builtins

from parkway.store.schedules import ScheduleRecord, schedule_record, schedule_row
from parkway.store.sqlite.transport import Part
from parkway.store.sqltext import load_queries

S = load_queries(__package__, "schedules.sql")


class SQLiteSchedules(Part):
    """Schedules' statements on the transaction's connection."""

    async def get(self, schedule_id: str) -> ScheduleRecord | None:
        row = self._c.execute(S["get_schedule"], (schedule_id,)).fetchone()
        return None if row is None else schedule_record(row)

    async def put(self, record: ScheduleRecord) -> None:
        self._c.execute(S["put_schedule"], schedule_row(record))

    async def delete(self, schedule_id: str) -> bool:
        return self._c.execute(S["delete_schedule"], (schedule_id,)).rowcount == 1

    async def list(self) -> builtins.list[ScheduleRecord]:
        return [schedule_record(row) for row in self._c.execute(S["list_schedules"])]

    async def due(self, now: float, limit: int) -> builtins.list[ScheduleRecord]:
        rows = self._c.execute(S["due_schedules"], (now, limit)).fetchall()
        return [schedule_record(row) for row in rows]

    async def next_at(self) -> float | None:
        row = self._c.execute(S["next_schedule_at"]).fetchone()
        return None if row is None or row[0] is None else float(row[0])
