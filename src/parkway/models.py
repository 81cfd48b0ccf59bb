"""Public value types: run status and info, errors as data, retry policy, journal entries."""

from __future__ import annotations

import enum
import re
import traceback
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from parkway import limits
from parkway.durations import Duration, to_seconds
from parkway.errors import (
    CallbackFailedError,
    CompensationFailedError,
    DuplicateSubscriptionError,
    InvalidArgumentError,
    NonDeterminismError,
    NonRetryableError,
    ParkwayError,
    RunCancelledError,
    RunTimeoutError,
    StepFailedError,
    WaitTimeoutError,
    WorkflowFailedError,
    shown,
)

# A lone surrogate: text that no store (nor JSON) can encode.
_SURROGATES = re.compile("[\ud800-\udfff]")


class _Subscriptable:
    """Lets a record be read as ``info.status`` or ``info["status"]`` alike."""

    def __getitem__(self, key: str) -> Any:
        if key not in {f.name for f in fields(self)}:  # type: ignore[arg-type]
            raise KeyError(key)
        return getattr(self, key)

    def to_dict(self) -> dict[str, Any]:
        """The record as a plain JSON-friendly dict."""
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, datetime):
                value = value.isoformat()
            elif f.name == "waiting":
                value = [
                    {k: v.isoformat() if isinstance(v, datetime) else v for k, v in w.items()}
                    for w in value
                ]
            elif isinstance(value, ErrorInfo):
                value = value.to_dict()
            elif isinstance(value, enum.Enum):
                value = value.value
            out[f.name] = value
        return out


class RunStatus(enum.StrEnum):
    """Where a run is in its life. Compares equal to its string value."""

    PENDING = "pending"
    RUNNING = "running"
    PARKED = "parked"
    # Its code no longer replays its journal: no worker advances it until a retry
    # (or a worker that opens with the workflow) finds that it replays again.
    HELD = "held"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value

    @property
    def is_terminal(self) -> bool:
        """Whether the run has finished for good."""
        return self in _TERMINAL


_TERMINAL = {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED}


class ErrorInfo(str):
    """An error as stored with a run: reads as ``"Type: message"``.

    Also exposes ``.type``, ``.message`` and ``.traceback`` (and ``info["type"]``).
    """

    type: str
    message: str
    traceback: str | None

    def __new__(cls, type: str, message: str, traceback: str | None = None) -> ErrorInfo:
        self = super().__new__(cls, f"{type}: {message}" if message else type)
        self.type, self.message, self.traceback = type, message, traceback
        return self

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            if key in ("type", "message", "traceback"):
                return getattr(self, key)
            raise KeyError(key)
        return str.__getitem__(self, key)

    def to_dict(self) -> dict[str, Any]:
        """The error as ``{"type", "message", "traceback"}``."""
        return {"type": self.type, "message": self.message, "traceback": self.traceback}

    @classmethod
    def from_exception(cls, exc: BaseException, traceback: str | None = None) -> ErrorInfo:
        """Describe an exception."""
        return cls(type(exc).__name__, exception_text(exc), traceback)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ErrorInfo | None:
        """Rebuild from :meth:`to_dict` output (``None`` stays ``None``)."""
        if data is None:
            return None
        return cls(data.get("type", "Exception"), data.get("message", ""), data.get("traceback"))


# The first and last instants a datetime can show.
_FIRST, _LAST = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)


def _dt(ts: float) -> datetime:
    """A stored epoch time as an aware UTC datetime, for any float: a listing must
    not fail on one stored value. Durations are bounded, so none is written out of
    range; one that is (an older store, a clock set near year 9999) shows clamped."""
    try:
        return datetime.fromtimestamp(ts, UTC)
    except (OverflowError, OSError, ValueError):
        return _FIRST if ts < 0 else _LAST  # (NaN, which compares false, is "never")


