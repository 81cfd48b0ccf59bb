"""The PostgreSQL store: its life (open, migrate, close), its transactions, and the
worker's calls that are single statements (claim, load, leases, next due, watch).

Apart from the transaction's modules, which it hands out, and from its
connections (connections.py), which they need, so that the store's own surface
is read in one place.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import psycopg
import psycopg_pool

from parkway.errors import ParkwayError, StoreConnectionError, StoreError
from parkway.store.base import (
    ENDED,
    JournalEntry,
    LoadedRun,
    RunRecord,
    SignalRecord,
    StoreStats,
    TaskRecord,
    reads_mailbox,
)
from parkway.store.postgres import schema
from parkway.store.postgres.connections import Connections
from parkway.store.postgres.failures import connect_error, first_line, privilege_error, rollback
from parkway.store.postgres.listener import Listener
from parkway.store.postgres.pool import LifoPool
from parkway.store.postgres.rows import claimed_run
from parkway.store.postgres.statements import CLAIM_DUE, CLAIM_SERVED, Q
from parkway.store.postgres.transport import Transport
from parkway.store.postgres.tx import PostgresTx
from parkway.store.postgres.url import DEFAULT_POOL_SIZE, DEFAULT_POOL_TIMEOUT, parse
from parkway.store.postgres.wire import Conn

log = logging.getLogger("parkway.store.postgres")


class PostgresStore(Connections):
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
        super().__init__(conninfo, display=display, pool_size=pool_size, pool_timeout=pool_timeout)
        self._listener = Listener(conninfo, display=display, token=self._token)
        # What claim() read of the runs it leased, until the worker loads them.
        self._claimed: dict[str, LoadedRun] = {}
        # Runs its claims took over from an expired lease (see StoreStats).
        self._takeovers = 0

    @classmethod
    def from_url(cls, url: str) -> PostgresStore:
        """Parse ``url`` (libpq syntax plus parkway's parameters) without connecting."""
        conninfo, display, pool_size, pool_timeout = parse(url)
        return cls(conninfo, display=display, pool_size=pool_size, pool_timeout=pool_timeout)

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        if self._pool is not None:
            return
        try:
            conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
        except psycopg.OperationalError as exc:
            raise connect_error(self._params, self.display, exc) from exc
        try:
            await schema.migrate(conn, self.display, self._params)
            await schema.check_privileges(conn, self._params)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise privilege_error(self._params, exc) from exc
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot prepare parkway's schema in PostgreSQL {self.display}: {first_line(exc)}"
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
            raise StoreConnectionError(
                f"cannot open a connection pool to PostgreSQL {self.display}: {first_line(exc)}"
            ) from exc
        self._pool = pool
        if self._listener.watchers:
            self._listener.start()

    async def close(self) -> None:
        self._claimed.clear()
        await self._listener.stop()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    # -- transactions ------------------------------------------------------------------------

    @asynccontextmanager
    async def transaction(self, *, readonly: bool = False) -> AsyncIterator[PostgresTx]:
        t = Transport(self, await self._getconn(), readonly=readonly)
        try:
            try:
                yield PostgresTx(t)
            except BaseException as exc:
                await rollback(t._c)
                if isinstance(exc, psycopg.Error):
                    raise self._failed(exc) from exc
                raise
            try:
                await t._commit()
            except BaseException as exc:
                await rollback(t._c)
                if isinstance(exc, psycopg.Error):
                    raise self._failed(exc, committing=True) from exc
                raise
        finally:
            await self._putconn(t._c)
        due = t._to_report()
        if due is not None:
            # Tasks were added: this process's worker is told here, as other
            # processes' are by the notification (which the listener drops as
            # ours), unless they are all for runs it was just handed (see runs.lease).
            self._listener.report(due)

    # -- the worker's calls ------------------------------------------------------------------

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
        # One statement leases the runs, without waiting for an fsync, and reads all
        # they need to be advanced (load_run hands it over): see claim_due and
        # claim_settings in queries.sql.
        claimed: list[str] = []
        while len(claimed) < limit:
            places = limit - len(claimed)
            params = dict(now=now, wall=wall_now, limit=places, owner=owner, until=lease_until)
            statement = CLAIM_DUE
            if serves is not None:
                params["serves"], statement = list(serves), CLAIM_SERVED
            _, claim = await self._pipeline([(Q["claim_settings"], ()), (statement, params)])
            rows = claim.rows or []
            for row in rows:
                loaded = claimed_run(row, owner)
                self._claimed[loaded.run.id] = loaded
                claimed.append(loaded.run.id)
            if rows:
                self._takeovers += rows[0][-1]  # (claim_takeovers)
            # Fewer runs than places taken: some run had several due tasks, and
            # others may be due behind them. (The worker counts on a claim that
            # leased fewer runs than asked having left none due.)
            if not rows or rows[0][-2] < places or rows[0][-2] == len(rows):  # (-2: found)
                break
        return claimed

    async def load_run(
        self, run_id: str, now: float, *, owner: str | None = None
    ) -> LoadedRun | None:
        # (Read whole, the journal too: a run not handed over by the claim is rare.)
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
            await self._single(
                Q["extend_leases"], {"until": lease_until, "ids": list(run_ids), "owner": owner}
            )

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

    async def stats(self, now: float) -> StoreStats:
        parked, due, dead = await self._pipeline(
            [(Q["stats_parked"], ()), (Q["stats_due"], (now,)), (Q["stats_dead_letters"], ())]
        )
        count, oldest = (due.rows or [(0, None)])[0]
        by_workflow = parked.rows or []
        return StoreStats(
            {str(name): int(n) for name, n, _ in by_workflow if n},
            int(count),
            None if oldest is None else float(oldest),
            int((dead.rows or [(0,)])[0][0]),
            self._takeovers,
            held={str(name): int(n) for name, _, n in by_workflow if n},
        )

    async def has_due(self, now: float) -> bool:
        rows = await self._single(Q["has_due"], (now,))
        return bool(rows[0][0])

    async def changed(self) -> bool:
        if self._pool is None:
            return False
        return self._listener.changed()

    def watch(self, callback: Callable[[float | None], None]) -> None:
        self._listener.watchers.append(callback)
        if self._pool is not None:
            self._listener.start()

    def watch_streams(self, callback: Callable[[str | None], None]) -> None:
        self._listener.stream_watchers.append(callback)
        if self._pool is not None:
            self._listener.start()
