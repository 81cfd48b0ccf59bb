"""The memory store's workers and operator entries (``tx.workers``, ``tx.operators``)."""

from __future__ import annotations

import builtins
import dataclasses
import functools
from collections.abc import Callable

from parkway.store.fleet import OperatorRecord, WorkerRecord
from parkway.store.memory.state import _Part, _State


def delete_operator_entries(state: _State, undo: list[Callable[[], object]], run_id: str) -> None:
    """The run's operator entries go with it (see ``tx.runs.delete``)."""
    entries = state.operator_entries.pop(run_id, None)
    if entries is not None:
        undo.append(lambda: state.operator_entries.__setitem__(run_id, entries))


class MemoryWorkers(_Part):
    """Workers by id, undone with the transaction."""

    async def beat(self, worker: WorkerRecord) -> None:
        workers = self._s.workers
        before = workers.get(worker.id)
        if before is None:
            self._undo.append(lambda: workers.pop(worker.id, None))
        else:
            self._undo.append(lambda: workers.__setitem__(worker.id, before))
            worker = dataclasses.replace(worker, started_at=before.started_at)
        workers[worker.id] = dataclasses.replace(
            worker, workflows={k: list(v) for k, v in worker.workflows.items()}
        )

    async def list(self, now: float) -> builtins.list[WorkerRecord]:
        found = [dataclasses.replace(w) for w in self._s.workers.values() if w.alive_until > now]
        return sorted(found, key=lambda w: (w.started_at, w.id))

    async def prune(self, now: float) -> int:
        gone = [w for w in self._s.workers.values() if w.alive_until < now]
        for worker in gone:
            del self._s.workers[worker.id]
            self._undo.append(functools.partial(self._s.workers.__setitem__, worker.id, worker))
        return len(gone)


class MemoryOperators(_Part):
    """Operator entries by run, in the order recorded."""

    async def add(self, entry: OperatorRecord) -> None:
        entries = self._s.operator_entries.setdefault(entry.run_id, [])
        entries.append(dataclasses.replace(entry))
        self._undo.append(entries.pop)

    async def list(self, run_id: str) -> builtins.list[OperatorRecord]:
        return [dataclasses.replace(e) for e in self._s.operator_entries.get(run_id, ())]