@dataclass(frozen=True)
class RunInfo(_Subscriptable):
    """A snapshot of one run.

    ``values``: what the run published with ``ctx.set_value``, by key. ``paused``:
    an operator paused it (``engine.pause``): no worker advances it, whatever its
    status says it waits for, until ``engine.resume``.

    ``waiting``: one dict per thing the run waits for now (empty for a run that
    waits for nothing): ``kind`` (``signal``, ``event``, ``message``, ``timer``,
    ``retry``...), ``name``, and where they apply ``subject`` and ``match`` (an
    event), ``key`` (a message), ``at`` (the wait's timeout or due time, a
    datetime or ``None``). A step waiting to be retried is ``{"kind": "retry",
    "name": step, "attempt": n, "max_attempts": m, "at": when, "error": {...}}``
    (``n``: the attempt it will make next; ``error``: the last attempt's).

    ``forked_from``: for a run made by ``engine.fork``, ``{"run_id": source, "at":
    entries copied}``; else ``None``.
    """

    id: str
    workflow: str
    version: str
    status: RunStatus
    input: Any
    output: Any
    error: ErrorInfo | None
    domain: str
    subject: str | None
    parent_id: str | None
    created_at: datetime
    updated_at: datetime
    values: dict[str, Any] = field(default_factory=dict)
    paused: bool = False
    waiting: list[dict[str, Any]] = field(default_factory=list)
    forked_from: dict[str, Any] | None = None


@dataclass(frozen=True)
class StreamItem(_Subscriptable):
    """One item of a run's stream (``ctx.write_stream``, ``step_context().write_stream``).

    Attributes:
        offset: Its place in the stream, from 0, without gaps.
        value: The JSON value written.
        attempt: The attempt of the step that wrote it (a retried step writes
            again: its items carry the new attempt), ``None`` when the workflow's
            body wrote it (exactly once).
        written_at: When it was committed (engine time, UTC).
    """

    offset: int
    value: Any
    attempt: int | None
    written_at: datetime


@dataclass(frozen=True)
class HistoryEntry(_Subscriptable):
    """One journaled operation of a run, in order.

    ``status`` is ``done`` (result recorded), ``error`` (the operation raised) or
    ``pending`` (the run waits here now).

    ``deadline``: for a pending operation, when it fires by itself (a wait's
    timeout, a sleep's end, a failed step's next attempt), ``None`` if never.
    ``attempt``: for a step waiting to be tried again, the attempt that failed
    (its error in ``error``).

    A step's failed attempts stay in the history, each as an entry of kind
    ``attempt`` before the step's own (its name, ``attempt``, ``error``, and
    ``started_at`` / ``ended_at``), also once the step has succeeded.
    """

    position: int
    kind: str
    name: str
    status: str
    result: Any
    error: ErrorInfo | None
    at: datetime
    deadline: datetime | None = None
    attempt: int | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None


