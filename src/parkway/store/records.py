"""The records the store moves, and the constants their fields take.

Times are floats: engine time (``clock.now()``) for due times and timestamps,
wall-clock time for leases (a lease must expire in real time even under a
manual test clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parkway.models import RunStatus
from parkway.store.vocabulary import Capability, TaskKind, UpdateStatus, WaitKind


@dataclass
class RunRecord:
    """One row of ``runs``. JSON columns hold encoded bytes."""

    id: str
    workflow: str
    version: str
    status: RunStatus
    input: bytes | None
    output: bytes | None
    error: bytes | None
    domain: str
    subject: str | None
    parent_id: str | None
    trigger: bytes | None
    generation: int
    created_at: float
    updated_at: float
    lease_owner: str | None = None
    lease_until: float | None = None
    # The worker whose advance parked the run last, if it keeps the run's replay
    # machine (see parkway.worker.cache): its claims need not read the journal.
    advanced_by: str | None = None
    # Set by ``engine.pause``: no claim leases the run (its inputs wait as tasks)
    # until ``engine.resume`` clears it.
    paused: bool = False
    # Set by ``engine.fork`` on the run it makes: the run it was forked from, and how
    # many of that run's journal entries it started with.
    forked_from: str | None = None
    forked_at: int | None = None


@dataclass(frozen=True)
class JournalEntry:
    """One operation of a run at ``pos``; ``state`` is ``done``, ``error``,
    ``pending`` or ``withdrawn`` (a wait that lost: ``ctx.first``, a failed gather).

    ``branch``: the ``ctx.gather`` branch (or update handler) the operation belongs
    to (``None``: the workflow's own line). ``seq``: the order in which its result
    was applied, where that is not ``pos`` (a wait answered after later operations
    of other branches were journaled); replay applies entries in that order.
    """

    pos: int
    kind: str
    name: str
    state: str
    value: bytes | None
    deadline: float | None
    at: float
    branch: str | None = None
    seq: int | None = None


@dataclass
class NewTask:
    """A task to insert: wakes ``run_id`` at ``due_at`` (``pos``: the wait it targets)."""

    run_id: str
    due_at: float
    kind: str
    pos: int | None = None
    payload: bytes | None = None


@dataclass
class TaskRecord:
    """A stored task."""

    id: int
    run_id: str
    due_at: float
    kind: str
    pos: int | None
    payload: bytes | None


@dataclass(frozen=True)
class SignalRecord:
    """A signal buffered in a run's mailbox, consumed in ``id`` order per name."""

    id: int
    run_id: str
    name: str
    payload: bytes | None
    at: float


@dataclass(frozen=True)
class EventRecord:
    """One published event in the event log."""

    id: str
    name: str
    domain: str
    subject: str | None
    payload: bytes | None
    published_at: float


@dataclass(frozen=True)
class SubscriptionRecord:
    """A parked wait, indexed so a publish finds it by key rather than by scanning.

    ``subject`` is the subject waited on or ``"*"``; ``shape``/``digest`` index
    the match (see :mod:`parkway.matching`); ``wait`` labels the wait for people
    (read back as :func:`wait_label` makes it where a store kept none: see
    :meth:`stored_wait`).
    """

    run_id: str
    pos: int
    kind: str
    domain: str
    name: str
    subject: str
    shape: str
    digest: str
    match: bytes | None
    wait: str
    expires_at: float
    created_at: float
    # The wait's own deadline (its timeout), if any: past it, the timeout wins.
    deadline: float | None = None

    def __post_init__(self) -> None:
        if self.wait is None:  # (a row that kept no label: the usual one)
            # (Frozen: the label is filled in once, as the record is made.)
            object.__setattr__(self, "wait", wait_label(self.kind, self.name, self.pos))

    @property
    def stored_wait(self) -> str | None:
        """The label as a store keeps it: ``None`` where it is the usual
        ``wait_for_<kind>:<name>#<pos>``, which every parked wait would otherwise
        keep on disk for nothing. (A cancel condition's label is kept: they are
        few, and the SQL that reads labels back then needs one rule only.)"""
        if self.kind != WaitKind.CANCEL and self.wait == wait_label(self.kind, self.name, self.pos):
            return None
        return self.wait


def wait_label(kind: str, name: str, pos: int) -> str:
    """The usual label of a subscription: ``wait_for_event:<name>#<pos>`` (or
    ``wait_for_message:...``), ``cancel_on:<event>`` for a cancel condition."""
    if kind == WaitKind.CANCEL:
        return f"cancel_on:{name.removeprefix(CANCEL_PREFIX)}"
    return f"wait_for_{kind}:{name}#{pos}"


@dataclass(frozen=True)
class MessageRecord:
    """A buffered message (``status`` ``buffered``) or a dead letter (``expired``)."""

    id: int
    name: str
    key: str
    payload: bytes | None
    message_id: str | None
    status: str
    reason: str | None
    received_at: float
    expires_at: float


@dataclass(frozen=True)
class StreamRecord:
    """An item of a run's stream: its place from 0, its JSON value, the attempt of
    the step that wrote it (``None``: the workflow's body) and when it was written."""

    offset: int
    value: bytes
    attempt: int | None
    written_at: float


@dataclass
class UpdateRecord:
    """An update sent to a run (``engine.update``), and what became of it.

    ``status``: ``pending`` (not handled yet), ``done`` (``result`` is the
    handler's return value), ``failed`` (``result`` is the handler's error),
    ``rejected`` (``result`` is the reason: its validator refused it, or the run
    has no handler of that name) or ``closed`` (the run ended first). ``seq``
    orders a run's updates as they arrived (given by the store).
    """

    run_id: str
    id: str
    name: str
    payload: bytes | None
    status: str
    result: bytes | None
    created_at: float
    finished_at: float | None = None
    seq: int = 0


@dataclass(frozen=True)
class AttemptRecord:
    """A failed attempt of a step, kept for the run's history after the step goes on.

    ``error``: the failure as JSON (``error_dict``); times are engine time.
    """

    run_id: str
    pos: int
    step: str
    attempt: int
    error: bytes
    started_at: float
    ended_at: float


UPDATE_PENDING = UpdateStatus.PENDING

# cancel_on's conditions are subscriptions of kind "cancel" indexed under the
# event's name with this prefix (see parkway.core.cancel_on): a control
# character, so no name a caller gives can collide with one (not NUL, which
# PostgreSQL's text refuses).
CANCEL_PREFIX = "\x1fcancel:"


@dataclass(frozen=True)
class LoadedRun:
    """What a worker reads to advance a run: the row, its due tasks and its journal.

    ``journal`` is empty for a run that has ended (nothing is replayed then), and
    ``None`` when it was not read because the loading worker's advance parked the
    run last (``RunRecord.advanced_by``): that worker may hold it in its cache.
    ``signals`` is its mailbox when a signal task is among ``tasks`` (read with
    the rest, to save the advance a read), else ``None``.
    """

    run: RunRecord
    tasks: list[TaskRecord]
    journal: list[JournalEntry] | None
    signals: list[SignalRecord] | None = None


@dataclass
class Lease:
    """What :meth:`tx.runs.lease` got, known once its transaction has committed.

    ``taken``: whether the run is leased now (``None``: not known, say because
    the commit's reply was lost: its worker loads the run to see). ``loaded``:
    what advancing it needs, when taken and known.
    """

    run_id: str
    taken: bool | None = None
    loaded: LoadedRun | None = None


@dataclass
class Sent:
    """What :meth:`tx.signals.send` found: the run's status (``None``: no such run).

    ``known``: whether ``status`` is known yet. A store may send the signal with
    its transaction's ``COMMIT`` (one round trip), so it is known once that has
    committed, and not before.
    """

    status: str | None = None
    known: bool = False


@dataclass
class MessageDelivery:
    """What :meth:`tx.messages.deliver` did, known once its transaction has
    committed (``known``; see :class:`Sent`).

    ``outcome``: ``"delivered"`` (to ``run_id``), ``"duplicate"`` (its message id
    was seen), or ``None``: no run waits for it (nothing was written). ``lease``:
    the run's lease, when one was asked for and it was delivered.
    """

    outcome: str | None = None
    run_id: str | None = None
    known: bool = False
    lease: Lease | None = None


@dataclass
class EventDelivery:
    """What :meth:`tx.events.deliver` did, known once its transaction has committed
    (``known``; see :class:`Sent`).

    ``outcome``: ``"published"`` (recorded, and delivered to ``waits``: one
    ``(run id, wait)`` per wait it took, in the order a publish takes them),
    ``"duplicate"`` (its id was seen), or ``None``: declined, nothing written
    (the caller publishes the usual way, in a transaction of its own). ``lease``:
    the first run's lease, when one was asked for and a wait was taken.
    """

    outcome: str | None = None
    waits: list[tuple[str, str]] = field(default_factory=list)
    known: bool = False
    lease: Lease | None = None


@dataclass(frozen=True)
class StoreStats:
    """What :meth:`Store.stats` read: the gauges an operator watches.

    ``parked``: parked runs, by workflow (``held``: held runs, whose code no longer
    replays their journal). ``due``: tasks due now and not yet
    done (the backlog; a paused run's are left out), the oldest due at
    ``oldest_due_at`` (``None``: none is due). ``dead_letters``: messages that
    expired unconsumed. ``takeovers``: runs
    this store object's claims leased from a lease that had expired (its worker
    died or stalled), since it was made: this process's count, not the store's.
    (A hand-over's ``tx.runs.lease`` of such a run is not counted.)
    """

    parked: dict[str, int]
    due: int
    oldest_due_at: float | None
    dead_letters: int
    takeovers: int = 0
    held: dict[str, int] = field(default_factory=dict)


# The kind of a task that carries a message to the run waiting for it: its own,
# so that one a run can no longer take (its wait timed out, it ended) is buffered
# again instead of dropped.
MESSAGE_TASK = TaskKind.MESSAGE

# Statuses of a run that has ended (no journal to replay).
ENDED = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})

