"""The storage protocol every backend implements (its records: :mod:`parkway.store.records`).

The engine holds all workflow logic; a store offers atomic transactions over a
handful of primitive operations (runs, journal, tasks, mailbox) plus the
worker's claim/lease calls. Every state change of a run is one transaction, so
a crash leaves all of it or none of it.

Times are floats: engine time (``clock.now()``) for due times and timestamps,
wall-clock time for leases (a lease must expire in real time even under a
manual test clock).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from parkway.store.admission import Admission
from parkway.store.events import Events, FusedEvents
from parkway.store.fleet import Operators, Workers
from parkway.store.journal import Journal
from parkway.store.messages import FusedMessages, Messages
from parkway.store.people import Callbacks, HumanTasks
from parkway.store.records import (
    ACTIVE,
    ENDED,
    FUSED,
    MESSAGE_TASK,
    AttemptRecord,
    EventDelivery,
    EventRecord,
    FlowEntry,
    FlowSlot,
    JournalEntry,
    Lease,
    LoadedRun,
    MessageDelivery,
    MessageRecord,
    NewTask,
    RunRecord,
    Sent,
    SignalRecord,
    StoreStats,
    StreamRecord,
    SubscriptionRecord,
    TaskRecord,
    UpdateRecord,
)
from parkway.store.runs import RUN_MUTABLE, Runs
from parkway.store.schedules import ScheduleRecord, Schedules
from parkway.store.signals import Signals
from parkway.store.streams import Streams
from parkway.store.subscriptions import Subscriptions
from parkway.store.tasks import Tasks
from parkway.store.updates import Updates
from parkway.store.values import Values

# The capabilities of a store whose watch() reports this process's commits that
# added tasks (see Store.capabilities): the engine need not poke its worker after
# each commit, nor the worker look for work after each advance.
REPORTS_OWN = frozenset({"push", "reports_own"})


class Tx(Protocol):
    """One atomic transaction, its operations grouped by what they store.

    Each part is a small protocol of its own: :class:`parkway.store.runs.Runs`,
    :class:`parkway.store.journal.Journal`, :class:`parkway.store.tasks.Tasks`,
    :class:`parkway.store.signals.Signals`, :class:`parkway.store.events.Events`,
    :class:`parkway.store.subscriptions.Subscriptions`,
    :class:`parkway.store.messages.Messages`, :class:`parkway.store.values.Values`,
    :class:`parkway.store.updates.Updates`, :class:`parkway.store.schedules.Schedules`,
    :class:`parkway.store.admission.Admission`, :class:`parkway.store.people.Callbacks`,
    :class:`parkway.store.people.HumanTasks`, :class:`parkway.store.streams.Streams`,
    :class:`parkway.store.fleet.Workers` and :class:`parkway.store.fleet.Operators`.
    A backend composes one object per part over its connection.
    """

    @property
    def runs(self) -> Runs: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def tasks(self) -> Tasks: ...
    @property
    def signals(self) -> Signals: ...
    @property
    def events(self) -> Events: ...
    @property
    def subscriptions(self) -> Subscriptions: ...
    @property
    def messages(self) -> Messages: ...
    @property
    def values(self) -> Values: ...
    @property
    def updates(self) -> Updates: ...
    @property
    def schedules(self) -> Schedules: ...
    @property
    def admission(self) -> Admission: ...
    @property
    def callbacks(self) -> Callbacks: ...
    @property
    def human_tasks(self) -> HumanTasks: ...
    @property
    def streams(self) -> Streams: ...
    @property
    def workers(self) -> Workers: ...
    @property
    def operators(self) -> Operators: ...


class FusedTx(Tx, Protocol):
    """A transaction of a store with the ``"fused"`` capability: the senders' fast
    paths (:func:`parkway.core.publishing.deliver`, :func:`parkway.core.messages.deliver`)
    as one operation each (``tx.events.deliver``, ``tx.messages.deliver``), which the
    store may send with the ``COMMIT`` (one round trip). Their meaning is the core's
    composed path's, which the conformance suite checks on every backend."""

    @property
    def events(self) -> FusedEvents: ...
    @property
    def messages(self) -> FusedMessages: ...


