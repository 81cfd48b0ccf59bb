"""The store's part of schedules: their rows, and the operations on them inside a
transaction (a part of the :class:`parkway.store.base.Tx` protocol).

A schedule's row holds its definition, whether it is paused, and where its
firing stands: ``last_tick`` (the last tick handled, fired or skipped; at first
the time it was registered, or resumed) and ``next_at`` (the tick due next,
``None`` while paused). The worker that fires a tick starts its run and moves
these on in one transaction, so no tick is started twice or lost.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass
class ScheduleRecord:
    """One schedule's row. Times are engine seconds."""

    id: str
    workflow: str
    cron: str
    timezone: str
    catch_up: str
    input: bytes
    paused: bool
    last_tick: float
    next_at: float | None
    last_run_id: str | None
    created_at: float
    updated_at: float


SCHEDULE_COLUMNS = (
    "id",
    "workflow",
    "cron",
    "timezone",
    "catch_up",
    "input",
    "paused",
    "last_tick",
    "next_at",
    "last_run_id",
    "created_at",
    "updated_at",
)


def schedule_row(record: ScheduleRecord) -> tuple[object, ...]:
    """The record's columns, in :data:`SCHEDULE_COLUMNS` order."""
    return tuple(getattr(record, column) for column in SCHEDULE_COLUMNS)


def schedule_record(row: Sequence[Any]) -> ScheduleRecord:
    """A record from a row of :data:`SCHEDULE_COLUMNS` (the paused flag and the
    input as the driver returned them)."""
    values = list(row)
    values[5] = bytes(values[5])  # (a memoryview, on PostgreSQL)
    values[6] = bool(values[6])  # (an integer, on SQLite)
    return ScheduleRecord(*values)


class Schedules(Protocol):
    """Schedules inside one transaction (``tx.schedules``)."""

    async def get(self, schedule_id: str) -> ScheduleRecord | None:
        """The schedule's row (locked until the transaction ends, in a writing one)."""
        ...

    async def put(self, record: ScheduleRecord) -> None:
        """Insert the row, or replace the one with its id."""
        ...

    async def delete(self, schedule_id: str) -> bool:
        """Delete the schedule; whether it existed."""
        ...

    async def list(self) -> builtins.list[ScheduleRecord]:
        """Every schedule, by id."""
        ...

    async def due(self, now: float, limit: int) -> builtins.list[ScheduleRecord]:
        """Up to ``limit`` schedules not paused whose ``next_at`` is at or before ``now``,
        the earliest first, locked for this transaction; a schedule another
        transaction holds is left out (it is that one's to fire)."""
        ...

    async def next_at(self) -> float | None:
        """The earliest ``next_at`` of the schedules not paused, or ``None``."""
        ...


__all__ = ["SCHEDULE_COLUMNS", "ScheduleRecord", "Schedules", "schedule_record", "schedule_row"]
