"""How a PostgreSQL transaction's statements reach the server: pipelined, writes
queued until a round trip goes anyway, writes fused into a worker's fenced
update, and the commit, sent with its writes in one round trip where a lost
reply can still be settled.

``BEGIN`` is not sent on its own: it rides in one pipeline with the first
statement, and so does an advisory lock with the statement it guards. Writes
whose result nobody reads (inserts, deletes) are not sent when made but queued,
and ride in the pipeline of the next statement that returns something, or of
the ``COMMIT``: a transaction pays one round trip per statement that needs a
result, plus one. (A queued write that fails fails the transaction, at the next
statement or at commit, as it would have anyway: nothing in the engine recovers
from a failed write inside one.)

Apart from the entity operations (runs.py, journal.py, events.py,
messages.py), which say what to write and read, because this is the part that
decides how many round trips a transaction costs: the operations only call
:meth:`Transport._exec`, :meth:`Transport._write` and :meth:`Transport._fuse`.
It also keeps what the transaction announced (the notifications its
statements send at commit), which decides whether this process's worker must
be told of new tasks.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from parkway.errors import StoreConnectionError
from parkway.ids import new_mark
from parkway.store.postgres.connections import Connections, Row, Step
from parkway.store.postgres.failures import connection_lost, first_line
from parkway.store.postgres.recovery import Recovery, xid_of
from parkway.store.postgres.statements import BEGIN_WRITE, FUSABLE, Q, fenced_update
from parkway.store.postgres.wire import Conn, Params, Query, Result
from parkway.store.records import RunRecord, SubscriptionRecord

log = logging.getLogger("parkway.store.postgres")

# The share of marked commits that also delete marks older than an hour.
PRUNE_MARKS = 0.001


@dataclass
class _Fence:
    """A queued lease-fenced update: its run, shape, parameters and the writes it took."""

    run_id: str
    columns: tuple[str, ...]
    release: bool
    params: list[Any]
    parts: tuple[str, ...] = ()


class Transport(Recovery):
    """The round trips of one transaction (see the module's docstring), and what its
    parts leave there for one another."""

    # What one part's operation left for another's in the same transaction (None
    # until set: class defaults, so that a transaction costs no __init__ for them):
    # the runs.start queued last (the run, its due time and payload, the statement's
    # parameters), which runs.lease may turn into a leased insert; the signals.send
    # (its run and parameters), whose notification runs.lease may take over; and
    # what events.record read ahead, which subscriptions.shapes and .find hand over
    # (shapes of waits by (domain, name), waits by their index key).
    _started: tuple[RunRecord, float, bytes | None, tuple[Any, ...]] | None = None
    _signal: tuple[str, dict[str, Any]] | None = None
    _shapes: dict[tuple[str, str], list[str]] | None = None
    _found: dict[tuple[str, ...], list[SubscriptionRecord]] | None = None

    def __init__(self, store: Connections, conn: Conn, *, readonly: bool) -> None:
        super().__init__(store, conn, readonly=readonly)
        self._queued: list[Step] = []  # writes not sent yet (see the module's docstring)
        # Whether every write queued so far may be applied twice (then a commit cut
        # off with its connection can simply be sent again).
        self._idempotent = True
        # The last update_leased queued, which the writes right after it may join
        # (see _fuse).
        self._fence_at: _Fence | None = None
        # Queued writes whose result someone awaits (see _write).
        self._on_result: list[tuple[Step, Callable[[Result], None]]] = []
        # The earliest due time this transaction's notifications announced so far
        # (None: none sent yet), and those of statements that notify only if they
        # add a task (a signal, a delivery), until one is known not to have.
        self._notified: float | None = None
        self._maybe_notified: list[list[float]] = []
        # The runs this transaction gave tasks, and those it leased to this
        # process's worker (which then needs no report of those tasks).
        self._task_runs: set[str] = set()
        self._leased: set[str] = set()

    @property
    def started(self) -> bool:
        """Whether a transaction was begun (else there is nothing to commit)."""
        return not self._ro and self._begin is None

    async def _exec(
        self, query: Query, params: Params = (), *, lock: int | None = None, shared: bool = False
    ) -> Result:
        """Run ``query``, after ``lock`` (an advisory key held to commit) if given.

        The lock is a statement of its own, sent in the same pipeline: the query
        then reads a snapshot taken after the lock was granted, which under READ
        COMMITTED sees whatever the previous holder committed.
        """
        if lock is None:
            return (await self._run([(query, params)]))[-1]
        locking = Q["xact_lock_shared" if shared else "xact_lock"]
        return (await self._run([(locking, (lock,)), (query, params)]))[-1]

    async def _all(self, query: Query, params: Params = (), **lock: Any) -> list[Row]:
        return (await self._exec(query, params, **lock)).rows or []

    async def _one(self, query: Query, params: Params = (), **lock: Any) -> Row | None:
        rows = (await self._exec(query, params, **lock)).rows
        return rows[0] if rows else None

    async def _write(
        self,
        query: Query,
        params: Params = (),
        *,
        lock: int | None = None,
        shared: bool = False,
        idempotent: bool = False,
        on_result: Callable[[Result], None] | None = None,
    ) -> None:
        """Queue a write whose result is not needed now; it is sent with the next round trip.

        ``idempotent``: applying it twice is applying it once (see ``_commit``).
        ``on_result``: called with its result once it arrives (by the commit at the
        latest; never, if the commit's reply was lost though it went through).
        """
        if self._ro:  # no transaction to hold it back for
            result = await self._exec(query, params, lock=lock, shared=shared)
            if on_result is not None:
                on_result(result)
            return
        self._idempotent = self._idempotent and idempotent
        if lock is not None:
            self._queued.append((Q["xact_lock_shared" if shared else "xact_lock"], (lock,)))
        step: Step = (query, params)
        self._queued.append(step)
        if on_result is not None:
            self._on_result.append((step, on_result))

    def _last_params(self) -> object:
        """The parameters of the write queued last (None: nothing is queued)."""
        return self._queued[-1][1] if self._queued else None

    def _results(self, steps: Sequence[Step], results: Sequence[Result]) -> None:
        """Hand queued writes that asked for their result (see _write) their result."""
        if not self._on_result:
            return
        sent = {id(step): result for step, result in zip(steps, results, strict=True)}
        waiting = []
        for step, callback in self._on_result:
            result = sent.get(id(step))
            if result is None:
                waiting.append((step, callback))
            else:
                callback(result)
        self._on_result = waiting

    async def _run(self, steps: list[Step]) -> list[Result]:
        """Run the queued writes and ``steps`` in one round trip; return the results of ``steps``.

        Survives a connection that dies under them (see :meth:`_recover`).
        """
        steps = [*self._queued, *steps]
        queued = len(self._queued)
        attempts = self._store.pool_size + 1
        for attempt in range(attempts):
            try:
                if attempt:
                    await self._recover()
                if self._begin is None:
                    results = await self._send(steps)
                else:
                    results = await self._send([(self._begin, ()), (Q["xact_id"], ()), *steps])
                    self._begin, self._xid, results = None, xid_of(results[1]), results[2:]
            except psycopg.OperationalError as exc:
                if not connection_lost(exc, self._c) or attempt == attempts - 1:
                    raise
                continue
            self._queued = []
            if not self._ro:
                self._log += zip(steps, results, strict=True)
            self._results(steps[:queued], results[:queued])
            return results[queued:]
        raise AssertionError("unreachable")

    # -- write fusion ------------------------------------------------------------------------

    async def _write_fenced(
        self, run_id: str, changes: dict[str, Any], *, owner: str, release: bool
    ) -> None:
        """Queue the lease-fenced update of a worker's commit (see update_leased)."""
        # Queued, not asked: parkway.lease_held fails the transaction if the lease
        # is gone, so the writes queued behind it never commit (see _commit).
        # Unique, not secret (see new_mark).
        token = new_mark()
        if self._token is None:
            self._token = (run_id, token)
        columns = tuple(changes)
        params = [*changes.values(), token, run_id, owner]
        await self._write(fenced_update(columns, release=release), params)
        # The writes of the run's commit right after it may ride in this statement.
        self._fence_at = _Fence(run_id, columns, release, params)

    def _fuse(self, query: str, params: Sequence[Any], run_id: str | None = None) -> bool:
        """Add the write ``query`` (a name in FUSABLE) to the statement of the lease-fenced
        update queued last, as one more part of it; whether it could.

        It can while that update is the last write queued (so every earlier write
        is a statement before it, whose rows it sees) and no part of it touches
        the same table (the parts of one statement see the same snapshot, and
        never each other's rows). With ``run_id``, only that run's update takes it.
        """
        fence = self._fence_at
        if (
            fence is None
            or (run_id is not None and fence.run_id != run_id)
            or not self._queued
            or self._queued[-1][1] is not fence.params  # no longer the last write
            or FUSABLE[query] in {FUSABLE[part] for part in fence.parts}
        ):
            return False
        fence.parts = (*fence.parts, query)
        fence.params = [*fence.params, *params]
        fenced = fenced_update(fence.columns, release=fence.release, parts=fence.parts)
        self._queued[-1] = (fenced, fence.params)
        return True

    # -- commit ------------------------------------------------------------------------------

    async def _mark(self, params: dict[str, Any], found: Callable[[str | None], None]) -> None:
        """Settle a lost reply of the statement just queued by its commit mark
        (``params["mark"]``), when the transaction goes with its ``COMMIT`` in one
        round trip (see _commit_at_once); now and then, prune old marks too."""
        if not self.started:
            self._marks.append((params, found))
            if random.random() < PRUNE_MARKS:
                await self._write(Q["prune_marks"], (), idempotent=True)

    async def _commit(self) -> None:
        """Commit, making sure of the outcome if the connection dies during ``COMMIT``."""
        if self._queued and not self.started:
            if self._token is not None or self._idempotent or self._marks:
                await self._commit_at_once()
                return
            # Only queued writes: they go first, with BEGIN and the id asked for,
            # so that a COMMIT cut off below can still learn its fate.
            await self._run([])
        if not self.started:
            return
        attempts = self._store.pool_size + 1
        for attempt in range(attempts):
            try:
                if attempt:
                    await self._recover()  # only once the server said it did not commit
                results = await self._send([*self._queued, ("COMMIT", ())])
                self._results(self._queued, results[:-1])
                self._queued = []
                return
            except psycopg.OperationalError as exc:
                if not connection_lost(exc, self._c) or attempt == attempts - 1:
                    raise
                # The reply was lost, not necessarily the commit: ask the server.
                status = await self._store._xact_status(self._xid)
                if status == "committed":
                    return
                if status != "aborted":
                    raise
        raise AssertionError("unreachable")

    async def _commit_at_once(self) -> None:
        """A transaction of queued writes only: BEGIN, them, COMMIT, in one round trip
        (a single statement goes alone: in autocommit mode it is its own transaction).

        No transaction id is asked for (that would take a round trip of its own).
        If the connection dies, a transaction fenced by a lease is known committed
        by the run's ``commit_token``, a marked one by its commit mark; if it did
        not commit, it is sent again on a fresh connection (where the fence stops
        it if the lease has been lost meanwhile; with a new mark). A transaction of
        idempotent writes is simply sent again.
        """
        steps: list[Step] = [(BEGIN_WRITE, ()), *self._queued, ("COMMIT", ())]
        if len(self._queued) == 1:
            steps = self._queued  # one statement is a transaction of its own (autocommit)
        attempts = self._store.pool_size + 1
        for attempt in range(attempts):
            try:
                if attempt:
                    await self._fresh_connection()
                    self._resent = True
                results = await self._send(steps)
                self._results(self._queued, results if len(steps) == 1 else results[1:-1])
                self._queued = []
                return
            except psycopg.OperationalError as exc:
                if not connection_lost(exc, self._c) or attempt == attempts - 1:
                    raise
                try:
                    committed = await self._settle()
                except Exception as lost:
                    # Whatever went wrong while asking, the commit itself may have
                    # happened: the caller must not take it as rolled back.
                    raise StoreConnectionError(
                        f"PostgreSQL {self._store.display}: the connection was lost while "
                        f"committing, and asking what became of the commit failed: "
                        f"{first_line(lost)} (the commit may or may not have happened; retry)",
                        outcome_unknown=True,
                    ) from lost
                if committed:
                    self._queued = []
                    return
                log.warning(
                    "connection to %s lost while committing; sending it again",
                    self._store.display,
                )
        raise AssertionError("unreachable")

    # -- what the transaction announced ------------------------------------------------------

    def _announce(self, due: float) -> str:
        """The payload of a notification of tasks due from ``due`` on (see listener.py)."""
        self._notified = due if self._notified is None else min(self._notified, due)
        return f"{self._store._token} {due!r}"

    def _announce_maybe(self, due: float) -> tuple[str, Callable[[], None]]:
        """:meth:`_announce` for a statement that notifies only if it adds a task;
        also returns what to call once it is known that it did not."""
        entry = [due]
        self._maybe_notified.append(entry)
        return f"{self._store._token} {due!r}", lambda: self._maybe_notified.remove(entry)

    def _announced(self) -> float | None:
        """The earliest due time this transaction announced (None: nothing)."""
        if not self._maybe_notified:  # (most transactions: asked at every commit)
            return self._notified
        dues = [entry[0] for entry in self._maybe_notified]
        if self._notified is not None:
            dues.append(self._notified)
        return min(dues)

    def _to_report(self) -> float | None:
        """After the commit: the earliest due time of the tasks it added that this
        process's worker must be told of (None: none). Other processes' workers hear
        of them by the notification; this one drops its own notifications, and needs
        no word of the runs this transaction leased to it (see runs.lease)."""
        announced = self._announced()
        if announced is not None and not self._task_runs <= self._leased:
            return announced
        return None


class Part:
    """What every part of a transaction holds: its transport (no operations here)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport
