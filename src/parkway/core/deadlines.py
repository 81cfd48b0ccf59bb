"""Run deadlines (``@engine.workflow(timeout=)``, ``engine.start(timeout=)``) and why a
worker stops a run.

A run with a timeout gets a task of kind ``deadline`` when it is inserted, due at
``created_at + timeout`` (engine time), with the timeout in its payload. No
worker polls for it: the task is due work like a timer, claimed at its time even
while the run is paused (the deadline outranks the pause), and kept across
``continue_as_new`` (the new generation keeps the run's ``created_at``). The run's
end drops it with its other tasks.

The deadline is journaled too (position 0, branch ``!deadline``, kept across
generations), so the run's code stops doing anything new once it has passed even
within one advance: a run busy with steps back to back never waits for its task.
"""

from __future__ import annotations

from collections.abc import Sequence

from parkway import _json
from parkway.errors import RunCancelledError, RunTimeoutError
from parkway.replay.sagas import DEADLINE_BRANCH, REGISTERED, STOP_BRANCH
from parkway.store.base import JournalEntry, NewTask, RunRecord, TaskRecord, Tx
from parkway.store.vocabulary import EntryKind, EntryState, TaskKind

DEADLINE = TaskKind.DEADLINE
CANCEL = TaskKind.CANCEL


async def add_deadline(tx: Tx, run: RunRecord, timeout: float | None) -> None:
    """A new run's deadline (nothing without a timeout): its task, and its journal
    entry, by which the run's code stops doing anything new once it has passed,
    even within one advance (see :mod:`parkway.replay.sagas`)."""
    if timeout is None:
        return
    at = run.created_at + timeout
    value = _json.dumps({"timeout": timeout})
    await tx.tasks.add([NewTask(run.id, at, DEADLINE, payload=value)])
    entry = JournalEntry(
        0,
        EntryKind.DEADLINE,
        "timeout",
        EntryState.DONE,
        value,
        at,
        run.created_at,
        DEADLINE_BRANCH,
    )
    await tx.journal.put(run.id, [entry])


def stop_reason(run: RunRecord, tasks: Sequence[TaskRecord]) -> BaseException | None:
    """Why the run must stop now, from its due tasks: its deadline passed (first), or
    it was cancelled; ``None``: it goes on."""
    cancelled = False
    for task in tasks:
        if task.kind == DEADLINE:
            timeout = _json.loads(task.payload)["timeout"] if task.payload else 0.0
            return RunTimeoutError(run.id, timeout)
        cancelled = cancelled or task.kind == CANCEL
    return RunCancelledError(run.id) if cancelled else None


def compensating(journal: Sequence[JournalEntry]) -> bool:
    """Whether a run whose journal this is must be stopped by a worker (compensations
    are registered, or its stop is under way) rather than ended at once."""
    return any(e.kind == REGISTERED or e.branch == STOP_BRANCH for e in journal)
