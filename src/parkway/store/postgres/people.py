"""The PostgreSQL store's callbacks and human tasks (``tx.callbacks``,
``tx.human_tasks``).

A writing transaction reads the callback or task it completes locked (``FOR
UPDATE``): a second completion of it waits for the first to commit, then reads
its outcome.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from parkway.store.people import (
    CallbackRecord,
    HumanTaskFilter,
    HumanTaskRecord,
    callback_record,
    callback_row,
    task_record,
    task_row,
)
from parkway.store.postgres.transport import Part
from parkway.store.sqltext import load_queries

S = load_queries(__package__, "people.sql")


class PostgresCallbacks(Part):
    """Callbacks' statements over the transaction's transport."""

    async def add(self, record: CallbackRecord) -> None:
        await self._t._write(S["add_callback"], callback_row(record), idempotent=True)

    async def get(self, token_hash: str) -> CallbackRecord | None:
        t = self._t
        row = await t._one(S["get_callback" if t._ro else "get_callback_locked"], (token_hash,))
        return None if row is None else callback_record(row)

    async def finish(self, token_hash: str, status: str, outcome: bytes, at: float) -> None:
        await self._t._write(S["finish_callback"], (status, outcome, at, token_hash))


class PostgresHumanTasks(Part):
    """Human tasks' statements over the transaction's transport."""

    async def add(self, records: Sequence[HumanTaskRecord]) -> None:
        t = self._t
        for record in records:
            await t._write(S["add_human_task"], task_row(record), idempotent=True)

    async def get(self, task_id: str) -> HumanTaskRecord | None:
        t = self._t
        row = await t._one(S["get_human_task" if t._ro else "get_human_task_locked"], (task_id,))
        return None if row is None else task_record(row)

    async def list(self, query: HumanTaskFilter) -> builtins.list[HumanTaskRecord]:
        params = dict(
            status=query.status,
            assignee=query.assignee,
            workflow=query.workflow,
            limit=query.limit,
        )
        return [task_record(row) for row in await self._t._all(S["list_human_tasks"], params)]

    async def finish(
        self,
        task_id: str,
        status: str,
        at: float,
        *,
        by: str | None = None,
        result: bytes | None = None,
    ) -> bool:
        row = await self._t._one(S["finish_human_task"], (status, at, by, result, task_id))
        return row is not None

    async def close_run(self, run_id: str, at: float) -> None:
        await self._t._write(S["close_human_tasks"], (at, run_id), idempotent=True)
