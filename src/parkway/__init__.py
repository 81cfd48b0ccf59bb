"""parkway: durable, event-driven workflows for Python.

A run parks on a wait (a timer, a signal, an event, a message) with zero
compute, survives restarts, and is resumed by exactly the input it waits for.
"""

from parkway.durations import Duration
from parkway.engine import Engine
from parkway.errors import (
    ConcurrencyLimitError,
    CorrelationError,
    DuplicateSubscriptionError,
    DuplicateWorkflowError,
    EngineClosedError,
    FlowDefinitionError,
    InvalidArgumentError,
    InvalidDurationError,
    InvalidEventError,
    InvalidInputError,
    InvalidMessageError,
    InvalidWorkflowError,
    MessageNotFoundError,
    NonDeterminismError,
    ParkwayError,
    ResultTimeoutError,
    RoutingError,
    RunCancelledError,
    RunClosedError,
    RunNotFoundError,
    SerializationError,
    StepFailedError,
    StoreError,
    UnknownWorkflowError,
    UpdateFailedError,
    UpdateRejectedError,
    WaitTimeoutError,
    WorkflowFailedError,
    WorkflowUsageError,
)
from parkway.events import (
    Batch,
    CancelOn,
    CorrelationResult,
    Debounce,
    Delivery,
    Event,
    MessageInfo,
    PublishResult,
    SubscriptionInfo,
)
from parkway.flowcontrol import Concurrency, RateLimit
from parkway.flows import NodeModel, SubscriptionRequest, default_node_models
from parkway.handle import RunHandle
from parkway.models import ErrorInfo, HistoryEntry, Retry, RunInfo, RunStatus
from parkway.replay.context import ChildHandle, WorkflowContext

__version__ = "0.1.0"

__all__ = [
    "Batch",
    "CancelOn",
    "ChildHandle",
    "Concurrency",
    "ConcurrencyLimitError",
    "CorrelationError",
    "CorrelationResult",
    "Debounce",
    "Delivery",
    "DuplicateSubscriptionError",
    "DuplicateWorkflowError",
    "Duration",
    "Engine",
    "EngineClosedError",
    "ErrorInfo",
    "Event",
    "FlowDefinitionError",
    "HistoryEntry",
    "InvalidArgumentError",
    "InvalidDurationError",
    "InvalidEventError",
    "InvalidInputError",
    "InvalidMessageError",
    "InvalidWorkflowError",
    "MessageInfo",
    "MessageNotFoundError",
    "NodeModel",
    "NonDeterminismError",
    "ParkwayError",
    "PublishResult",
    "RateLimit",
    "ResultTimeoutError",
    "Retry",
    "RoutingError",
    "RunCancelledError",
    "RunClosedError",
    "RunHandle",
    "RunInfo",
    "RunNotFoundError",
    "RunStatus",
    "SerializationError",
    "StepFailedError",
    "StoreError",
    "SubscriptionInfo",
    "SubscriptionRequest",
    "UnknownWorkflowError",
    "UpdateFailedError",
    "UpdateRejectedError",
    "WaitTimeoutError",
    "WorkflowContext",
    "WorkflowFailedError",
    "WorkflowUsageError",
    "__version__",
    "default_node_models",
]