# Statuses of a run that has not ended.
ACTIVE = frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PARKED, RunStatus.HELD})

# The capability of a store whose transactions are :class:`FusedTx`: the senders'
# fast paths (a delivery and its lease) are one statement there, not several.
FUSED = Capability.FUSED


@dataclass
class FlowSlot:
    """One flow-control key's counters (``tx.admission.slot``): ``active``, the runs that
    hold a slot of its ``Concurrency`` (admitted and not ended); ``started``, how
    many runs its ``RateLimit`` has given a start time (the ring of those times is
    read and written by ``tx.admission.rate_mark``); ``limit``, the concurrency limit last
    admitted under (so a process that does not register the workflow can still
    hand a freed slot on)."""

    active: int = 0
    started: int = 0
    limit: int = 0


@dataclass(frozen=True)
class FlowEntry:
    """A run under a ``Concurrency`` limit: its workflow and key, and whether it is
    ``queued`` (waiting for a slot, with no task) or holds a slot."""

    workflow: str
    key: str
    queued: bool


# The due time of the tasks of a run not admitted yet (queued for a slot, or
# waiting for its rate window) that arrived before its start (a signal, an
# update): out of every claim's reach until the run is admitted, when they
# come due with its start task (``tx.tasks.defer``, ``tx.tasks.wake_deferred``).
DEFERRED = 1e15
