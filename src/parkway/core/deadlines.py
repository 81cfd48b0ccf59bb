"""Run deadlines (``@engine.workflow(timeout=)``, ``engine.start(timeout=)``) and why a
worker stops a run.

A run with a timeout gets a task of kind ``deadline`` when it is inserted, due at
``created_at + timeout`` (engine time), with the timeout in its payload. No
worker polls for it: the task is due work like a timer, claimed at its time even
while the run is paused (the deadline outranks the pause), and kept across
``continue_as_new`` (the new generation keeps the run's ``created_at``). The run's
end drops it with its other tasks.
"""

from __future__ import annotations

from collections.abc import Sequence

from parkway import _json
from parkway.durations import Duration, to_seconds
from parkway.errors import InvalidArgumentError, RunCancelledError, RunTimeoutError
from parkway.replay.sagas import REGISTERED, STOP_BRANCH
from parkway.store.base import JournalEntry, NewTask, RunRecord, TaskRecord

DEADLINE = "deadline"
CANCEL = "cancel"


def check_timeout(value: Duration | None, field: str = "timeout") -> float | None:
    """A run timeout in seconds (``None``: none); it must be longer than zero.

    Raises:
        InvalidDurationError: ``value`` is not a duration.
        InvalidArgumentError: It is zero.
    """
    if value is None:
        return None
    seconds = to_seconds(value, field)
    if seconds <= 0:
        raise InvalidArgumentError(f"{field} must be longer than zero, got {value!r}", field=field)
    return seconds


def deadline_tasks(run: RunRecord, timeout: float | None) -> list[NewTask]:
    """The deadline task of a new run (none without a timeout)."""
    if timeout is None:
        return []
    payload = _json.dumps({"timeout": timeout})
    return [NewTask(run.id, run.created_at + timeout, DEADLINE, payload=payload)]


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
