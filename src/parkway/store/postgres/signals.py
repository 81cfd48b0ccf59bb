"""A PostgreSQL transaction's signals (``tx.signals``): each run's mailbox, and a
signal sent with its task in one statement."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from parkway.ids import new_mark
from parkway.store.postgres.statements import Q
from parkway.store.postgres.transport import Part
from parkway.store.postgres.wire import Result
from parkway.store.records import ENDED, Sent, SignalRecord


class PostgresSignals(Part):
    """A run's mailbox."""

    async def add(self, run_id: str, name: str, payload: bytes | None, at: float) -> None:
        await self._t._write(Q["add_signal"], (run_id, name, payload, at))

    async def send(
        self,
        run_id: str,
        name: str,
        payload: bytes | None,
        at: float,
        *,
        task_payload: bytes | None = None,
    ) -> Sent:
        # Queued, with a commit mark: in a transaction of its own (or with a lease
        # for this process's worker) the signal goes with its COMMIT, one round
        # trip; what it found is known once that returns.
        t = self._t
        sent = Sent()
        token, unannounce = t._announce_maybe(at)
        params: dict[str, Any] = dict(
            run=run_id,
            name=name,
            payload=payload,
            at=at,
            token=token,
            mark=new_mark(),
            quiet=False,
            task_payload=task_payload,
        )
        t._signal = (run_id, params)
        t._task_runs.add(run_id)

        def found(status: str | None) -> None:
            sent.status, sent.known = status, True
            if status is None or status in ENDED:
                unannounce()  # nothing added: nothing announced
                t._task_runs.discard(run_id)

        def answered(result: Result) -> None:
            found(str(result.rows[0][0]) if result.rows else None)

        await t._write(Q["send_signal"], params, on_result=answered)
        await t._mark(params, found)
        return sent

    async def list(self, run_id: str) -> builtins.list[SignalRecord]:
        return [SignalRecord(*row) for row in await self._t._all(Q["signals"], (run_id,))]

    async def delete(self, ids: Sequence[int]) -> None:
        t = self._t
        if ids and not t._fuse("delete_signals", (list(ids),)):
            await t._write(Q["delete_signals"], (list(ids),))