@dataclass(frozen=True)
class HumanTask(_Subscriptable):
    """A task for a person, made by ``ctx.human_task`` (see ``engine.tasks``).

    ``status``: ``open`` (waiting for a person), ``completed``, ``cancelled``
    (its run ended, or stopped waiting for it) or ``expired`` (its timeout
    passed). ``form_schema``: the JSON Schema the result must fit (``None``: any
    JSON). ``data``: what the person is shown. ``assignees``: who may complete
    it (empty: anyone). ``due_at``: when it expires, ``None`` if never.
    """

    id: str
    run_id: str
    workflow: str
    name: str
    title: str | None
    form_schema: dict[str, Any] | None
    data: Any
    assignees: tuple[str, ...]
    status: str
    created_at: datetime
    due_at: datetime | None
    completed_by: str | None
    completed_at: datetime | None
    result: Any

    def to_dict(self) -> dict[str, Any]:
        """The task as JSON-ready data (times as ISO 8601)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in ("created_at", "due_at", "completed_at"):
            out[key] = None if out[key] is None else out[key].isoformat()
        out["assignees"] = list(self.assignees)
        return out


@dataclass(frozen=True)
class CallbackResult(_Subscriptable):
    """What ``engine.complete_callback`` / ``fail_callback`` did.

    The first completion of a callback decides it; any later one changes nothing
    and answers that first outcome again, with ``duplicate=True``.

    Attributes:
        status: ``"completed"`` or ``"failed"``: the callback's outcome.
        value: The value it was completed with (``None`` when failed).
        message: The failure's message (``None`` when completed).
        duplicate: Whether it had been completed or failed before this call.
        run_id: The run that waits on it.
    """

    status: str
    value: Any
    message: str | None
    duplicate: bool
    run_id: str


@dataclass(frozen=True)
class WorkerInfo(_Subscriptable):
    """A worker process seen lately (see ``engine.workers``).

    Attributes:
        id: The worker's id (``host:pid:random``), the owner of the leases it holds.
        host: The machine it runs on.
        pid: Its process id there.
        started_at: When it started.
        last_seen: When it last renewed its row (with its lease heartbeat).
        workflows: What it serves, ``{name: [versions]}``: it claims only runs of
            those workflows and versions.
    """

    id: str
    host: str
    pid: int
    started_at: datetime
    last_seen: datetime
    workflows: dict[str, list[str]]


@dataclass(frozen=True)
class EventInfo(_Subscriptable):
    """A published event still kept for de-duplication (see ``engine.events``).

    Attributes:
        id: The event's id.
        name: Its name.
        domain: Its domain.
        subject: Its subject (``None``: none).
        payload: Its payload.
        published_at: When it was published.
        started: Ids of the runs it started.
        resumed: Ids of the parked runs it resumed.
    """

    id: str
    name: str
    domain: str
    subject: str | None
    payload: Any
    published_at: datetime
    started: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Retry:
    """How often, and how patiently, a failing step is tried again.

    Args:
        max_attempts: Attempts in all, the first included (``1`` = no retry).
        backoff: Delay before the second attempt; later delays grow by ``factor``.
        factor: Multiplier applied to the delay after each failed attempt.
        max_backoff: Upper bound of any one delay; not below ``backoff``.
        non_retryable: Exception classes, or their qualified names as strings
            (``"billing.CardDeclined"`` or ``"CardDeclined"``), whose failures are
            final: an attempt raising one of them (or a subclass) fails the step at
            once, as one raising :class:`parkway.NonRetryableError` always does.

    Raises:
        InvalidArgumentError: A field is out of its range (``backoff`` above
            ``max_backoff`` among them), or ``non_retryable`` holds something
            that is neither an exception class nor a name.
    """

    max_attempts: int = 3
    backoff: Duration = 1.0
    factor: float = 2.0
    max_backoff: Duration = 60.0
    non_retryable: tuple[type[BaseException] | str, ...] = ()
    _delays: tuple[float, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:

        attempts, factor = self.max_attempts, self.factor
        if not _whole(attempts) or not 1 <= attempts <= limits.MAX_INT:
            raise InvalidArgumentError(
                f"Retry.max_attempts must be a whole number from 1 to 2**63 - 1, "
                f"got {shown(attempts)}",
                field="max_attempts",
            )
        # (Compared before any float(): 10**400 has none, and nan is in no range.)
        if (
            not isinstance(factor, int | float)
            or isinstance(factor, bool)
            or not (1 <= factor <= limits.MAX_RETRY_FACTOR)
        ):
            raise InvalidArgumentError(
                f"Retry.factor must be a number from 1 to {limits.MAX_RETRY_FACTOR:,}, "
                f"got {shown(factor)}",
                field="factor",
            )
        base = to_seconds(self.backoff, "Retry.backoff")
        cap = to_seconds(self.max_backoff, "Retry.max_backoff")
        if base > cap:
            raise InvalidArgumentError(
                f"Retry.backoff ({base:g}s) is above Retry.max_backoff ({cap:g}s): no delay "
                "could be that long; raise max_backoff or lower backoff",
                field="Retry.backoff",
            )
        object.__setattr__(self, "_delays", (base, cap))
        object.__setattr__(self, "non_retryable", _exception_kinds(self.non_retryable))

    def delay(self, failed_attempts: int) -> float:
        """Seconds to wait after the ``failed_attempts``-th failure."""
        base, cap = self._delays
        try:
            return min(cap, base * float(self.factor) ** (failed_attempts - 1))
        except OverflowError:  # (grown past any float: the cap, long before)
            return cap

    def retries(self, exc: BaseException) -> bool:
        """Whether a failure raising ``exc`` may be tried again (attempts allowing)."""
        if isinstance(exc, NonRetryableError):
            return False
        for kind in self.non_retryable:
            if isinstance(kind, str):
                if any(kind in _names(cls) for cls in type(exc).__mro__):
                    return False
            elif isinstance(exc, kind):
                return False
        return True


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _exception_kinds(value: object) -> tuple[type[BaseException] | str, ...]:
    """``Retry.non_retryable`` checked: a tuple of exception classes and names."""
    items = (value,) if isinstance(value, str | type) else value
    if not isinstance(items, tuple | list | frozenset | set):
        raise InvalidArgumentError(
            "Retry.non_retryable must be a tuple of exception classes or names, "
            f"got {shown(value)}",
            field="Retry.non_retryable",
        )
    for item in items:
        if isinstance(item, str):
            if not item.strip():
                raise InvalidArgumentError(
                    "Retry.non_retryable holds an empty name", field="Retry.non_retryable"
                )
        elif not (isinstance(item, type) and issubclass(item, BaseException)):
            raise InvalidArgumentError(
                "Retry.non_retryable must hold exception classes or their names, "
                f"got {shown(item)}",
                field="Retry.non_retryable",
            )
    return tuple(items)


def _names(cls: type) -> tuple[str, str, str]:
    """The names a string in ``Retry.non_retryable`` may give ``cls`` by."""
    return (cls.__name__, cls.__qualname__, f"{cls.__module__}.{cls.__qualname__}")


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or the name of its type when that cannot be had.

    A step's exception is the user's object: its ``__str__`` may raise, or return
    something that is not text, or text no store can encode (a lone surrogate).
    What it says is recorded, logged and journaled; none of that may fail on it
    (a failure there once had its run retried, and its step re-run, for ever).
    """
    try:
        text = str(exc)
    except BaseException:  # (whatever it raised: the type still says what failed)
        return type(exc).__name__
    return _encodable(text)


