"""A PostgreSQL transaction's operations on what a run publishes and is asked: its
values (``ctx.set_value``) and the updates sent to it (``engine.update``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from parkway.store.base import AttemptRecord, UpdateRecord
from parkway.store.postgres.runs import RunOps
from parkway.store.postgres.statements import Q


class UpdateOps(RunOps):
    """Run values and updates."""

    async def put_values(self, run_id: str, values: Mapping[str, bytes], at: float) -> None:
        if values:
            await self._write(Q["put_values"], (run_id, at, list(values), list(values.values())))

    async def run_values(self, run_ids: Sequence[str]) -> dict[str, dict[str, bytes]]:
        out: dict[str, dict[str, bytes]] = {}
        for run_id, key, value in await self._all(Q["run_values"], (list(run_ids),)):
            out.setdefault(run_id, {})[key] = bytes(value)
        return out

    async def add_attempts(self, attempts: Sequence[AttemptRecord]) -> None:
        if attempts:
            columns = list(zip(*(dataclasses.astuple(a) for a in attempts), strict=True))
            await self._write(Q["add_attempts"], [list(c) for c in columns])

    async def attempts(self, run_id: str) -> list[AttemptRecord]:
        rows = await self._all(Q["attempts"], (run_id,))
        return [AttemptRecord(r, p, s, a, bytes(e), b, x) for r, p, s, a, e, b, x in rows]

    async def add_update(self, update: UpdateRecord) -> UpdateRecord | None:
        u = update
        row = await self._one(
            Q["add_update"], (u.run_id, u.id, u.name, u.payload, u.status, u.result, u.created_at)
        )
        if row is not None:
            return None
        return await self.get_update(u.run_id, u.id)

    async def get_update(self, run_id: str, update_id: str) -> UpdateRecord | None:
        row = await self._one(Q["get_update"], (run_id, update_id))
        return None if row is None else UpdateRecord(*row)

    async def pending_updates(self, run_id: str) -> list[UpdateRecord]:
        return [UpdateRecord(*row) for row in await self._all(Q["pending_updates"], (run_id,))]

    async def finish_update(
        self, run_id: str, update_id: str, status: str, result: bytes | None, at: float
    ) -> None:
        await self._write(Q["finish_update"], (status, result, at, run_id, update_id))
