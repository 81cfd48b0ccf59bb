"""A SQLite transaction's tasks and signals (``tx.tasks``, ``tx.signals``): what is due
for a run and when, and each run's mailbox."""

from __future__ import annotations

import builtins
import json
from collections.abc import Coroutine, Sequence
from typing import Any

from parkway.store import composed
from parkway.store.base import NewTask, Sent, SignalRecord, TaskRecord
from parkway.store.records import DEFERRED
from parkway.store.sqlite.admission import F
from parkway.store.sqlite.statements import Q
from parkway.store.sqlite.transport import Part


class SQLiteTasks(Part):
    """Tasks' statements on the transaction's connection."""

    async def add(self, tasks: Sequence[NewTask]) -> None:
        self._t.given.update(t.run_id for t in tasks)
        self._c.executemany(
            Q["add_task"], [(t.run_id, t.due_at, t.kind, t.pos, t.payload) for t in tasks]
        )

    async def due(self, run_id: str, now: float) -> list[TaskRecord]:
        return [TaskRecord(*row) for row in self._c.execute(Q["due_tasks"], (run_id, now))]

    async def delete(self, ids: Sequence[int]) -> None:
        self._c.executemany(Q["delete_task"], [(i,) for i in ids])

    async def delete_waits(
        self, run_id: str, pos: int | None = None, *, keep: Sequence[int] = ()
    ) -> None:
        if keep:  # rare and short: the kept ids as a JSON array
            query = Q["delete_wait_tasks_keep" if pos is None else "delete_wait_tasks_at_keep"]
            args: tuple[Any, ...] = (run_id,) if pos is None else (run_id, pos)
            self._c.execute(query, (*args, json.dumps(list(keep))))
        elif pos is None:
            self._c.execute(Q["delete_wait_tasks"], (run_id,))
        else:
            self._c.execute(Q["delete_wait_tasks_at"], (run_id, pos))

    async def delete_run(self, run_id: str) -> None:
        self._c.execute(Q["delete_all_tasks"], (run_id,))

    async def defer(self, run_id: str, ids: Sequence[int]) -> None:
        if ids:
            self._c.execute(F["defer_tasks"], (run_id, DEFERRED, json.dumps(list(ids))))

    async def wake_deferred(self, run_id: str, at: float) -> None:
        if self._c.execute(F["wake_deferred"], (at, run_id, DEFERRED)).rowcount:
            self._t.added_tasks = True  # (other processes' workers are told at commit)


class SQLiteSignals(Part):
    """Mailboxes' statements on the transaction's connection."""

    async def add(self, run_id: str, name: str, payload: bytes | None, at: float) -> None:
        self._c.execute(Q["add_signal"], (run_id, name, payload, at))

    def send(
        self,
        run_id: str,
        name: str,
        payload: bytes | None,
        at: float,
        *,
        task_payload: bytes | None = None,
    ) -> Coroutine[Any, Any, Sent]:
        # (the composed operation's coroutine itself, not one awaiting it)
        return composed.send_signal(self._tx, run_id, name, payload, at, task_payload=task_payload)

    async def list(self, run_id: str) -> builtins.list[SignalRecord]:
        return [SignalRecord(*row) for row in self._c.execute(Q["signals"], (run_id,))]

    async def delete(self, ids: Sequence[int]) -> None:
        self._c.executemany(Q["delete_signal"], [(i,) for i in ids])
