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

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, cast

from parkway.errors import LeaseLostError
from parkway.store.fleet import FleetTx
from parkway.store.flow import FlowTx
from parkway.store.people import PeopleTx
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
from parkway.store.schedules import ScheduleRecord, ScheduleTx
from parkway.store.streams import StreamTx

# Columns of ``runs`` that ``update_run`` may change.
RUN_MUTABLE = frozenset(
    {
        "status", "input", "output", "error", "generation", "updated_at", "workflow", "version",
        "advanced_by", "paused", "forked_from", "forked_at",
    }
)  # fmt: skip

# The capabilities of a store whose watch() reports this process's commits that
# added tasks (see Store.capabilities): the engine need not poke its worker after
# each commit, nor the worker look for work after each advance.
REPORTS_OWN = frozenset({"push", "reports_own"})


class Tx(ScheduleTx, FlowTx, PeopleTx, StreamTx, FleetTx, Protocol):
    """Primitive operations inside one atomic transaction (schedules' among them:
    :class:`parkway.store.schedules.ScheduleTx`; callbacks' and human tasks':
    :class:`parkway.store.people.PeopleTx`; streams':
    :class:`parkway.store.streams.StreamTx`)."""

    async def get_run(self, run_id: str) -> RunRecord | None: ...
    async def insert_run(self, run: RunRecord) -> None: ...
    async def start_run(
        self, run: RunRecord, due_at: float, *, task_payload: bytes | None = None
    ) -> None:
        """Insert ``run`` and its start task due at ``due_at``, unless the id exists.

        Idempotent: a second start of the same id changes nothing. ``task_payload``:
        the start task's (the starter's trace context, see :mod:`parkway.core.telemetry`).
        """
        ...

    async def update_run(
        self,
        run_id: str,
        changes: dict[str, Any],
        *,
        owner: str | None = None,
        release: bool = True,
    ) -> bool:
        """Apply ``changes``; with ``owner``, only while that worker holds the lease.

        With ``owner`` and ``release`` the lease is also dropped. Returns whether
        the row changed (``False`` = the lease was lost: roll back).
        """
        ...

    async def update_leased(
        self, run_id: str, changes: dict[str, Any], *, owner: str, release: bool = True
    ) -> None:
        """``update_run`` for the worker that leases the run: fenced by the lease.

        Raises :class:`parkway.errors.LeaseLostError` when ``owner`` no longer
        holds the lease, either at once or when the transaction commits (then
        nothing of it is saved). A store that fences at commit need not wait
        for an answer here, so a worker's commit can be a single round trip.
        With ``release`` the lease is dropped.
        """
        ...

    async def drop_cache_marks(self, run_ids: Sequence[str], owner: str) -> None:
        """Clear ``advanced_by`` of those of ``run_ids`` whose row still names ``owner``:
        its worker no longer holds their machines (evicted from its cache), so a
        load for it reads their journals with the rest instead of leaving them out.

        A hint, never waited for: a row another transaction holds locked is
        skipped (a mark left in place costs the load of that run a read of its
        own, as before; a mark cleared too early, a replay).
        """
        ...

    async def lease_run(
        self, run_id: str, *, owner: str, now: float, wall_now: float, lease_until: float
    ) -> Lease:
        """Lease the run to ``owner``, as a claim would, if no one holds its lease, it
        has not ended and it is neither paused nor held: the worker of the process that gives
        a run a task can
        then advance it without a claim. What it needs (its tasks due at ``now``,
        this transaction's among them) comes with the lease.
        """
        ...

    async def list_runs(
        self,
        *,
        workflow: str | None,
        status: str | None,
        subject: str | None,
        domain: str | None,
        parent_id: str | None,
        limit: int,
        search: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
        before: str | None = None,
    ) -> list[RunRecord]:
        """Runs, newest first (``created_at`` then ``id``, both descending); without
        ``workflow``, internal runs (``parkway.*``) are left out.

        ``search``: only runs whose id or subject starts with it (case-sensitive).
        ``created_after`` / ``created_before``: ``created_after <= created_at <
        created_before``. ``before``: a run id, the keyset cursor of the previous
        page; only runs after it in this order (none if no run has that id).
        """
        ...

    async def run_counts(self) -> list[tuple[str, str, int]]:
        """``(workflow, status, runs)`` for every pair that has runs, internal runs left
        out, by workflow then status."""
        ...

    async def find_runs(
        self,
        *,
        statuses: Sequence[str],
        workflow: str | None,
        subject: str | None,
        created_before: float | None,
        after: str | None,
        limit: int,
    ) -> list[RunRecord]:
        """Runs in one of ``statuses`` matching the filters given, by id, those after
        ``after`` (an id) only: a bulk operation's next batch. Without ``workflow``,
        internal runs (``parkway.*``) are left out."""
        ...

    async def expired_runs(
        self, before: float, *, workflow: str | None, exclude: Sequence[str], limit: int
    ) -> list[str]:
        """Ids of runs that ended (``ENDED``) before ``before`` (their ``updated_at``),
        oldest first: of ``workflow``, or (``None``) of any workflow not in ``exclude``."""
        ...

    async def delete_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs and everything kept for them: journal, tasks, mailbox,
        subscriptions, values, updates and streams."""
        ...

    async def journal(self, run_id: str) -> list[JournalEntry]: ...
    async def put_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None: ...
    async def clear_journal(self, run_id: str) -> None: ...
    async def journal_outline(self, run_id: str) -> list[tuple[int, str]]:
        """The run's journal as ``(pos, state)`` pairs in position order: what a fork
        decides on, without reading any entry's value."""
        ...

    async def copy_journal(self, source_id: str, run_id: str, before: int | None) -> None:
        """Copy ``source_id``'s journal entries at positions below ``before`` (``None``:
        all) to ``run_id``, but the pending ones (an ``engine.fork``), in the store."""
        ...

    async def add_tasks(self, tasks: Sequence[NewTask]) -> None: ...
    async def due_tasks(self, run_id: str, now: float) -> list[TaskRecord]: ...
    async def delete_tasks(self, ids: Sequence[int]) -> None: ...
    async def delete_wait_tasks(
        self, run_id: str, pos: int | None = None, *, keep: Sequence[int] = ()
    ) -> None:
        """Delete the run's timer and delivery tasks (those aimed at a wait), or one wait's.

        Tasks whose id is in ``keep`` stay.
        """
        ...

    async def delete_all_tasks(self, run_id: str) -> None: ...
    async def add_signal(
        self, run_id: str, name: str, payload: bytes | None, at: float
    ) -> None: ...
    async def send_signal(
        self,
        run_id: str,
        name: str,
        payload: bytes | None,
        at: float,
        *,
        task_payload: bytes | None = None,
    ) -> Sent:
        """Buffer a signal for the run, with its task due at ``at`` (carrying
        ``task_payload``: the sender's trace context), unless the run is missing or
        has ended; what it found: the run's status (``None``: no such run), maybe
        known only once the transaction has committed."""
        ...

    async def signals(self, run_id: str) -> list[SignalRecord]: ...
    async def delete_signals(self, ids: Sequence[int]) -> None: ...
    async def record_event(
        self,
        event: EventRecord,
        fresh_after: float,
        *,
        digest: Callable[[str], str | None] | None = None,
    ) -> EventRecord | None:
        """Record the event, unless one with its id was published at or after
        ``fresh_after``: then change nothing and return that one. An older one
        with its id is replaced (its id is free again).

        ``digest(shape)``: the event payload's digest under a match shape (see
        :mod:`parkway.matching`), so a store may read ahead the event waits that
        the publish looks for next (``find_subscriptions``).
        """
        ...

    async def get_event(self, event_id: str) -> EventRecord | None: ...
    async def insert_event(self, event: EventRecord) -> None: ...
    async def delete_event(self, event_id: str) -> None: ...
    async def events_since(self, domain: str, name: str, since: float) -> list[EventRecord]: ...
    async def prune_events(self, before: float) -> int: ...
    async def add_subscription(self, sub: SubscriptionRecord) -> None: ...
    async def shapes(self, domain: str, name: str) -> list[str]: ...
    async def find_subscriptions(
        self, *, domain: str, name: str, shape: str, digest: str, subject: str | None, kind: str
    ) -> list[SubscriptionRecord]:
        """Waits indexed under exactly this key, on ``subject`` or on ``"*"``."""
        ...

    async def list_subscriptions(
        self, *, run_id: str | None = None, name: str | None = None
    ) -> list[SubscriptionRecord]: ...
    async def delete_subscription(self, run_id: str, pos: int) -> None: ...
    async def delete_run_subscriptions(self, run_id: str) -> None: ...
    async def sweep_subscriptions(self, now: float) -> int:
        """Delete subscriptions past their TTL (and shapes no wait uses); return how many."""
        ...

    async def active_run(self, workflow: str, domain: str, subject: str | None) -> str | None:
        """The id of an unfinished run of ``workflow`` in this domain and subject, if any."""
        ...

    async def message_wait(self, name: str, key: str) -> SubscriptionRecord | None:
        """The one live wait for message ``(name, key)``, if any."""
        ...

    async def take_message_wait(self, name: str, key: str, now: float) -> SubscriptionRecord | None:
        """Remove and return the wait for message ``(name, key)``, unless there is none
        or its deadline has passed at ``now`` (then it stays: its timeout wins)."""
        ...

    async def add_message(self, message: MessageRecord) -> int:
        """Buffer a message (its ``id`` is ignored); return the new id."""
        ...

    async def oldest_message(self, name: str, key: str, now: float) -> MessageRecord | None: ...
    async def get_message(self, message_id: int) -> MessageRecord | None: ...
    async def list_messages(self, status: str | None) -> list[MessageRecord]: ...
    async def delete_message(self, message_id: int) -> None: ...
    async def update_message(
        self, message_id: int, status: str, reason: str | None, expires_at: float
    ) -> None: ...
    async def expire_messages(self, now: float, reason: str) -> list[MessageRecord]:
        """Turn buffered messages past their TTL into dead letters; return them."""
        ...

    async def put_values(self, run_id: str, values: Mapping[str, bytes], at: float) -> None:
        """Set the run's values (``ctx.set_value``), replacing those of the same keys."""
        ...

    async def run_values(self, run_ids: Sequence[str]) -> dict[str, dict[str, bytes]]:
        """The values of each of ``run_ids`` that has any, by key."""
        ...

    async def add_attempts(self, attempts: Sequence[AttemptRecord]) -> None:
        """Keep failed attempts of steps (one already kept, by run, position and
        attempt, is left as it is). ``clear_journal`` and ``delete_runs`` drop them."""
        ...

    async def attempts(self, run_id: str) -> list[AttemptRecord]:
        """The failed attempts kept for ``run_id``, by position then attempt."""
        ...

    async def add_update(self, update: UpdateRecord) -> UpdateRecord | None:
        """Record an update sent to a run, unless one with its ``(run_id, id)`` exists:
        then change nothing and return that one."""
        ...

    async def get_update(self, run_id: str, update_id: str) -> UpdateRecord | None: ...
    async def pending_updates(self, run_id: str) -> list[UpdateRecord]:
        """The run's updates not handled yet, in the order they arrived."""
        ...

    async def finish_update(
        self, run_id: str, update_id: str, status: str, result: bytes | None, at: float
    ) -> None:
        """Record what became of a pending update (see :class:`UpdateRecord`)."""
        ...

    async def message_id_seen(self, message_id: str) -> float | None: ...
    async def remember_message_id(self, message_id: str, at: float) -> None: ...
    async def prune_message_ids(self, before: float) -> None: ...


