"""A SQLite transaction's flow-control operations (``Tx.flow_slot`` and the rest).

SQLite has one writer at a time (every write transaction is ``BEGIN
IMMEDIATE``), so reading a key's slot row in a write transaction is enough to
hold it until commit: no other process changes that key meanwhile.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from parkway.store.records import DEFERRED, FlowEntry, FlowSlot
from parkway.store.sqltext import load_queries

F = load_queries(__package__, "flow.sql")


class FlowOps:
    """Flow control over the transaction's connection (a part of ``SQLiteTx``)."""

    _c: sqlite3.Connection
    added_tasks: bool  # (tasks given to runs not known here: see SQLiteTx.tell_others)

    async def flow_slot(self, workflow: str, key: str) -> FlowSlot:
        row = self._c.execute(F["flow_slot"], (workflow, key)).fetchone()
        return FlowSlot() if row is None else FlowSlot(*row)

    async def put_flow_slot(self, workflow: str, key: str, slot: FlowSlot) -> None:
        self._c.execute(F["put_flow_slot"], (workflow, key, slot.active, slot.started, slot.limit))

    async def flow_enter(
        self, run_id: str, workflow: str, key: str, priority: int, *, queued: bool
    ) -> None:
        self._c.execute(F["flow_enter"], (run_id, workflow, key, priority, int(queued)))

    async def flow_entry(self, run_id: str) -> FlowEntry | None:
        row = self._c.execute(F["flow_entry"], (run_id,)).fetchone()
        return None if row is None else FlowEntry(row[0], row[1], bool(row[2]))

    async def flow_leave(self, run_id: str) -> FlowEntry | None:
        row = self._c.execute(F["flow_leave"], (run_id,)).fetchone()
        return None if row is None else FlowEntry(row[0], row[1], bool(row[2]))

    async def flow_next(self, workflow: str, key: str) -> str | None:
        row = self._c.execute(F["flow_next"], (workflow, key)).fetchone()
        return None if row is None else str(row[0])

    async def flow_oldest(self, workflow: str, key: str) -> str | None:
        row = self._c.execute(F["flow_oldest"], (workflow, key)).fetchone()
        return None if row is None else str(row[0])

    async def rate_mark(self, workflow: str, key: str, slot: int) -> float | None:
        row = self._c.execute(F["rate_mark"], (workflow, key, slot)).fetchone()
        return None if row is None else float(row[0])

    async def put_rate_mark(self, workflow: str, key: str, slot: int, at: float) -> None:
        self._c.execute(F["put_rate_mark"], (workflow, key, slot, at))

    async def defer_tasks(self, run_id: str, ids: Sequence[int]) -> None:
        if ids:
            self._c.execute(F["defer_tasks"], (run_id, DEFERRED, json.dumps(list(ids))))

    async def wake_deferred(self, run_id: str, at: float) -> None:
        if self._c.execute(F["wake_deferred"], (at, run_id, DEFERRED)).rowcount:
            self.added_tasks = True  # (other processes' workers are told at commit)
