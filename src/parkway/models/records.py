"""Public records: a run's status and snapshot, its journal, streams, human tasks,
callbacks, workers, events kept, replay reports."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from parkway.models.failures import ErrorInfo
from parkway.models.wire import _Subscriptable, times_as_text, wire


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
    paused: bool = field(
        default=False,
        metadata=wire(description="Paused by an operator: no worker advances it until resumed."),
    )
    waiting: list[dict[str, Any]] = field(
        default_factory=list,
        metadata=wire(
            encode=times_as_text,
            description="What the run waits for now, one item per wait (empty: nothing).",
        ),
    )
    forked_from: dict[str, Any] | None = field(
        default=None,
        metadata=wire(description="The run it was forked from (engine.fork), else null."),
    )


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
    deadline: datetime | None = field(
        default=None,
        metadata=wire(
            description="Pending: when it fires by itself (a timeout, a timer, a step's retry)."
        ),
    )
    attempt: int | None = field(
        default=None,
        metadata=wire(
            description="A step waiting to be retried, or a failed attempt (kind attempt): "
            "the attempt that failed."
        ),
    )
    started_at: datetime | None = field(
        default=None,
        metadata=wire(description="A failed attempt (kind attempt): when it started."),
    )
    ended_at: datetime | None = field(
        default=None,
        metadata=wire(description="A failed attempt (kind attempt): when it failed."),
    )


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
    form_schema: dict[str, Any] | None = field(
        metadata=wire(description="The JSON Schema the result must fit (null: any JSON).")
    )
    data: Any = field(metadata=wire(description="What the person is shown."))
    assignees: tuple[str, ...] = field(
        metadata=wire(description="Who may complete it (empty: anyone).")
    )
    status: str = field(metadata=wire(choices=("open", "completed", "cancelled", "expired")))
    created_at: datetime
    due_at: datetime | None
    completed_by: str | None
    completed_at: datetime | None
    result: Any


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

    status: str = field(metadata=wire(choices=("completed", "failed")))
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
