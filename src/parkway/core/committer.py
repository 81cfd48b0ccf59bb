"""Group commit: the commits of one process that queue up share one transaction.

On PostgreSQL a commit costs round trips and an fsync, not CPU, and a worker
advancing many runs at once spends most of its time waiting on them. So while
one transaction is being committed, the next commits queue; then all of them
go in one transaction (one ``BEGIN``, one ``COMMIT``, one round trip when none
of them reads). A lone commit is not delayed: batches form only under load.

A worker's job is a commit fenced by its run's lease: it calls
``tx.runs.update_leased(...)`` before writing anything. A store that checks the
lease at once raises :class:`LeaseLostError` there, before the job wrote
anything, so that job alone is told and the batch commits the others. A store
that checks at commit fails the whole batch; then, as on any other failure,
each job is retried in a transaction of its own, so one bad job never fails
another, and its own error reaches it unchanged.

A sender's job (a message delivered, ``fenced=False``) has no lease to stop a
second copy of it: after a commit whose outcome is unknown
(:attr:`StoreError.outcome_unknown`), retrying it could do it twice, so every
job of that batch gets the error instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from parkway.errors import LeaseLostError, StoreError
from parkway.store.base import Store, Tx

Job = Callable[[Tx], Awaitable[Any]]

# A batch never grows past this many jobs: a transaction holding thousands of
# row locks would make every other worker wait on it.
MAX_BATCH = 64


@dataclass(eq=False)
class _Pending:
    job: Job
    done: asyncio.Future[Any]
    order: str = ""


class Committer:
    """Runs commit jobs of one process, batching those that queue up.

    ``fenced``: each job is fenced by its run's lease (a worker's), so it may be
    retried whatever became of the batch.
    """

    def __init__(self, store: Store, *, fenced: bool = True) -> None:
        self._store = store
        self._fenced = fenced
        self._queue: list[_Pending] = []
        self._draining: asyncio.Task[None] | None = None
        self.batches = 0  # transactions committed, for tests and benchmarks
        self.jobs = 0  # jobs committed

    async def run(self, job: Job, *, alone: bool = False, order: str = "") -> Any:
        """Run ``job`` in a transaction, maybe shared with others; return its result.

        With ``alone`` (the caller knows no other commit could join this one) and
        nothing queued, the job commits at once, without the loop turn a batch
        waits for. ``order``: jobs of a batch run sorted by it (stably), so that
        two batches take the locks their jobs take in one order.

        Unfenced, a caller cancelled while its job waits in the queue takes it
        out: nothing of it is done. Once its transaction is under way, the
        cancellation waits for that transaction's end, so what the job did is
        settled first.
        """
        if alone and not self._queue and (self._draining is None or self._draining.done()):
            async with self._store.transaction() as tx:
                result = await job(tx)
            self._count(1)
            return result
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        pending = _Pending(job, done, order)
        self._queue.append(pending)
        if self._draining is None or self._draining.done():
            self._draining = asyncio.create_task(self._drain(), name="parkway-committer")
        if self._fenced:
            # (A worker's job is cancelled only when the worker stops; whatever it
            # did, its lease decides. No shield: it costs on every commit.)
            return await done
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            if pending in self._queue:
                self._queue.remove(pending)
                raise
            with contextlib.suppress(BaseException):
                await asyncio.shield(done)
            raise

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            batch.sort(key=lambda pending: pending.order)
            if len(batch) == 1:
                await self._alone(batch[0])
            else:
                await self._together(batch)

    async def _alone(self, pending: _Pending) -> None:
        try:
            async with self._store.transaction() as tx:
                result = await pending.job(tx)
        except BaseException as exc:  # delivered to the job's caller, never swallowed
            _fail(pending, exc)
        else:
            self._count(1)
            _succeed(pending, result)

    async def _together(self, batch: list[_Pending]) -> None:
        outcomes: list[tuple[_Pending, Any, BaseException | None]] = []
        try:
            async with self._store.transaction() as tx:
                for pending in batch:
                    try:
                        outcomes.append((pending, await pending.job(tx), None))
                    except LeaseLostError as exc:  # raised before it wrote anything
                        outcomes.append((pending, None, exc))
        except asyncio.CancelledError:
            for pending in batch:
                pending.done.cancel()
            raise
        except Exception as exc:
            if not self._fenced and isinstance(exc, StoreError) and exc.outcome_unknown:
                for pending in batch:
                    _fail(pending, exc)
                return
            # Someone's failure (a lease found lost at commit, say), or the store's:
            # each on its own, to tell whose.
            for pending in batch:
                await self._alone(pending)
            return
        self._count(sum(1 for _, _, error in outcomes if error is None))
        for pending, result, error in outcomes:
            if error is None:
                _succeed(pending, result)
            else:
                _fail(pending, error)

    def _count(self, jobs: int) -> None:
        self.batches += 1
        self.jobs += jobs


def _succeed(pending: _Pending, result: Any) -> None:
    if not pending.done.done():
        pending.done.set_result(result)


def _fail(pending: _Pending, exc: BaseException) -> None:
    if not pending.done.done():
        if isinstance(exc, asyncio.CancelledError):
            pending.done.cancel()
        else:
            pending.done.set_exception(exc)
