"""Run state changes shared by the client API and the worker, each inside a transaction."""

from __future__ import annotations

from parkway import _json
from parkway.core import admission, deadlines, operators
from parkway.core.messages import after_run_ends, rebuffer
from parkway.core.runtime import Runtime
from parkway.errors import RunNotFoundError, RunTimeoutError
from parkway.models import RunStatus, error_dict
from parkway.store.base import ENDED, NewTask, RunRecord, Tx
from parkway.store.runs import RunFilter
from parkway.store.vocabulary import TaskKind


async def finish(
    rt: Runtime,
    tx: Tx,
    run: RunRecord,
    now: float,
    *,
    messages: bool = True,
    human_tasks: bool = True,
) -> None:
    """What follows a run's end: its timers and subscriptions go, its open human tasks
    are cancelled, its parent wakes up, a message-started run hands its key to the
    next buffered message, and a run under a concurrency limit frees its slot (to
    the key's next queued run).

    ``messages=False``: the caller knows the run never waited for a message, so
    no delivery can be pending for it (and none is looked for).
    ``human_tasks=False``: the caller knows the run never opened a human task, so
    none is looked for to close.
    """
    if messages:
        await rebuffer(rt, tx, run.id, now)
    wf = rt.registry.get(run.workflow, run.version)
    if wf is None or admission.limited(wf):  # (unregistered here: it may be under a limit)
        await admission.release(tx, wf, run, now)
    await tx.tasks.delete_run(run.id)
    await tx.subscriptions.delete_run(run.id)
    await tx.streams.end_run(run.id)  # (their readers elsewhere stop after the last item)
    if human_tasks:
        await tx.human_tasks.close_run(run.id, now)
    if run.parent_id is not None:
        await tx.tasks.add([NewTask(run.parent_id, now, TaskKind.CHILD)])
    if run.id.startswith("msg:"):
        await after_run_ends(rt, tx, run.workflow, run.version, run.subject, now)


async def cancel(
    rt: Runtime,
    tx: Tx,
    run: RunRecord,
    now: float,
    *,
    owner: str | None = None,
    checked: bool = False,
) -> bool:
    """Cancel ``run`` and, through tasks, its active children. Returns whether it changed.

    A run with compensations registered is not ended here: it gets a ``cancel``
    task (and loses its pause), and the worker that takes it runs its compensations
    before it ends it ``cancelled`` (see :mod:`parkway.replay.sagas`).
    ``checked``: the caller knows it has none (its journal was read).
    """
    if not checked and deadlines.compensating(await tx.journal.read(run.id)):
        if run.paused:  # (its compensations need a worker: the cancel outranks the pause)
            await tx.runs.update(run.id, {"paused": False}, owner=owner)
        await tx.tasks.add([NewTask(run.id, now, deadlines.CANCEL)])
        return True
    changes = {"status": RunStatus.CANCELLED, "updated_at": now}
    if not await tx.runs.update(run.id, changes, owner=owner):
        return False
    await finish(rt, tx, run, now)
    rt.telemetry.cancelled(run)
    await cancel_children(tx, run, now)
    return True


async def time_out(
    rt: Runtime, tx: Tx, run: RunRecord, reason: RunTimeoutError, now: float, *, owner: str
) -> bool:
    """End ``run``, which has no compensation to run, ``failed`` with ``reason`` (its
    deadline passed); its active children are cancelled. Whether it changed."""
    error = error_dict(reason)
    changes = {
        "status": RunStatus.FAILED,
        "updated_at": now,
        "paused": False,
        "error": _json.dumps(error),
        "advanced_by": None,
    }
    if not await tx.runs.update(run.id, changes, owner=owner):
        return False
    await finish(rt, tx, run, now)
    rt.telemetry.timed_out(run, error)
    await cancel_children(tx, run, now)
    return True


async def cancel_children(tx: Tx, run: RunRecord, now: float) -> None:
    """Cancel the active children of ``run`` (which stops), through tasks."""
    children = await tx.runs.list(RunFilter(parent_id=run.id, limit=1_000_000))
    await tx.tasks.add(
        [
            NewTask(child.id, now, deadlines.CANCEL)
            for child in children
            if child.status not in ENDED
        ]
    )


async def cancel_run(rt: Runtime, run_id: str, by: str | None = None) -> None:
    """Cancel a run and its active children; a finished run is left as it is.
    ``by``: who asked (see :mod:`parkway.core.operators`).

    Raises:
        RunNotFoundError: No run has that id.
    """
    now = rt.now()
    async with rt.store.transaction() as tx:
        run = await tx.runs.get(run_id)
        if run is None:
            raise RunNotFoundError(run_id)
        if run.status in ENDED:
            return
        if run.lease_owner is None:
            await cancel(rt, tx, run, now)
        else:  # a worker is advancing it: it will see this task next
            await tx.tasks.add([NewTask(run_id, now, TaskKind.CANCEL)])
        await operators.record(rt, tx, run_id, "cancel", by)
    rt.results.notify(run_id)
    rt.after_commit()
