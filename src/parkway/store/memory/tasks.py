"""The memory store's tasks and signals (``tx.tasks``, ``tx.signals``): what is due for
a run and when, and each run's mailbox."""

from __future__ import annotations

import bisect
import builtins
import functools
import heapq
from collections.abc import Coroutine, Sequence
from typing import Any

from parkway.store import composed
from parkway.store.base import NewTask, Sent, SignalRecord, TaskRecord
from parkway.store.memory.state import _copy, _Part
from parkway.store.records import DEFERRED


class MemoryTasks(_Part):
    """Tasks by id, indexed by run and by due time (the claims' heap)."""

    async def add(self, tasks: Sequence[NewTask]) -> None:
        for task in tasks:
            task_id = self._s.next_task
            self._s.next_task += 1
            record = TaskRecord(
                task_id, task.run_id, task.due_at, task.kind, task.pos, task.payload
            )
            self._s.tasks[task_id] = record
            self._s.run_tasks.setdefault(task.run_id, set()).add(task_id)
            heapq.heappush(self._s.due_heap, (task.due_at, task_id))
            self._undo.append(functools.partial(self._drop, task_id))

    def _drop(self, task_id: int) -> TaskRecord | None:
        task = self._s.tasks.pop(task_id, None)
        if task is not None:
            self._s.run_tasks.get(task.run_id, set()).discard(task_id)
        return task

    def _restore(self, task: TaskRecord) -> None:
        self._s.tasks[task.id] = task
        self._s.run_tasks.setdefault(task.run_id, set()).add(task.id)
        heapq.heappush(self._s.due_heap, (task.due_at, task.id))

    async def due(self, run_id: str, now: float) -> list[TaskRecord]:
        ids = self._s.run_tasks.get(run_id, ())
        due = [self._s.tasks[i] for i in ids if self._s.tasks[i].due_at <= now]
        return sorted(due, key=lambda t: t.id)

    async def delete(self, ids: Sequence[int]) -> None:
        for task_id in ids:
            task = self._drop(task_id)
            if task is not None:
                self._undo.append(functools.partial(self._restore, task))

    async def delete_waits(
        self, run_id: str, pos: int | None = None, *, keep: Sequence[int] = ()
    ) -> None:
        kept = set(keep)
        ids = [
            i
            for i in self._s.run_tasks.get(run_id, ())
            if self._s.tasks[i].pos is not None
            and (pos is None or self._s.tasks[i].pos == pos)
            and i not in kept
        ]
        await self.delete(ids)

    async def delete_run(self, run_id: str) -> None:
        await self.delete(list(self._s.run_tasks.get(run_id, ())))

    def _retime(self, task_id: int, due_at: float) -> None:
        old = self._s.tasks.get(task_id)
        if old is None:
            return
        new = _copy(old)
        new.due_at = due_at
        self._s.tasks[task_id] = new
        heapq.heappush(self._s.due_heap, (due_at, task_id))

        def undo() -> None:
            self._s.tasks[task_id] = old
            heapq.heappush(self._s.due_heap, (old.due_at, task_id))

        self._undo.append(undo)

    async def defer(self, run_id: str, ids: Sequence[int]) -> None:
        tasks = [self._s.tasks[i] for i in self._s.run_tasks.get(run_id, ())]
        starts = [t.due_at for t in tasks if t.kind == "start"]
        until = min(starts) if starts else DEFERRED
        for task_id in ids:
            self._retime(task_id, until)

    async def wake_deferred(self, run_id: str, at: float) -> None:
        for task_id in list(self._s.run_tasks.get(run_id, ())):
            if self._s.tasks[task_id].due_at >= DEFERRED:
                self._retime(task_id, at)


class MemorySignals(_Part):
    """Each run's mailbox: signals by id, and the ids of each run's in order."""

    async def add(self, run_id: str, name: str, payload: bytes | None, at: float) -> None:
        signal_id = self._s.next_signal
        self._s.next_signal += 1
        self._s.signals[signal_id] = SignalRecord(signal_id, run_id, name, payload, at)
        self._s.run_signals.setdefault(run_id, []).append(signal_id)

        def undo() -> None:
            self._s.signals.pop(signal_id, None)
            self._s.run_signals[run_id].remove(signal_id)

        self._undo.append(undo)

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
        return [self._s.signals[i] for i in self._s.run_signals.get(run_id, ())]

    async def delete(self, ids: Sequence[int]) -> None:
        for signal_id in ids:
            signal = self._s.signals.pop(signal_id, None)
            if signal is None:
                continue
            queue = self._s.run_signals[signal.run_id]
            queue.remove(signal_id)

            def undo(s: SignalRecord = signal, q: builtins.list[int] = queue) -> None:
                self._s.signals[s.id] = s
                bisect.insort(q, s.id)

            self._undo.append(undo)
