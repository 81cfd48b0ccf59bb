"""A PostgreSQL transaction's admission rows (``tx.admission``: concurrency and rate
limits; the statements in ``flow.sql``).

Why a row lock on a per-key slot row, and not an advisory lock: the lock and the
counters it guards are one row, read in the same round trip that locks it
(``SELECT ... FOR UPDATE`` after the row's ``INSERT ... ON CONFLICT DO NOTHING``,
pipelined), and it is held exactly as long as the transaction that changes the
key, on any connection of any process. A start of a key that finds it full and
queues its run, and an end of a run of that key that frees a slot, both take
it first; so the end either sees the queued run (and starts it) or comes first
(and the start sees the free slot): a run is never left queued beside a free
slot. Under READ COMMITTED each statement after the lock reads what the
previous holder committed. Other keys' rows are other locks: they go on in
parallel.
"""

from __future__ import annotations

from parkway.store.postgres.transport import Part
from parkway.store.records import FlowEntry, FlowSlot
from parkway.store.sqltext import load_queries

F = load_queries(__package__, "flow.sql")


class PostgresAdmission(Part):
    """Concurrency and rate limits."""

    async def slot(self, workflow: str, key: str) -> FlowSlot:
        t = self._t
        if t._ro:  # (a look, not a change: no row to make, no lock to take)
            row = await t._one(F["flow_slot_read"], (workflow, key))
        else:
            await t._write(F["flow_slot_row"], (workflow, key), idempotent=True)
            row = await t._one(F["flow_slot"], (workflow, key))
        return FlowSlot() if row is None else FlowSlot(int(row[0]), int(row[1]), int(row[2]))

    async def put_slot(self, workflow: str, key: str, slot: FlowSlot) -> None:
        params = (slot.active, slot.started, slot.limit, workflow, key)
        await self._t._write(F["put_flow_slot"], params, idempotent=True)

    async def enter(
        self, run_id: str, workflow: str, key: str, priority: int, *, queued: bool
    ) -> None:
        await self._t._write(F["flow_enter"], (run_id, workflow, key, priority, queued))

    async def entry(self, run_id: str) -> FlowEntry | None:
        row = await self._t._one(F["flow_entry"], (run_id,))
        return None if row is None else FlowEntry(str(row[0]), str(row[1]), bool(row[2]))

    async def leave(self, run_id: str) -> FlowEntry | None:
        row = await self._t._one(F["flow_leave"], (run_id,))
        return None if row is None else FlowEntry(str(row[0]), str(row[1]), bool(row[2]))

    async def next(self, workflow: str, key: str) -> str | None:
        row = await self._t._one(F["flow_next"], (workflow, key))
        return None if row is None else str(row[0])

    async def oldest(self, workflow: str, key: str) -> str | None:
        row = await self._t._one(F["flow_oldest"], (workflow, key))
        return None if row is None else str(row[0])

    async def rate_mark(self, workflow: str, key: str, slot: int) -> float | None:
        row = await self._t._one(F["rate_mark"], (workflow, key, slot))
        return None if row is None else float(row[0])

    async def put_rate_mark(self, workflow: str, key: str, slot: int, at: float) -> None:
        await self._t._write(F["put_rate_mark"], (workflow, key, slot, at), idempotent=True)
