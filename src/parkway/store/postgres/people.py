"""The PostgreSQL store's callbacks and human tasks (a part of
:class:`parkway.store.postgres.tx.PostgresTx`).

A writing transaction reads the callback or task it completes locked (``FOR
UPDATE``): a second completion of it waits for the first to commit, then reads
its outcome.
"""

from __future__ import annotations

from collections.abc import Sequence

from parkway.store.people import (
    CallbackRecord,
    HumanTaskRecord,
    callback_record,
    callback_row,
    task_record,
    task_row,
)
from parkway.store.postgres.runs import RunOps
from parkway.store.sqltext import load_queries

S = load_queries(__package__, "people.sql")


class PeopleOps(RunOps):
    """Callbacks' and human tasks' statements over the transaction's transport."""

    async def add_callback(self, record: CallbackRecord) -> None:
        await self._write(S["add_callback"], callback_row(record), idempotent=True)

    async def get_callback(self, token_hash: str) -> CallbackRecord | None:
        query = S["get_callback" if self._ro else "get_callback_locked"]
        row = await self._one(query, (token_hash,))
        return None if row is None else callback_record(row)

    async def finish_callback(
        self, token_hash: str, status: str, outcome: bytes, at: float
    ) -> None:
        await self._write(S["finish_callback"], (status, outcome, at, token_hash))

    async def add_human_tasks(self, records: Sequence[HumanTaskRecord]) -> None:
        for record in records:
            await self._write(S["add_human_task"], task_row(record), idempotent=True)

    async def get_human_task(self, task_id: str) -> HumanTaskRecord | None:
        query = S["get_human_task" if self._ro else "get_human_task_locked"]
        row = await self._one(query, (task_id,))
        return None if row is None else task_record(row)

    async def list_human_tasks(
        self,
        *,
        status: str | None,
        assignee: str | None,
        workflow: str | None,
        limit: int,
    ) -> list[HumanTaskRecord]:
        params = dict(status=status, assignee=assignee, workflow=workflow, limit=limit)
        return [task_record(row) for row in await self._all(S["list_human_tasks"], params)]

    async def finish_human_task(
        self,
        task_id: str,
        status: str,
        at: float,
        *,
        by: str | None = None,
        result: bytes | None = None,
    ) -> bool:
        row = await self._one(S["finish_human_task"], (status, at, by, result, task_id))
        return row is not None

    async def close_human_tasks(self, run_id: str, at: float) -> None:
        await self._write(S["close_human_tasks"], (at, run_id), idempotent=True)
