"""Public value types: run status and info, errors as data, retry policy, journal entries.

One module per job: the records and their JSON form (:mod:`parkway.models.records`,
derived by :mod:`parkway.models.wire`), errors as data
(:mod:`parkway.models.failures`), the retry policy (:mod:`parkway.models.retry`).
"""

from parkway.models.failures import (
    ErrorInfo,
    error_dict,
    exception_text,
    rebuild_error,
)
from parkway.models.records import (
    UNSET,
    CallbackResult,
    EventInfo,
    HistoryEntry,
    HumanTask,
    ReplayDivergence,
    ReplayReport,
    RunInfo,
    RunStatus,
    StreamItem,
    WorkerInfo,
    _dt,
    _Unset,
)
from parkway.models.retry import Retry
from parkway.models.wire import Wire, _Subscriptable

__all__ = [
    "UNSET",
    "CallbackResult",
    "ErrorInfo",
    "EventInfo",
    "HistoryEntry",
    "HumanTask",
    "ReplayDivergence",
    "ReplayReport",
    "Retry",
    "RunInfo",
    "RunStatus",
    "StreamItem",
    "Wire",
    "WorkerInfo",
    "_Subscriptable",
    "_Unset",
    "_dt",
    "error_dict",
    "exception_text",
    "rebuild_error",
]
