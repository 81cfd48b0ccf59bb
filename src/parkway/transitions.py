"""Run state changes shared by the client API and the worker, each inside a transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING

from parkway.messages import after_run_ends, rebuffer
from parkway.models import RunStatus
from parkway.store.base import ENDED, NewTask, RunRecord, Tx

if TYPE_CHECKING:
    from parkway.engine import Engine

TERMINAL = ENDED


async def finish(
    tx: Tx, run: RunRecord, now: float, engine: Engine, *, messages: bool = True
) -> None:
    """What follows a run's end: its timers and subscriptions go, its parent wakes up,
    and a message-started run hands its key to the next buffered message.

    ``messages=False``: the caller knows the run never waited for a message, so
    no delivery can be pending for it (and none is looked for).
    """
    if messages:
        await rebuffer(engine, tx, run.id, now)
    await tx.delete_all_tasks(run.id)
    await tx.delete_run_subscriptions(run.id)
    if run.parent_id is not None:
        await tx.add_tasks([NewTask(run.parent_id, now, "child")])
    if run.id.startswith("msg:"):
        await after_run_ends(engine, tx, run.workflow, run.version, run.subject, now)


async def cancel(
    tx: Tx, run: RunRecord, now: float, engine: Engine, *, owner: str | None = None
) -> bool:
    """Cancel ``run`` and, through tasks, its active children. Returns whether it changed."""
    changes = {"status": RunStatus.CANCELLED.value, "updated_at": now}
    if not await tx.update_run(run.id, changes, owner=owner):
        return False
    await finish(tx, run, now, engine)
    children = await tx.list_runs(
        workflow=None, status=None, subject=None, domain=None, parent_id=run.id, limit=1_000_000
    )
    await tx.add_tasks(
        [NewTask(child.id, now, "cancel") for child in children if child.status not in TERMINAL]
    )
    return True
