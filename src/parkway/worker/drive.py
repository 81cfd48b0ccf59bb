"""Doing what a run's replay machine asks, until it has an outcome.

:class:`Driver` runs each step (:func:`~parkway.worker.steps.call_step`), awaits
a plain asyncio awaitable the workflow awaited, reads what the machine was not
given (the mailbox, a child's row, a message's holder), and flushes the
machine's writes (fenced by the run's lease) before a step's side effect when
they may not wait (:attr:`Writes.may_wait_for_commit`), and when a
``ctx.publish`` needs its effects committed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from parkway.core.runtime import Runtime
from parkway.models import RunStatus
from parkway.replay.machine import Machine, Token
from parkway.replay.requests import (
    AwaitFuture,
    Flush,
    ReadHolder,
    ReadMailbox,
    ReadRun,
    RunStep,
    StepResult,
)
from parkway.replay.writes import Outcome, Writes
from parkway.store.base import JournalEntry, RunRecord, Tx
from parkway.store.vocabulary import Capability, EntryState
from parkway.worker import streams as step_streams
from parkway.worker.commit import apply_writes
from parkway.worker.deadlines import Deadlines
from parkway.worker.refusals import Commit, commit_retrying, store_errors
from parkway.worker.steps import call_step, settled
from parkway.worker.streams import StepStreams
from parkway.worker.threads import StepThreads


class Driver:
    """Drives machines of runs leased to ``owner``; ``commit(run_id, job)`` commits a
    job fenced by that run's lease; ``running``: the runs whose row a flush of their
    current advance has set running (shared with the advance's final commit)."""

    def __init__(
        self,
        rt: Runtime,
        owner: str,
        commit: Commit,
        executor: StepThreads,
        running: set[str],
    ) -> None:
        self.rt, self.owner, self.commit = rt, owner, commit
        self.executor = executor  # where sync steps run
        self.deadlines = Deadlines()  # of the attempts of steps with a timeout
        self.running = running
        # Whether to commit ahead while the workflow awaits plain awaitables (see the
        # module's docstring): not on a store whose commit holds the loop (SQLite's),
        # nor in memory, where a commit costs no wait to overlap.
        caps = rt.store.capabilities
        self.ahead = Capability.PERSISTENT in caps and Capability.LOOP_BOUND not in caps

    async def drive(self, run: RunRecord, machine: Machine) -> Outcome:
        """Run ``machine`` to its outcome, doing each thing it asks for.

        Steps of different branches run at the same time (a gather); a lone step
        is awaited here, without a task of its own.
        """
        inflight: dict[asyncio.Future[Any], Token] = {}
        plain: set[asyncio.Future[Any]] = set()  # the inflight waits of plain awaitables
        ahead: asyncio.Future[None] | None = None  # a commit started ahead (see above)
        try:
            while True:
                requests = machine.take_requests()
                if not requests:
                    if machine.outcome is not None:
                        if ahead is not None:  # (the final commit comes after it)
                            await self._settle(ahead)
                            ahead = None
                        return machine.outcome
                    if not inflight:  # (cannot be: the machine answers or asks)
                        raise RuntimeError(f"run {run.id!r}: replay stopped with nothing to do")
                    if ahead is None and self.ahead and self._due(machine, plain, inflight):
                        ahead = asyncio.ensure_future(self._commit(run, machine.take_writes()))
                    waits = inflight if ahead is None else [*inflight, ahead]
                    done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    for future in done:
                        if future is ahead:
                            ahead = None
                            future.result()  # (its failure is the advance's)
                        else:
                            plain.discard(future)
                            machine.resume(inflight.pop(future), future.result())
                    continue
                if ahead is not None:  # (durable before anything else is done)
                    await self._settle(ahead)
                    ahead = None
                for token, request in requests:
                    if isinstance(request, RunStep):
                        if not machine.writes.may_wait_for_commit:
                            await self.flush(run, machine)
                        if len(requests) == 1 and not inflight:
                            machine.resume(token, await self._call(run, request))
                        else:
                            inflight[asyncio.ensure_future(self._call(run, request))] = token
                    elif isinstance(request, AwaitFuture):
                        future = asyncio.ensure_future(settled(request.future))
                        inflight[future] = token
                        plain.add(future)
                    elif isinstance(request, Flush):
                        machine.resume(token, await self.flush(run, machine))
                    else:
                        machine.resume(token, await self._read(run, request))
        except asyncio.CancelledError:
            # The worker stops and its grace is over: steps in flight are not waited
            # for (a sync step's thread is abandoned; its run goes to another worker).
            for future in inflight:
                future.cancel()
            inflight.clear()
            if ahead is not None:
                ahead.cancel()
                ahead = None
            raise
        finally:
            if ahead is not None:  # (the advance failed meanwhile: its commit settles)
                await asyncio.wait([ahead])
                if not ahead.cancelled():
                    ahead.exception()  # (retrieved: the advance's own failure goes on)
            if inflight:  # (the run ended with steps in flight: they settle, unheard)
                await asyncio.wait(inflight)

    @staticmethod
    def _due(
        machine: Machine,
        plain: set[asyncio.Future[Any]],
        inflight: dict[asyncio.Future[Any], Token],
    ) -> bool:
        """Whether to commit the machine's writes ahead: it awaits plain awaitables only
        (no step is in flight), and its writes must be durable before its next step
        (and carry no publish, whose entries a ``Flush`` hands back)."""
        writes = machine.writes
        return (
            plain.issuperset(inflight)
            and bool(writes)
            and not writes.may_wait_for_commit
            and not writes.publishes
        )

    @staticmethod
    async def _settle(ahead: asyncio.Future[None]) -> None:
        """Wait for a commit started ahead (raising its failure, the advance's own)."""
        await ahead

    async def _call(self, run: RunRecord, request: RunStep) -> StepResult:
        # The attempt's stream writer, for step_context().write_stream: its writes
        # all commit before the step's result is recorded.
        writer = StepStreams(self.rt, run.id, request.attempt)
        token = step_streams.CURRENT.set(writer)

        async def heartbeat(data: bytes) -> None:
            await self._heartbeat(run, request, data)

        try:
            attempt = call_step(run, request, self.executor, heartbeat, self.deadlines)
            result = await self.rt.telemetry.step(request, attempt)
        finally:
            step_streams.CURRENT.reset(token)
        if not writer.used:  # (most steps write no stream)
            return result
        try:
            await writer.settle()
        except Exception as exc:
            return result if result.error is not None else StepResult(error=exc)
        return result

    async def _heartbeat(self, run: RunRecord, request: RunStep, data: bytes) -> None:
        """Journal a heartbeat's details in the step's entry, pending while it runs
        (fenced by the lease): a replay after a crash finds them with the step."""
        rt = self.rt
        now = rt.now()
        value = b'{"attempt":%d,"heartbeat":%s}' % (request.attempt, data)
        entry = JournalEntry(
            request.position,
            request.cmd.kind,
            request.cmd.name,
            EntryState.PENDING,
            value,
            None,
            now,
            request.branch,
            request.seq,
        )

        async def job(tx: Tx) -> None:
            await tx.runs.update_leased(
                run.id, {"updated_at": now}, owner=self.owner, release=False
            )
            await tx.journal.put(run.id, [entry])

        with store_errors(run):
            await self.commit(run.id, rt.telemetry.bind(job))

    async def _read(self, run: RunRecord, request: ReadMailbox | ReadRun | ReadHolder) -> Any:
        async with self.store_call(run) as tx:
            if isinstance(request, ReadMailbox):
                return await tx.signals.list(run.id)
            if isinstance(request, ReadRun):
                return await tx.runs.get(request.run_id)
            return await tx.messages.wait(request.name, request.key)

    async def flush(self, run: RunRecord, machine: Machine) -> dict[int, JournalEntry]:
        """Commit the machine's writes so far (fenced by the lease) before a side effect
        runs; the journal entries of the publishes among them, by position."""
        writes = machine.take_writes()
        if not writes:
            return {}
        await self._commit(run, writes)
        return {pos: writes.journal[pos] for pos, _, _, _ in writes.publishes}

    async def _commit(self, run: RunRecord, writes: Writes) -> None:
        """Commit ``writes`` (taken from the machine), fenced by the lease."""
        rt = self.rt

        # The run's row says it runs and no worker keeps its machine (the journal
        # changes: no cached machine of it holds any longer, this one's included until
        # its advance parks again). Once it says so, the lease's fence and the time
        # are all a flush changes: an UPDATE naming `status` rewrites the run's
        # entries in the indexes on it even when its value stays, which costs a flush
        # several times what leaving it unnamed does (see docs/performance.md).
        settled = run.id in self.running or (
            run.status == RunStatus.RUNNING and run.advanced_by is None
        )

        async def job(tx: Tx) -> None:
            changes: dict[str, object] = {"updated_at": rt.now()}
            if not settled:
                changes.update(status=RunStatus.RUNNING, advanced_by=None)
            await tx.runs.update_leased(run.id, changes, owner=self.owner, release=False)
            await apply_writes(rt, tx, writes)

        with store_errors(run):
            await commit_retrying(self.commit, run, rt.telemetry.bind(job))
        self.running.add(run.id)
        if writes.tells_callers:
            rt.results.notify(run.id)
        rt.after_commit()

    @contextlib.asynccontextmanager
    async def store_call(self, run: RunRecord) -> AsyncIterator[Tx]:
        """A read-only transaction whose failure never reaches the workflow as its own."""
        with store_errors(run):
            async with self.rt.store.transaction(readonly=True) as tx:
                yield tx
