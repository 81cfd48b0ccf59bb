"""A SQLite transaction's run values and updates (``tx.values``, ``tx.updates``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from parkway.store.base import UpdateRecord
from parkway.store.sqlite.statements import Q
from parkway.store.sqlite.transport import Part


class SQLiteValues(Part):
    """Run values' statements on the transaction's connection."""

    async def put(self, run_id: str, values: Mapping[str, bytes], at: float) -> None:
        self._c.executemany(Q["put_value"], [(run_id, k, v, at) for k, v in values.items()])

    async def of_runs(self, run_ids: Sequence[str]) -> dict[str, dict[str, bytes]]:
        out: dict[str, dict[str, bytes]] = {}
        for run_id, key, value in self._c.execute(Q["run_values"], (json.dumps(list(run_ids)),)):
            out.setdefault(run_id, {})[key] = value
        return out


class SQLiteUpdates(Part):
    """Updates' statements on the transaction's connection."""

    async def add(self, update: UpdateRecord) -> UpdateRecord | None:
        u = update
        cursor = self._c.execute(
            Q["add_update"], (u.run_id, u.id, u.name, u.payload, u.status, u.result, u.created_at)
        )
        if cursor.rowcount:
            return None
        return await self.get(u.run_id, u.id)

    async def get(self, run_id: str, update_id: str) -> UpdateRecord | None:
        row = self._c.execute(Q["get_update"], (run_id, update_id)).fetchone()
        return None if row is None else UpdateRecord(*row)

    async def pending(self, run_id: str) -> list[UpdateRecord]:
        return [UpdateRecord(*row) for row in self._c.execute(Q["pending_updates"], (run_id,))]

    async def finish(
        self, run_id: str, update_id: str, status: str, result: bytes | None, at: float
    ) -> None:
        self._c.execute(Q["finish_update"], (status, result, at, run_id, update_id))
