"""The PostgreSQL store's connections: its pool, and the statements it sends outside
a transaction, one round trip each, retried on a dead connection.

Apart from the store's public calls (store.py) because a transaction needs this
part and only this part of its store: a fresh connection when its own dies, and
the questions that settle a commit whose reply was lost (its run's commit
token, its commit marks, its transaction's status). So the transaction's
modules import this one, never the store, and the store builds on it. It also
keeps the little that all of one store's transactions share: the token that
tags its notifications and the shapes of waits it saw.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import psycopg
import psycopg_pool
from psycopg.conninfo import conninfo_to_dict

from parkway.errors import ParkwayError, StoreConnectionError, StoreError
from parkway.store.postgres import wire
from parkway.store.postgres.failures import connection_lost, failed, rollback
from parkway.store.postgres.statements import DELIVER_EVENT_SHAPES, Q
from parkway.store.postgres.wire import Conn, Params, Query, Result

log = logging.getLogger("parkway.store.postgres")

Row = tuple[Any, ...]
# Parameters: positional (%s), or named (%(name)s) for a query that uses one twice.
Step = tuple[Query, Params]


class Connections:
    """A pool of connections to one database, and what its transactions share."""

    def __init__(self, conninfo: str, *, display: str, pool_size: int, pool_timeout: float) -> None:
        self.conninfo = conninfo
        self.display = display
        self.pool_size = pool_size
        self.pool_timeout = pool_timeout
        self._params = conninfo_to_dict(conninfo)
        self._pool: psycopg_pool.AsyncConnectionPool[Conn] | None = None
        # Tags this store's notifications, so that its own commits do not wake it.
        self._token = uuid.uuid4().hex
        # The shapes of waits the last publish of each (domain, name) found: the
        # next one reads ahead the waits under them (see PostgresEvents.record).
        self._shapes_seen: dict[tuple[str, str], tuple[str, ...]] = {}

    def _saw_shapes(self, name: tuple[str, str], shapes: list[str]) -> list[str]:
        """Remember ``shapes``, just read for the waits on ``name``; return them.

        Kept: those shapes, then the ones seen before that a wait may take again
        (so that events.deliver need not decline then), within events.deliver's limit.
        """
        before = self._shapes_seen.get(name, ())
        merged = (*shapes, *(shape for shape in before if shape not in shapes))
        self._shapes_seen[name] = merged[: max(len(shapes), DELIVER_EVENT_SHAPES)]
        return shapes

    @property
    def pool(self) -> psycopg_pool.AsyncConnectionPool[Conn]:
        """The open pool (a ``ParkwayError`` while the store is not open)."""
        if self._pool is None:
            raise ParkwayError("the store is not open; use `async with engine:` first")
        return self._pool

    async def _getconn(self) -> Conn:
        try:
            return await self.pool.getconn()
        except psycopg_pool.PoolTimeout as exc:
            raise StoreConnectionError(
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

    def _failed(self, exc: BaseException, *, committing: bool = False) -> ParkwayError:
        return failed(self._params, self.display, exc, committing=committing)

    async def _single(self, query: str, params: Params = ()) -> list[Row]:
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
                return await wire.send(conn, steps)
            except psycopg.OperationalError as exc:
                if not connection_lost(exc, conn) or attempt == self.pool_size:
                    raise self._failed(exc) from exc
                await conn.close()
            except psycopg.Error as exc:
                await rollback(conn)  # a claim's BEGIN may have been left open
                raise self._failed(exc) from exc
            finally:
                await self._putconn(conn)
        raise AssertionError("unreachable")

    # -- what became of a commit whose reply was lost (see recovery.py) ----------------------

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
