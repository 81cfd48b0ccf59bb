"""A PostgreSQL transaction's run values (``ctx.set_value``; ``tx.values``) and the
updates sent to runs (``engine.update``; ``tx.updates``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from parkway.store.postgres.statements import Q
from parkway.store.postgres.transport import Part
from parkway.store.records import UpdateRecord


class PostgresValues(Part):
    """Run values."""

    async def put(self, run_id: str, values: Mapping[str, bytes], at: float) -> None:
        if values:
            params = (run_id, at, list(values), list(values.values()))
            await self._t._write(Q["put_values"], params)

    async def of_runs(self, run_ids: Sequence[str]) -> dict[str, dict[str, bytes]]:
        out: dict[str, dict[str, bytes]] = {}
        for run_id, key, value in await self._t._all(Q["run_values"], (list(run_ids),)):
            out.setdefault(run_id, {})[key] = bytes(value)
        return out


class PostgresUpdates(Part):
    """Updates sent to runs, and their answers."""

    async def add(self, update: UpdateRecord) -> UpdateRecord | None:
        u = update
        row = await self._t._one(
            Q["add_update"], (u.run_id, u.id, u.name, u.payload, u.status, u.result, u.created_at)
        )
        if row is not None:
            return None
        return await self.get(u.run_id, u.id)

    async def get(self, run_id: str, update_id: str) -> UpdateRecord | None:
        row = await self._t._one(Q["get_update"], (run_id, update_id))
        return None if row is None else UpdateRecord(*row)

    async def pending(self, run_id: str) -> list[UpdateRecord]:
        rows = await self._t._all(Q["pending_updates"], (run_id,))
        return [UpdateRecord(*row) for row in rows]

    async def finish(
        self, run_id: str, update_id: str, status: str, result: bytes | None, at: float
    ) -> None:
        await self._t._write(Q["finish_update"], (status, result, at, run_id, update_id))