class Store(Protocol):
    """A storage backend.

    Attributes:
        capabilities: What the backend can do beyond the protocol:
            ``"shared"`` (several processes may open it), ``"persistent"``,
            ``"push"`` (:meth:`watch` reports other processes' commits, so the
            worker need not poll :meth:`changed`), ``"reports_own"`` (:meth:`watch`
            reports this process's commits that added tasks to runs not leased
            to its own worker in the same transaction, as ``"push"`` does, so
            the engine need not poke its worker after every commit, nor the
            worker look for work after every advance) and ``"cheap_claim"`` (a
            claim that finds nothing costs no more than :meth:`has_due`, so
            the worker claims without asking first) and ``"group_commit"``
            (a commit costs more than the writes in it, round trips and an
            fsync on PostgreSQL, the WAL's writes on SQLite: the worker's
            commits that queue up share one transaction, see
            :mod:`parkway.core.committer`) and ``"loop_bound"`` (its statements run
            on the event loop's thread, so what limits it under load is that
            thread's time, not round trips: a worker whose loop is busy takes
            its runs in batches, see :mod:`parkway.worker.load`).
    """

    capabilities: frozenset[str]

    async def open(self) -> None:
        """Connect, and create or migrate the schema."""
        ...

    async def close(self) -> None: ...

    def transaction(self, *, readonly: bool = False) -> AbstractAsyncContextManager[Tx]:
        """One atomic transaction: committed on clean exit, rolled back on error.

        ``readonly`` promises no writes, so the backend may skip the write lock.
        """
        ...

    async def claim(
        self,
        owner: str,
        *,
        now: float,
        wall_now: float,
        lease_until: float,
        limit: int,
        serves: Sequence[str] | None = None,
    ) -> list[str]:
        """Lease up to ``limit`` runs that have a task due at ``now``, no live lease and
        are neither paused (``RunRecord.paused``) nor held (status ``held``: their
        inputs wait, as tasks, for a retry); with ``serves``, only runs whose key
        (:func:`parkway.store.fleet.run_key`) is among those (see
        :func:`parkway.store.fleet.serve_keys`), others left for the workers that
        serve them.

        A store with the ``"push"`` capability leases fewer than ``limit`` only
        when no other run is claimable: its worker does not claim again until
        a commit adds tasks.
        """
        ...

    async def load_run(
        self, run_id: str, now: float, *, owner: str | None = None
    ) -> LoadedRun | None:
        """The run, its tasks due at ``now`` and (unless it ended) its journal.

        ``owner``: the loading worker; the journal is not read (``None``) when that
        worker's advance parked the run last (``RunRecord.advanced_by``). The runs
        :meth:`claim` leases load the same way for their owner.
        """
        ...

    async def extend_leases(
        self, owner: str, run_ids: Sequence[str], lease_until: float
    ) -> None: ...

    async def release_leases(self, owner: str) -> None:
        """Drop every lease ``owner`` holds (graceful shutdown)."""
        ...

    async def next_due(self, *, after: float | None = None) -> float | None:
        """The earliest task due time (strictly after ``after`` when given)."""
        ...

    async def has_due(self, now: float) -> bool:
        """Whether any task is due at ``now`` for a run that exists and is neither paused
        nor held (a paused run's inputs wait for its resume, a held run's for its retry;
        a deleted run's are no one's)."""
        ...

    async def stats(self, now: float) -> StoreStats:
        """The gauges at ``now`` (see :class:`StoreStats`), read cheaply: by index,
        for a scrape every few seconds (each count grows with what it counts, the
        backlog, the parked runs, the dead letters, never with all the runs)."""
        ...

    async def changed(self) -> bool:
        """Whether another process committed since the last call (cheap; polled)."""
        ...

    def watch_streams(self, callback: Callable[[str | None], None]) -> None:
        """Call ``callback(run_id)`` (on the event loop) when another process
        committed a change to the run's streams (``None``: some run's, unknown
        which, as after a lost connection).

        This process's own commits are not reported (the core tells its readers
        itself, see :mod:`parkway.core.streams`). The first call starts listening:
        PostgreSQL by ``LISTEN``, SQLite by its wake-up socket; a store nobody else
        writes to (``memory://``) never calls it.
        """
        ...

    def watch(self, callback: Callable[[float | None], None]) -> None:
        """Call ``callback(due)`` (on the event loop) when a commit added tasks.

        ``due`` is the earliest due time among them, or ``None`` when unknown
        (say, after a lost connection: anything may have been added meanwhile).
        A store with the ``"push"`` capability calls it for the commits of every
        process, this one's too; one with ``"reports_own"`` for this process's.
        Others may call it as a hint (SQLite: for other processes' commits, when
        their wake-up reaches this one) and are polled through :meth:`changed`
        all the same.
        """
        ...


async def load_in_transaction(
    store: Store, run_id: str, now: float, owner: str | None = None
) -> LoadedRun | None:
    """:meth:`Store.load_run` for stores whose reads are cheap: one read-only transaction."""
    async with store.transaction(readonly=True) as tx:
        return await load_in(tx, run_id, now, owner)


async def load_in(tx: Tx, run_id: str, now: float, owner: str | None = None) -> LoadedRun | None:
    """What advancing the run needs, read in ``tx`` (for ``owner``: see
    :meth:`Store.load_run`)."""
    run = await tx.runs.get(run_id)
    return None if run is None else await load_with(tx, run, now, owner)


async def load_with(tx: Tx, run: RunRecord, now: float, owner: str | None = None) -> LoadedRun:
    """:func:`load_in` of a run whose row was read already (by the statement that
    leased it, say)."""
    tasks = await tx.tasks.due(run.id, now)
    signals = await tx.signals.list(run.id) if reads_mailbox(run, tasks) else None
    journal: list[JournalEntry] | None = []
    if run.status not in ENDED:
        journal = None if holds_journal(run, owner) else await tx.journal.read(run.id)
    return LoadedRun(run, tasks, journal, signals)


def holds_journal(run: RunRecord, owner: str | None) -> bool:
    """Whether ``owner``'s advance parked ``run`` last (so it need not read its journal)."""
    return owner is not None and run.advanced_by == owner


def reads_mailbox(run: RunRecord, tasks: Sequence[TaskRecord]) -> bool:
    """Whether a load hands the mailbox over (see :class:`LoadedRun`): the run goes on,
    and a signal is among its due tasks."""
    return run.status not in ENDED and any(t.kind == "signal" for t in tasks)


__all__ = [
    "ACTIVE",
    "ENDED",
    "FUSED",
    "MESSAGE_TASK",
    "REPORTS_OWN",
    "RUN_MUTABLE",
    "AttemptRecord",
    "EventDelivery",
    "EventRecord",
    "FlowEntry",
    "FlowSlot",
    "FusedTx",
    "JournalEntry",
    "Lease",
    "LoadedRun",
    "MessageDelivery",
    "MessageRecord",
    "NewTask",
    "RunRecord",
    "ScheduleRecord",
    "Sent",
    "SignalRecord",
    "Store",
    "StoreStats",
    "StreamRecord",
    "SubscriptionRecord",
    "TaskRecord",
    "Tx",
    "UpdateRecord",
    "holds_journal",
    "load_in",
    "load_in_transaction",
    "load_with",
    "reads_mailbox",
]