class FusedTx(Tx, Protocol):
    """A transaction of a store with the ``"fused"`` capability: the senders' fast
    paths (:func:`parkway.core.publishing.deliver`, :func:`parkway.core.messages.deliver`)
    as one operation each, which the store may send with the ``COMMIT`` (one round
    trip). Their meaning is the core's composed path's, which the conformance suite
    checks on every backend."""

    async def deliver_event(
        self,
        event: EventRecord,
        payload: Any,
        envelope: bytes,
        *,
        fresh_after: float,
        owner: str | None = None,
        wall_now: float = 0.0,
        lease_until: float = 0.0,
    ) -> EventDelivery:
        """A publish that only resumes waits (no workflow starts for it).

        Unless the event's id was seen at or after ``fresh_after`` (then
        ``"duplicate"``, nothing written), record it as :meth:`record_event`
        would and take every event wait its ``payload`` (``event.payload``
        decoded) matches, as :func:`parkway.core.publishing.take_event_waits` does:
        each gets a delivery task carrying ``envelope`` due at ``event.published_at``. With
        ``owner``, also lease the first run to it as :meth:`lease_run` would.
        A store may decline (say, because the waits' match shapes are not the
        ones it expected), writing nothing. What it did may be known only once
        the transaction has committed, so that a store can send all of it with
        the ``COMMIT``.
        """
        ...

    async def deliver_message(
        self,
        name: str,
        key: str,
        body: bytes,
        now: float,
        *,
        message_id: str | None,
        fresh_after: float,
        owner: str | None = None,
        wall_now: float = 0.0,
        lease_until: float = 0.0,
    ) -> MessageDelivery:
        """A message straight to the run waiting for it, if one does.

        Unless ``message_id`` was seen at or after ``fresh_after`` (then:
        ``"duplicate"``, nothing written), take the wait as
        :meth:`take_message_wait` would, give its run a :data:`MESSAGE_TASK`
        task carrying ``body`` due at ``now``, and remember ``message_id`` as
        seen at ``now``. With ``owner``, also lease the run to it as
        :meth:`lease_run` would. With no wait, nothing is written: the caller
        goes on to start a run or buffer the message, in a transaction of its
        own. What it did may be known only once the transaction has committed,
        so that a store can send all of it with the ``COMMIT``.
        """
        ...


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
    run = await tx.get_run(run_id)
    return None if run is None else await load_with(tx, run, now, owner)


