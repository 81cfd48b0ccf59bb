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
import functools
import logging
import os
import socket
import time
import uuid
from typing import Any

from parkway.core import controls, schedules
from parkway.core.committer import Committer, Job
from parkway.core.fleet import LEASES_ALIVE
from parkway.core.housekeeping import maybe_sweep
from parkway.core.runtime import Runtime
from parkway.store.base import REPORTS_OWN, Lease, LoadedRun
from parkway.store.fleet import WorkerRecord, serve_keys
from parkway.store.vocabulary import Capability
from parkway.worker import gc_thresholds
from parkway.worker.advance import Advancer
from parkway.worker.cache import RunCache
from parkway.worker.load import SATURATED_FACTOR, LoopLoad
from parkway.worker.threads import StepThreads

log = logging.getLogger("parkway.worker")

# How long an idle worker waits between cheap checks for work committed by
# another process (SQLite: one PRAGMA; nothing else is read unless it changed):
# every millisecond while work is flowing, more lazily once it has been quiet.
CROSS_PROCESS_POLL = 0.001
QUIET_POLL = 0.005
QUIET_AFTER = 2.0
# A full claim attempt at least this often, to pick up expired leases and due timers.
FULL_POLL = 1.0
# How soon to look again at a schedule tick that is due but was not ours to fire.
TICK_RETRY = 0.05


