"""Every error parkway raises derives from :class:`ParkwayError`.

An error's default message is its docstring; subclasses that know more (a run
id, a message key, a position in the journal) say it, and say what to do next.
"""

from __future__ import annotations

import reprlib
from typing import Any

# How much of a caller's value an error message shows.
SHOWN_LENGTH = 80
# An int with more bits than this is described, not written out: str() of one over
# 4,300 digits raises ValueError, and a message need not hold 80 digits of it.
_SHOWN_INT_BITS = 200


class _Shown(reprlib.Repr):
    """``repr``, bounded, for any value a caller may hand us: a long string or list
    is cut, a huge int is described by its size, and an object whose ``__repr__``
    raises is named by its type (``reprlib`` catches that for instances)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = SHOWN_LENGTH
        self.maxlevel = 3

    def repr_int(self, x: int, level: int) -> str:
        return _int_text(x)

    def repr_str(self, x: str, level: int) -> str:
        # (A str, exactly: a subclass goes through repr_instance, which guards its repr.)
        if len(x) <= SHOWN_LENGTH:
            return repr(x)
        return f"{x[:60]!r}...{x[-12:]!r} ({len(x)} characters)"

    def repr_instance(self, x: object, level: int) -> str:
        if isinstance(x, int) and int.bit_length(x) > _SHOWN_INT_BITS:  # (an IntEnum...)
            return _int_text(int.__int__(x))
        try:
            text = repr(x)
        except Exception:  # (the caller's __repr__ is not ours to trust)
            return f"<{type(x).__name__} object>"
        if not isinstance(text, str):
            return f"<{type(x).__name__} object>"
        return text if len(text) <= SHOWN_LENGTH else f"{text[:60]}...{text[-12:]}"


def _int_text(x: int) -> str:
    if x.bit_length() <= _SHOWN_INT_BITS:
        return int.__repr__(x)
    digits = int(x.bit_length() * 0.30103) + 1
    return f"{'-' if x < 0 else ''}<an int of about {digits:,} digits>"


_shown = _Shown()


def shown(value: object) -> str:
    """``repr(value)`` for an error message, built safely whatever the caller passed:
    at most about :data:`SHOWN_LENGTH` characters, never raising (not for an int of
    10,000 digits, nor for an object whose ``__repr__`` raises)."""
    try:
        return _shown.repr(value)
    except Exception:
        return f"<{type(value).__name__} object>"


def describe(exc: BaseException) -> str:
    """``str(exc)`` for a message, safely: an exception whose ``__str__`` raises (or
    returns no string) is named by its type, and a long message is cut."""
    try:
        text = str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose message cannot be shown>"
    if not isinstance(text, str):
        return f"<{type(exc).__name__} whose message cannot be shown>"
    return text if len(text) <= 1000 else f"{text[:1000]}... ({len(text)} characters)"


class ParkwayError(Exception):
    """Base class of every error raised by parkway."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or type(self).__name__).strip())


class InvalidDurationError(ParkwayError, ValueError):
    """A duration could not be understood."""

    def __init__(
        self, value: object, field: str = "duration", *, detail: str | None = None
    ) -> None:
        text = shown(value)
        super().__init__(
            f"{field}: {text} {detail}"
            if detail
            else f"{field}: {text} is not a duration; use a timedelta, a number of seconds, "
            'or a string such as "250ms", "10s", "1m", "2h", "1d" or "1w"'
        )
        self.value, self.field = value, field


class InvalidInputError(ParkwayError, ValueError):
    """The input given to a workflow was rejected."""

    def __init__(self, message: str, *, workflow: str | None = None, field: str | None = None):
        prefix = (
            f"invalid input for workflow {shown(workflow)}: " if workflow else "invalid input: "
        )
        super().__init__(prefix + message)
        self.workflow, self.field = workflow, field


class InvalidArgumentError(InvalidInputError):
    """An argument of a parkway call is malformed (the message names it).

    Attributes:
        field: The argument or field at fault, when one is named.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        ParkwayError.__init__(self, message)
        self.workflow, self.field = None, field


class InvalidEventError(InvalidArgumentError):
    """An event's name, id, domain or subject is malformed."""


class InvalidMessageError(InvalidArgumentError):
    """A message's name, key or message id is malformed."""


class InvalidWorkflowError(InvalidArgumentError):
    """A workflow's registration options are malformed (``@engine.workflow(...)``)."""


