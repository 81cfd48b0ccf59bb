"""PostgreSQL store: many worker processes on many machines (``postgresql://...``).

Driver: psycopg 3 (async) with ``psycopg_pool.AsyncConnectionPool``, rather
than asyncpg. psycopg goes through libpq, so a parkway URL means exactly what
it means to ``psql`` (``.pgpass``, service files, ``PG*`` variables, every
``sslmode``, several hosts); its API is fully typed (this package is mypy
strict); its pool replaces broken connections by itself and LISTEN needs no
callback plumbing (``notifies()``); and it works behind PgBouncer. Its cursors
cost ~70 µs of Python per statement, though, which made the client the
bottleneck of a busy worker: statements go through :mod:`.wire`
instead (psycopg's connection, adapters and errors, its libpq handle driven
directly, every statement prepared once per connection).

One transaction = one pooled connection in autocommit mode: a write
transaction sends ``BEGIN ISOLATION LEVEL READ COMMITTED`` in one pipeline
with its first statement; a read-only one runs statement by statement, as on
SQLite. The worker's claim, lease and polling calls are single statements.
SQLite runs one writer at a time, so every read-then-write in the engine is
atomic there for free; under READ COMMITTED with many processes each such
sequence needs a lock, and each lock below names the race it closes (each has
a test in tests/store/conformance/ that fails without it):

- publish vs publish on one subscription: ``subscriptions.find`` locks the
  rows (``FOR UPDATE``); the loser re-reads them deleted and skips them.
- publish vs a ``since_start`` park (``events.since`` then
  ``subscriptions.add``): ``events.insert`` takes a shared advisory lock on the
  event's (domain, name), ``events.since`` an exclusive one, so one of the two
  commits first and the other sees its row: the event is never lost between
  them. Plain waits need no lock (an event published before a wait commits is
  simply earlier than the wait), and publishes of one name stay concurrent.
- the same event id or message id published twice at once: an exclusive
  advisory lock on the id in ``events.get`` / ``messages.id_seen``, so the second
  sees the first and reports a duplicate.
- correlate vs correlate, vs a ``wait_for_message`` being registered, vs a
  message-started run ending (which starts the next one): an exclusive
  advisory lock on the subject/key, taken by ``messages.wait``,
  ``messages.oldest`` and ``runs.active`` (the same key for all three, so they
  never deadlock on each other), plus row locks on the wait and the message.
- ``unique_per_subject`` starts: ``runs.active`` holds the subject lock until
  commit, so two publishes cannot both see "no active run".
- a message delivered while its run stops waiting (``messages.rebuffer`` reads
  the run's deliveries, then deletes its tasks): a read-write ``tasks.due``
  takes the key lock of the run's message waits first, so the delivery is
  either among what it reads or finds the wait gone.
- cancel vs claim: ``runs.get`` in a read-write transaction locks the row
  (``FOR NO KEY UPDATE``); ``claim`` skips locked rows.
- two starts of one run id: ``runs.insert`` does nothing when the id exists.

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
replayed on one (see :mod:`.recovery`); a ``COMMIT`` whose reply was lost
asks the server what became of the transaction (``pg_xact_status``), or, for a
transaction sent with its ``COMMIT`` in one round trip (a worker's commit, a
start, a signal), looks at what it left: the run's commit token, the run itself,
the transaction's commit mark (migration 003). The
listener reconnects by itself and then reports a change, since notifications
sent meanwhile are lost. Needs PostgreSQL 13 or later.

The package, by job (each module's docstring says why it is apart):

- :mod:`.store`: :class:`PostgresStore`, its life (open, migrate, close), its
  transactions and the worker's single-statement calls (claim, load, leases,
  next due, watch); on :mod:`.connections`, its pool and the statements sent
  outside a transaction, which is all a transaction needs of its store.
- :mod:`.tx`: :class:`PostgresTx`, the ``FusedTx`` protocol, composed of one
  part per entity, each made on first use: :mod:`.runs` (runs and leases),
  :mod:`.journal` (journal, failed attempts), :mod:`.tasks`, :mod:`.signals`,
  :mod:`.events`, :mod:`.subscriptions`, :mod:`.messages`, :mod:`.updates`
  (values, updates), :mod:`.schedules`, :mod:`.admission`, :mod:`.people`
  (callbacks, human tasks), :mod:`.streams`, :mod:`.fleet` (workers,
  operators); all over :mod:`.transport` (queued writes, write fusion,
  commit, commit marks) and :mod:`.recovery` (replay after a lost
  connection, settling a lost commit).
- :mod:`.statements`: every statement, built once at import from the named
  SQL in ``queries.sql``; :mod:`.rows` makes the claims' rows into records.
- :mod:`.schema`: the migrations (``migrations/NNN_*.sql``) and the privilege
  check; :mod:`.listener`: LISTEN/NOTIFY; :mod:`.url`: the URL's settings;
  :mod:`.failures`: the errors raised, with their fix.
- :mod:`.wire`: statements straight through libpq, prepared once per
  connection, pipelined; :mod:`.pool`: the pool, last returned first out.
"""

from __future__ import annotations

from parkway.store.postgres.schema import MIGRATION_LOCK, MIGRATIONS
from parkway.store.postgres.statements import DELIVER_EVENT_SHAPES
from parkway.store.postgres.store import PostgresStore
from parkway.store.postgres.tx import PostgresTx

__all__ = ["DELIVER_EVENT_SHAPES", "MIGRATIONS", "MIGRATION_LOCK", "PostgresStore", "PostgresTx"]