async def load_with(tx: Tx, run: RunRecord, now: float, owner: str | None = None) -> LoadedRun:
    """:func:`load_in` of a run whose row was read already (by the statement that
    leased it, say)."""
    tasks = await tx.due_tasks(run.id, now)
    signals = await tx.signals(run.id) if reads_mailbox(run, tasks) else None
    journal: list[JournalEntry] | None = []
    if run.status not in ENDED:
        journal = None if holds_journal(run, owner) else await tx.journal(run.id)
    return LoadedRun(run, tasks, journal, signals)


def holds_journal(run: RunRecord, owner: str | None) -> bool:
    """Whether ``owner``'s advance parked ``run`` last (so it need not read its journal)."""
    return owner is not None and run.advanced_by == owner


def reads_mailbox(run: RunRecord, tasks: Sequence[TaskRecord]) -> bool:
    """Whether a load hands the mailbox over (see :class:`LoadedRun`): the run goes on,
    and a signal is among its due tasks."""
    return run.status not in ENDED and any(t.kind == "signal" for t in tasks)


class ComposedTx:
    """The :class:`Tx` operations made of the primitive ones, for stores whose
    statements are cheap (memory, SQLite). The PostgreSQL store does each in
    one statement instead."""

    def _tx(self) -> Tx:
        return cast(Tx, self)

    async def start_run(
        self, run: RunRecord, due_at: float, *, task_payload: bytes | None = None
    ) -> None:
        tx = self._tx()
        if await tx.get_run(run.id) is None:
            await tx.insert_run(run)
            await tx.add_tasks([NewTask(run.id, due_at, "start", payload=task_payload)])

    async def update_leased(
        self, run_id: str, changes: dict[str, Any], *, owner: str, release: bool = True
    ) -> None:
        if not await self._tx().update_run(run_id, changes, owner=owner, release=release):
            raise LeaseLostError(f"lost the lease on run {run_id!r}")

    async def send_signal(
        self,
        run_id: str,
        name: str,
        payload: bytes | None,
        at: float,
        *,
        task_payload: bytes | None = None,
    ) -> Sent:
        tx = self._tx()
        run = await tx.get_run(run_id)
        if run is None:
            return Sent(None, known=True)
        if run.status not in ENDED:
            await tx.add_signal(run_id, name, payload, at)
            await tx.add_tasks([NewTask(run_id, at, "signal", payload=task_payload)])
        return Sent(run.status, known=True)

    async def record_event(
        self,
        event: EventRecord,
        fresh_after: float,
        *,
        digest: Callable[[str], str | None] | None = None,  # (reads are cheap here)
    ) -> EventRecord | None:
        tx = self._tx()
        existing = await tx.get_event(event.id)
        if existing is not None:
            if existing.published_at >= fresh_after:
                return existing
            await tx.delete_event(event.id)
        await tx.insert_event(event)
        return None

    async def take_message_wait(self, name: str, key: str, now: float) -> SubscriptionRecord | None:
        tx = self._tx()
        wait = await tx.message_wait(name, key)
        if wait is None or (wait.deadline is not None and now > wait.deadline):
            return None
        await tx.delete_subscription(wait.run_id, wait.pos)
        return wait


__all__ = [
    "ACTIVE",
    "ENDED",
    "FUSED",
    "MESSAGE_TASK",
    "REPORTS_OWN",
    "RUN_MUTABLE",
    "AttemptRecord",
    "ComposedTx",
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
