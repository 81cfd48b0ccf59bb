"""The memory store's callbacks and human tasks (a part of
:class:`parkway.store.memory.MemoryTx`)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence

from parkway.store.memory.state import _State
from parkway.store.people import TASK_OPEN, CallbackRecord, HumanTaskRecord


class MemoryPeople:
    """Callbacks and human tasks in dicts; every change undone if the transaction fails."""

    _s: _State
    _undo: list[Callable[[], object]]

    def _keep_callback(self, token_hash: str) -> None:
        before = self._s.callbacks.get(token_hash)
        if before is None:
            self._undo.append(lambda: self._s.callbacks.pop(token_hash, None))
        else:
            self._undo.append(lambda: self._s.callbacks.__setitem__(token_hash, before))

    def _keep_task(self, task_id: str) -> None:
        before = self._s.human_tasks.get(task_id)
        if before is None:
            self._undo.append(lambda: self._s.human_tasks.pop(task_id, None))
        else:
            self._undo.append(lambda: self._s.human_tasks.__setitem__(task_id, before))

    async def add_callback(self, record: CallbackRecord) -> None:
        if record.token_hash in self._s.callbacks:
            return
        self._keep_callback(record.token_hash)
        self._s.callbacks[record.token_hash] = dataclasses.replace(record)

    async def get_callback(self, token_hash: str) -> CallbackRecord | None:
        found = self._s.callbacks.get(token_hash)
        return None if found is None else dataclasses.replace(found)

    async def finish_callback(
        self, token_hash: str, status: str, outcome: bytes, at: float
    ) -> None:
        found = self._s.callbacks.get(token_hash)
        if found is None:
            return
        self._keep_callback(token_hash)
        self._s.callbacks[token_hash] = dataclasses.replace(
            found, status=status, outcome=outcome, completed_at=at
        )

    async def add_human_tasks(self, records: Sequence[HumanTaskRecord]) -> None:
        for record in records:
            if record.id not in self._s.human_tasks:
                self._keep_task(record.id)
                self._s.human_tasks[record.id] = dataclasses.replace(record)

    async def get_human_task(self, task_id: str) -> HumanTaskRecord | None:
        found = self._s.human_tasks.get(task_id)
        return None if found is None else dataclasses.replace(found)

    async def list_human_tasks(
        self,
        *,
        status: str | None,
        assignee: str | None,
        workflow: str | None,
        limit: int,
    ) -> list[HumanTaskRecord]:
        found = []
        for task in self._s.human_tasks.values():
            if status is not None and task.status != status:
                continue
            if workflow is not None and task.workflow != workflow:
                continue
            if assignee is not None:
                names = json.loads(task.assignees)
                if names and assignee not in names:
                    continue
            found.append(task)
        found.sort(key=lambda t: (t.created_at, t.id))
        return [dataclasses.replace(t) for t in found[:limit]]

    async def finish_human_task(
        self,
        task_id: str,
        status: str,
        at: float,
        *,
        by: str | None = None,
        result: bytes | None = None,
    ) -> bool:
        found = self._s.human_tasks.get(task_id)
        if found is None or found.status != TASK_OPEN:
            return False
        self._keep_task(task_id)
        self._s.human_tasks[task_id] = dataclasses.replace(
            found, status=status, completed_at=at, completed_by=by, result=result
        )
        return True

    async def close_human_tasks(self, run_id: str, at: float) -> None:
        for task in list(self._s.human_tasks.values()):
            if task.run_id == run_id and task.status == TASK_OPEN:
                await self.finish_human_task(task.id, "cancelled", at)

    def _delete_people(self, run_id: str) -> None:
        """The run's callbacks and tasks go with it."""
        for key in [k for k, c in self._s.callbacks.items() if c.run_id == run_id]:
            self._keep_callback(key)
            del self._s.callbacks[key]
        for key in [k for k, t in self._s.human_tasks.items() if t.run_id == run_id]:
            self._keep_task(key)
            del self._s.human_tasks[key]