class EngineClosedError(ParkwayError):
    """The engine is not open: it was never opened, or it was closed."""

    def __init__(self) -> None:
        super().__init__(
            "the engine is not open; use `async with engine:` or `await engine.open()` first"
        )


class WorkflowUsageError(ParkwayError):
    """A workflow used ``ctx`` in a way replay cannot follow (the message says how to mend it)."""


class SerializationError(ParkwayError, TypeError):
    """A value that must be stored is not JSON-serialisable."""

    def __init__(self, what: str, path: str, detail: str) -> None:
        super().__init__(
            f"{what} is not JSON-serialisable at {path}: {detail}; "
            "pass plain dicts, lists, strings, numbers, booleans or None"
        )
        self.what, self.path = what, path


class UnknownWorkflowError(ParkwayError, LookupError):
    """No workflow is registered under this name."""

    def __init__(self, name: str, known: list[str]) -> None:
        hint = ", ".join(sorted(known)) or "none"
        super().__init__(
            f"no workflow named {shown(name)} is registered (registered: {hint}); "
            "decorate it with @engine.workflow() before starting it"
        )
        self.name = name


class DuplicateWorkflowError(ParkwayError, ValueError):
    """A workflow with this name and version is already registered."""

    def __init__(self, name: str, version: str) -> None:
        super().__init__(
            f"workflow {shown(name)} version {shown(version)} is already registered; "
            "give the new one another name, or another version= to run both side by side"
        )
        self.name, self.version = name, version


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


class CorrelationError(ParkwayError):
    """A message could not be correlated to any receiver."""


class DuplicateSubscriptionError(ParkwayError):
    """Another run is already waiting for this message name and key."""

    def __init__(self, name: str, key: str, holder: str) -> None:
        super().__init__(
            f"run {holder} already waits for message {shown(name)} with key {shown(key)}; "
            "correlation would be ambiguous"
        )
        self.name, self.key, self.holder = name, key, holder


class FlowDefinitionError(ParkwayError, ValueError):
    """A JSON flow definition is malformed."""


class RoutingError(ParkwayError):
    """An event could not be routed to a domain and subject."""


class ResultTimeoutError(ParkwayError, TimeoutError):
    """The run did not finish within the time the caller was willing to wait."""

    def __init__(self, run_id: str, timeout: float) -> None:
        super().__init__(
            f"run {shown(run_id)} did not finish within {timeout:g}s; it goes on in the background "
            "(check it with engine.get_run)"
        )
        self.run_id, self.timeout = run_id, timeout


class MessageNotFoundError(ParkwayError, LookupError):
    """No buffered message or dead letter has this id."""

    def __init__(self, message_id: object) -> None:
        super().__init__(
            f"no buffered message or dead letter with id {shown(message_id)}; "
            "list them with engine.messages()"
        )
        self.message_id = message_id


class StoreError(ParkwayError):
    """The store failed or could not be reached (no connection, a timeout, a lost
    commit): nothing the caller sent was wrong, and the operation may be retried
    (the message says whether it took effect).

    The subclasses name the cause: :class:`StoreFullError` (no room left),
    :class:`StoreBusyError` (locked by another writer), :class:`StoreConnectionError`
    (no connection, or it was lost), :class:`StoreConflictError` (rolled back for
    another transaction); a plain ``StoreError`` is any other failure of the store.

    Attributes:
        took_effect: Whether the operation was saved: ``False``, nothing of it was
            (retry it as it is); ``None``, unknown (the reply to its commit was lost:
            look before doing it again); ``True``, it was, though what followed failed.
        outcome_unknown: ``took_effect is None``: the commit may or may not have
            happened (its reply was lost and the server could not be asked).
        conflict: The server rolled the transaction back because it conflicted with
            another one (a deadlock, a serialization failure): nothing was saved,
            and the same operation may simply be done again.
        retry_after: Seconds worth waiting before trying again (HTTP sends it as
            ``Retry-After`` with its 503).
    """

    retry_after: float = 5.0

    def __init__(
        self,
        message: str,
        *,
        outcome_unknown: bool = False,
        conflict: bool = False,
        took_effect: bool | None = False,
    ) -> None:
        super().__init__(message)
        # (outcome_unknown predates took_effect: either says "unknown")
        self.took_effect: bool | None = None if outcome_unknown else took_effect
        self.outcome_unknown = self.took_effect is None
        self.conflict = conflict


class StoreFullError(StoreError):
    """The store has no room left (the disk or volume is full, or the database
    server's is): the operation was not saved. Free space; parkway goes on by
    itself once there is some (see "Store errors" in the operating guide)."""

    retry_after = 30.0


