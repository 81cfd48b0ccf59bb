"""Run state changes shared by the client API and the worker, each inside a transaction."""

from __future__ import annotations

from parkway.core import flow
from parkway.core.messages import after_run_ends, rebuffer
from parkway.core.runtime import Runtime
from parkway.errors import RunNotFoundError
from parkway.models import RunStatus
from parkway.store.base import ENDED, NewTask, RunRecord, Tx


async def finish(rt: Runtime, tx: Tx, run: RunRecord, now: float, *, messages: bool = True) -> None:
    """What follows a run's end: its timers and subscriptions go, its open human tasks
    are cancelled, its parent wakes up, a message-started run hands its key to the
    next buffered message, and a run under a concurrency limit frees its slot (to
    the key's next queued run).

    ``messages=False``: the caller knows the run never waited for a message, so
    no delivery can be pending for it (and none is looked for).
    """
    if messages:
        await rebuffer(rt, tx, run.id, now)
    wf = rt.registry.get(run.workflow, run.version)
    if wf is None or flow.limited(wf):  # (unregistered here: it may be under a limit)
        await flow.release(tx, wf, run, now)
    await tx.delete_all_tasks(run.id)
    await tx.delete_run_subscriptions(run.id)
    await tx.close_human_tasks(run.id, now)
    if run.parent_id is not None:
        await tx.add_tasks([NewTask(run.parent_id, now, "child")])
    if run.id.startswith("msg:"):
        await after_run_ends(rt, tx, run.workflow, run.version, run.subject, now)


async def cancel(
    rt: Runtime, tx: Tx, run: RunRecord, now: float, *, owner: str | None = None
) -> bool:
    """Cancel ``run`` and, through tasks, its active children. Returns whether it changed."""
    changes = {"status": RunStatus.CANCELLED.value, "updated_at": now}
    if not await tx.update_run(run.id, changes, owner=owner):
        return False
    await finish(rt, tx, run, now)
    rt.telemetry.cancelled(run)
    children = await tx.list_runs(
        workflow=None, status=None, subject=None, domain=None, parent_id=run.id, limit=1_000_000
    )
    await tx.add_tasks(
        [NewTask(child.id, now, "cancel") for child in children if child.status not in ENDED]
    )
    return True


async def cancel_run(rt: Runtime, run_id: str) -> None:
    """Cancel a run and its active children; a finished run is left as it is.

    Raises:
        RunNotFoundError: No run has that id.
    """
    now = rt.now()
    async with rt.store.transaction() as tx:
        run = await tx.get_run(run_id)
        if run is None:
            raise RunNotFoundError(run_id)
        if run.status in ENDED:
            return
        if run.lease_owner is None:
            await cancel(rt, tx, run, now)
        else:  # a worker is advancing it: it will see this task next
            await tx.add_tasks([NewTask(run_id, now, "cancel")])
    rt.results.notify(run_id)
    rt.after_commit()
