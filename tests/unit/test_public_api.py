"""The public surface: exactly these names, each documented."""

from __future__ import annotations

import inspect
from datetime import timedelta

import pytest

import parkway
import parkway.testing
from parkway import (
    ChildHandle,
    Engine,
    ErrorInfo,
    ParkwayError,
    Retry,
    RunHandle,
    RunStatus,
    WorkflowContext,
)

EXPECTED_ALL = {
    "Callback",
    "CallbackFailedError",
    "CallbackNotFoundError",
    "HumanTask",
    "TaskAssignmentError",
    "WorkerInfo",
    "EventInfo",
    "CancelOn",
    "InvalidScheduleError",
    "Schedule",
    "ScheduleInfo",
    "ScheduleNotFoundError",
    "EngineClosedError",
    "InvalidArgumentError",
    "InvalidEventError",
    "InvalidMessageError",
    "InvalidWorkflowError",
    "UpdateFailedError",
    "UpdateRejectedError",
    "WorkflowUsageError",
    "Batch",
    "ChildHandle",
    "Concurrency",
    "ConcurrencyLimitError",
    "CompensationFailedError",
    "CorrelationError",
    "CorrelationResult",
    "Debounce",
    "Delivery",
    "DuplicateSubscriptionError",
    "DuplicateWorkflowError",
    "Duration",
    "Engine",
    "ErrorInfo",
    "Event",
    "FlowDefinitionError",
    "HistoryEntry",
    "InvalidDurationError",
    "InvalidInputError",
    "MessageInfo",
    "MessageNotFoundError",
    "NodeModel",
    "NonDeterminismError",
    "NonRetryableError",
    "ParkwayError",
    "PublishResult",
    "RateLimit",
    "ResultTimeoutError",
    "ReplayDivergence",
    "ReplayReport",
    "Retry",
    "RoutingError",
    "RunCancelledError",
    "RunClosedError",
    "RunHandle",
    "RunInfo",
    "RunNotFoundError",
    "RunStateError",
    "RunTimeoutError",
    "RunStatus",
    "SerializationError",
    "StepContext",
    "StepFailedError",
    "StepTimeoutError",
    "StoreBusyError",
    "StoreConflictError",
    "StoreConnectionError",
    "StoreError",
    "StoreFullError",
    "StreamItem",
    "SubscriptionInfo",
    "SubscriptionRequest",
    "UnknownWorkflowError",
    "WaitTimeoutError",
    "WorkflowContext",
    "WorkflowFailedError",
    "__version__",
    "default_node_models",
    "step_context",
    "UNSET",
}

# Plain values: they cannot carry a docstring of their own.
DATA_NAMES = {"__version__", "Duration", "default_node_models"}

# The error classes the design contract names; all derive from ParkwayError.
CONTRACT_ERRORS = [
    "WaitTimeoutError",
    "CorrelationError",
    "DuplicateSubscriptionError",
    "RunNotFoundError",
    "WorkflowFailedError",
    "RunCancelledError",
    "NonDeterminismError",
    "StepFailedError",
    "StepTimeoutError",
    "NonRetryableError",
    "InvalidInputError",
    "FlowDefinitionError",
    "RoutingError",
    "RunTimeoutError",
    "CompensationFailedError",
]


def test_all_is_pinned_exactly() -> None:
    assert len(parkway.__all__) == len(set(parkway.__all__)), "duplicates in __all__"
    assert set(parkway.__all__) == EXPECTED_ALL


def test_every_exported_name_exists() -> None:
    for name in parkway.__all__:
        assert hasattr(parkway, name), name


@pytest.mark.parametrize("name", sorted(EXPECTED_ALL - DATA_NAMES))
def test_every_exported_name_has_its_own_docstring(name: str) -> None:
    obj = getattr(parkway, name)
    # A class's own docstring (not inherited from a base class).
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    assert isinstance(doc, str) and doc.strip(), f"{name} has no docstring"


def test_data_names() -> None:
    assert isinstance(parkway.__version__, str) and parkway.__version__
    assert set(parkway.Duration.__args__) == {timedelta, float, int, str}


@pytest.mark.parametrize(
    "cls",
    [Engine, RunHandle, WorkflowContext, ChildHandle, Retry, ErrorInfo],
    ids=lambda c: c.__name__,
)
def test_public_methods_are_documented(cls: type) -> None:
    undocumented = [
        name
        for name, member in vars(cls).items()
        if not name.startswith("_") and callable(member) and not (member.__doc__ or "").strip()
    ]
    assert undocumented == []


@pytest.mark.parametrize("name", CONTRACT_ERRORS)
def test_contract_errors_derive_from_parkway_error(name: str) -> None:
    cls = getattr(parkway, name)
    assert issubclass(cls, ParkwayError)


def test_every_exported_exception_is_a_parkway_error() -> None:
    for name in parkway.__all__:
        obj = getattr(parkway, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            assert issubclass(obj, ParkwayError), name


def test_timeouts_are_timeout_errors() -> None:
    assert issubclass(parkway.WaitTimeoutError, TimeoutError)
    assert issubclass(parkway.ResultTimeoutError, TimeoutError)


def test_run_status_values() -> None:
    assert {s.value for s in RunStatus} == {
        "pending",
        "running",
        "parked",
        "held",
        "completed",
        "failed",
        "cancelled",
    }
    assert RunStatus.PARKED == "parked"
    assert RunStatus.HELD == "held" and not RunStatus.HELD.is_terminal


def test_testing_module_exports_manual_clock() -> None:
    assert parkway.testing.__all__ == ["ManualClock", "check_replay"]
    clock_cls = parkway.testing.ManualClock
    assert (clock_cls.__doc__ or "").strip()
    assert (clock_cls.advance.__doc__ or "").strip()


def test_new_run_ids_are_uuid7_and_ordered_by_time() -> None:
    """A run or event id made by parkway is a UUIDv7 (time first), so that rows made
    together share pages of the tables keyed by it."""
    import time
    import uuid

    from parkway.ids import new_id

    first = new_id()
    time.sleep(0.002)
    later = [new_id() for _ in range(200)]
    assert all(len(i) == 32 and i == i.lower() for i in [first, *later])
    assert all(first < i for i in later)  # (a later millisecond sorts after)
    parsed = uuid.UUID(first)
    assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
    assert abs(int(first[:12], 16) / 1000 - time.time()) < 5
    assert len(set(later)) == len(later)
