"""The SQLite store's workers and operator entries (``tx.workers``, ``tx.operators``);
its statements (``fleet.sql``) have the event links' too (see events.py)."""

from __future__ import annotations

import builtins

import orjson

from parkway.store.fleet import OperatorRecord, WorkerRecord
from parkway.store.sqlite.transport import Part
from parkway.store.sqltext import load_queries

S = load_queries(__package__, "fleet.sql")


def _worker(row: tuple[str, str, int, float, float, float, str]) -> WorkerRecord:
    return WorkerRecord(*row[:6], orjson.loads(row[6]))


class SQLiteWorkers(Part):
    """Workers' statements on the transaction's connection."""

    async def beat(self, worker: WorkerRecord) -> None:
        workflows = orjson.dumps(worker.workflows).decode()
        self._c.execute(
            S["beat_worker"],
            (
                worker.id,
                worker.host,
                worker.pid,
                worker.started_at,
                worker.last_seen,
                worker.alive_until,
                workflows,
            ),
        )

    async def list(self, now: float) -> builtins.list[WorkerRecord]:
        return [_worker(row) for row in self._c.execute(S["list_workers"], (now,))]

    async def prune(self, now: float) -> int:
        return self._c.execute(S["prune_workers"], (now,)).rowcount


class SQLiteOperators(Part):
    """Operator entries' statements on the transaction's connection."""

    async def add(self, entry: OperatorRecord) -> None:
        self._c.execute(S["add_operator_entry"], (entry.run_id, entry.action, entry.by, entry.at))

    async def list(self, run_id: str) -> builtins.list[OperatorRecord]:
        return [OperatorRecord(*row) for row in self._c.execute(S["operator_entries"], (run_id,))]
