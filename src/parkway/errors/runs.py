"""Errors of runs: not found, in the wrong state, failed, timed out, cancelled,
no longer replaying their journal, and their updates and limits."""

from __future__ import annotations

from typing import Any

from parkway.errors.base import ParkwayError
from parkway.errors.text import shown


class RunNotFoundError(ParkwayError, LookupError):
    """No run exists with this id."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {shown(run_id)}; list runs with engine.list_runs()")
        self.run_id = run_id


class RunClosedError(ParkwayError):
    """The run has already finished and takes no more input."""

    def __init__(self, run_id: str, status: str, what: str) -> None:
        super().__init__(f"run {shown(run_id)} is {status}; it can no longer receive {what}")
        self.run_id, self.status = run_id, status


class RunStateError(ParkwayError):
    """The run's state does not allow this operation (pausing a finished run,
    retrying one that has not failed, ...).

    Attributes:
        run_id: The run.
        status: Its status.
        action: What was asked (``"pause"``, ``"resume"``, ``"retry"``).
    """

    def __init__(self, run_id: str, status: str, action: str, hint: str) -> None:
        super().__init__(f"cannot {action} run {shown(run_id)}: it is {status}; {hint}")
        self.run_id, self.status, self.action = run_id, status, action


class WorkflowFailedError(ParkwayError):
    """The workflow run ended with an error.

    Attributes:
        run_id: The failed run.
        type: The name of the exception the workflow raised (also ``error_type``).
        error_message: Its message.
        error: The stored :class:`parkway.ErrorInfo` (with the traceback).
    """

    def __init__(self, run_id: str, error: Any) -> None:
        self.run_id = run_id
        self.error = error
        self.type: str = getattr(error, "type", "Exception")
        self.error_type = self.type
        self.error_message: str = getattr(error, "message", str(error))
        super().__init__(f"run {shown(run_id)} failed: {self.type}: {self.error_message}")


class RunCancelledError(ParkwayError):
    """The workflow run was cancelled."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {shown(run_id)} was cancelled")
        self.run_id = run_id


class NonDeterminismError(ParkwayError):
    """Replaying a run diverged from its journal; the run is held unchanged."""

    def __init__(self, run_id: str, position: int, expected: str, got: str) -> None:
        super().__init__(
            f"run {shown(run_id)} diverged from its journal at position {position}: "
            f"the journal has {expected} but the workflow now does {got}. The run is held; "
            "deploy code that replays the same operations in the same order, or register the "
            "change under a new version= so new runs use it"
        )
        self.run_id, self.position, self.expected, self.got = run_id, position, expected, got


class StepFailedError(ParkwayError):
    """A step failed on its last attempt."""

    def __init__(self, step: str, attempts: int, error_type: str, error_message: str) -> None:
        super().__init__(
            f"step {shown(step)} failed after {attempts} attempt(s): {error_type}: {error_message}"
        )
        self.step, self.attempts = step, attempts
        self.error_type, self.error_message = error_type, error_message


class RunTimeoutError(ParkwayError, TimeoutError):
    """A run was still active at its deadline (``created_at + timeout``).

    Attributes:
        run_id: The run that timed out.
        timeout: Its timeout, in seconds.
    """

    def __init__(self, run_id: str, timeout: float) -> None:
        super().__init__(f"run {run_id!r} timed out: still active {timeout:g}s after its start")
        self.run_id, self.timeout = run_id, timeout


class CompensationFailedError(ParkwayError):
    """A compensation still failed after its retries; the run ended ``failed``.

    Attributes:
        run_id: The run whose compensations were run.
        failed: The names of the steps whose compensation failed, in the order
            they were run (newest step first).
    """

    def __init__(self, run_id: str, failed: list[str]) -> None:
        names = ", ".join(repr(name) for name in failed)
        super().__init__(f"run {run_id!r}: the compensation of step(s) {names} failed")
        self.run_id, self.failed = run_id, list(failed)


class StepTimeoutError(ParkwayError, TimeoutError):
    """An attempt of a step ran past its ``timeout`` and was cut off (an ``async def``
    step cancelled, a ``def`` step's thread abandoned: its late result is ignored)."""

    def __init__(self, step: str, timeout: float) -> None:
        super().__init__(f"step {step!r} timed out after {timeout:g}s")
        self.step, self.timeout = step, timeout


class NonRetryableError(ParkwayError):
    """Raised from a step: a failure that trying again cannot mend (a declined card).

    The step fails at once, whatever its ``Retry`` allows; subclass it for
    failures of your own that are final.
    """


class WaitTimeoutError(ParkwayError, TimeoutError):
    """A wait's deadline passed before its input arrived."""

    def __init__(self, what: str, timeout: float) -> None:
        super().__init__(f"{what} timed out after {timeout:g}s")
        self.what, self.timeout = what, timeout


class ResultTimeoutError(ParkwayError, TimeoutError):
    """The run did not finish within the time the caller was willing to wait."""

    def __init__(self, run_id: str, timeout: float) -> None:
        super().__init__(
            f"run {shown(run_id)} did not finish within {timeout:g}s; it goes on in the background "
            "(check it with engine.get_run)"
        )
        self.run_id, self.timeout = run_id, timeout


class UpdateRejectedError(ParkwayError):
    """The run refused an update: its validator raised, or it has no handler of that
    name. Nothing of it was journaled.

    Attributes:
        run_id: The run.
        name: The update's name.
        reason: Why (the validator's message).
    """

    def __init__(self, run_id: str, name: str, reason: str) -> None:
        super().__init__(f"run {shown(run_id)} rejected update {shown(name)}: {reason}")
        self.run_id, self.name, self.reason = run_id, name, reason


class UpdateFailedError(ParkwayError):
    """An update was accepted, but its handler raised (the run goes on).

    Attributes:
        run_id: The run.
        name: The update's name.
        error: The handler's error (a :class:`parkway.ErrorInfo`).
    """

    def __init__(self, run_id: str, name: str, error: Any) -> None:
        self.run_id, self.name, self.error = run_id, name, error
        super().__init__(f"update {shown(name)} of run {shown(run_id)} failed: {error}")


class ConcurrencyLimitError(ParkwayError):
    """A start was refused: the workflow's ``Concurrency(when_full="skip")`` limit
    is full for the run's key. Nothing was written.

    Attributes:
        workflow: The workflow whose limit is full.
        key: The key value the limit is counted under (``""``: the workflow's
            one limit, ``key=None``).
        limit: The limit.
    """

    def __init__(self, workflow: str, key: str, limit: int) -> None:
        scope = f"key {shown(key)}" if key else "the workflow"
        super().__init__(
            f"workflow {shown(workflow)} already has {limit} active run(s) for {scope} "
            "(Concurrency when_full='skip'): not started"
        )
        self.workflow, self.key, self.limit = workflow, key, limit
