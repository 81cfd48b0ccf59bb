"""PostgreSQL store: many worker processes on many machines (``postgresql://...``).

Driver: psycopg 3 (async) with ``psycopg_pool.AsyncConnectionPool``, rather
than asyncpg. psycopg goes through libpq, so a parkway URL means exactly what
it means to ``psql`` (``.pgpass``, service files, ``PG*`` variables, every
``sslmode``, several hosts); its API is fully typed (this package is mypy
strict); its pool replaces broken connections by itself and LISTEN needs no
callback plumbing (``notifies()``); and it works behind PgBouncer. Its cursors
cost ~70 µs of Python per statement, though, which made the client the
bottleneck of a busy worker: statements go through :mod:`parkway.store.pgwire`
instead (psycopg's connection, adapters and errors, its libpq handle driven
directly, every statement prepared once per connection).

One transaction = one pooled connection in autocommit mode: a write
transaction sends ``BEGIN ISOLATION LEVEL READ COMMITTED`` in one pipeline
with its first statement; a read-only one runs statement by statement, as on
SQLite. The worker's claim, lease and polling calls are single statements.
SQLite runs one writer at a time, so every read-then-write in the engine is
atomic there for free; under READ COMMITTED with many processes each such
sequence needs a lock, and each lock below names the race it closes (each has
a test in tests/store/test_conformance.py that fails without it):

- publish vs publish on one subscription: ``find_subscriptions`` locks the
  rows (``FOR UPDATE``); the loser re-reads them deleted and skips them.
- publish vs a ``since_start`` park (``events_since`` then
  ``add_subscription``): ``insert_event`` takes a shared advisory lock on the
  event's (domain, name), ``events_since`` an exclusive one, so one of the two
  commits first and the other sees its row: the event is never lost between
  them. Plain waits need no lock (an event published before a wait commits is
  simply earlier than the wait), and publishes of one name stay concurrent.
- the same event id or message id published twice at once: an exclusive
  advisory lock on the id in ``get_event`` / ``message_id_seen``, so the second
  sees the first and reports a duplicate.
- correlate vs correlate, vs a ``wait_for_message`` being registered, vs a
  message-started run ending (which starts the next one): an exclusive
  advisory lock on the subject/key, taken by ``message_wait``,
  ``oldest_message`` and ``active_run`` (the same key for all three, so they
  never deadlock on each other), plus row locks on the wait and the message.
- ``unique_per_subject`` starts: ``active_run`` holds the subject lock until
  commit, so two publishes cannot both see "no active run".
- a message delivered while its run stops waiting (``messages.rebuffer`` reads
  the run's deliveries, then deletes its tasks): a read-write ``due_tasks``
  takes the key lock of the run's message waits first, so the delivery is
  either among what it reads or finds the wait gone.
- cancel vs claim: ``get_run`` in a read-write transaction locks the row
  (``FOR NO KEY UPDATE``); ``claim`` skips locked rows.
- two starts of one run id: ``insert_run`` does nothing when the id exists.

Lock waits are bounded by ``statement_timeout``; a deadlock (which these lock
orders make unlikely) is detected by PostgreSQL and surfaces as a failed
transaction, which the worker retries. Batched commits hold the locks of all
their jobs to the end: a sender's batch of deliveries takes its keys in key
order, so two senders' batches do not deadlock on keys alone (their message
ids are locked too, in the same order, which two batches can still cross with
repeated ids); a worker's batch, whose runs' message keys come in any order,
can with a sender's. Either way each job is then retried on its own (the
rollback is known), after ``deadlock_timeout``.

A lost connection (server restart, failover, ``pg_terminate_backend``) is
survived where the outcome is certain: a read or a transaction's first
statement moves to a fresh connection; a write transaction cut off midway is
replayed on one (see :class:`PostgresTx`); a ``COMMIT`` whose reply was lost
asks the server what became of the transaction (``pg_xact_status``), or, for a
transaction sent with its ``COMMIT`` in one round trip (a worker's commit, a
start, a signal), looks at what it left: the run's commit token, the run itself,
the transaction's commit mark (migration 003). The
listener reconnects by itself and then reports a change, since notifications
sent meanwhile are lost. Needs PostgreSQL 13 or later.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import operator
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import orjson
import psycopg
import psycopg_pool
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from parkway.durations import to_seconds
from parkway.errors import InvalidDurationError, LeaseLostError, ParkwayError, StoreError
from parkway.matching import payload_digest
from parkway.store import pgwire
from parkway.store.base import (
    ENDED,
    RUN_MUTABLE,
    EventDelivery,
    EventRecord,
    JournalEntry,
    Lease,
    LoadedRun,
    MessageDelivery,
    MessageRecord,
    NewTask,
    RunRecord,
    Sent,
    SignalRecord,
    SubscriptionRecord,
    TaskRecord,
    reads_mailbox,
)
from parkway.store.pgpool import LifoPool
from parkway.store.pgwire import Conn, Query, Result
from parkway.store.sql import load_migrations, load_queries

log = logging.getLogger("parkway.store.postgres")

Q = load_queries("postgres.sql")
# A claim of whatever is due, and a claim of one run (see the queries).
CLAIM_DUE = f"{Q['claim_due']}\n{Q['claimed_rows']}"


def _lease_rows(rows: str) -> str:
    """claimed_rows as a lease in the sender's transaction has it: one row even when
    it leased nothing (its columns null), ending with lease_note."""
    source, found = "FROM claimed AS c\n", "(SELECT count(*) FROM due) AS found\n"
    assert source in rows and found in rows, "claimed_rows changed: see _lease_rows"
    rows = rows.replace(source, "FROM (SELECT) AS one LEFT JOIN claimed AS c ON true\n")
    return rows.replace(found, f"{found.rstrip()},\n{Q['lease_note']}\n")


CLAIM_RUN = f"{Q['claim_run']}\n{_lease_rows(Q['claimed_rows'])}"
# claim_run for the run deliver_message just delivered to (none: it claims nothing).
CLAIM_DELIVERED = CLAIM_RUN.replace("%(run)s", "current_setting('parkway.delivered', true)")
MIGRATIONS = load_migrations("postgres_migrations")
# The most shapes deliver_event takes waits under in one statement (more: the usual path).
DELIVER_EVENT_SHAPES = 8


@functools.lru_cache(maxsize=DELIVER_EVENT_SHAPES + 1)
def deliver_event_query(shapes: int) -> str:
    """deliver_event with a removal of the matching waits under each of ``shapes``
    shapes (see the queries)."""
    lookups = "".join(
        f"), taken_{i} AS (\n" + Q["deliver_event_lookup"].replace("{n}", str(i)) + "\n"
        for i in range(shapes)
    )
    taken = " UNION ALL ".join(f"SELECT * FROM taken_{i}" for i in range(shapes)) or (
        "SELECT NULL::text AS run_id, NULL::int4 AS pos, NULL::text AS wait, 0 AS ord, "
        "NULL::float8 AS created_at WHERE false"
    )
    return Q["deliver_event"].replace("{lookups}", lookups).replace("{taken}", taken)


Row = tuple[Any, ...]
# Parameters: positional (%s), or named (%(name)s) for a query that uses one twice.
Step = tuple[Query, Sequence[Any] | Mapping[str, Any]]


CHANNEL = "parkway_tasks"
# What parkway.lease_held raises (migration 002).
LEASE_LOST = "PKL01"
BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"

# Parkway's own URL query parameters (removed before the URL reaches libpq).
DEFAULT_POOL_SIZE = 10
DEFAULT_POOL_TIMEOUT = 30.0
DEFAULT_STATEMENT_TIMEOUT = 30.0
# A session idle inside a transaction this long is ended by the server, so a
# frozen process cannot hold run locks forever (parkway never waits on user
# code inside a transaction).
IDLE_IN_TRANSACTION_TIMEOUT = 60.0
# The share of marked commits that also delete marks older than an hour.
PRUNE_MARKS = 0.001
# The listener probes its connection this often when no notification came.
LISTEN_PROBE = 30.0


def lock_key(kind: str, *parts: str) -> int:
    """A 64-bit advisory lock key for ``kind`` and ``parts`` (length-prefixed: unambiguous)."""
    text = "".join(f"{len(p)}:{p}" for p in (kind, *parts))
    return int.from_bytes(
        hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True
    )


MIGRATION_LOCK = lock_key("parkway-migrations")


def _subject_lock(domain: str, subject: str | None) -> int:
    return lock_key("subject", domain, "" if subject is None else f"={subject}")


# Writes that may ride in a run's lease-fenced update (see PostgresTx._fuse), and
# the table each writes. Only the journal's are inserts, into a table no other
# part touches: no part is meant to see rows another part writes.
FUSABLE = {
    "put_journal": "journal",
    "put_journal_entry": "journal",
    "delete_tasks": "tasks",
    "delete_task": "tasks",
    "delete_all_tasks": "tasks",
    "delete_signals": "mailbox",
    "delete_run_subscriptions": "subscriptions",
    "delete_subscription": "subscriptions",
    "delete_wait_tasks_at": "tasks",
    "delete_wait_tasks_at_keep": "tasks",
}


@dataclass
class _Fence:
    """A queued lease-fenced update: its run, shape, parameters and the writes it took."""

    run_id: str
    columns: tuple[str, ...]
    release: bool
    params: list[Any]
    parts: tuple[str, ...] = ()


class PostgresTx:
    """Primitive operations on an open PostgreSQL transaction.

    ``BEGIN`` is not sent on its own: it rides in one pipeline with the first
    statement, and so does an advisory lock with the statement it guards.
    Writes whose result nobody reads (inserts, deletes) are not sent when made
    but queued, and ride in the pipeline of the next statement that returns
    something, or of the ``COMMIT``: a transaction pays one round trip per
    statement that needs a result, plus one. (A queued write that fails fails
    the transaction, at the next statement or at commit, as it would have
    anyway: nothing in the engine recovers from a failed write inside one.)

    A write transaction keeps a log of its statements and their results. If the
    connection dies before ``COMMIT`` (server restart, failover, a terminated
    backend), the server has rolled it all back; the transaction is replayed on
    a fresh connection, and carries on only if every result comes back the
    same (then the caller's decisions, made on those results, still hold).
    """

    def __init__(self, store: PostgresStore, conn: Conn, *, readonly: bool) -> None:
        self._store = store
        self._c = conn
        self._ro = readonly
        # Reads run statement by statement in autocommit mode, as on SQLite: no
        # reader needs one snapshot across statements (a run's journal changes
        # only under its lease), and it saves the COMMIT round trip.
        self._begin: str | None = None if readonly else BEGIN_WRITE
        self._log: list[tuple[Step, Result]] = []
        self._xid: str | None = None  # the transaction's id, to learn a lost COMMIT's fate
        # The earliest due time this transaction's notifications announced so far
        # (None: none sent yet), and those of statements that notify only if they
        # add a task (a signal, a delivery), until one is known not to have.
        self._notified: float | None = None
        self._maybe_notified: list[list[float]] = []
        self._queued: list[Step] = []  # writes not sent yet (see the class docstring)
        # The token of the first lease-fenced update (update_leased): tells whether a
        # commit whose connection died went through.
        self._token: tuple[str, int] | None = None
        # Whether every write queued so far may be applied twice (then a commit cut
        # off with its connection can simply be sent again).
        self._idempotent = True
        # The statements writing this transaction's commit marks (migration 003):
        # each one's parameters and what to do with what its mark recorded. Then
        # the commit goes in one round trip, and a lost reply is settled by the
        # marks (several when a sender's deliveries share the transaction).
        self._marks: list[tuple[dict[str, Any], Callable[[str | None], None]]] = []
        # The last update_leased queued, which the writes right after it may join
        # (see _fuse).
        self._fence_at: _Fence | None = None
        # Queued writes whose result someone awaits (see _write).
        self._on_result: list[tuple[Step, Callable[[Result], None]]] = []
        # The runs this transaction gave tasks, and those it leased to this
        # process's worker (which then needs no report of those tasks).
        self._task_runs: set[str] = set()
        self._leased: set[str] = set()
        # The start_run queued last (run id, parameters), which lease_run may silence,
        # and the send_signal, whose notification it may take over.
        self._started: tuple[str, list[Any]] | None = None
        self._signal: tuple[str, dict[str, Any]] | None = None
        # Whether a commit was sent again after a lost connection (see lease_run).
        self._resent = False
        # What record_event read ahead: shapes of waits by (domain, name), and waits
        # by find_subscriptions' arguments.
        self._shapes: dict[tuple[str, str], list[str]] = {}
        self._found: dict[tuple[str, ...], list[SubscriptionRecord]] = {}

    @property
    def started(self) -> bool:
        """Whether a transaction was begun (else there is nothing to commit)."""
        return not self._ro and self._begin is None

    async def _exec(
        self, query: Query, params: Sequence[Any] | Mapping[str, Any] = (), *,
        lock: int | None = None,
        shared: bool = False,
    ) -> Result:  # fmt: skip
        """Run ``query``, after ``lock`` (an advisory key held to commit) if given.

        The lock is a statement of its own, sent in the same pipeline: the query
        then reads a snapshot taken after the lock was granted, which under READ
        COMMITTED sees whatever the previous holder committed.
        """
        if lock is None:
            return (await self._run([(query, params)]))[-1]
        locking = Q["xact_lock_shared" if shared else "xact_lock"]
        return (await self._run([(locking, (lock,)), (query, params)]))[-1]

    async def _write(
        self, query: Query, params: Sequence[Any] | Mapping[str, Any] = (), *,
        lock: int | None = None, shared: bool = False, idempotent: bool = False,
        on_result: Callable[[Result], None] | None = None,
    ) -> None:  # fmt: skip
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
                    self._begin, self._xid, results = None, _xid(results[1]), results[2:]
            except psycopg.OperationalError as exc:
                if not _connection_lost(exc, self._c) or attempt == attempts - 1:
                    raise
                continue
            self._queued = []
            if not self._ro:
                self._log += zip(steps, results, strict=True)
            self._results(steps[:queued], results[:queued])
            return results[queued:]
        raise AssertionError("unreachable")

    async def _fresh_connection(self) -> None:
        """Swap the dead connection for a fresh one from the pool."""
        fresh = await self._store._getconn()
        lost, self._c = self._c, fresh
        await lost.close()  # in an unknown state: the pool discards it
        await self._store._putconn(lost)

    async def _recover(self) -> None:
        """A fresh connection, with this transaction's statements replayed on it."""
        await self._fresh_connection()
        if self._ro:
            return
        self._begin = BEGIN_WRITE
        if not self._log:
            return
        log.warning("connection to %s lost mid-transaction; replaying it", self._store.display)
        steps = [step for step, _ in self._log]
        results = await self._send([(BEGIN_WRITE, ()), (Q["xact_id"], ()), *steps])
        self._begin, self._xid = None, _xid(results[1])
        if results[2:] != [result for _, result in self._log]:
            raise StoreError(
                f"the connection to PostgreSQL {self._store.display} was lost mid-transaction "
                "and the data it had read changed meanwhile; rolled back, retry"
            )

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
                if not _connection_lost(exc, self._c) or attempt == attempts - 1:
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
                if not _connection_lost(exc, self._c) or attempt == attempts - 1:
                    raise
                try:
                    committed = await self._settle()
                except Exception as lost:
                    # Whatever went wrong while asking, the commit itself may have
                    # happened: the caller must not take it as rolled back.
                    raise StoreError(
                        f"PostgreSQL {self._store.display}: the connection was lost while "
                        f"committing, and asking what became of the commit failed: "
                        f"{_first_line(lost)} (the commit may or may not have happened; retry)",
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

    async def _settle(self) -> bool:
        """Whether a commit sent at once, whose reply was lost, went through: known by
        the run's commit token, or by the commit marks (then each marked statement
        is told what it did). If it did not, it never will, and the marks are new
        for the next send."""
        if self._token is not None and await self._store._committed(*self._token):
            return True
        if not self._marks:
            return False
        # The first mark tells whether the transaction committed (and, taken by the
        # settling, stops a late copy of it for good); each mark, what its statement did.
        params, found = self._marks[0]
        committed, result = await self._store._mark_outcome(params["mark"])
        if not committed:
            for params, _ in self._marks:
                params["mark"] = random.getrandbits(63)  # the first one is taken now
            return False
        found(result)
        for params, found in self._marks[1:]:
            found(await self._store._mark_result(params["mark"]))
        return True

    async def _send(self, steps: list[Step]) -> list[Result]:
        return await _send(self._c, steps)

    def _announce(self, due: float) -> str:
        """The payload of a notification of tasks due from ``due`` on (see _listen)."""
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

    async def _all(self, query: Query, params: Sequence[Any] = (), **lock: Any) -> list[Row]:
        return (await self._exec(query, params, **lock)).rows or []

    async def _one(
        self, query: Query, params: Sequence[Any] | Mapping[str, Any] = (), **lock: Any
    ) -> Row | None:
        rows = (await self._exec(query, params, **lock)).rows
        return rows[0] if rows else None

    # -- runs --------------------------------------------------------------------------------

    async def get_run(self, run_id: str) -> RunRecord | None:
        row = await self._one(Q["get_run" if self._ro else "get_run_locked"], (run_id,))
        return RunRecord(*row) if row else None

    async def insert_run(self, run: RunRecord) -> None:
        await self._write(
            Q["insert_run"],
            (
                run.id, run.workflow, run.version, run.status, run.input, run.output, run.error,
                run.domain, run.subject, run.parent_id, run.trigger, run.generation,
                run.created_at, run.updated_at, run.lease_owner, run.lease_until,
            ),
        )  # fmt: skip

    async def start_run(self, run: RunRecord, due_at: float) -> None:
        params = [
            run.id, run.workflow, run.version, run.status, run.input, run.output, run.error,
            run.domain, run.subject, run.parent_id, run.trigger, run.generation,
            run.created_at, run.updated_at, run.lease_owner, run.lease_until, due_at,
            self._announce(due_at),
        ]  # fmt: skip
        await self._write(Q["start_run"], params, idempotent=True)
        self._task_runs.add(run.id)
        self._started = (run.id, params)

    async def update_run(
        self,
        run_id: str,
        changes: dict[str, Any],
        *,
        owner: str | None = None,
        release: bool = True,
    ) -> bool:
        if not set(changes) <= RUN_MUTABLE:
            raise ValueError(f"not updatable: {set(changes) - RUN_MUTABLE}")
        query = _update_run_query(tuple(changes), owned=owner is not None, release=release)
        params: list[Any] = [*changes.values(), run_id]
        if owner is not None:
            params.append(owner)
        return (await self._exec(query, params)).rowcount == 1

    async def update_leased(
        self, run_id: str, changes: dict[str, Any], *, owner: str, release: bool = True
    ) -> None:
        if not set(changes) <= RUN_MUTABLE:
            raise ValueError(f"not updatable: {set(changes) - RUN_MUTABLE}")
        if self._ro:
            raise ValueError("update_leased in a read-only transaction")
        # Queued, not asked: parkway.lease_held fails the transaction if the lease
        # is gone, so the writes queued behind it never commit (see _commit).
        # Unique, not secret: the process's own generator (seeded from os.urandom)
        # spares a system call per commit.
        token = random.getrandbits(63)
        if self._token is None:
            self._token = (run_id, token)
        columns = tuple(changes)
        params = [*changes.values(), token, run_id, owner]
        await self._write(_update_leased_query(columns, release=release), params)
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
        fenced = _update_leased_query(fence.columns, release=fence.release, parts=fence.parts)
        self._queued[-1] = (fenced, fence.params)
        return True

    def _last_params(self) -> object:
        """The parameters of the write queued last (None: nothing is queued)."""
        return self._queued[-1][1] if self._queued else None

    def _took(self, lease: Lease, loaded: LoadedRun | None) -> None:
        """What a lease's claim returned, once its statement's result has come."""
        lease.loaded = loaded
        # Sent again after a lost connection, it finds the lease taken (by the
        # first send, maybe): then whether it is is not known (the worker looks).
        lease.taken = loaded is not None or (None if self._resent else False)
        if loaded is not None:
            self._leased.add(loaded.run.id)

    async def lease_run(
        self, run_id: str, *, owner: str, now: float, wall_now: float, lease_until: float
    ) -> Lease:
        lease = Lease(run_id)

        def taken(loaded: LoadedRun | None) -> None:
            self._took(lease, loaded)

        # The signal just queued leaves its notification to this lease, which sends
        # it only if it does not lease the run (see lease_note).
        signal = self._signal
        if signal is not None and signal[0] == run_id and self._last_params() is signal[1]:
            signal[1]["quiet"] = True
        started = self._started
        if (
            started is not None
            and started[0] == run_id
            and self._queued
            and self._queued[-1][1] is started[1]
        ):
            # The run this transaction starts (its start_run is the last write): that
            # statement inserts it leased instead, with no notification (no one
            # else need hear of it), and returns it with its start task.
            start = started[1]
            start[3], start[14], start[15], start[17] = "running", owner, lease_until, None

            def inserted(result: Result) -> None:
                taken(_started_run(result.rows[0]) if result.rows else None)

            self._on_result.append((self._queued[-1], inserted))
            return lease
        # Queued: it rides with the commit, and the lease is known when that returns.
        params = dict(run=run_id, owner=owner, now=now, wall=wall_now, until=lease_until)
        await self._write(
            CLAIM_RUN,
            params,
            on_result=lambda result: taken(_leased_run(result)),
            idempotent=True,
        )
        return lease

    async def list_runs(
        self,
        *,
        workflow: str | None,
        status: str | None,
        subject: str | None,
        domain: str | None,
        parent_id: str | None,
        limit: int,
    ) -> list[RunRecord]:
        clauses: list[sql.Composable] = []
        params: list[Any] = []
        for column, value in (
            ("workflow", workflow),
            ("status", status),
            ("subject", subject),
            ("domain", domain),
            ("parent_id", parent_id),
        ):
            if value is not None:
                clauses.append(sql.SQL("{} = %s").format(sql.Identifier(column)))
                params.append(value)
        if workflow is None:  # internal runs are listed only by their own name
            clauses.append(sql.SQL("workflow NOT LIKE %s"))
            params.append("parkway.%")
        query = sql.SQL("{}\n{} ORDER BY created_at DESC, id DESC LIMIT %s").format(
            sql.SQL(Q["list_runs"]), _where(clauses)
        )
        return [RunRecord(*row) for row in await self._all(query, (*params, limit))]

    async def active_run(self, workflow: str, domain: str, subject: str | None) -> str | None:
        lock = None if self._ro else _subject_lock(domain, subject)
        if subject is None:
            row = await self._one(Q["active_run_no_subject"], (workflow, domain), lock=lock)
        else:
            row = await self._one(Q["active_run"], (workflow, domain, subject), lock=lock)
        return row[0] if row else None

    # -- journal -----------------------------------------------------------------------------

    async def journal(self, run_id: str) -> list[JournalEntry]:
        return [JournalEntry(*row) for row in await self._all(Q["journal"], (run_id,))]

    async def put_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        # One statement for all; the last entry for a position wins, as on SQLite.
        latest = list({e.pos: e for e in entries}.values())
        if not latest:
            return
        if len(latest) == 1:
            # The usual case (a step's result): plain values, no arrays to build.
            e = latest[0]
            one = (run_id, e.pos, e.kind, e.name, e.state, e.value, e.deadline, e.at)
            if not self._fuse("put_journal_entry", one, run_id):
                await self._write(Q["put_journal_entry"], one)
            return
        params = (
            run_id, [e.pos for e in latest], [e.kind for e in latest],
            [e.name for e in latest], [e.state for e in latest],
            [e.value for e in latest], [e.deadline for e in latest],
            [e.at for e in latest],
        )  # fmt: skip
        if not self._fuse("put_journal", params, run_id):
            await self._write(Q["put_journal"], params)

    async def clear_journal(self, run_id: str) -> None:
        await self._write(Q["clear_journal"], (run_id,))

    # -- tasks -------------------------------------------------------------------------------

    async def add_tasks(self, tasks: Sequence[NewTask]) -> None:
        if not tasks:
            return
        columns = (
            [t.run_id for t in tasks],
            [t.due_at for t in tasks],
            [t.kind for t in tasks],
            [t.pos for t in tasks],
            [t.payload for t in tasks],
        )
        self._task_runs.update(columns[0])
        first = min(columns[1])
        if self._notified is not None and self._notified <= first:
            await self._write(Q["add_tasks"], columns)
        else:
            await self._write(Q["add_tasks_notify"], (*columns, self._announce(first)))

    async def due_tasks(self, run_id: str, now: float) -> list[TaskRecord]:
        if self._ro:
            return [TaskRecord(*row) for row in await self._all(Q["due_tasks"], (run_id, now))]
        # Read-write: the run's commit is about to re-buffer the message deliveries
        # it will not take and delete the rest (messages.rebuffer). A correlate
        # committing a delivery between that read and that delete would lose its
        # message, so while the run has a message wait, take its key's lock (the
        # one correlate holds to commit) and read after. A run without one
        # can get no message delivery: one read, in the same round trip.
        waits, tasks = await self._run(
            [(Q["message_wait_keys"], (run_id,)), (Q["due_tasks"], (run_id, now))]
        )
        keys = sorted({row[0] for row in waits.rows or []})
        if keys:
            locks: list[Step] = [(Q["xact_lock"], (_subject_lock("default", k),)) for k in keys]
            tasks = (await self._run([*locks, (Q["due_tasks"], (run_id, now))]))[-1]
        return [TaskRecord(*row) for row in tasks.rows or []]

    async def delete_tasks(self, ids: Sequence[int]) -> None:
        if len(ids) == 1:  # the usual case: no array to build
            if not self._fuse("delete_task", (ids[0],)):
                await self._write(Q["delete_task"], (ids[0],))
        elif ids and not self._fuse("delete_tasks", (list(ids),)):
            await self._write(Q["delete_tasks"], (list(ids),))

    async def delete_wait_tasks(
        self, run_id: str, pos: int | None = None, *, keep: Sequence[int] = ()
    ) -> None:
        if keep:
            if pos is None:
                await self._write(Q["delete_wait_tasks_keep"], (run_id, list(keep)))
            elif not self._fuse("delete_wait_tasks_at_keep", (run_id, pos, list(keep)), run_id):
                await self._write(Q["delete_wait_tasks_at_keep"], (run_id, pos, list(keep)))
        elif pos is None:
            await self._write(Q["delete_wait_tasks"], (run_id,))
        elif not self._fuse("delete_wait_tasks_at", (run_id, pos), run_id):
            await self._write(Q["delete_wait_tasks_at"], (run_id, pos))

    async def delete_all_tasks(self, run_id: str) -> None:
        if not self._fuse("delete_all_tasks", (run_id,), run_id):
            await self._write(Q["delete_all_tasks"], (run_id,))

    # -- mailbox -----------------------------------------------------------------------------

    async def add_signal(self, run_id: str, name: str, payload: bytes | None, at: float) -> None:
        await self._write(Q["add_signal"], (run_id, name, payload, at))

    async def send_signal(self, run_id: str, name: str, payload: bytes | None, at: float) -> Sent:
        # Queued, with a commit mark: in a transaction of its own (or with a lease
        # for this process's worker) the signal goes with its COMMIT, one round
        # trip; what it found is known once that returns.
        sent = Sent()
        token, unannounce = self._announce_maybe(at)
        params = dict(
            run=run_id, name=name, payload=payload, at=at, token=token,
            mark=random.getrandbits(63), quiet=False,
        )  # fmt: skip
        self._signal = (run_id, params)
        self._task_runs.add(run_id)

        def found(status: str | None) -> None:
            sent.status, sent.known = status, True
            if status is None or status in ENDED:
                unannounce()  # nothing added: nothing announced
                self._task_runs.discard(run_id)

        def answered(result: Result) -> None:
            found(str(result.rows[0][0]) if result.rows else None)

        await self._write(Q["send_signal"], params, on_result=answered)
        await self._mark(params, found)
        return sent

    async def _mark(self, params: dict[str, Any], found: Callable[[str | None], None]) -> None:
        """Settle a lost reply of the statement just queued by its commit mark
        (``params["mark"]``), when the transaction goes with its ``COMMIT`` in one
        round trip (see _commit_at_once); now and then, prune old marks too."""
        if not self.started:
            self._marks.append((params, found))
            if random.random() < PRUNE_MARKS:
                await self._write(Q["prune_marks"], (), idempotent=True)

    async def _deliver(
        self,
        query: str,
        params: dict[str, Any],
        found: Callable[[str | None], None],
        *,
        lock: int,
        shared: bool = False,
        owner: str | None,
        now: float,
        wall_now: float,
        lease_until: float,
    ) -> Lease | None:
        """Queue a delivery statement (deliver_message, deliver_event) after ``lock``:
        ``found`` gets its one-column result, or what its commit mark recorded; with
        ``owner``, the lease of the run it delivered to (left in ``parkway.delivered``)
        after it, whose run is filled in once that is known; that lease then sends
        the delivery's notification, only if it leases nothing (``quiet``, see
        lease_note)."""
        params["quiet"] = owner is not None
        await self._write(
            query, params, lock=lock, shared=shared,
            on_result=lambda result: found(str(result.rows[0][0]) if result.rows else None),
        )  # fmt: skip
        await self._mark(params, found)
        if owner is None:
            return None
        lease = Lease("")

        def took(result: Result) -> None:
            self._took(lease, _leased_run(result))

        await self._write(
            CLAIM_DELIVERED, dict(owner=owner, now=now, wall=wall_now, until=lease_until),
            on_result=took, idempotent=True,
        )  # fmt: skip
        return lease

    async def signals(self, run_id: str) -> list[SignalRecord]:
        return [SignalRecord(*row) for row in await self._all(Q["signals"], (run_id,))]

    async def delete_signals(self, ids: Sequence[int]) -> None:
        if ids and not self._fuse("delete_signals", (list(ids),)):
            await self._write(Q["delete_signals"], (list(ids),))

    # -- events ------------------------------------------------------------------------------

    async def record_event(
        self,
        event: EventRecord,
        fresh_after: float,
        *,
        digest: Callable[[str], str | None] | None = None,
    ) -> EventRecord | None:
        # One round trip for what a publish reads: the id's lock and any event with
        # that id, the name's lock, the insert (a no-op if the id is taken), the
        # shapes of the waits on the name, and the waits under each shape the last
        # publish of the name found (shapes rarely change); shapes() and
        # find_subscriptions() then hand them over.
        name = (event.domain, event.name)
        row = (event.id, event.name, event.domain, event.subject, event.payload,
               event.published_at)  # fmt: skip
        steps: list[Step] = [
            (Q["xact_lock"], (lock_key("event-id", event.id),)),
            (Q["get_event"], (event.id,)),
            (Q["xact_lock_shared"], (lock_key("event-name", *name),)),
            (Q["insert_new_event"], row),
            (Q["shapes"], (*name, *name)),
        ]
        ahead: list[tuple[str, str, str, str, str, str]] = []
        if digest is not None:
            for shape in self._store._shapes_seen.get(name, ()):
                digested = digest(shape)
                if digested is not None:
                    key = (*name, shape, digested, event.subject or "*", "event")
                    ahead.append(key)
                    steps.append((Q["find_subscriptions_locked"], key))
        _, found, _, _, shapes, *waits = await self._run(steps)
        self._shapes[name] = self._store._saw_shapes(name, [r[0] for r in shapes.rows or []])
        for key, result in zip(ahead, waits, strict=True):
            self._found[key] = [SubscriptionRecord(*r) for r in result.rows or []]
        if not found.rows:
            return None
        existing = EventRecord(*found.rows[0])
        if existing.published_at >= fresh_after:
            return existing
        # Past retention: a new event that reuses the id.
        await self._write(Q["delete_event"], (event.id,))
        await self._write(Q["insert_event"], row)
        return None

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
        # One statement after the shared lock of the event's name (see insert_event),
        # and the lease of the first run it delivers to after it: all queued, so that
        # with the COMMIT they are one round trip (a publish the usual way is two:
        # the reads, then the writes that depend on them); a lost reply is settled
        # by the commit mark. The server applies the match rule; the digests, which
        # only Python computes, are for the shapes this store has seen on the name
        # (see _saw_shapes), and a shape it has not seen makes the statement decline.
        name = (event.domain, event.name)
        known = self._store._shapes_seen.get(name, ())
        digests = ((shape, payload_digest(payload, shape)) for shape in known)
        digested = [(shape, digest) for shape, digest in digests if digest is not None]
        if len(digested) > DELIVER_EVENT_SHAPES:
            return EventDelivery(known=True)  # declined, nothing written
        now = event.published_at
        delivery = EventDelivery()
        token, unannounce = self._announce_maybe(now)
        params: dict[str, Any] = dict(
            domain=event.domain, name=event.name, known=orjson.dumps(known).decode(), id=event.id,
            subject=event.subject, subject_or_any=event.subject or "*", payload=event.payload,
            now=now, fresh=fresh_after, envelope=envelope, mark=random.getrandbits(63),
            token=token,
        )  # fmt: skip
        for i, (shape, digest) in enumerate(digested):
            params[f"shape{i}"], params[f"digest{i}"] = shape, digest

        def found(result: str | None) -> None:
            delivery.known = True
            if result == "duplicate":
                delivery.outcome = "duplicate"
            elif result and result.startswith("published "):
                delivery.outcome = "published"
                delivery.waits = [(str(r), str(w)) for r, w in orjson.loads(result[10:])]
                self._task_runs.update(run_id for run_id, _ in delivery.waits)
                if delivery.lease is not None and delivery.waits:
                    delivery.lease.run_id = delivery.waits[0][0]
            if not delivery.waits:
                unannounce()  # nothing added: nothing announced
                delivery.lease = None

        delivery.lease = await self._deliver(
            deliver_event_query(len(digested)), params, found,
            lock=lock_key("event-name", *name), shared=True,
            owner=owner, now=now, wall_now=wall_now, lease_until=lease_until,
        )  # fmt: skip
        return delivery

    async def get_event(self, event_id: str) -> EventRecord | None:
        lock = None if self._ro else lock_key("event-id", event_id)
        row = await self._one(Q["get_event"], (event_id,), lock=lock)
        return EventRecord(*row) if row else None

    async def insert_event(self, event: EventRecord) -> None:
        await self._write(
            Q["insert_event"],
            (event.id, event.name, event.domain, event.subject, event.payload, event.published_at),
            lock=lock_key("event-name", event.domain, event.name),
            shared=True,
        )

    async def delete_event(self, event_id: str) -> None:
        await self._write(Q["delete_event"], (event_id,))

    async def events_since(self, domain: str, name: str, since: float) -> list[EventRecord]:
        lock = None if self._ro else lock_key("event-name", domain, name)
        rows = await self._all(Q["events_since"], (domain, name, since), lock=lock)
        return [EventRecord(*row) for row in rows]

    async def prune_events(self, before: float) -> int:
        return (await self._exec(Q["prune_events"], (before,))).rowcount

    # -- subscriptions -----------------------------------------------------------------------

    async def add_subscription(self, sub: SubscriptionRecord) -> None:
        await self._write(
            Q["add_subscription"],
            (
                sub.run_id, sub.pos, sub.kind, sub.domain, sub.name, sub.subject, sub.shape,
                sub.digest, sub.match, sub.wait, sub.expires_at, sub.created_at, sub.deadline,
            ),
        )  # fmt: skip

    async def shapes(self, domain: str, name: str) -> list[str]:
        read = self._shapes.pop((domain, name), None)  # by record_event, in this transaction
        if read is not None:
            return read
        rows = await self._all(Q["shapes"], (domain, name, domain, name))
        return self._store._saw_shapes((domain, name), [row[0] for row in rows])

    async def find_subscriptions(
        self, *, domain: str, name: str, shape: str, digest: str, subject: str | None, kind: str
    ) -> list[SubscriptionRecord]:
        # '*' never names a real subject, so a missing subject matches only wildcards.
        key = (domain, name, shape, digest, subject or "*", kind)
        read = self._found.pop(key, None)  # by record_event, in this transaction
        if read is not None:
            return read
        query = Q["find_subscriptions" if self._ro else "find_subscriptions_locked"]
        rows = await self._all(query, key)
        return [SubscriptionRecord(*row) for row in rows]

    async def list_subscriptions(
        self, *, run_id: str | None = None, name: str | None = None
    ) -> list[SubscriptionRecord]:
        clauses: list[sql.Composable] = []
        params: list[Any] = []
        if run_id is not None:
            clauses.append(sql.SQL("run_id = %s"))
            params.append(run_id)
        if name is not None:
            clauses.append(sql.SQL("name = %s"))
            params.append(name)
        query = sql.SQL("{}\n{} ORDER BY created_at, run_id, pos").format(
            sql.SQL(Q["list_subscriptions"]), _where(clauses)
        )
        return [SubscriptionRecord(*row) for row in await self._all(query, params)]

    async def delete_subscription(self, run_id: str, pos: int) -> None:
        if not self._fuse("delete_subscription", (run_id, pos), run_id):
            await self._write(Q["delete_subscription"], (run_id, pos))

    async def delete_run_subscriptions(self, run_id: str) -> None:
        if not self._fuse("delete_run_subscriptions", (run_id,), run_id):
            await self._write(Q["delete_run_subscriptions"], (run_id,))

    async def sweep_subscriptions(self, now: float) -> int:
        return (await self._exec(Q["sweep_subscriptions"], (now,))).rowcount

    # -- messages ----------------------------------------------------------------------------

    async def message_wait(self, name: str, key: str) -> SubscriptionRecord | None:
        if self._ro:
            row = await self._one(Q["message_wait"], (name, key))
        else:
            # Message-started runs live in domain "default" with subject = key:
            # the same lock as active_run's for them, so the two never deadlock.
            lock = _subject_lock("default", key)
            row = await self._one(Q["message_wait_locked"], (name, key), lock=lock)
        return SubscriptionRecord(*row) if row else None

    async def take_message_wait(self, name: str, key: str, now: float) -> SubscriptionRecord | None:
        # One statement after the key's lock (see message_wait): the wait and its removal.
        lock = _subject_lock("default", key)
        row = await self._one(Q["take_message_wait"], (name, key, now), lock=lock)
        return SubscriptionRecord(*row) if row else None

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
        # One statement after the locks (see message_id_seen and message_wait), and
        # the lease of the run it delivers to after it: all queued, so that with the
        # COMMIT they are one round trip; a lost reply is settled by the commit mark.
        delivery = MessageDelivery()
        token, unannounce = self._announce_maybe(now)
        params: dict[str, Any] = dict(
            mid=message_id, fresh=fresh_after, name=name, key=key, now=now, body=body,
            mark=random.getrandbits(63), token=token,
        )  # fmt: skip

        def found(result: str | None) -> None:
            delivery.known = True
            if result == "duplicate":
                delivery.outcome = "duplicate"
            elif result and result.startswith("delivered "):
                delivery.outcome, delivery.run_id = "delivered", result[len("delivered ") :]
                self._task_runs.add(delivery.run_id)
                if delivery.lease is not None:
                    delivery.lease.run_id = delivery.run_id
            if delivery.outcome != "delivered":
                unannounce()  # nothing added: nothing announced
                delivery.lease = None

        if message_id is not None:
            await self._write(Q["xact_lock"], (lock_key("message-id", message_id),))
        delivery.lease = await self._deliver(
            Q["deliver_message"], params, found, lock=_subject_lock("default", key),
            owner=owner, now=now, wall_now=wall_now, lease_until=lease_until,
        )  # fmt: skip
        return delivery

    async def add_message(self, message: MessageRecord) -> int:
        m = message
        row = await self._one(
            Q["add_message"],
            (m.name, m.key, m.payload, m.message_id, m.status, m.reason, m.received_at,
             m.expires_at),
        )  # fmt: skip
        assert row is not None
        return int(row[0])

    async def oldest_message(self, name: str, key: str, now: float) -> MessageRecord | None:
        if self._ro:
            row = await self._one(Q["oldest_message"], (name, key, now))
        else:
            lock = _subject_lock("default", key)
            row = await self._one(Q["oldest_message_locked"], (name, key, now), lock=lock)
        return MessageRecord(*row) if row else None

    async def get_message(self, message_id: int) -> MessageRecord | None:
        query = Q["get_message" if self._ro else "get_message_locked"]
        row = await self._one(query, (message_id,))
        return MessageRecord(*row) if row else None

    async def list_messages(self, status: str | None) -> list[MessageRecord]:
        if status is None:
            rows = await self._all(Q["list_messages"])
        else:
            rows = await self._all(Q["list_messages_by_status"], (status,))
        return [MessageRecord(*row) for row in rows]

    async def delete_message(self, message_id: int) -> None:
        await self._write(Q["delete_message"], (message_id,))

    async def update_message(
        self, message_id: int, status: str, reason: str | None, expires_at: float
    ) -> None:
        await self._write(Q["update_message"], (status, reason, expires_at, message_id))

    async def expire_messages(self, now: float, reason: str) -> list[MessageRecord]:
        rows = await self._all(Q["expire_messages"], (reason, now))
        return sorted((MessageRecord(*row) for row in rows), key=lambda m: m.id)

    async def message_id_seen(self, message_id: str) -> float | None:
        lock = None if self._ro else lock_key("message-id", message_id)
        row = await self._one(Q["message_id_seen"], (message_id,), lock=lock)
        return float(row[0]) if row else None

    async def remember_message_id(self, message_id: str, at: float) -> None:
        await self._write(Q["remember_message_id"], (message_id, at))

    async def prune_message_ids(self, before: float) -> None:
        await self._write(Q["prune_message_ids"], (before,))


class PostgresStore:
    """A PostgreSQL database shared by any number of worker and client processes.

    URL: anything libpq accepts (``postgresql://user:password@host:port/db?sslmode=...``),
    plus parkway's own query parameters: ``pool_size`` (connections per process,
    default 10), ``pool_timeout`` (how long a transaction waits for a free
    connection, default 30s) and ``statement_timeout`` (default 30s; 0 = none).
    """

    capabilities: frozenset[str] = frozenset(
        {"persistent", "shared", "push", "cheap_claim", "group_commit", "fused"}
    )

    def __init__(
        self,
        conninfo: str,
        *,
        display: str,
        pool_size: int = DEFAULT_POOL_SIZE,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
    ) -> None:
        self.conninfo = conninfo
        self.display = display
        self.pool_size = pool_size
        self.pool_timeout = pool_timeout
        self._params = conninfo_to_dict(conninfo)
        self._pool: psycopg_pool.AsyncConnectionPool[Conn] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._changed = False
        self._watchers: list[Callable[[float | None], None]] = []
        # What claim() read of the runs it leased, until the worker loads them.
        self._claimed: dict[str, LoadedRun] = {}
        # Tags this store's notifications, so that its own commits do not wake it.
        self._token = uuid.uuid4().hex
        # The shapes of waits the last publish of each (domain, name) found: the
        # next one reads ahead the waits under them (see PostgresTx.record_event).
        self._shapes_seen: dict[tuple[str, str], tuple[str, ...]] = {}

    def _saw_shapes(self, name: tuple[str, str], shapes: list[str]) -> list[str]:
        """Remember ``shapes``, just read for the waits on ``name``; return them.

        Kept: those shapes, then the ones seen before that a wait may take again
        (so that deliver_event need not decline then), within deliver_event's limit.
        """
        before = self._shapes_seen.get(name, ())
        merged = (*shapes, *(shape for shape in before if shape not in shapes))
        self._shapes_seen[name] = merged[: max(len(shapes), DELIVER_EVENT_SHAPES)]
        return shapes

    @classmethod
    def from_url(cls, url: str) -> PostgresStore:
        """Parse ``url`` (libpq syntax plus parkway's parameters) without connecting."""
        parts = urlsplit(url)
        ours: dict[str, str] = {}
        rest: list[tuple[str, str]] = []
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key in ("pool_size", "pool_timeout", "statement_timeout"):
                ours[key] = value
            else:
                rest.append((key, value))
        # Rebuilt by hand: urlunsplit would turn postgresql:///db into postgresql:/db.
        libpq_url = url.split("?", 1)[0] + (f"?{urlencode(rest, quote_via=quote)}" if rest else "")
        try:
            params = conninfo_to_dict(libpq_url)
        except psycopg.Error as exc:
            raise ParkwayError(
                f"bad PostgreSQL url {_redact(url)!r}: {exc}; write "
                "postgresql://user:password@host:5432/database"
            ) from exc
        try:
            pool_size = int(ours.get("pool_size", DEFAULT_POOL_SIZE))
            if pool_size < 1:
                raise ValueError
        except ValueError:
            raise ParkwayError(
                f"pool_size in {_redact(url)!r} must be a whole number >= 1, "
                f"got {ours['pool_size']!r}"
            ) from None
        pool_timeout = _duration(ours.get("pool_timeout"), DEFAULT_POOL_TIMEOUT, "pool_timeout")
        statement_timeout = _duration(
            ours.get("statement_timeout"), DEFAULT_STATEMENT_TIMEOUT, "statement_timeout"
        )
        settings = (
            f"-c statement_timeout={round(statement_timeout * 1000)} "
            f"-c idle_in_transaction_session_timeout={round(IDLE_IN_TRANSACTION_TIMEOUT * 1000)}"
        )
        params["options"] = f"{params.get('options') or ''} {settings}".strip()
        params.setdefault("application_name", "parkway")
        params.setdefault("connect_timeout", "10")
        user = params.get("user") or "(default user)"
        where = f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}"
        display = f"{user}@{where}/{params.get('dbname') or '(default database)'}"
        return cls(
            make_conninfo("", **params),
            display=display,
            pool_size=pool_size,
            pool_timeout=pool_timeout,
        )

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        if self._pool is not None:
            return
        try:
            conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
        except psycopg.OperationalError as exc:
            raise self._connect_error(exc) from exc
        try:
            await self._migrate(conn)
            await self._check_privileges(conn)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise self._privilege_error(exc) from exc
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot prepare parkway's schema in PostgreSQL {self.display}: {_first_line(exc)}"
            ) from exc
        finally:
            await conn.close()
        pool: psycopg_pool.AsyncConnectionPool[Conn] = LifoPool(
            self.conninfo,
            min_size=1,
            max_size=self.pool_size,
            kwargs={"autocommit": True},
            timeout=self.pool_timeout,
            name="parkway",
            open=False,
        )
        try:
            await pool.open(wait=True, timeout=self.pool_timeout)
        except psycopg.Error as exc:
            await pool.close()
            raise StoreError(
                f"cannot open a connection pool to PostgreSQL {self.display}: {_first_line(exc)}"
            ) from exc
        self._pool = pool
        if self._watchers and self._listener is None:
            self._start_listener()

    async def close(self) -> None:
        self._claimed.clear()
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
            self._listener = None
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def _migrate(self, conn: Conn) -> None:
        latest = MIGRATIONS[-1][0]
        if await self._version(conn) == latest:
            return  # the common case: no lock, no DDL, no CREATE privilege needed
        # Processes starting together queue here; each re-reads the version once it
        # holds the lock, so the migrations run once. Session-level: DDL commits.
        await conn.execute(Q["lock_migrations"], (MIGRATION_LOCK,))
        try:
            await conn.execute("SET statement_timeout = 0")
            current = await self._version(conn)
            if current > latest:
                raise ParkwayError(
                    f"the parkway schema in {self.display} is at version {current}, newer "
                    f"than this parkway knows (up to {latest}); upgrade parkway"
                )
            if current < latest:
                async with conn.transaction():
                    exists = await conn.execute(Q["schema_exists"])
                    row = await exists.fetchone()
                    if not (row and row[0]):
                        await conn.execute(Q["create_schema"])
                    await conn.execute(Q["create_schema_version"])
            for version, script in MIGRATIONS:
                if version > current:
                    async with conn.transaction():
                        # No parameters: sent as one simple query, several statements.
                        await conn.execute(script.encode())
                        await conn.execute(Q["record_version"], (version, time.time()))
                    log.info("applied parkway schema migration %03d to %s", version, self.display)
        finally:
            if not conn.broken:
                await conn.execute(Q["unlock_migrations"], (MIGRATION_LOCK,))
                await conn.execute("RESET statement_timeout")

    async def _version(self, conn: Conn) -> int:
        latest = MIGRATIONS[-1][0]
        cursor = await conn.execute(Q["schema_usage"])
        row = await cursor.fetchone()
        if row is None:
            return 0  # no schema yet
        if not row[0]:
            raise self._privilege_error(None, "USAGE on schema parkway")
        cursor = await conn.execute(Q["schema_version_exists"])
        row = await cursor.fetchone()
        if not (row and row[0]):
            return 0
        cursor = await conn.execute(Q["schema_version"])
        row = await cursor.fetchone()
        version = int(row[0]) if row else 0
        if version > latest:
            raise ParkwayError(
                f"the parkway schema in {self.display} is at version {version}, newer than "
                f"this parkway knows (up to {latest}); upgrade parkway"
            )
        return version

    async def _check_privileges(self, conn: Conn) -> None:
        # Fail at open with the fix, not at the first write with a bare error.
        cursor = await conn.execute(Q["missing_privileges"])
        missing = [r[0] for r in await cursor.fetchall()]
        if missing:
            raise self._privilege_error(
                None, f"SELECT, INSERT, UPDATE or DELETE on parkway.{', parkway.'.join(missing)}"
            )

    def _connect_error(self, exc: psycopg.OperationalError) -> StoreError:
        detail = str(exc).strip()
        lower = detail.lower()
        db = self._params.get("dbname") or "(default)"
        user = self._params.get("user") or "(default)"
        if "database" in lower and "does not exist" in lower:
            return StoreError(
                f"PostgreSQL database {db!r} does not exist ({self.display}); create it "
                f'(createdb {db}, or CREATE DATABASE "{db}") or fix the database name in the url'
            )
        if "role" in lower and "does not exist" in lower:
            return StoreError(
                f"PostgreSQL role {user!r} does not exist ({self.display}); create it "
                "(CREATE ROLE ... LOGIN) or fix the user name in the url"
            )
        if "password" in lower or "authentication" in lower:
            return StoreError(
                f"PostgreSQL refused the credentials of {user!r} ({self.display}): "
                f"{_first_line(exc)}; check the user and password in the url or ~/.pgpass"
            )
        return StoreError(
            f"cannot connect to PostgreSQL {self.display}: {_first_line(exc)}; check the host "
            "and port in the url and that the server is running and accepts TCP connections"
        )

    def _privilege_error(self, exc: psycopg.Error | None, what: str = "") -> StoreError:
        user = self._params.get("user") or "the connecting role"
        db = self._params.get("dbname") or "the database"
        if exc is not None:
            return StoreError(
                f"PostgreSQL role {user!r} may not create parkway's schema in database "
                f'{db!r} ({_first_line(exc)}); GRANT CREATE ON DATABASE "{db}" TO "{user}", '
                "or open parkway once as a role that may (e.g. the database owner), then "
                f"GRANT USAGE ON SCHEMA parkway and SELECT, INSERT, UPDATE, DELETE ON ALL "
                f'TABLES IN SCHEMA parkway TO "{user}"'
            )
        return StoreError(
            f"PostgreSQL role {user!r} lacks {what} in database {db!r}; as the schema's "
            f'owner run: GRANT USAGE ON SCHEMA parkway TO "{user}"; GRANT SELECT, INSERT, '
            f'UPDATE, DELETE ON ALL TABLES IN SCHEMA parkway TO "{user}"'
        )

    # -- transactions ------------------------------------------------------------------------

    @property
    def pool(self) -> psycopg_pool.AsyncConnectionPool[Conn]:
        if self._pool is None:
            raise ParkwayError("the store is not open; use `async with engine:` first")
        return self._pool

    async def _getconn(self) -> Conn:
        try:
            return await self.pool.getconn()
        except psycopg_pool.PoolTimeout as exc:
            raise StoreError(
                f"no connection to PostgreSQL {self.display} within {self.pool_timeout:g}s: "
                f"the server is unreachable or all {self.pool_size} pooled connections are "
                "busy (raise pool_size in the url)"
            ) from exc
        except psycopg_pool.PoolClosed as exc:
            raise StoreError("the store is closed; open the engine again") from exc

    async def _putconn(self, conn: Conn) -> None:
        pool = self._pool
        if pool is None:
            await conn.close()
        else:
            await pool.putconn(conn)

    @asynccontextmanager
    async def transaction(self, *, readonly: bool = False) -> AsyncIterator[PostgresTx]:
        tx = PostgresTx(self, await self._getconn(), readonly=readonly)
        try:
            try:
                yield tx
            except BaseException as exc:
                await _rollback(tx._c)
                if isinstance(exc, psycopg.Error):
                    raise self._failed(exc) from exc
                raise
            try:
                await tx._commit()
            except BaseException as exc:
                await _rollback(tx._c)
                if isinstance(exc, psycopg.Error):
                    raise self._failed(exc, committing=True) from exc
                raise
        finally:
            await self._putconn(tx._c)
        announced = tx._announced()
        if announced is not None and not tx._task_runs <= tx._leased:
            # Tasks were added: this process's worker is told here, as other
            # processes' are by the notification (which _listen drops as ours),
            # unless they are all for runs it was just handed (see lease_run).
            self._report(announced)

    async def _committed(self, run_id: str, token: int) -> bool:
        """Whether the worker commit that set ``token`` on the run went through.

        The read waits for the row lock, so a commit the server is still finishing
        is seen finished (or aborted) rather than missed.
        """
        rows = await self._single(Q["commit_token"], (run_id,))
        return bool(rows) and rows[0][0] == token

    async def _mark_result(self, mark: int) -> str | None:
        """What the statement that wrote commit mark ``mark`` recorded (its
        transaction is known to have committed)."""
        rows = await self._single(Q["mark_result"], (mark,))
        return rows[0][0] if rows else None

    async def _mark_outcome(self, mark: int) -> tuple[bool, str | None]:
        """Whether the transaction that wrote commit mark ``mark`` committed, and the
        result it recorded. The insert waits for a transaction still writing the
        mark; once it is in, that transaction can never commit (see migration 003).
        """
        inserted, recorded = await self._pipeline(
            [(Q["mark_outcome"], (mark,)), (Q["mark_result"], (mark,))]
        )
        if inserted.rowcount == 1:
            return False, None
        rows = recorded.rows or [(None,)]
        return True, rows[0][0]

    async def _xact_status(self, xid: str | None, patience: float = 5.0) -> str | None:
        """``committed``, ``aborted`` or ``None`` (unknown) for transaction ``xid``.

        A transaction that never got an id wrote nothing: as good as aborted.
        """
        if xid is None:
            return "aborted"
        deadline = time.monotonic() + patience
        while True:
            try:
                rows = await self._single(Q["xact_status"], (xid,))
            except ParkwayError:
                log.warning("could not learn the fate of transaction %s", xid, exc_info=True)
                return None
            status = rows[0][0] if rows else None
            # "in progress": the server has not finished ending the lost session yet.
            if status != "in progress" or time.monotonic() > deadline:
                return None if status == "in progress" else status
            await asyncio.sleep(0.05)

    async def _single(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> list[Row]:
        """One statement in autocommit mode (its own transaction), retried on a dead connection.

        Only for statements that may safely run twice (reads, claims, lease updates).
        """
        return (await self._pipeline([(query, params)]))[0].rows or []

    async def _pipeline(self, steps: list[Step]) -> list[Result]:
        """Statements in one round trip, in autocommit mode, retried on a dead connection.

        The same caveat as :meth:`_single`: each must be safe to run twice.
        """
        for attempt in range(self.pool_size + 1):
            conn = await self._getconn()
            try:
                return await _send(conn, steps)
            except psycopg.OperationalError as exc:
                if not _connection_lost(exc, conn) or attempt == self.pool_size:
                    raise self._failed(exc) from exc
                await conn.close()
            except psycopg.Error as exc:
                await _rollback(conn)  # a claim's BEGIN may have been left open
                raise self._failed(exc) from exc
            finally:
                await self._putconn(conn)
        raise AssertionError("unreachable")

    def _failed(self, exc: BaseException, *, committing: bool = False) -> ParkwayError:
        detail = _first_line(exc)
        if isinstance(exc, psycopg.Error) and exc.sqlstate == LEASE_LOST:
            # A queued lease-fenced update failed (whenever it was sent): rolled back.
            return LeaseLostError(detail)
        if isinstance(exc, psycopg.errors.QueryCanceled):
            hint = "a statement ran past statement_timeout; raise it: ?statement_timeout=60s"
        elif isinstance(exc, psycopg.errors.InsufficientPrivilege):
            user = self._params.get("user") or "the connecting role"
            hint = f"grant {user!r} SELECT, INSERT, UPDATE, DELETE on the tables of schema parkway"
        elif isinstance(exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure):
            hint = "another transaction got in the way; retry"
        elif isinstance(exc, psycopg.OperationalError):
            hint = "the server may be restarting or unreachable; retry"
        else:
            hint = "nothing of the transaction was saved"
        # Only a COMMIT cut off with its connection leaves the outcome unknown
        # (when even the server could not tell us afterwards).
        unknown = (
            committing
            and isinstance(exc, psycopg.OperationalError)
            and (exc.sqlstate is None or exc.sqlstate.startswith(("08", "57P")))
        )
        outcome = "the commit may or may not have happened" if unknown else "rolled back"
        return StoreError(
            f"PostgreSQL {self.display}: {detail} ({outcome}; {hint})", outcome_unknown=unknown
        )

    # -- the worker's calls ------------------------------------------------------------------

    async def claim(
        self, owner: str, *, now: float, wall_now: float, lease_until: float, limit: int
    ) -> list[str]:
        # One statement leases the runs, without waiting for an fsync, and reads all
        # they need to be advanced (load_run hands it over): see claim_due and
        # claim_settings in postgres.sql.
        claimed: list[str] = []
        while len(claimed) < limit:
            params = dict(
                now=now, wall=wall_now, limit=limit - len(claimed), owner=owner, until=lease_until
            )
            _, claim = await self._pipeline([(Q["claim_settings"], ()), (CLAIM_DUE, params)])
            rows = claim.rows or []
            for row in rows:
                loaded = _claimed_run(row)
                self._claimed[loaded.run.id] = loaded
                claimed.append(loaded.run.id)
            # Fewer runs than places taken: some run had several due tasks, and
            # others may be due behind them. (The worker counts on a claim that
            # leased fewer runs than asked having left none due.)
            if not rows or rows[0][-1] < params["limit"] or rows[0][-1] == len(rows):
                break
        return claimed

    async def load_run(self, run_id: str, now: float) -> LoadedRun | None:
        claimed = self._claimed.pop(run_id, None)
        if claimed is not None:
            return claimed
        run, tasks, journal, mailbox = await self._pipeline(
            [
                (Q["get_run"], (run_id,)),
                (Q["due_tasks"], (run_id, now)),
                (Q["journal"], (run_id,)),
                (Q["signals"], (run_id,)),
            ]
        )
        if not run.rows:
            return None
        record = RunRecord(*run.rows[0])
        due = [TaskRecord(*row) for row in tasks.rows or []]
        if record.status in ENDED:
            return LoadedRun(record, due, [])
        signals = None
        if reads_mailbox(record, due):
            signals = [SignalRecord(*row) for row in mailbox.rows or []]
        return LoadedRun(record, due, [JournalEntry(*row) for row in journal.rows or []], signals)

    async def extend_leases(self, owner: str, run_ids: Sequence[str], lease_until: float) -> None:
        if run_ids:
            await self._single(Q["extend_leases"], (lease_until, list(run_ids), owner))

    async def release_leases(self, owner: str) -> None:
        await self._single(Q["release_leases"], (owner,))

    async def next_due(self, *, after: float | None = None) -> float | None:
        try:
            if after is None:
                rows = await self._single(Q["next_due"])
            else:
                rows = await self._single(Q["next_due_after"], (after,))
        except ParkwayError:
            # Polled by the worker's idle loop, which must outlive a database outage:
            # "unknown" makes it wait its full poll interval and try to claim again.
            log.warning("could not read the next due time", exc_info=True)
            return None
        return float(rows[0][0]) if rows and rows[0][0] is not None else None

    async def has_due(self, now: float) -> bool:
        rows = await self._single(Q["has_due"], (now,))
        return bool(rows[0][0])

    async def changed(self) -> bool:
        if self._pool is None:
            return False
        if self._listener is None:
            self._start_listener()
            return True
        changed, self._changed = self._changed, False
        return changed

    def watch(self, callback: Callable[[float | None], None]) -> None:
        self._watchers.append(callback)
        if self._pool is not None and self._listener is None:
            self._start_listener()

    def _start_listener(self) -> None:
        # Started on first use: client-only engines never listen, and keep one
        # connection fewer.
        self._listener = asyncio.create_task(self._listen(), name="parkway-listener")

    def _change(self, due: float | None = None) -> None:
        """Another process committed tasks (the earliest due at ``due``, if known)."""
        self._changed = True
        self._report(due)

    def _report(self, due: float | None) -> None:
        for callback in self._watchers:
            callback(due)

    async def _listen(self) -> None:
        """Hold a LISTEN connection; set the changed flag on every foreign notification."""
        delay = 0.1
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    # Whatever was committed while nobody listened: look once.
                    self._change()
                    delay = 0.1
                    while True:
                        async for note in conn.notifies(timeout=LISTEN_PROBE):
                            # "<store token> <earliest due time>": our own are
                            # reported at commit (see transaction()).
                            token, _, due = note.payload.partition(" ")
                            if token != self._token:
                                self._change(_due(due))
                        # Quiet for a while: a dead peer only shows when we talk to it.
                        await conn.execute("SELECT 1")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning(
                    "notification connection to %s lost (%s); reconnecting in %.1fs",
                    self.display, _first_line(exc), delay,
                )  # fmt: skip
                self._change()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


@functools.lru_cache(maxsize=256)
def _update_run_query(columns: tuple[str, ...], *, owned: bool, release: bool) -> str:
    """``UPDATE runs`` of these columns: one text per shape, so psycopg prepares it once.

    The columns come from ``RUN_MUTABLE`` (checked by the caller), never from input.
    """
    sets = [f'"{column}" = %s' for column in columns]
    where = "id = %s"
    if owned:
        if release:
            sets.append("lease_owner = NULL, lease_until = NULL")
        where = "id = %s AND lease_owner = %s"
    return f"UPDATE parkway.runs SET {', '.join(sets)} WHERE {where}"


@functools.lru_cache(maxsize=256)
def _update_leased_query(
    columns: tuple[str, ...], *, release: bool, parts: tuple[str, ...] = ()
) -> str:
    """A lease-fenced ``UPDATE runs`` that fails its transaction when the lease is gone,
    with the writes ``parts`` (names in FUSABLE) in the same statement, in order."""
    update = _update_run_query((*columns, "commit_token"), owned=True, release=release)
    # A newline before each closing parenthesis: a query may end in a comment.
    joined = "".join(f", {part} AS ({Q[part]}\n)" for part in parts)
    return (
        f"WITH changed AS ({update} RETURNING 1){joined} "
        "SELECT parkway.lease_held(count(*)) FROM changed"
    )


def _started_run(row: Row) -> LoadedRun:
    """A row of start_run: the run's 16 columns, then its start task's id and due
    time."""
    run = RunRecord(*row[:16])
    return LoadedRun(run, [TaskRecord(row[16], run.id, row[17], "start", None, None)], [])


_first = operator.itemgetter(0)


def _claimed_run(row: Row) -> LoadedRun:
    """A row of the claim query: the run's 16 columns, then its tasks, journal and
    mailbox as arrays of columns (``None`` when it has none), each in no particular
    order: put in order here (tasks and signals by id, the journal by position)."""
    run = RunRecord(*row[:16])
    t_ids, t_dues, t_kinds, t_poss, t_payloads = row[16:21]
    j_poss, j_kinds, j_names, j_states, j_values, j_deadlines, j_ats = row[21:28]
    m_ids, m_names, m_payloads, m_ats = row[28:32]
    tasks = [
        TaskRecord(*task)
        for task in sorted(zip(
            t_ids or (), [run.id] * len(t_ids or ()), t_dues or (), t_kinds or (),
            t_poss or (), t_payloads or (), strict=True,
        ), key=_first)
    ]  # fmt: skip
    journal = [
        JournalEntry(*entry)
        for entry in sorted(zip(
            j_poss or (), j_kinds or (), j_names or (), j_states or (), j_values or (),
            j_deadlines or (), j_ats or (), strict=True,
        ), key=_first)
    ]  # fmt: skip
    signals = None
    if reads_mailbox(run, tasks):
        signals = [
            SignalRecord(*signal)
            for signal in sorted(zip(
                m_ids or (), [run.id] * len(m_ids or ()), m_names or (), m_payloads or (),
                m_ats or (), strict=True,
            ), key=_first)
        ]  # fmt: skip
    return LoadedRun(run, tasks, journal, signals)


def _leased_run(result: Result) -> LoadedRun | None:
    """What a lease in the sender's transaction returned (see _lease_rows): its one
    row, whose run is null when it leased nothing."""
    rows = result.rows
    return _claimed_run(rows[0]) if rows and rows[0][0] is not None else None


async def _send(conn: Conn, steps: list[Step]) -> list[Result]:
    """Statements in one round trip (a pipeline when there are several); their results."""
    return await pgwire.send(conn, steps)


def _due(text: str) -> float | None:
    """The due time a notification announces (``None``: unknown, as from an older
    parkway, which sent only its token)."""
    try:
        return float(text)
    except ValueError:
        return None


def _xid(result: Result) -> str | None:
    return str(result.rows[0][0]) if result.rows else None


def _connection_lost(exc: psycopg.OperationalError, conn: Conn) -> bool:
    """Whether ``exc`` means the connection is gone (rather than a statement failed)."""
    if conn.broken or conn.closed:
        return True
    state = exc.sqlstate
    # None: a client-side failure (lost socket, a pipeline cut short); class 08:
    # connection exceptions; 57P0x: the server shut the session down.
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


async def _rollback(conn: Conn) -> None:
    # On failure the connection is in an unknown state (broken, or interrupted
    # mid-query): close it, and the pool replaces it.
    try:
        if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            await conn.execute("ROLLBACK")
    except Exception:
        await conn.close()
    except BaseException:
        await conn.close()
        raise


def _where(clauses: list[sql.Composable]) -> sql.Composable:
    if not clauses:
        return sql.SQL("")
    return sql.SQL("WHERE {}").format(sql.SQL(" AND ").join(clauses))


def _duration(value: str | None, default: float, name: str) -> float:
    if value is None:
        return default
    try:
        return to_seconds(float(value) if _is_number(value) else value, name)
    except InvalidDurationError as exc:
        raise ParkwayError(f"{name} in the PostgreSQL url: {exc}") from exc


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(line.strip() for line in text.splitlines() if line.strip())[:500]


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
