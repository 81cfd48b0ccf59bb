"""The PostgreSQL store's workers and operator entries (``tx.workers``,
``tx.operators``); ``fleet.sql`` also holds the statements of the runs no worker
serves (``runs.unserved``) and of event links (``events.link``)."""

from __future__ import annotations

import builtins

import orjson

from parkway.store.fleet import OperatorRecord, WorkerRecord
from parkway.store.postgres.transport import Part
from parkway.store.sqltext import load_queries

S = load_queries(__package__, "fleet.sql")


class PostgresWorkers(Part):
    """The workers serving the store."""

    async def beat(self, worker: WorkerRecord) -> None:
        workflows = orjson.dumps(worker.workflows).decode()
        row = (
            worker.id,
            worker.host,
            worker.pid,
            worker.started_at,
            worker.last_seen,
            worker.alive_until,
            workflows,
        )
        await self._t._write(S["beat_worker"], row, idempotent=True)

    async def list(self, now: float) -> builtins.list[WorkerRecord]:
        rows = await self._t._all(S["list_workers"], (now,))
        return [WorkerRecord(r[0], r[1], r[2], r[3], r[4], r[5], orjson.loads(r[6])) for r in rows]

    async def prune(self, now: float) -> int:
        return (await self._t._exec(S["prune_workers"], (now,))).rowcount


class PostgresOperators(Part):
    """Operator entries: who did what to a run."""

    async def add(self, entry: OperatorRecord) -> None:
        params = (entry.run_id, entry.action, entry.by, entry.at)
        await self._t._write(S["add_operator_entry"], params)

    async def list(self, run_id: str) -> builtins.list[OperatorRecord]:
        rows = await self._t._all(S["operator_entries"], (run_id,))
        return [OperatorRecord(*row) for row in rows]
