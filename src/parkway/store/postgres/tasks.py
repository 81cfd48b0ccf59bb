"""A PostgreSQL transaction's tasks (``tx.tasks``): what is due for a run, most of
a worker's commit's deletes fused into its fenced update, and the deferral of a
run not admitted yet (see :mod:`parkway.store.postgres.admission`)."""

from __future__ import annotations

from collections.abc import Sequence

from parkway.store.postgres.admission import F
from parkway.store.postgres.connections import Step
from parkway.store.postgres.statements import Q, subject_lock
from parkway.store.postgres.transport import Part
from parkway.store.records import DEFERRED, NewTask, TaskRecord


class PostgresTasks(Part):
    """A run's tasks."""

    async def add(self, tasks: Sequence[NewTask]) -> None:
        if not tasks:
            return
        t = self._t
        columns = (
            [task.run_id for task in tasks],
            [task.due_at for task in tasks],
            [task.kind for task in tasks],
            [task.pos for task in tasks],
            [task.payload for task in tasks],
        )
        t._task_runs.update(columns[0])
        first = min(columns[1])
        if t._notified is not None and t._notified <= first:
            await t._write(Q["add_tasks"], columns)
        else:
            await t._write(Q["add_tasks_notify"], (*columns, t._announce(first)))

    async def due(self, run_id: str, now: float) -> list[TaskRecord]:
        t = self._t
        if t._ro:
            return [TaskRecord(*row) for row in await t._all(Q["due_tasks"], (run_id, now))]
        # Read-write: the run's commit is about to re-buffer the message deliveries
        # it will not take and delete the rest (messages.rebuffer). A correlate
        # committing a delivery between that read and that delete would lose its
        # message, so while the run has a message wait, take its key's lock (the
        # one correlate holds to commit) and read after. A run without one
        # can get no message delivery: one read, in the same round trip.
        waits, due = await t._run(
            [(Q["message_wait_keys"], (run_id,)), (Q["due_tasks"], (run_id, now))]
        )
        keys = sorted({row[0] for row in waits.rows or []})
        if keys:
            locks: list[Step] = [(Q["xact_lock"], (subject_lock("default", k),)) for k in keys]
            due = (await t._run([*locks, (Q["due_tasks"], (run_id, now))]))[-1]
        return [TaskRecord(*row) for row in due.rows or []]

    async def delete(self, ids: Sequence[int]) -> None:
        t = self._t
        if len(ids) == 1:  # the usual case: no array to build
            if not t._fuse("delete_task", (ids[0],)):
                await t._write(Q["delete_task"], (ids[0],))
        elif ids and not t._fuse("delete_tasks", (list(ids),)):
            await t._write(Q["delete_tasks"], (list(ids),))

    async def delete_waits(
        self, run_id: str, pos: int | None = None, *, keep: Sequence[int] = ()
    ) -> None:
        t = self._t
        if keep:
            if pos is None:
                await t._write(Q["delete_wait_tasks_keep"], (run_id, list(keep)))
            elif not t._fuse("delete_wait_tasks_at_keep", (run_id, pos, list(keep)), run_id):
                await t._write(Q["delete_wait_tasks_at_keep"], (run_id, pos, list(keep)))
        elif pos is None:
            await t._write(Q["delete_wait_tasks"], (run_id,))
        elif not t._fuse("delete_wait_tasks_at", (run_id, pos), run_id):
            await t._write(Q["delete_wait_tasks_at"], (run_id, pos))

    async def delete_run(self, run_id: str) -> None:
        t = self._t
        if not t._fuse("delete_all_tasks", (run_id,), run_id):
            await t._write(Q["delete_all_tasks"], (run_id,))

    async def defer(self, run_id: str, ids: Sequence[int]) -> None:
        if ids:
            await self._t._write(F["defer_tasks"], (run_id, DEFERRED, list(ids)), idempotent=True)

    async def wake_deferred(self, run_id: str, at: float) -> None:
        # (the admission that wakes them adds the run's start task in the same
        # transaction: that one's notification tells the workers)
        await self._t._write(F["wake_deferred"], (at, run_id, DEFERRED), idempotent=True)