class StoreBusyError(StoreError):
    """The database stayed locked by other writers (SQLite's ``database is locked``
    past its busy timeout, a PostgreSQL lock or connection limit): the operation was
    not saved; retry it shortly."""

    retry_after = 1.0


class StoreConnectionError(StoreError):
    """No connection to the store could be made, or the one in use was lost (the
    server restarting or unreachable). ``took_effect`` says whether a commit cut off
    with it happened: ``False``, nothing was saved; ``None``, unknown."""

    retry_after = 5.0


class StoreConflictError(StoreError):
    """The transaction was rolled back because it conflicted with another one (a
    deadlock, a serialization failure): nothing was saved; do it again."""

    retry_after = 1.0

    def __init__(
        self,
        message: str,
        *,
        outcome_unknown: bool = False,
        conflict: bool = True,
        took_effect: bool | None = False,
    ) -> None:
        super().__init__(
            message, outcome_unknown=outcome_unknown, conflict=conflict, took_effect=took_effect
        )


class LeaseLostError(ParkwayError):
    """This worker's lease on the run expired and another worker took it over (internal)."""


class StoreFailedError(StoreError):
    """The store failed while a run was being advanced. A failure of the store itself
    (a lost connection, a locked database) is retried later; one that is the run's
    own (the store refuses what its step returned or raised, every time) fails the
    run with this error, after a few tries."""


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


class MissingExtraError(ParkwayError, ImportError):
    """A feature needs an optional extra of parkway that is not installed.

    Also an :class:`ImportError`, so that ``except ImportError`` around an
    optional import keeps working.

    Attributes:
        extra: The extra to install (``pip install 'parkway[<extra>]'``).
        feature: What needs it (``"the PostgreSQL store"``, ``"parkway.http"``).
        missing: The module that could not be imported.
    """

    def __init__(self, extra: str, feature: str, missing: str) -> None:
        ParkwayError.__init__(
            self,
            f"{feature} needs the {shown(extra)} extra ({missing} is not installed): "
            f"pip install 'parkway[{extra}]'",
        )
        self.extra, self.feature, self.missing = extra, feature, missing
        self.name = missing


class MetricsDisabledError(ParkwayError):
    """This engine does not count metrics: give it ``metrics=True`` (or a
    prometheus_client ``CollectorRegistry``), with the ``metrics`` extra installed
    (pip install 'parkway[metrics]')."""


class InvalidScheduleError(InvalidArgumentError):
    """A schedule is malformed: its cron expression, time zone, catch-up, input, or
    the workflow it names (``field`` says which); nothing was written.

    Attributes:
        field: ``"cron"``, ``"timezone"``, ``"catch_up"``, ``"input"``, ``"workflow"``
            or ``"id"``.
    """

    def __init__(self, message: str, field: str) -> None:
        super().__init__(f"invalid schedule: {message}", field=field)


class ScheduleNotFoundError(ParkwayError, LookupError):
    """No schedule exists with this id."""

    def __init__(self, schedule_id: str) -> None:
        super().__init__(
            f"no schedule with id {shown(schedule_id)}; list them with engine.schedules() "
            "or `parkway schedules`"
        )
        self.schedule_id = schedule_id


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


class CallbackFailedError(ParkwayError):
    """The callback was failed (``engine.fail_callback``); raised by ``cb.wait()``.

    Attributes:
        message: The message the failing party gave.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CallbackNotFoundError(ParkwayError, LookupError):
    """No callback has this token (it was never made, or its run was deleted)."""

    def __init__(self) -> None:
        # (The token is a capability: it is never repeated back, not even in an error.)
        super().__init__("no callback has this token; check that the whole token or URL was used")


class TaskNotFoundError(ParkwayError, LookupError):
    """No human task has this id."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"no human task with id {task_id!r}; list them with engine.tasks()")
        self.task_id = task_id


class TaskAssignmentError(ParkwayError):
    """The task is assigned to others than the one completing it.

    Attributes:
        task_id: The task.
        by: Who tried to complete it (``None``: nobody was named).
        assignees: Who may.
    """

    def __init__(self, task_id: str, by: str | None, assignees: tuple[str, ...]) -> None:
        who = "no one named (pass by=)" if by is None else repr(by)
        super().__init__(
            f"human task {task_id!r} is assigned to {', '.join(map(repr, assignees))}; "
            f"{who} may not complete it"
        )
        self.task_id, self.by, self.assignees = task_id, by, assignees
