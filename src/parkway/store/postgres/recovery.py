"""A transaction that outlives its connection (server restart, failover, a
terminated backend), where its outcome is certain.

A write transaction keeps a log of its statements and their results. If the
connection dies before ``COMMIT``, the server has rolled it all back; the
transaction is replayed on a fresh connection, and carries on only if every
result comes back the same (then the caller's decisions, made on those results,
still hold). A commit sent with its writes in one round trip, whose reply was
lost, is settled by what it left: the run's commit token (a worker's commit) or
its commit marks (a sender's; migration 003).

Apart from the transport (transport.py), which decides when to call these, so
that what a lost connection costs and what makes a replay safe is read in one
place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from parkway.errors import StoreConnectionError
from parkway.ids import new_mark
from parkway.store.postgres import wire
from parkway.store.postgres.connections import Connections, Step
from parkway.store.postgres.statements import BEGIN_WRITE, Q
from parkway.store.postgres.wire import Conn, Result

log = logging.getLogger("parkway.store.postgres")


def xid_of(result: Result) -> str | None:
    """The transaction id a ``xact_id`` statement returned."""
    return str(result.rows[0][0]) if result.rows else None


class Recovery:
    """What a transaction keeps so that it can go on after its connection died."""

    def __init__(self, store: Connections, conn: Conn, *, readonly: bool) -> None:
        self._store = store
        self._c = conn
        self._ro = readonly
        # Reads run statement by statement in autocommit mode, as on SQLite: no
        # reader needs one snapshot across statements (a run's journal changes
        # only under its lease), and it saves the COMMIT round trip. A write
        # transaction sends its BEGIN with its first statement (see Transport).
        self._begin: str | None = None if readonly else BEGIN_WRITE
        self._log: list[tuple[Step, Result]] = []
        self._xid: str | None = None  # the transaction's id, to learn a lost COMMIT's fate
        # The token of the first lease-fenced update (update_leased): tells whether a
        # commit whose connection died went through.
        self._token: tuple[str, int] | None = None
        # The statements writing this transaction's commit marks (migration 003):
        # each one's parameters and what to do with what its mark recorded. Then
        # the commit goes in one round trip, and a lost reply is settled by the
        # marks (several when a sender's deliveries share the transaction).
        self._marks: list[tuple[dict[str, Any], Callable[[str | None], None]]] = []
        # Whether a commit was sent again after a lost connection (see runs.lease).
        self._resent = False

    async def _send(self, steps: list[Step]) -> list[Result]:
        return await wire.send(self._c, steps)

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
        self._begin, self._xid = None, xid_of(results[1])
        if results[2:] != [result for _, result in self._log]:
            raise StoreConnectionError(
                f"the connection to PostgreSQL {self._store.display} was lost mid-transaction "
                "and the data it had read changed meanwhile; rolled back, retry"
            )

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
                params["mark"] = new_mark()  # the first one is taken now
            return False
        found(result)
        for params, found in self._marks[1:]:
            found(await self._store._mark_result(params["mark"]))
        return True
