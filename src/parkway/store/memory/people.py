"""The memory store's callbacks and human tasks (``tx.callbacks``, ``tx.human_tasks``)."""

from __future__ import annotations

import builtins
import dataclasses
import json
from collections.abc import Callable, Sequence

from parkway.store.memory.state import _Part, _State
from parkway.store.people import TASK_OPEN, CallbackRecord, HumanTaskFilter, HumanTaskRecord

Undo = list[Callable[[], object]]


def _keep_callback(state: _State, undo: Undo, token_hash: str) -> None:
    callbacks = state.callbacks
    before = callbacks.get(token_hash)
    if before is None:
        undo.append(lambda: callbacks.pop(token_hash, None))
    else:
        undo.append(lambda: callbacks.__setitem__(token_hash, before))


def _keep_task(state: _State, undo: Undo, task_id: str) -> None:
    tasks = state.human_tasks
    before = tasks.get(task_id)
    if before is None:
        undo.append(lambda: tasks.pop(task_id, None))
    else:
        undo.append(lambda: tasks.__setitem__(task_id, before))


def delete_people(state: _State, undo: Undo, run_id: str) -> None:
    """The run's callbacks and tasks go with it (see ``tx.runs.delete``)."""
    for key in [k for k, c in state.callbacks.items() if c.run_id == run_id]:
        _keep_callback(state, undo, key)
        del state.callbacks[key]
    for key in [k for k, t in state.human_tasks.items() if t.run_id == run_id]:
        _keep_task(state, undo, key)
        del state.human_tasks[key]


class MemoryCallbacks(_Part):
    """Callbacks in a dict, by the hash of their token; every change undone if the
    transaction fails."""

    async def add(self, record: CallbackRecord) -> None:
        if record.token_hash in self._s.callbacks:
            return
        _keep_callback(self._s, self._undo, record.token_hash)
        self._s.callbacks[record.token_hash] = dataclasses.replace(record)

    async def get(self, token_hash: str) -> CallbackRecord | None:
        found = self._s.callbacks.get(token_hash)
        return None if found is None else dataclasses.replace(found)

    async def finish(self, token_hash: str, status: str, outcome: bytes, at: float) -> None:
        found = self._s.callbacks.get(token_hash)
        if found is None:
            return
        _keep_callback(self._s, self._undo, token_hash)
        self._s.callbacks[token_hash] = dataclasses.replace(
            found, status=status, outcome=outcome, completed_at=at
        )


class MemoryHumanTasks(_Part):
    """Human tasks in a dict, by id; every change undone if the transaction fails."""

    async def add(self, records: Sequence[HumanTaskRecord]) -> None:
        for record in records:
            if record.id not in self._s.human_tasks:
                _keep_task(self._s, self._undo, record.id)
                self._s.human_tasks[record.id] = dataclasses.replace(record)

    async def get(self, task_id: str) -> HumanTaskRecord | None:
        found = self._s.human_tasks.get(task_id)
        return None if found is None else dataclasses.replace(found)

    async def list(self, query: HumanTaskFilter) -> builtins.list[HumanTaskRecord]:
        status, assignee, workflow = query.status, query.assignee, query.workflow
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
        return [dataclasses.replace(t) for t in found[: query.limit]]

    async def finish(
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
        _keep_task(self._s, self._undo, task_id)
        self._s.human_tasks[task_id] = dataclasses.replace(
            found, status=status, completed_at=at, completed_by=by, result=result
        )
        return True

    async def close_run(self, run_id: str, at: float) -> None:
        for task in builtins.list(self._s.human_tasks.values()):
            if task.run_id == run_id and task.status == TASK_OPEN:
                await self.finish(task.id, "cancelled", at)