class Worker:
    """Advances runs of one engine; started by ``async with engine`` or ``parkway worker``."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.concurrency = rt.settings.concurrency
        self.lease = rt.settings.lease
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.owner = f"{self.host}:{self.pid}:{uuid.uuid4().hex[:8]}"
        self.started_at = time.time()
        # The claim's keys of the workflows and versions this worker serves (see
        # parkway.store.fleet), made again when a workflow is registered.
        self._serves: tuple[int, list[str]] = (-1, [])
        self.inflight: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._progress = asyncio.Event()
        self._stopping = False
        self._loop_task: asyncio.Task[None] | None = None
        self._beat_task: asyncio.Task[None] | None = None
        self.advanced = 0  # runs advanced, for stats and tests
        store = rt.store
        # The commits that queue up share a transaction (see parkway.core.committer):
        # on PostgreSQL that saves round trips and fsyncs, on SQLite the COMMIT's
        # writes of the WAL, a large part of a short workflow's time.
        self.committer = Committer(store) if Capability.GROUP_COMMIT in store.capabilities else None
        self._last_work = 0.0
        # Pokes so far, and the count when each in-flight run was claimed: a run's
        # end wakes the claim loop only if something was committed meanwhile (a
        # task for that very run, say, which the claim then could not take) or
        # if the loop waits for a free place.
        self._pokes = 0
        self._poked_at: dict[asyncio.Task[None], int] = {}
        self._full = False
        # A store that tells of this process's commits that add tasks (and of the
        # others' it knows of) pokes for each; any other, a run's end wakes the loop
        # always (a task may have come for it that nobody announced).
        self._wake_on_done = not store.capabilities & REPORTS_OWN
        # Places promised to runs this process is handing over (see reserve()).
        self._reserved = 0
        # The earliest due time after the last look, kept where the store reports
        # every commit's (push), so an idle worker need not ask each time:
        # (known, due). Lowered by each report; a report while a look is in
        # flight makes the look's answer unsafe to keep (_due_reports).
        self._next_due: tuple[bool, float | None] = (False, None)
        self._due_reports = 0
        # Sync steps run in threads of their own, as many as runs at once: the
        # loop's default executor has a handful (cores + 4), which a gather of
        # sync steps, or many runs in sync steps, would queue behind.
        self._executor = StepThreads(self.concurrency)
        # Parked runs' machines, so that a resume does not replay the journal.
        # (Clearing an evicted run's mark saves its next advance a round trip; on a
        # loop-bound store a read is no round trip: see parkway.worker.cache.)
        self.cache = RunCache(
            rt.settings.cached_runs, clears_marks=Capability.LOOP_BOUND not in store.capabilities
        )
        self._advancer = Advancer(rt, self.owner, self.commit, self._executor, self.cache)
        # Batches while the loop is busy (see parkway.worker.load): a store whose
        # statements run on the loop, and the setting not 0.
        self._busy_interval = (
            rt.settings.busy_claim_interval if Capability.LOOP_BOUND in store.capabilities else 0.0
        )
        self.load = LoopLoad()
        self._last_claim = 0.0  # when the last claim began (time.monotonic())
        self._last_claimed = 0  # how many runs it took
        self._gc_held = False  # this worker tuned the garbage collector (see start())

    def start(self) -> None:
        self._gc_held = gc_thresholds.hold(self.rt.settings.tune_gc)
        # Commits that add tasks, other processes' too, wake this worker the moment
        # the store knows of them (on every commit with "push"; as a hint that
        # saves a poll interval otherwise).
        self.rt.store.watch(self._tasks_added)
        schedules.started(self.rt)  # (ticks from now on are on time; earlier ones caught up)
        self._loop_task = asyncio.create_task(self._loop(), name=f"parkway-worker-{self.owner}")
        self._beat_task = asyncio.create_task(self._heartbeat(), name="parkway-heartbeat")

    async def retry_held(self) -> None:
        """Retry the held runs of the workflows this worker registers: opened with
        fixed code, it frees the runs the old code held (in batches; the claim loop
        takes them as they become due). The engine awaits it as it opens, so that a
        held run's ``result()`` asked after the open waits for the retried run."""
        try:
            retried = await controls.retry_held(self.rt)
        except Exception:  # the store is down: a later open, or engine.retry, will do it
            log.warning("could not retry the held runs", exc_info=True)
            return
        if retried:
            log.info("retried %d held run(s) with the code this worker has", retried)

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
        # Threads still in a step past the grace are not waited for here (the
        # command line leaves without them; their runs are released).
        self._executor.shutdown()
        self.cache.clear()
        if self._gc_held:
            self._gc_held = False
            gc_thresholds.release()
        await self.beat(stopped=True)  # (gone from the list of workers at once)
        try:
            await self.rt.store.release_leases(self.owner)
        except Exception:  # the store may already be gone; leases then expire on their own
            log.warning("could not release leases of %s", self.owner, exc_info=True)

    # -- the claim loop ----------------------------------------------------------------------

    async def _loop(self) -> None:
        store, clock = self.rt.store, self.rt.clock
        # A store that pushes other processes' commits is not polled.
        poll = Capability.SHARED in store.capabilities and Capability.PUSH not in store.capabilities
        ask_first = Capability.CHEAP_CLAIM not in store.capabilities
        while not self._stopping:
            await maybe_sweep(self.rt)
            self._wake.clear()
            # Due schedule ticks start their runs first, so that this very turn claims them.
            await schedules.maybe_fire(self.rt)
            free = self.concurrency - len(self.inflight) - self._reserved
            claimed: list[str] = []
            if free > 0:
                try:
                    if ask_first and not await store.has_due(clock.now()):
                        # Nothing due at all: skip the claim's write transaction.
                        await self._idle_wait(poll)
                        continue
                    interval = self._batch_interval()
                    if interval:
                        # Runs come faster than one at a time and the loop is busy:
                        # let the next claim's batch fill for the rest of the interval.
                        wait = self._last_claim + interval - time.monotonic()
                        if wait > 0:
                            await asyncio.sleep(wait)
                            free = self.concurrency - len(self.inflight) - self._reserved
                            if self._stopping or free <= 0:
                                continue  # (stopped, or its places taken meanwhile)
                    self._last_claim = time.monotonic()
                    wall = time.time()
                    pokes = self._pokes  # a poke during the claim may not be in it
                    claimed = await store.claim(
                        self.owner,
                        now=clock.now(),
                        wall_now=wall,
                        lease_until=wall + self.lease,
                        limit=free,
                        serves=self.serves(),
                    )
                except Exception:
                    log.exception("claim failed; retrying")
                    await asyncio.sleep(0.5)
                    continue
                self._last_claimed = len(claimed)
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

    def _batch_interval(self) -> float:
        """How long after the last claim the next one waits (0: not at all). It waits
        while the last one took several runs (work comes together, not one run sent
        and awaited at a time) and the event loop is busy; longer while the loop is
        saturated (larger batches cost each run less, and the loop catches up)."""
        if not (self._busy_interval and self._last_claimed > 1 and self.load.busy()):
            return 0.0
        if self.load.saturated():
            return self._busy_interval * SATURATED_FACTOR
        return self._busy_interval

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
            # The next schedule tick wakes the worker when it is due (one still due
            # now is being fired by another worker: look again shortly).
            tick = await schedules.next_fire(self.rt)
            if tick is not None:
                budget = min(budget, tick - now if tick > now else TICK_RETRY)
        deadline = time.monotonic() + budget
        while not self._stopping and not self._wake.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if poll:
                if await store.changed():
                    # Another process committed: counted as a poke, so that a run
                    # leased here meanwhile is looked at again when its advance
                    # ends (a task for it, whose wake-up was lost, waits behind it).
                    self._pokes += 1
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
        if Capability.PUSH in self.rt.store.capabilities and reports == self._due_reports:
            self._next_due = (True, next_due)
        return next_due

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    def reserve(self) -> str | None:
        """A place for a run this process is about to give a task: the owner to lease
        it to in that same transaction (``tx.runs.lease``), then :meth:`adopt` it.

        ``None`` when there is no free place (the run is then claimed as usual).
        """
        if self._stopping or len(self.inflight) + self._reserved >= self.concurrency:
            return None
        if self._busy_interval and self._coming_together() and self.load.busy():
            # A busy loop with runs coming several at a time: this one waits for the
            # next claim, with the others that come meanwhile (see
            # parkway.worker.load). One run at a time, sent and awaited, would make
            # a batch of nobody but this run: it goes at once.
            return None
        self._reserved += 1
        return self.owner

    def _coming_together(self) -> bool:
        """Whether runs come several at a time: others are under way or being handed
        over, or the last claim took several. (The last alone missed the gaps of a
        paced load: between two claims' batches the worker often has nothing under
        way, and the run that came then was handed over and committed by itself,
        at the cost of a run alone.)"""
        return bool(self.inflight or self._reserved or self._last_claimed > 1)

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
        advance = self.rt.telemetry.advancing(self._advancer.advance(run_id, loaded))
        task = asyncio.create_task(advance, name=f"parkway-run-{run_id}")
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

    def serves(self) -> list[str]:
        """The keys of the runs this worker claims: those of the workflows and
        versions it registers (see :func:`parkway.store.fleet.serve_keys`)."""
        registry = self.rt.registry
        changes, keys = self._serves
        if changes != registry.changes:
            keys = serve_keys(registry.served())
            self._serves = (registry.changes, keys)
        return keys

    def record(self, *, stopped: bool = False) -> WorkerRecord:
        """This worker's row in the store's list of workers, seen now: alive for
        three lease periods (``LEASES_ALIVE``) unless ``stopped``."""
        now = time.time()
        alive_until = 0.0 if stopped else now + LEASES_ALIVE * self.lease
        return WorkerRecord(
            self.owner,
            self.host,
            self.pid,
            self.started_at,
            now,
            alive_until,
            self.rt.registry.served(),
        )

    async def beat(self, *, stopped: bool = False) -> None:
        """Say in the store that this worker lives (or that it ``stopped``)."""
        try:
            async with self.rt.store.transaction() as tx:
                await tx.workers.beat(self.record(stopped=stopped))
        except Exception:  # the next beat tries again; meanwhile it may look gone
            log.warning("could not renew worker %s in the store", self.owner, exc_info=True)

    async def _heartbeat(self) -> None:
        # The worker's row is renewed with the leases: once a third of a lease, so a
        # worker that died drops out of engine.workers() within three lease periods.
        store = self.rt.store
        while True:
            await asyncio.sleep(self.lease / 3)
            await self.beat()
            if self.inflight:
                try:
                    await store.extend_leases(
                        self.owner, list(self.inflight), time.time() + self.lease
                    )
                except Exception:
                    log.warning("lease heartbeat failed", exc_info=True)

    async def commit(self, run_id: str, job: Job, *, order: str = "") -> Any:
        """Run ``job`` (which fences on ``run_id``'s lease first) in a transaction;
        ``order``: its place among the jobs of a batch (see ``Committer.run``)."""
        if self.committer is not None:
            # A lone run has no commit to share with: it need not wait for one.
            alone = len(self.inflight) <= 1
            return await self.committer.run(job, alone=alone, order=order)
        async with self.rt.store.transaction() as tx:
            return await job(tx)
