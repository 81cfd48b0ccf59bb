"""The final commit of a run's advance: its last writes, its new status, its tasks.

:class:`FinalCommit` writes what the advance decided under the run's lease: a
run that parked keeps its waits, one that ended is finished
(:func:`parkway.core.transitions.finish`), one that went on as new starts its
next generation, and a held one keeps everything it was given for the retry
that frees it. A run whose commit the store refused every time
(:class:`~parkway.worker.refusals.Refused`) fails, with nothing of it kept.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from parkway import _json
from parkway.core import admission, cancel_on
from parkway.core.messages import rebuffer
from parkway.core.runtime import Runtime
from parkway.core.transitions import cancel_children, finish
from parkway.errors import StoreFailedError
from parkway.models import RunStatus, error_dict, exception_text
from parkway.replay.machine import Machine
from parkway.replay.writes import Outcome, Writes
from parkway.store.base import ENDED, MESSAGE_TASK, NewTask, RunRecord, TaskRecord, Tx
from parkway.store.vocabulary import Ending, TaskKind
from parkway.worker.cache import RunCache
from parkway.worker.commit import apply_writes
from parkway.worker.refusals import CAUSE_CHARS, Commit, Refused, commit_retrying

log = logging.getLogger("parkway.worker")

_RUN_FIELDS = frozenset(f.name for f in dataclasses.fields(RunRecord))


class FinalCommit:
    """Commits the outcomes of the advances of runs leased to ``owner``; ``running``:
    the runs whose row a flush of their current advance has set running."""

    def __init__(
        self, rt: Runtime, owner: str, commit: Commit, cache: RunCache, running: set[str]
    ) -> None:
        self.rt, self.owner, self._commit = rt, owner, commit
        self.cache = cache
        self.running = running

    async def commit(
        self,
        run: RunRecord,
        tasks: list[TaskRecord],
        writes: Writes,
        outcome: Outcome,
        machine: Machine | None = None,
        *,
        pin: dict[str, object] | None = None,
        keep: bool = False,
    ) -> None:
        """The advance's final commit: its last writes, the run's new status, its tasks.

        ``keep``: this worker keeps the parked machine, and says so in the run's row
        (``advanced_by``); otherwise the row says no worker does.
        """
        rt = self.rt
        now = rt.now()
        changes: dict[str, object] = {
            "updated_at": now,
            "advanced_by": self.owner if keep else None,
            **(pin or {}),
        }
        status = outcome.status
        held = status == RunStatus.HELD
        if held:
            # Held unchanged: its journal, and every task it was given (the inputs sent
            # to it, which no claim takes while it is held), wait for a retry.
            changes["status"] = status
            changes["error"] = _json.dumps(outcome.error)
        elif status == Ending.CONTINUED:
            changes.update(
                status=RunStatus.RUNNING,
                input=outcome.new_input,
                generation=run.generation + 1,
                output=None,
                error=None,
            )
        else:
            if status != run.status or run.id in self.running:
                # (Parked again and never flushed as running: the status is left
                # unnamed, which spares the index entries an UPDATE naming it rewrites.)
                changes["status"] = status
            changes["error"] = None  # a run held earlier may have recovered
            if status == RunStatus.COMPLETED:
                changes["output"] = outcome.output
            elif status == RunStatus.FAILED:
                changes["error"] = _json.dumps(outcome.error)
        rebuffers = machine is not None and machine.may_hold_deliveries
        # Open human tasks to close at its end: only a run that opened one has any
        # (a task's id is journaled in the commit that opens it; an earlier
        # generation's, cleared from the journal, may still be open).
        # (read only as the run ends: the scan is over the whole journal)
        people = status in ENDED and (
            machine is None or run.generation > 0 or _opened_human_tasks(machine)
        )
        # Updates given that the run did not get to before it went on as new wait
        # for the new generation (an ended run's are closed: see core.updates).
        updates_left = machine is not None and machine.unhandled_updates
        # Runs the cache let go of since the last commit: this one clears their marks.
        evicted = self.cache.evicted()
        stopped = machine is not None and machine.stopping
        deadline = machine.deadline_entry if machine is not None else None

        async def job(tx: Tx) -> None:
            await tx.runs.update_leased(run.id, changes, owner=self.owner)
            if held:
                if evicted:
                    await tx.runs.drop_cache_marks(evicted, self.owner)
                return
            consumed = frozenset(writes.consumed_tasks)
            await apply_writes(rt, tx, writes, ending=status in ENDED)
            claimed = frozenset(t.id for t in tasks)
            if status in ENDED:
                # finish() drops all the run's tasks, and buffers again each message
                # it did not take, if it may have any: the ones it took go first.
                if rebuffers:
                    await tx.tasks.delete(list(consumed))
                await finish(rt, tx, run, now, messages=rebuffers, human_tasks=people)
                if stopped:  # (cancelled, or past its deadline: its children stop too)
                    await cancel_children(tx, run, now)
            else:
                if any(t.kind == MESSAGE_TASK for t in tasks):  # else none to buffer again
                    await rebuffer(rt, tx, run.id, now, keep=consumed, only=claimed)
                await tx.tasks.delete(list(claimed))
            if status == Ending.CONTINUED:
                await tx.journal.clear(run.id)
                if deadline is not None:  # (its deadline holds across generations)
                    await tx.journal.put(run.id, [deadline])
                await rebuffer(rt, tx, run.id, now)
                await tx.tasks.delete_waits(run.id)
                await tx.subscriptions.delete_run(run.id)
                await tx.tasks.add([NewTask(run.id, now, TaskKind.START)])
                # The new generation holds its cancel conditions anew (its input's).
                renewed = dataclasses.replace(run, input=outcome.new_input)
                await cancel_on.register(rt.registry, tx, renewed, now)
                if updates_left:
                    await tx.tasks.add([NewTask(run.id, now, TaskKind.UPDATE)])
            if evicted:  # (last: on PostgreSQL the writes above may join the fenced update)
                await tx.runs.drop_cache_marks(evicted, self.owner)

        # (An end frees its key's slot: batched in the keys' order, see admission.lock_order.)
        order = (
            admission.lock_order(rt.registry.get(run.workflow, run.version), run)
            if (status in ENDED)
            else ""
        )
        await commit_retrying(self._commit, run, rt.telemetry.bind(job), order=order)
        rt.telemetry.committed(run, outcome, machine)
        if status in ENDED or held:
            final: dict[str, Any] = {k: v for k, v in changes.items() if k in _RUN_FIELDS}
            rt.results.notify(run.id, dataclasses.replace(run, **final))
        elif writes.tells_callers:  # a value set, an update answered: wake their callers
            rt.results.notify(run.id)
        rt.after_commit()

    async def fail_refused(
        self,
        run: RunRecord,
        tasks: list[TaskRecord],
        machine: Machine | None,
        refused: Refused,
    ) -> None:
        """Fail ``run``: the store refused what its advance decided, every time.

        Nothing of those writes is kept (the last commit's state stands); the run ends
        ``failed`` with a :class:`StoreFailedError` that quotes the store's refusal.
        """
        cause = refused.cause
        error = StoreFailedError(
            f"run {run.id!r}: the store refused to save what the run decided, "
            f"{refused.tries} times ({type(cause).__name__}: "
            f"{exception_text(cause)[:CAUSE_CHARS]}); a step's result or error it cannot "
            "store (an integer beyond 64 bits, a NUL character, text it cannot encode)?"
        )
        log.error("%s; the run fails", error)
        if machine is not None:
            machine.take_writes()  # (what was refused: never committed)
        failed = Outcome(RunStatus.FAILED, error=error_dict(error))
        await self.commit(run, tasks, Writes(run.id), failed, machine)


def _opened_human_tasks(machine: Machine) -> bool:
    """Whether the run's journal holds a human task it opened (``ctx.human_task``)."""
    return any(e.kind == "value" and e.name == "human_task" for e in machine.entries.values())
