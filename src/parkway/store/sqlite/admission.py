"""A SQLite transaction's admission (``tx.admission``): concurrency and rate limits.

SQLite has one writer at a time (every write transaction is ``BEGIN
IMMEDIATE``), so reading a key's slot row in a write transaction is enough to
hold it until commit: no other process changes that key meanwhile.
"""

from __future__ import annotations

from parkway.store.records import FlowEntry, FlowSlot
from parkway.store.sqlite.transport import Part
from parkway.store.sqltext import load_queries

F = load_queries(__package__, "flow.sql")


class SQLiteAdmission(Part):
    """Admission's statements on the transaction's connection."""

    async def slot(self, workflow: str, key: str) -> FlowSlot:
        row = self._c.execute(F["flow_slot"], (workflow, key)).fetchone()
        return FlowSlot() if row is None else FlowSlot(*row)

    async def put_slot(self, workflow: str, key: str, slot: FlowSlot) -> None:
        self._c.execute(F["put_flow_slot"], (workflow, key, slot.active, slot.started, slot.limit))

    async def enter(
        self, run_id: str, workflow: str, key: str, priority: int, *, queued: bool
    ) -> None:
        self._c.execute(F["flow_enter"], (run_id, workflow, key, priority, int(queued)))

    async def entry(self, run_id: str) -> FlowEntry | None:
        row = self._c.execute(F["flow_entry"], (run_id,)).fetchone()
        return None if row is None else FlowEntry(row[0], row[1], bool(row[2]))

    async def leave(self, run_id: str) -> FlowEntry | None:
        row = self._c.execute(F["flow_leave"], (run_id,)).fetchone()
        return None if row is None else FlowEntry(row[0], row[1], bool(row[2]))

    async def next(self, workflow: str, key: str) -> str | None:
        row = self._c.execute(F["flow_next"], (workflow, key)).fetchone()
        return None if row is None else str(row[0])

    async def oldest(self, workflow: str, key: str) -> str | None:
        row = self._c.execute(F["flow_oldest"], (workflow, key)).fetchone()
        return None if row is None else str(row[0])

    async def rate_mark(self, workflow: str, key: str, slot: int) -> float | None:
        row = self._c.execute(F["rate_mark"], (workflow, key, slot)).fetchone()
        return None if row is None else float(row[0])

    async def put_rate_mark(self, workflow: str, key: str, slot: int, at: float) -> None:
        self._c.execute(F["put_rate_mark"], (workflow, key, slot, at))
