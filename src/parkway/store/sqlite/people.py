"""The SQLite store's callbacks and human tasks (``tx.callbacks``, ``tx.human_tasks``).

A writing transaction holds SQLite's write lock from its ``BEGIN IMMEDIATE``: the
callback or task it reads is no other transaction's until it commits, so two
completions of one are decided one after the other.
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
from parkway.store.sqlite.transport import Part
from parkway.store.sqltext import load_queries

S = load_queries(__package__, "people.sql")


class SQLiteCallbacks(Part):
    """Callbacks' statements on the transaction's connection."""

    async def add(self, record: CallbackRecord) -> None:
        self._c.execute(S["add_callback"], callback_row(record))

    async def get(self, token_hash: str) -> CallbackRecord | None:
        row = self._c.execute(S["get_callback"], (token_hash,)).fetchone()
        return None if row is None else callback_record(row)

    async def finish(self, token_hash: str, status: str, outcome: bytes, at: float) -> None:
        self._c.execute(S["finish_callback"], (status, outcome, at, token_hash))


class SQLiteHumanTasks(Part):
    """Human tasks' statements on the transaction's connection."""

    async def add(self, records: Sequence[HumanTaskRecord]) -> None:
        self._c.executemany(S["add_human_task"], [task_row(r) for r in records])

    async def get(self, task_id: str) -> HumanTaskRecord | None:
        row = self._c.execute(S["get_human_task"], (task_id,)).fetchone()
        return None if row is None else task_record(row)

    async def list(self, query: HumanTaskFilter) -> builtins.list[HumanTaskRecord]:
        params = dict(
            status=query.status,
            assignee=query.assignee,
            workflow=query.workflow,
            limit=query.limit,
        )
        return [task_record(row) for row in self._c.execute(S["list_human_tasks"], params)]

    async def finish(
        self,
        task_id: str,
        status: str,
        at: float,
        *,
        by: str | None = None,
        result: bytes | None = None,
    ) -> bool:
        cursor = self._c.execute(S["finish_human_task"], (status, at, by, result, task_id))
        return cursor.rowcount == 1

    async def close_run(self, run_id: str, at: float) -> None:
        self._c.execute(S["close_human_tasks"], (at, run_id))
