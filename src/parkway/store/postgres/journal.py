"""A PostgreSQL transaction's operations on a run's journal, tasks and mailbox: what a
worker's commit writes (most of it fused into the commit's fenced update) and a
signal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from parkway.ids import new_mark
from parkway.store.base import ENDED, JournalEntry, NewTask, Sent, SignalRecord, TaskRecord
from parkway.store.postgres.connections import Step
from parkway.store.postgres.runs import RunOps
from parkway.store.postgres.statements import Q, subject_lock
from parkway.store.postgres.wire import Result


class JournalOps(RunOps):
    """A run's journal, tasks and mailbox."""

    # -- journal -----------------------------------------------------------------------------

    async def journal(self, run_id: str) -> list[JournalEntry]:
        return [JournalEntry(*row) for row in await self._all(Q["journal"], (run_id,))]

    async def journal_outline(self, run_id: str) -> list[tuple[int, str]]:
        return [
            (int(pos), str(state))
            for pos, state in await self._all(Q["journal_outline"], (run_id,))
        ]

    async def copy_journal(self, source_id: str, run_id: str, before: int | None) -> None:
        await self._exec(Q["copy_journal"], {"run": run_id, "source": source_id, "before": before})

    async def put_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        # One statement for all; the last entry for a position wins, as on SQLite.
        latest = list({e.pos: e for e in entries}.values())
        if not latest:
            return
        if len(latest) == 1:
            # The usual case (a step's result): plain values, no arrays to build.
            e = latest[0]
            one = (
                run_id,
                e.pos,
                e.kind,
                e.name,
                e.state,
                e.value,
                e.deadline,
                e.at,
                e.branch,
                e.seq,
            )
            if not self._fuse("put_journal_entry", one, run_id):
                await self._write(Q["put_journal_entry"], one)
            return
        params = (
            run_id, [e.pos for e in latest], [e.kind for e in latest],
            [e.name for e in latest], [e.state for e in latest],
            [e.value for e in latest], [e.deadline for e in latest],
            [e.at for e in latest], [e.branch for e in latest], [e.seq for e in latest],
        )  # fmt: skip
        if not self._fuse("put_journal", params, run_id):
            await self._write(Q["put_journal"], params)

    async def clear_journal(self, run_id: str) -> None:
        await self._write(Q["clear_journal"], {"id": run_id})

    # -- tasks -------------------------------------------------------------------------------

    async def add_tasks(self, tasks: Sequence[NewTask]) -> None:
        if not tasks:
            return
        columns = (
            [t.run_id for t in tasks],
            [t.due_at for t in tasks],
            [t.kind for t in tasks],
            [t.pos for t in tasks],
            [t.payload for t in tasks],
        )
        self._task_runs.update(columns[0])
        first = min(columns[1])
        if self._notified is not None and self._notified <= first:
            await self._write(Q["add_tasks"], columns)
        else:
            await self._write(Q["add_tasks_notify"], (*columns, self._announce(first)))

    async def due_tasks(self, run_id: str, now: float) -> list[TaskRecord]:
        if self._ro:
            return [TaskRecord(*row) for row in await self._all(Q["due_tasks"], (run_id, now))]
        # Read-write: the run's commit is about to re-buffer the message deliveries
        # it will not take and delete the rest (messages.rebuffer). A correlate
        # committing a delivery between that read and that delete would lose its
        # message, so while the run has a message wait, take its key's lock (the
        # one correlate holds to commit) and read after. A run without one
        # can get no message delivery: one read, in the same round trip.
        waits, tasks = await self._run(
            [(Q["message_wait_keys"], (run_id,)), (Q["due_tasks"], (run_id, now))]
        )
        keys = sorted({row[0] for row in waits.rows or []})
        if keys:
            locks: list[Step] = [(Q["xact_lock"], (subject_lock("default", k),)) for k in keys]
            tasks = (await self._run([*locks, (Q["due_tasks"], (run_id, now))]))[-1]
        return [TaskRecord(*row) for row in tasks.rows or []]

    async def delete_tasks(self, ids: Sequence[int]) -> None:
        if len(ids) == 1:  # the usual case: no array to build
            if not self._fuse("delete_task", (ids[0],)):
                await self._write(Q["delete_task"], (ids[0],))
        elif ids and not self._fuse("delete_tasks", (list(ids),)):
            await self._write(Q["delete_tasks"], (list(ids),))

    async def delete_wait_tasks(
        self, run_id: str, pos: int | None = None, *, keep: Sequence[int] = ()
    ) -> None:
        if keep:
            if pos is None:
                await self._write(Q["delete_wait_tasks_keep"], (run_id, list(keep)))
            elif not self._fuse("delete_wait_tasks_at_keep", (run_id, pos, list(keep)), run_id):
                await self._write(Q["delete_wait_tasks_at_keep"], (run_id, pos, list(keep)))
        elif pos is None:
            await self._write(Q["delete_wait_tasks"], (run_id,))
        elif not self._fuse("delete_wait_tasks_at", (run_id, pos), run_id):
            await self._write(Q["delete_wait_tasks_at"], (run_id, pos))

    async def delete_all_tasks(self, run_id: str) -> None:
        if not self._fuse("delete_all_tasks", (run_id,), run_id):
            await self._write(Q["delete_all_tasks"], (run_id,))

    # -- mailbox -----------------------------------------------------------------------------

    async def add_signal(self, run_id: str, name: str, payload: bytes | None, at: float) -> None:
        await self._write(Q["add_signal"], (run_id, name, payload, at))

    async def send_signal(
        self,
        run_id: str,
        name: str,
        payload: bytes | None,
        at: float,
        *,
        task_payload: bytes | None = None,
    ) -> Sent:
        # Queued, with a commit mark: in a transaction of its own (or with a lease
        # for this process's worker) the signal goes with its COMMIT, one round
        # trip; what it found is known once that returns.
        sent = Sent()
        token, unannounce = self._announce_maybe(at)
        params: dict[str, Any] = dict(
            run=run_id, name=name, payload=payload, at=at, token=token,
            mark=new_mark(), quiet=False, task_payload=task_payload,
        )  # fmt: skip
        self._signal = (run_id, params)
        self._task_runs.add(run_id)

        def found(status: str | None) -> None:
            sent.status, sent.known = status, True
            if status is None or status in ENDED:
                unannounce()  # nothing added: nothing announced
                self._task_runs.discard(run_id)

        def answered(result: Result) -> None:
            found(str(result.rows[0][0]) if result.rows else None)

        await self._write(Q["send_signal"], params, on_result=answered)
        await self._mark(params, found)
        return sent

    async def signals(self, run_id: str) -> list[SignalRecord]:
        return [SignalRecord(*row) for row in await self._all(Q["signals"], (run_id,))]

    async def delete_signals(self, ids: Sequence[int]) -> None:
        if ids and not self._fuse("delete_signals", (list(ids),)):
            await self._write(Q["delete_signals"], (list(ids),))