def _encodable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (JSON refuses them)."""
    if _SURROGATES.search(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class _Unset(enum.Enum):
    """An argument not given, where ``None`` is a value: ``engine.fork(run_id,
    input=UNSET)`` keeps the source's input, ``input=None`` makes it ``None``."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset.UNSET
"""An argument not given, where ``None`` is a value (``engine.fork``'s ``input``)."""


@dataclass(frozen=True)
class ReplayDivergence(_Subscriptable):
    """A run whose journal the registered code no longer replays.

    ``position``: the journal position where the code went elsewhere; ``expected``:
    what the journal holds there; ``got``: what the code did instead.
    """

    run_id: str
    workflow: str
    version: str
    position: int
    expected: str
    got: str


@dataclass(frozen=True)
class ReplayReport(_Subscriptable):
    """What ``engine.check_replay`` found: how many runs it replayed (``checked``)
    and those whose code diverged from their journal (``diverged``)."""

    checked: int
    diverged: list[ReplayDivergence] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every run checked replays."""
        return not self.diverged

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-friendly data."""
        return {"checked": self.checked, "diverged": [d.to_dict() for d in self.diverged]}


def error_dict(exc: BaseException, *, with_traceback: bool = False) -> dict[str, Any]:
    """Describe an exception as data (journaled, stored with a run), so that
    :func:`rebuild_error` can raise it again on replay."""
    data: dict[str, Any] = {"type": type(exc).__name__, "message": exception_text(exc)}
    if isinstance(exc, StepFailedError):
        data["args"] = [exc.step, exc.attempts, exc.error_type, exc.error_message]
    elif isinstance(exc, WaitTimeoutError):
        data["args"] = [exc.what, exc.timeout]
    elif isinstance(exc, WorkflowFailedError):
        data["args"] = [exc.run_id, exc.error.to_dict() if exc.error else None]
    elif isinstance(exc, RunCancelledError):
        data["args"] = [exc.run_id]
    elif isinstance(exc, NonDeterminismError):
        data["args"] = [exc.run_id, exc.position, exc.expected, exc.got]
    elif isinstance(exc, DuplicateSubscriptionError):
        data["args"] = [exc.name, exc.key, exc.holder]
    elif isinstance(exc, CallbackFailedError):
        data["args"] = [exc.message]
    elif isinstance(exc, RunTimeoutError):
        data["args"] = [exc.run_id, exc.timeout]
    elif isinstance(exc, CompensationFailedError):
        data["args"] = [exc.run_id, exc.failed]
    if with_traceback:
        data["traceback"] = _encodable("".join(traceback.format_exception(exc)))
    return data


def rebuild_error(data: dict[str, Any]) -> Exception:
    """The exception :func:`error_dict` described (a ParkwayError when unknown)."""
    kind, args = data.get("type"), data.get("args")
    if args is not None:
        if kind == "StepFailedError":
            return StepFailedError(*args)
        if kind == "WaitTimeoutError":
            return WaitTimeoutError(*args)
        if kind == "WorkflowFailedError":
            return WorkflowFailedError(args[0], ErrorInfo.from_dict(args[1]))
        if kind == "RunCancelledError":
            return RunCancelledError(*args)
        if kind == "NonDeterminismError":
            return NonDeterminismError(*args)
        if kind == "DuplicateSubscriptionError":
            return DuplicateSubscriptionError(*args)
        if kind == "CallbackFailedError":
            return CallbackFailedError(*args)
        if kind == "RunTimeoutError":
            return RunTimeoutError(*args)
        if kind == "CompensationFailedError":
            return CompensationFailedError(*args)
    return ParkwayError(f"{kind}: {data.get('message')}")
