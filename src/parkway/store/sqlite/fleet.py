"""The SQLite store's workers, operator entries and event links (a part of
:class:`parkway.store.sqlite.tx.SQLiteTx`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import orjson

from parkway.store.fleet import EventLink, OperatorRecord, WorkerRecord
from parkway.store.sqltext import load_queries

S = load_queries(__package__, "fleet.sql")


def _worker(row: tuple[str, str, int, float, float, float, str]) -> WorkerRecord:
    return WorkerRecord(*row[:6], orjson.loads(row[6]))


class SQLiteFleet:
    """The fleet's statements on the transaction's connection."""

    _c: sqlite3.Connection

    async def beat_worker(self, worker: WorkerRecord) -> None:
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

    async def list_workers(self, now: float) -> list[WorkerRecord]:
        return [_worker(row) for row in self._c.execute(S["list_workers"], (now,))]

    async def prune_workers(self, now: float) -> int:
        return self._c.execute(S["prune_workers"], (now,)).rowcount

    async def unserved_runs(self, keys: Sequence[str], now: float, limit: int) -> list[str]:
        served = orjson.dumps(list(keys)).decode()
        return [row[0] for row in self._c.execute(S["unserved_runs"], (served, now, limit))]

    async def add_operator_entry(self, entry: OperatorRecord) -> None:
        self._c.execute(S["add_operator_entry"], (entry.run_id, entry.action, entry.by, entry.at))

    async def operator_entries(self, run_id: str) -> list[OperatorRecord]:
        return [OperatorRecord(*row) for row in self._c.execute(S["operator_entries"], (run_id,))]

    def _delete_operator_entries(self, ids: list[tuple[str]]) -> None:
        self._c.executemany(S["delete_run_operator_entries"], ids)

    async def link_event(self, event_id: str, at: float, how: str, run_ids: Sequence[str]) -> None:
        self._c.executemany(S["link_event"], [(event_id, how, run_id, at) for run_id in run_ids])

    def _delete_event_links(self, event_id: str) -> None:
        self._c.execute(S["delete_event_links"], (event_id,))

    def _prune_event_links(self, before: float) -> None:
        self._c.execute(S["prune_event_links"], (before,))

    async def list_events(
        self,
        *,
        name: str | None,
        subject: str | None,
        since: float | None,
        limit: int,
    ) -> list[tuple[str, str, str, str | None, bytes | None, float]]:
        params = dict(name=name, subject=subject, since=since, limit=limit)
        return [tuple(row) for row in self._c.execute(S["list_events"], params)]

    async def event_links(self, event_ids: Sequence[str]) -> list[EventLink]:
        ids = orjson.dumps(list(event_ids)).decode()
        return [EventLink(*row) for row in self._c.execute(S["event_links"], (ids,))]
