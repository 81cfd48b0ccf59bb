"""The PostgreSQL store's workers, operator entries and event links (a part of
:class:`parkway.store.postgres.tx.PostgresTx`)."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from parkway.store.fleet import EventLink, OperatorRecord, WorkerRecord
from parkway.store.postgres.runs import RunOps
from parkway.store.sqltext import load_queries

S = load_queries(__package__, "fleet.sql")


class FleetOps(RunOps):
    """The fleet's statements over the transaction's transport."""

    async def beat_worker(self, worker: WorkerRecord) -> None:
        workflows = orjson.dumps(worker.workflows).decode()
        row = (
            worker.id, worker.host, worker.pid, worker.started_at, worker.last_seen,
            worker.alive_until, workflows,
        )  # fmt: skip
        await self._write(S["beat_worker"], row, idempotent=True)

    async def list_workers(self, now: float) -> list[WorkerRecord]:
        rows = await self._all(S["list_workers"], (now,))
        return [WorkerRecord(r[0], r[1], r[2], r[3], r[4], r[5], orjson.loads(r[6])) for r in rows]

    async def prune_workers(self, now: float) -> int:
        return (await self._exec(S["prune_workers"], (now,))).rowcount

    async def unserved_runs(self, keys: Sequence[str], now: float, limit: int) -> list[str]:
        rows = await self._all(S["unserved_runs"], dict(keys=list(keys), now=now, limit=limit))
        return [row[0] for row in rows]

    async def add_operator_entry(self, entry: OperatorRecord) -> None:
        await self._write(S["add_operator_entry"], (entry.run_id, entry.action, entry.by, entry.at))

    async def operator_entries(self, run_id: str) -> list[OperatorRecord]:
        return [OperatorRecord(*row) for row in await self._all(S["operator_entries"], (run_id,))]

    async def link_event(self, event_id: str, at: float, how: str, run_ids: Sequence[str]) -> None:
        if run_ids:
            params = dict(id=event_id, how=how, runs=list(run_ids), at=at)
            await self._write(S["link_event"], params)

    async def list_events(
        self,
        *,
        name: str | None,
        subject: str | None,
        since: float | None,
        limit: int,
    ) -> list[tuple[str, str, str, str | None, bytes | None, float]]:
        params = dict(name=name, subject=subject, since=since, limit=limit)
        return [tuple(row) for row in await self._all(S["list_events"], params)]

    async def event_links(self, event_ids: Sequence[str]) -> list[EventLink]:
        rows = await self._all(S["event_links"], (list(event_ids),))
        return [EventLink(*row) for row in rows]
