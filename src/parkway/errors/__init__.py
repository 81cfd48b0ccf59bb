"""Every error parkway raises derives from :class:`ParkwayError`.

An error's default message is its docstring; subclasses that know more (a run
id, a message key, a position in the journal) say it, and say what to do next.

The classes live in modules by what went wrong (``inputs``, ``runs``, ``sent``,
``store``) and are all importable from this package, their one public path.
"""

from __future__ import annotations

from parkway.errors.base import ParkwayError
from parkway.errors.inputs import (
    DuplicateWorkflowError,
    EngineClosedError,
    FlowDefinitionError,
    InvalidArgumentError,
    InvalidDurationError,
    InvalidEventError,
    InvalidInputError,
    InvalidMessageError,
    InvalidScheduleError,
    InvalidWorkflowError,
    MetricsDisabledError,
    MissingExtraError,
    SerializationError,
    UnknownWorkflowError,
    WorkflowUsageError,
)
from parkway.errors.runs import (
    CompensationFailedError,
    ConcurrencyLimitError,
    NonDeterminismError,
    NonRetryableError,
    ResultTimeoutError,
    RunCancelledError,
    RunClosedError,
    RunNotFoundError,
    RunStateError,
    RunTimeoutError,
    StepFailedError,
    StepTimeoutError,
    UpdateFailedError,
    UpdateRejectedError,
    WaitTimeoutError,
    WorkflowFailedError,
)
from parkway.errors.sent import (
    CallbackFailedError,
    CallbackNotFoundError,
    CorrelationError,
    DuplicateSubscriptionError,
    MessageNotFoundError,
    RoutingError,
    ScheduleNotFoundError,
    TaskAssignmentError,
    TaskNotFoundError,
)
from parkway.errors.store import (
    LeaseLostError,
    StoreBusyError,
    StoreConflictError,
    StoreConnectionError,
    StoreError,
    StoreFailedError,
    StoreFullError,
)
from parkway.errors.text import SHOWN_LENGTH, describe, shown

__all__ = [
    "SHOWN_LENGTH",
    "CallbackFailedError",
    "CallbackNotFoundError",
    "CompensationFailedError",
    "ConcurrencyLimitError",
    "CorrelationError",
    "DuplicateSubscriptionError",
    "DuplicateWorkflowError",
    "EngineClosedError",
    "FlowDefinitionError",
    "InvalidArgumentError",
    "InvalidDurationError",
    "InvalidEventError",
    "InvalidInputError",
    "InvalidMessageError",
    "InvalidScheduleError",
    "InvalidWorkflowError",
    "LeaseLostError",
    "MessageNotFoundError",
    "MetricsDisabledError",
    "MissingExtraError",
    "NonDeterminismError",
    "NonRetryableError",
    "ParkwayError",
    "ResultTimeoutError",
    "RoutingError",
    "RunCancelledError",
    "RunClosedError",
    "RunNotFoundError",
    "RunStateError",
    "RunTimeoutError",
    "ScheduleNotFoundError",
    "SerializationError",
    "StepFailedError",
    "StepTimeoutError",
    "StoreBusyError",
    "StoreConflictError",
    "StoreConnectionError",
    "StoreError",
    "StoreFailedError",
    "StoreFullError",
    "TaskAssignmentError",
    "TaskNotFoundError",
    "UnknownWorkflowError",
    "UpdateFailedError",
    "UpdateRejectedError",
    "WaitTimeoutError",
    "WorkflowFailedError",
    "WorkflowUsageError",
    "describe",
    "shown",
]

# Each class says it is in this package, not in the module that defines it: that is
# the name logs, tracebacks and error records give it, and the one a string in
# Retry.non_retryable may use.
for _cls in (obj for obj in tuple(globals().values()) if isinstance(obj, type)):
    if issubclass(_cls, ParkwayError):
        _cls.__module__ = __name__
del _cls
