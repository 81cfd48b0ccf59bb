"""The worker: claim runs with due tasks, advance each under a lease, commit.

One asyncio task per claimed run, up to ``concurrency`` at once. A run is
advanced by one worker at a time (the lease), and all its due tasks are
handled by one replay, so a run's inputs are applied in order. Leases are
renewed by a heartbeat while a run is in flight; the lease of a worker that
died expires and another worker takes the run over, replaying from the last
commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import socket
import time
import uuid
from typing import Any

from parkway import _json
from parkway.core.committer import Committer, Job
from parkway.core.housekeeping import maybe_sweep
from parkway.core.messages import rebuffer
from parkway.core.runtime import Runtime
from parkway.core.transitions import cancel, finish
from parkway.errors import InvalidInputError, LeaseLostError, SerializationError
from parkway.models import RunStatus, error_dict
from parkway.registry import LATEST
from parkway.replay.execution import Execution, Outcome
from parkway.store.base import (
    ENDED,
    MESSAGE_TASK,
    Lease,
    LoadedRun,
    NewTask,
    RunRecord,
    TaskRecord,
    Tx,
)

log = logging.getLogger("parkway.worker")

# How long an idle worker waits between cheap checks for work committed by
# another process (SQLite: one PRAGMA; nothing else is read unless it changed):
# every millisecond while work is flowing, more lazily once it has been quiet.
CROSS_PROCESS_POLL = 0.001
QUIET_POLL = 0.005
QUIET_AFTER = 2.0
# A full claim attempt at least this often, to pick up expired leases and due timers.
FULL_POLL = 1.0
# A run whose worker raised unexpectedly is retried after this long.
RETRY_DELAY = 5.0
_RUN_FIELDS = frozenset(f.name for f in dataclasses.fields(RunRecord))


class Worker:
    """Advances runs of one engine; started by ``async with engine`` or ``parkway worker``."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.concurrency = rt.settings.concurrency
        self.lease = rt.settings.lease
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.inflight: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._progress = asyncio.Event()
        self._stopping = False
        self._loop_task: asyncio.Task[None] | None = None
        self._beat_task: asyncio.Task[None] | None = None
        self.advanced = 0  # runs advanced, for stats and tests
        store = rt.store
        # The commits that queue up share a transaction (see parkway.committer):
        # on PostgreSQL that saves round trips and fsyncs, on SQLite the COMMIT's
        # writes of the WAL, which were a third of a 3-step workflow's time.
        self.committer = Committer(store) if "group_commit" in store.capabilities else None
        self._last_work = 0.0
        # Pokes so far, and the count when each in-flight run was claimed: a run's
        # end wakes the claim loop only if something was committed meanwhile (a
        # task for that very run, say, which the claim then could not take) or
        # if the loop waits for a free place.
        self._pokes = 0
        self._poked_at: dict[asyncio.Task[None], int] = {}
        self._full = False
        self._wake_on_done = "push" not in store.capabilities
        # Places promised to runs this process is handing over (see reserve()).
        self._reserved = 0
        # The earliest due time after the last look, kept where the store reports
        # every commit's (push), so an idle worker need not ask each time:
        # (known, due). Lowered by each report; a report while a look is in
        # flight makes the look's answer unsafe to keep (_due_reports).
        self._next_due: tuple[bool, float | None] = (False, None)
        self._due_reports = 0

    def start(self) -> None:
        # Commits that add tasks, other processes' too, wake this worker the moment
        # the store knows of them (on every commit with "push"; as a hint that
        # saves a poll interval otherwise).
        self.rt.store.watch(self._tasks_added)
        self._loop_task = asyncio.create_task(self._loop(), name=f"parkway-worker-{self.owner}")
        self._beat_task = asyncio.create_task(self._heartbeat(), name="parkway-heartbeat")

    def poke(self) -> None:
        """Something was committed in this process: look for work now."""
        self._pokes += 1
        self._next_due = (False, None)  # whatever it added is not known here
        self._wake.set()

    def _tasks_added(self, due: float | None) -> None:
        """A commit added tasks, the earliest due at ``due`` (``None``: unknown)."""
        self._pokes += 1
        self._due_reports += 1
        known, next_due = self._next_due
        if due is None:
            self._next_due = (False, None)
        elif known and due > self.rt.clock.now() and (next_due is None or due < next_due):
            self._next_due = (True, due)  # (tasks due now are the claim's)
        self._wake.set()

    @property
    def busy(self) -> bool:
        return bool(self.inflight)

    async def wait_progress(self, timeout: float) -> None:
        """Return when a run finished an advance, or after ``timeout`` seconds."""
        self._progress.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._progress.wait(), timeout)

    async def stop(self, grace: float = 30.0) -> None:
        """Stop claiming; let in-flight advances finish (up to ``grace``); release the rest."""
        self._stopping = True
        self._wake.set()
        if self._loop_task is not None:
            await asyncio.gather(self._loop_task, return_exceptions=True)
        if self.inflight:
            _, pending = await asyncio.wait(list(self.inflight.values()), timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._beat_task is not None:
            self._beat_task.cancel()
            await asyncio.gather(self._beat_task, return_exceptions=True)
        try:
            await self.rt.store.release_leases(self.owner)
        except Exception:  # the store may already be gone; leases then expire on their own
            log.warning("could not release leases of %s", self.owner, exc_info=True)

    # -- the claim loop ----------------------------------------------------------------------

    async def _loop(self) -> None:
        store, clock = self.rt.store, self.rt.clock
        # A store that pushes other processes' commits is not polled.
        poll = "shared" in store.capabilities and "push" not in store.capabilities
        ask_first = "cheap_claim" not in store.capabilities
        while not self._stopping:
            await maybe_sweep(self.rt)
            self._wake.clear()
            free = self.concurrency - len(self.inflight) - self._reserved
            claimed: list[str] = []
            if free > 0:
                try:
                    if ask_first and not await store.has_due(clock.now()):
                        # Nothing due at all: skip the claim's write transaction.
                        await self._idle_wait(poll)
                        continue
                    wall = time.time()
                    pokes = self._pokes  # a poke during the claim may not be in it
                    claimed = await store.claim(
                        self.owner, now=clock.now(), wall_now=wall,
                        lease_until=wall + self.lease, limit=free,
                    )  # fmt: skip
                except Exception:
                    log.exception("claim failed; retrying")
                    await asyncio.sleep(0.5)
                    continue
                if claimed:
                    self._last_work = time.monotonic()
                for run_id in claimed:
                    self._launch(run_id, None, pokes)
            self._full = free <= 0 or len(claimed) == free
            if claimed and len(claimed) == free:
                # Full: wait for a slot rather than spinning.
                await self._sleep(FULL_POLL)
                continue
            # Fewer than asked: nothing more is claimable now. A commit in this
            # process pokes us; another process's shows in changed().
            await self._idle_wait(poll)

    async def _idle_wait(self, poll: bool) -> None:
        store, clock = self.rt.store, self.rt.clock
        budget = FULL_POLL
        if not clock.is_manual:
            # Tasks due now but not claimed belong to leased runs: their worker's
            # progress (or the lease's expiry) wakes us, not a spin.
            now = clock.now()
            next_due = await self._next_due_after(now)
            if next_due is not None:
                budget = min(budget, next_due - now)
        deadline = time.monotonic() + budget
        while not self._stopping and not self._wake.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if poll:
                if await store.changed():
                    return
                quiet = time.monotonic() - self._last_work > QUIET_AFTER
                await self._sleep(min(QUIET_POLL if quiet else CROSS_PROCESS_POLL, remaining))
            else:
                await self._sleep(remaining)

    async def _next_due_after(self, now: float) -> float | None:
        """The earliest due time after ``now``: asked of the store unless known."""
        known, next_due = self._next_due
        if known and (next_due is None or next_due > now):
            return next_due
        reports = self._due_reports
        try:
            next_due = await self.rt.store.next_due(after=now)
        except Exception:  # the store is down: poll again after the usual interval
            log.warning("could not read the next due time", exc_info=True)
            return None
        if "push" in self.rt.store.capabilities and reports == self._due_reports:
            self._next_due = (True, next_due)
        return next_due

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    def reserve(self) -> str | None:
        """A place for a run this process is about to give a task: the owner to lease
        it to in that same transaction (``Tx.lease_run``), then :meth:`adopt` it.

        ``None`` when there is no free place (the run is then claimed as usual).
        """
        if self._stopping or len(self.inflight) + self._reserved >= self.concurrency:
            return None
        self._reserved += 1
        return self.owner

    def adopt(self, lease: Lease | None) -> None:
        """Advance the run leased in the transaction :meth:`reserve` was for (``None``:
        none was, or it failed): no claim needed. Gives the place back otherwise."""
        self._reserved -= 1
        if lease is None or lease.taken is False or self._stopping:
            if self._full:
                self._wake.set()  # a claim may have been cut short by the place
            return
        # (taken None: the commit's reply was lost; the advance loads the run and
        # goes on only if the lease is this worker's.)
        self._launch(lease.run_id, lease.loaded, self._pokes)

    def _launch(self, run_id: str, loaded: LoadedRun | None, pokes: int) -> None:
        # The run's previous advance may still be finishing (its commit, which let
        # go of the lease, is done): the new one replaces it here.
        task = asyncio.create_task(self._advance(run_id, loaded), name=f"parkway-run-{run_id}")
        self.inflight[run_id] = task
        self._poked_at[task] = pokes
        self._last_work = time.monotonic()
        task.add_done_callback(functools.partial(self._done, run_id))

    def _done(self, run_id: str, task: asyncio.Task[None]) -> None:
        if self.inflight.get(run_id) is task:
            del self.inflight[run_id]
        self.advanced += 1
        self._progress.set()
        # A store that pushes pokes for every commit that added tasks, so a claim
        # now would find nothing new unless a poke came while the run was leased
        # (see Store.claim: a claim that leased fewer than asked left nothing due).
        poked = self._poked_at.pop(task, None) != self._pokes
        if self._wake_on_done or self._full or poked:
            self._wake.set()

    async def _heartbeat(self) -> None:
        store = self.rt.store
        while True:
            await asyncio.sleep(self.lease / 3)
            if self.inflight:
                try:
                    await store.extend_leases(
                        self.owner, list(self.inflight), time.time() + self.lease
                    )
                except Exception:
                    log.warning("lease heartbeat failed", exc_info=True)

    # -- advancing one run -------------------------------------------------------------------

    async def _advance(self, run_id: str, loaded: LoadedRun | None = None) -> None:
        rt, store = self.rt, self.rt.store
        now = rt.now()
        try:
            if loaded is None:
                loaded = await store.load_run(run_id, now)
        except Exception:  # its lease will expire and a worker will take it again
            log.warning(
                "run %s: could not load it; retrying after its lease", run_id, exc_info=True
            )
            return
        if loaded is None or loaded.run.lease_owner != self.owner:
            return
        run, tasks, journal, signals = loaded.run, loaded.tasks, loaded.journal, loaded.signals
        try:
            if run.status in ENDED:
                await self._commit_simple(run, tasks, {"updated_at": run.updated_at})
                return
            if any(t.kind == "cancel" for t in tasks):
                async with store.transaction() as tx:
                    if await cancel(rt, tx, run, rt.now(), owner=self.owner):
                        await tx.delete_tasks([t.id for t in tasks])
                rt.results.notify(run_id)
                return
            wf = rt.registry.get(run.workflow, run.version)
            if wf is None:
                log.warning(
                    "run %s needs workflow %r version %r, which this worker does not have; "
                    "retrying in %ss", run_id, run.workflow, run.version, RETRY_DELAY,
                )  # fmt: skip
                await self._postpone(run, tasks)
                return
            commit = functools.partial(self.commit, run.id)
            if run.version == LATEST:
                pinned = await self._pin(run, tasks, wf)
                if pinned is None:
                    return
                run = pinned
            execution = Execution(rt, run, wf, journal, tasks, self.owner, commit, signals)
            outcome = await execution.execute()
            await self._commit(run, tasks, execution, outcome)
        except LeaseLostError:
            log.warning("run %s: lease lost; another worker has taken it over", run_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("run %s: unexpected error while advancing; retrying later", run_id)
            try:
                await self._postpone(run, tasks)
            except Exception:
                log.exception("run %s: could not postpone", run_id)

    async def _pin(self, run: RunRecord, tasks: list[TaskRecord], wf: Any) -> RunRecord | None:
        """A run started without its workflow's version (``parkway start`` without
        ``--app``) takes ``wf``'s, and its input is validated, before it first runs.

        A rejected input fails the run; returns ``None`` then.
        """
        try:
            checked = wf.check_input(_json.loads(run.input))
            data = _json.dumps(checked, f"the input of workflow {wf.name!r}")
        except (InvalidInputError, SerializationError) as exc:
            execution = Execution(self.rt, run, wf, [], tasks, self.owner)
            failed = Outcome(RunStatus.FAILED.value, error=error_dict(exc))
            await self._commit(run, tasks, execution, failed, pin={"version": wf.version})
            return None
        changes = {"version": wf.version, "input": data, "updated_at": self.rt.clock.now()}

        async def job(tx: Tx) -> None:
            await tx.update_leased(run.id, changes, owner=self.owner, release=False)

        await self.commit(run.id, job)
        return dataclasses.replace(run, version=wf.version, input=data)

    async def commit(self, run_id: str, job: Job) -> Any:
        """Run ``job`` (which fences on ``run_id``'s lease first) in a transaction."""
        if self.committer is not None:
            # A lone run has no commit to share with: it need not wait for one.
            alone = len(self.inflight) <= 1
            return await self.committer.run(job, alone=alone)
        async with self.rt.store.transaction() as tx:
            return await job(tx)

    async def _commit(
        self,
        run: RunRecord,
        tasks: list[TaskRecord],
        execution: Execution,
        outcome: Outcome,
        *,
        pin: dict[str, object] | None = None,
    ) -> None:
        rt = self.rt
        now = rt.now()
        changes: dict[str, object] = {"updated_at": now, **(pin or {})}
        status = outcome.status
        if status == "held":
            changes["error"] = _json.dumps(outcome.error)
        elif status == "continued":
            changes.update(
                status=RunStatus.RUNNING.value, input=outcome.new_input,
                generation=run.generation + 1, output=None, error=None,
            )  # fmt: skip
        else:
            changes["status"] = status
            changes["error"] = None  # a run held earlier may have recovered
            if status == RunStatus.COMPLETED.value:
                changes["output"] = outcome.output
            elif status == RunStatus.FAILED.value:
                changes["error"] = _json.dumps(outcome.error)

        async def job(tx: Tx) -> None:
            await tx.update_leased(run.id, changes, owner=self.owner)
            consumed = frozenset(execution.consumed_tasks)
            await execution.writes.apply(tx, rt, ending=status in ENDED)
            claimed = frozenset(t.id for t in tasks)
            if status in ENDED:
                # finish() drops all the run's tasks, and buffers again each message
                # it did not take, if it may have any: the ones it took go first.
                rebuffers = execution.may_hold_deliveries
                if rebuffers:
                    await tx.delete_tasks(list(consumed))
                await finish(rt, tx, run, now, messages=rebuffers)
            else:
                if any(t.kind == MESSAGE_TASK for t in tasks):  # else none to buffer again
                    await rebuffer(rt, tx, run.id, now, keep=consumed, only=claimed)
                await tx.delete_tasks(list(claimed))
            if status == "continued":
                await tx.clear_journal(run.id)
                await rebuffer(rt, tx, run.id, now)
                await tx.delete_wait_tasks(run.id)
                await tx.delete_run_subscriptions(run.id)
                await tx.add_tasks([NewTask(run.id, now, "start")])

        await self.commit(run.id, job)
        if status in ENDED or status == "held":
            final: dict[str, Any] = {k: v for k, v in changes.items() if k in _RUN_FIELDS}
            rt.results.notify(run.id, dataclasses.replace(run, **final))
        rt.after_commit()

    async def _commit_simple(
        self, run: RunRecord, tasks: list[TaskRecord], changes: dict[str, object]
    ) -> None:
        async with self.rt.store.transaction() as tx:
            if await tx.update_run(run.id, changes, owner=self.owner):
                await tx.delete_tasks([t.id for t in tasks])

    async def _postpone(self, run: RunRecord, tasks: list[TaskRecord]) -> None:
        later = self.rt.clock.now() + RETRY_DELAY
        async with self.rt.store.transaction() as tx:
            if await tx.update_run(run.id, {"updated_at": run.updated_at}, owner=self.owner):
                await tx.delete_tasks([t.id for t in tasks])
                await tx.add_tasks(
                    [NewTask(t.run_id, later, t.kind, t.pos, t.payload) for t in tasks]
                )
