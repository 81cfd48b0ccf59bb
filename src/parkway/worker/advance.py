"""Advancing one run: load it, drive its replay machine, do what it asks, commit.

The replay machine (:mod:`parkway.replay.machine`) decides; this module does
the I/O it asks for: it runs each step (async ones on the loop, sync ones in a
thread), reads what the machine was not given (the mailbox, a child's row, a
message's holder), and commits, fenced by the run's lease: before a step's side
effect when the machine's writes may not wait (:attr:`Writes.may_wait_for_commit`),
when a ``ctx.publish`` needs its effects committed, and at the end with the
run's new status.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, Protocol

from parkway import _json
from parkway.core import admission, cancel_on, deadlines
from parkway.core.committer import Job
from parkway.core.messages import rebuffer
from parkway.core.publishing import prepare
from parkway.core.runtime import Runtime
from parkway.core.transitions import cancel, cancel_children, finish, time_out
from parkway.errors import (
    InvalidInputError,
    LeaseLostError,
    NonDeterminismError,
    RunTimeoutError,
    SerializationError,
    StepTimeoutError,
    StoreBusyError,
    StoreConflictError,
    StoreConnectionError,
    StoreError,
    StoreFailedError,
    StoreFullError,
)
from parkway.events import Event
from parkway.models import RunStatus, error_dict, exception_text
from parkway.registry import LATEST, WorkflowDef
from parkway.replay.commands import StepCmd
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
from parkway.store.base import (
    ENDED,
    MESSAGE_TASK,
    JournalEntry,
    LoadedRun,
    NewTask,
    RunRecord,
    TaskRecord,
    Tx,
    UpdateRecord,
)
from parkway.store.vocabulary import Ending, EntryState, TaskKind
from parkway.worker import step_context
from parkway.worker import streams as step_streams
from parkway.worker.cache import RunCache
from parkway.worker.commit import apply_writes
from parkway.worker.deadlines import Deadlines
from parkway.worker.heartbeat import Heartbeats
from parkway.worker.step_context import StepContext
from parkway.worker.streams import StepStreams
from parkway.worker.threads import Carried, StepThreads

log = logging.getLogger("parkway.worker")

# A run whose worker raised unexpectedly is retried after this long.
RETRY_DELAY = 5.0
# A commit the store refuses for what it holds (not for the store's own trouble) is
# tried this many times, COMMIT_PAUSE apart (then twice that...), before its run fails.
COMMIT_TRIES = 3
COMMIT_PAUSE = 0.2
# What of a refused commit's error the run's failure quotes.
_CAUSE_CHARS = 500
_RUN_FIELDS = frozenset(f.name for f in dataclasses.fields(RunRecord))


class Commit(Protocol):
    """The worker's commit of a run's job; ``order``: the job's place in a batch."""

    def __call__(self, run_id: str, job: Job, *, order: str = "") -> Awaitable[Any]: ...


class Advancer:
    """Advances runs leased to ``owner``; ``commit(run_id, job)`` commits a job that
    fences on that run's lease first (through the worker's committer)."""

    def __init__(
        self,
        rt: Runtime,
        owner: str,
        commit: Commit,
        executor: StepThreads,
        cache: RunCache,
    ) -> None:
        self.rt, self.owner, self.commit = rt, owner, commit
        self.executor = executor  # where sync steps run
        self.cache = cache  # parked runs' machines, to wake without a replay
        self.deadlines = Deadlines()  # of the attempts of steps with a timeout
        # Runs whose row a flush of their current advance has set running.
        self._running: set[str] = set()

    async def advance(self, run_id: str, loaded: LoadedRun | None = None) -> None:
        """Advance ``run_id`` (``loaded``: what came with its lease, if anything did)."""
        rt, store = self.rt, self.rt.store
        # The run's machine, if this worker parked it last: used only if the load did
        # not read the journal (no other worker advanced the run since).
        cached = self.cache.take(run_id)
        try:
            if loaded is None:
                loaded = await store.load_run(run_id, rt.now(), owner=self.owner)
        except Exception:  # its lease will expire and a worker will take it again
            log.warning(
                "run %s: could not load it; retrying after its lease", run_id, exc_info=True
            )
            if cached is not None:
                cached.machine.close()
            return
        if loaded is None or loaded.run.lease_owner != self.owner:
            if cached is not None:  # (another worker has it now)
                cached.machine.close()
            return
        run, tasks = loaded.run, loaded.tasks
        machine: Machine | None = None
        try:
            if run.status in ENDED:
                await self._commit_simple(run, tasks, {"updated_at": run.updated_at})
                return
            stop = deadlines.stop_reason(run, tasks)
            if stop is not None:
                # A run with compensations to run is driven to its end (below); any
                # other ends here, in one transaction, as it always has.
                loaded = await self._with_journal(run, loaded)
                assert loaded.journal is not None
                if not deadlines.compensating(loaded.journal):
                    await self._stop_at_once(run, tasks, stop)
                    return
                if cached is not None:  # (its stop replays from the journal, read now)
                    cached.machine.close()
                    cached = None
                if run.paused:  # (a deadline outranks a pause: the compensations run)
                    await self.commit(run.id, self._unpause(run))
            if admission.unadmitted(run, tasks, loaded.journal):
                # Claimed for a signal or an update before its limit admitted it: put
                # back, those tasks deferred to its start (see parkway.core.admission).
                async with store.transaction() as tx:
                    await admission.put_back(tx, run, tasks, self.owner)
                return
            wf = rt.registry.get(run.workflow, run.version)
            if wf is None:
                # Handed over by a publish or signal of this process (a claim takes
                # only runs this worker serves): let it go at once, for a worker that
                # serves its workflow and version to claim.
                log.info(
                    "run %s needs workflow %r version %r, which this worker does not serve; "
                    "left to the workers that do", run_id, run.workflow, run.version,
                )  # fmt: skip
                async with store.transaction() as tx:
                    await tx.update_run(run.id, {"updated_at": run.updated_at}, owner=self.owner)
                return
            if run.version == LATEST:
                pinned = await self._pin(run, tasks, wf)
                if pinned is None:
                    return
                run = pinned
            updates = None
            if any(t.kind == TaskKind.UPDATE for t in tasks):
                async with self._store_call(run) as tx:
                    updates = await tx.pending_updates(run.id)
            rt.telemetry.begin(run, tasks, rt.now())
            if cached is not None and cached.fits(loaded, wf):
                machine, cached = cached.machine, None
                machine.wake(run, tasks, signals=loaded.signals, updates=updates)
            else:
                machine = await self._machine(run, wf, loaded, updates, stop)
                machine.start()
            outcome = await self._drive(run, machine)
            keep = machine.parked and self.cache.size > 0
            await self._commit(run, tasks, machine.take_writes(), outcome, machine, keep=keep)
            if machine.history_crossed:
                log.warning(
                    "run %s: its journal has %d entries, past the engine's history_threshold "
                    "of %d; a replay of it (after a restart, on another worker) grows with "
                    "it: have the workflow call ctx.continue_as_new when "
                    "ctx.continue_as_new_suggested", run.id, len(machine.entries),
                    machine.history_threshold,
                )  # fmt: skip
            if keep:
                self.cache.put(run.id, machine, wf)
                machine = None
        except LeaseLostError:
            log.warning("run %s: lease lost; another worker has taken it over", run_id)
        except asyncio.CancelledError:
            raise
        except _Refused as refused:
            try:
                await self._fail_refused(run, tasks, machine, refused)
            except Exception:
                log.exception("run %s: could not record its failure; retrying later", run_id)
                with contextlib.suppress(Exception):
                    await self._postpone(run, tasks)
        except Exception:
            log.exception("run %s: unexpected error while advancing; retrying later", run_id)
            try:
                await self._postpone(run, tasks)
            except Exception:
                log.exception("run %s: could not postpone", run_id)
        finally:
            self._running.discard(run_id)
            if machine is not None:
                machine.close()
            if cached is not None:  # (not used: the run was advanced elsewhere, or ended)
                cached.machine.close()

    async def _machine(
        self,
        run: RunRecord,
        wf: WorkflowDef,
        loaded: LoadedRun,
        updates: list[UpdateRecord] | None,
        stop: BaseException | None = None,
    ) -> Machine:
        """A machine to replay ``run`` from its journal (read now if the load did not);
        ``stop``: why the run must stop, if it must (see :mod:`parkway.replay.sagas`)."""
        rt = self.rt
        journal = (await self._with_journal(run, loaded)).journal
        assert journal is not None
        return Machine(
            wf, run, journal, loaded.tasks, registry=rt.registry, clock=rt.now,
            prepare_event=self._prepare, event_retention=rt.settings.event_retention,
            signals=loaded.signals, updates=updates,
            history_threshold=rt.settings.history_threshold,
            public_url=rt.settings.public_url, stop=stop,
        )  # fmt: skip

    async def _with_journal(self, run: RunRecord, loaded: LoadedRun) -> LoadedRun:
        """``loaded`` with the run's journal (read now if the load did not)."""
        if loaded.journal is not None:
            return loaded
        # (This worker parked it last, and may no longer keep it.)
        async with self._store_call(run) as tx:
            journal = await tx.journal(run.id)
        return dataclasses.replace(loaded, journal=journal)

    async def _stop_at_once(
        self, run: RunRecord, tasks: list[TaskRecord], stop: BaseException
    ) -> None:
        """End a run with no compensation to run: cancelled, or failed at its deadline."""
        rt = self.rt
        async with rt.store.transaction() as tx:
            if isinstance(stop, RunTimeoutError):
                ended = await time_out(rt, tx, run, stop, rt.now(), owner=self.owner)
            else:
                ended = await cancel(rt, tx, run, rt.now(), owner=self.owner, checked=True)
            if ended:
                await tx.delete_tasks([t.id for t in tasks])
        rt.results.notify(run.id)

    def _unpause(self, run: RunRecord) -> Job:
        async def job(tx: Tx) -> None:
            changes = {"paused": False, "updated_at": self.rt.now()}
            await tx.update_leased(run.id, changes, owner=self.owner, release=False)

        run.paused = False
        return job

    def _prepare(self, event: Event) -> tuple[Event, bytes]:
        return prepare(self.rt, event)

    # -- doing what the machine asks ---------------------------------------------------------

    async def _drive(self, run: RunRecord, machine: Machine) -> Outcome:
        """Run ``machine`` to its outcome, doing each thing it asks for.

        Steps of different branches run at the same time (a gather); a lone step
        is awaited here, without a task of its own.
        """
        inflight: dict[asyncio.Future[Any], Token] = {}
        try:
            while True:
                requests = machine.take_requests()
                if not requests:
                    if machine.outcome is not None:
                        return machine.outcome
                    if not inflight:  # (cannot be: the machine answers or asks)
                        raise RuntimeError(f"run {run.id!r}: replay stopped with nothing to do")
                    done, _ = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
                    for future in done:
                        machine.resume(inflight.pop(future), future.result())
                    continue
                for token, request in requests:
                    if isinstance(request, RunStep):
                        if not machine.writes.may_wait_for_commit:
                            await self._flush(run, machine)
                        if len(requests) == 1 and not inflight:
                            machine.resume(token, await self._call(run, request))
                        else:
                            inflight[asyncio.ensure_future(self._call(run, request))] = token
                    elif isinstance(request, AwaitFuture):
                        inflight[asyncio.ensure_future(_settled(request.future))] = token
                    elif isinstance(request, Flush):
                        machine.resume(token, await self._flush(run, machine))
                    else:
                        machine.resume(token, await self._read(run, request))
        except asyncio.CancelledError:
            # The worker stops and its grace is over: steps in flight are not waited
            # for (a sync step's thread is abandoned; its run goes to another worker).
            for future in inflight:
                future.cancel()
            inflight.clear()
            raise
        finally:
            if inflight:  # (the run ended with steps in flight: they settle, unheard)
                await asyncio.wait(inflight)

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
            request.position, request.cmd.kind, request.cmd.name, EntryState.PENDING, value, None,
            now, request.branch, request.seq,
        )  # fmt: skip

        async def job(tx: Tx) -> None:
            await tx.update_leased(run.id, {"updated_at": now}, owner=self.owner, release=False)
            await tx.put_journal(run.id, [entry])

        with _store_errors(run):
            await self.commit(run.id, rt.telemetry.bind(job))

    async def _read(self, run: RunRecord, request: ReadMailbox | ReadRun | ReadHolder) -> Any:
        async with self._store_call(run) as tx:
            if isinstance(request, ReadMailbox):
                return await tx.signals(run.id)
            if isinstance(request, ReadRun):
                return await tx.get_run(request.run_id)
            return await tx.message_wait(request.name, request.key)

    async def _flush(self, run: RunRecord, machine: Machine) -> dict[int, JournalEntry]:
        """Commit the machine's writes so far (fenced by the lease) before a side effect
        runs; the journal entries of the publishes among them, by position."""
        writes = machine.take_writes()
        if not writes:
            return {}
        rt = self.rt

        # The run's row says it runs and no worker keeps its machine (the journal
        # changes: no cached machine of it holds any longer, this one's included until
        # its advance parks again). Once it says so, the lease's fence and the time
        # are all a flush changes: an UPDATE naming `status` rewrites the run's
        # entries in the indexes on it even when its value stays (SQLite: ~40 µs
        # against ~13 µs a flush, measured on 50,000 runs).
        settled = run.id in self._running or (
            run.status == RunStatus.RUNNING and run.advanced_by is None
        )

        async def job(tx: Tx) -> None:
            changes: dict[str, object] = {"updated_at": rt.now()}
            if not settled:
                changes.update(status=RunStatus.RUNNING, advanced_by=None)
            await tx.update_leased(run.id, changes, owner=self.owner, release=False)
            await apply_writes(rt, tx, writes)

        with _store_errors(run):
            await self._committed(run, rt.telemetry.bind(job))
        self._running.add(run.id)
        if writes.tells_callers:
            rt.results.notify(run.id)
        rt.after_commit()
        return {pos: writes.journal[pos] for pos, _, _, _ in writes.publishes}

    @contextlib.asynccontextmanager
    async def _store_call(self, run: RunRecord) -> AsyncIterator[Tx]:
        """A read-only transaction whose failure never reaches the workflow as its own."""
        with _store_errors(run):
            async with self.rt.store.transaction(readonly=True) as tx:
                yield tx

    # -- commits -----------------------------------------------------------------------------

    async def _pin(
        self, run: RunRecord, tasks: list[TaskRecord], wf: WorkflowDef
    ) -> RunRecord | None:
        """A run started without its workflow's version (a client that does not
        register it) takes ``wf``'s, and its input is validated, before it first runs.

        A rejected input fails the run; returns ``None`` then.
        """
        try:
            checked = wf.check_input(_json.loads(run.input))
            data = _json.dumps(checked, f"the input of workflow {wf.name!r}")
        except (InvalidInputError, SerializationError) as exc:
            failed = Outcome(RunStatus.FAILED, error=error_dict(exc))
            await self._commit(run, tasks, Writes(run.id), failed, pin={"version": wf.version})
            return None
        changes = {"version": wf.version, "input": data, "updated_at": self.rt.now()}

        pinned = dataclasses.replace(run, version=wf.version, input=data)

        async def job(tx: Tx) -> None:
            await tx.update_leased(run.id, changes, owner=self.owner, release=False)
            # (Its starter did not know the workflow: its cancel conditions start now.)
            await cancel_on.register(self.rt.registry, tx, pinned, self.rt.now())

        await self.commit(run.id, job)
        return pinned

    async def _commit(
        self,
        run: RunRecord,
        tasks: list[TaskRecord],
        writes: Writes,
        outcome: Outcome,
        machine: Machine | None = None,
        *,
        pin: dict[str, object] | None = None,
        keep: bool = False,
    ) -> None:
        """The advance's final commit: its last writes, the run's new status, its tasks.

        ``keep``: this worker keeps the parked machine, and says so in the run's row
        (``advanced_by``); otherwise the row says no worker does.
        """
        rt = self.rt
        now = rt.now()
        changes: dict[str, object] = {
            "updated_at": now, "advanced_by": self.owner if keep else None, **(pin or {}),
        }  # fmt: skip
        status = outcome.status
        held = status == RunStatus.HELD
        if held:
            # Held unchanged: its journal, and every task it was given (the inputs sent
            # to it, which no claim takes while it is held), wait for a retry.
            changes["status"] = status
            changes["error"] = _json.dumps(outcome.error)
        elif status == Ending.CONTINUED:
            changes.update(
                status=RunStatus.RUNNING, input=outcome.new_input,
                generation=run.generation + 1, output=None, error=None,
            )  # fmt: skip
        else:
            if status != run.status or run.id in self._running:
                # (Parked again and never flushed as running: the status is left
                # unnamed, which spares the index entries an UPDATE naming it rewrites.)
                changes["status"] = status
            changes["error"] = None  # a run held earlier may have recovered
            if status == RunStatus.COMPLETED:
                changes["output"] = outcome.output
            elif status == RunStatus.FAILED:
                changes["error"] = _json.dumps(outcome.error)
        rebuffers = machine is not None and machine.may_hold_deliveries
        # Updates given that the run did not get to before it went on as new wait
        # for the new generation (an ended run's are closed: see core.updates).
        updates_left = machine is not None and machine.unhandled_updates
        # Runs the cache let go of since the last commit: this one clears their marks.
        evicted = self.cache.evicted()
        stopped = machine is not None and machine.stopping
        deadline = machine.deadline_entry if machine is not None else None

        async def job(tx: Tx) -> None:
            await tx.update_leased(run.id, changes, owner=self.owner)
            if held:
                if evicted:
                    await tx.drop_cache_marks(evicted, self.owner)
                return
            consumed = frozenset(writes.consumed_tasks)
            await apply_writes(rt, tx, writes, ending=status in ENDED)
            claimed = frozenset(t.id for t in tasks)
            if status in ENDED:
                # finish() drops all the run's tasks, and buffers again each message
                # it did not take, if it may have any: the ones it took go first.
                if rebuffers:
                    await tx.delete_tasks(list(consumed))
                await finish(rt, tx, run, now, messages=rebuffers)
                if stopped:  # (cancelled, or past its deadline: its children stop too)
                    await cancel_children(tx, run, now)
            else:
                if any(t.kind == MESSAGE_TASK for t in tasks):  # else none to buffer again
                    await rebuffer(rt, tx, run.id, now, keep=consumed, only=claimed)
                await tx.delete_tasks(list(claimed))
            if status == Ending.CONTINUED:
                await tx.clear_journal(run.id)
                if deadline is not None:  # (its deadline holds across generations)
                    await tx.put_journal(run.id, [deadline])
                await rebuffer(rt, tx, run.id, now)
                await tx.delete_wait_tasks(run.id)
                await tx.delete_run_subscriptions(run.id)
                await tx.add_tasks([NewTask(run.id, now, TaskKind.START)])
                # The new generation holds its cancel conditions anew (its input's).
                renewed = dataclasses.replace(run, input=outcome.new_input)
                await cancel_on.register(rt.registry, tx, renewed, now)
                if updates_left:
                    await tx.add_tasks([NewTask(run.id, now, TaskKind.UPDATE)])
            if evicted:  # (last: on PostgreSQL the writes above may join the fenced update)
                await tx.drop_cache_marks(evicted, self.owner)

        # (An end frees its key's slot: batched in the keys' order, see admission.lock_order.)
        order = admission.lock_order(rt.registry.get(run.workflow, run.version), run) if (
            status in ENDED
        ) else ""  # fmt: skip
        await self._committed(run, rt.telemetry.bind(job), order=order)
        rt.telemetry.committed(run, outcome, machine)
        if status in ENDED or held:
            final: dict[str, Any] = {k: v for k, v in changes.items() if k in _RUN_FIELDS}
            rt.results.notify(run.id, dataclasses.replace(run, **final))
        elif writes.tells_callers:  # a value set, an update answered: wake their callers
            rt.results.notify(run.id)
        rt.after_commit()

    async def _committed(self, run: RunRecord, job: Job, *, order: str = "") -> None:
        """Commit ``job`` for ``run``; tried again, a few times, while the store refuses
        it for what it holds (:func:`_transient`: not the store's own trouble, which is
        raised at once, and the run retried later as ever).

        What the advance decided stays in hand meanwhile: a step whose result the store
        refuses is not run again to find out. Past the tries, :class:`_Refused`.
        """
        tries = 0
        while True:
            try:
                await self.commit(run.id, job, order=order)
                return
            except (LeaseLostError, NonDeterminismError):
                raise
            except Exception as exc:
                tries += 1
                if _transient(exc):
                    raise
                if tries >= COMMIT_TRIES:
                    raise _Refused(tries, exc) from exc
                log.warning(
                    "run %s: the store refused its commit (%s: %s); trying again",
                    run.id, type(exc).__name__, exception_text(exc)[:_CAUSE_CHARS],
                )  # fmt: skip
                await asyncio.sleep(COMMIT_PAUSE * 2 ** (tries - 1))

    async def _fail_refused(
        self,
        run: RunRecord,
        tasks: list[TaskRecord],
        machine: Machine | None,
        refused: _Refused,
    ) -> None:
        """Fail ``run``: the store refused what its advance decided, every time.

        Nothing of those writes is kept (the last commit's state stands); the run ends
        ``failed`` with a :class:`StoreFailedError` that quotes the store's refusal.
        """
        cause = refused.cause
        error = StoreFailedError(
            f"run {run.id!r}: the store refused to save what the run decided, "
            f"{refused.tries} times ({type(cause).__name__}: "
            f"{exception_text(cause)[:_CAUSE_CHARS]}); a step's result or error it cannot "
            "store (an integer beyond 64 bits, a NUL character, text it cannot encode)?"
        )
        log.error("%s; the run fails", error)
        if machine is not None:
            machine.take_writes()  # (what was refused: never committed)
        failed = Outcome(RunStatus.FAILED, error=error_dict(error))
        await self._commit(run, tasks, Writes(run.id), failed, machine)

    async def _commit_simple(
        self, run: RunRecord, tasks: list[TaskRecord], changes: dict[str, object]
    ) -> None:
        async with self.rt.store.transaction() as tx:
            if await tx.update_run(run.id, changes, owner=self.owner):
                await tx.delete_tasks([t.id for t in tasks])

    async def _postpone(self, run: RunRecord, tasks: list[TaskRecord]) -> None:
        later = self.rt.now() + RETRY_DELAY
        async with self.rt.store.transaction() as tx:
            if await tx.update_run(run.id, {"updated_at": run.updated_at}, owner=self.owner):
                await tx.delete_tasks([t.id for t in tasks])
                await tx.add_tasks(
                    [NewTask(t.run_id, later, t.kind, t.pos, t.payload) for t in tasks]
                )


async def call_step(
    run: RunRecord,
    request: RunStep,
    executor: StepThreads,
    heartbeat: Callable[[bytes], Awaitable[None]],
    deadlines: Deadlines,
) -> StepResult:
    """Run one attempt of a step of ``run``: what it returned, or the exception it raised.

    A sync step may block (requests, file I/O): it runs in ``executor``, with
    the caller's context variables (as ``asyncio.to_thread`` would), the step's
    :class:`StepContext` among them. ``heartbeat(data)`` commits the details its
    heartbeats record.

    The step's ``timeout`` bounds the attempt (on ``deadlines``, the worker's one
    timer for them): an async
    step is cancelled at the deadline; a sync step's thread cannot be, so the
    attempt is abandoned (the executor frees its place, and ignores what the
    thread returns later). Either way it fails with :class:`StepTimeoutError`.

    Any exception fails the attempt, ``BaseException``s too (``SystemExit`` from a
    library's ``sys.exit()``, ``KeyboardInterrupt``...): the step's code is the
    user's, and what it raises is its run's business, never the worker's (left to
    propagate, one such step stopped the whole process, and every restart claimed
    its run and went down again). Only the engine's own cancellation of the
    advance (a worker stopping) goes on as a cancellation.
    """
    cmd = request.cmd
    last = _json.loads(request.last_heartbeat) if request.last_heartbeat is not None else None
    beats = Heartbeats(heartbeat, what=f"run {run.id!r} step {cmd.name!r}")
    token = step_context.enter(
        StepContext(
            run.id, run.workflow, cmd.name, request.position, request.attempt,
            f"{run.id}:{request.position}", last, beats,
        )
    )  # fmt: skip
    try:
        if inspect.iscoroutinefunction(cmd.fn):
            if cmd.timeout is None:
                result = await cmd.fn(*cmd.args, **cmd.kwargs)
            else:
                result = await _within(cmd, cmd.fn(*cmd.args, **cmd.kwargs), deadlines)
        else:
            future = executor.run(cmd.fn, *cmd.args, **cmd.kwargs)
            if cmd.timeout is None:
                result = await future
            else:
                expired = StepTimeoutError(cmd.name, cmd.timeout)
                box = deadlines.add(
                    cmd.timeout, functools.partial(executor.abandon, future, expired)
                )
                try:
                    result = await future
                finally:
                    deadlines.cancel(box)
        if inspect.isawaitable(result):
            result = await result
    except Carried as carried:  # (a sync step's SystemExit...: see StepThreads.run)
        return StepResult(error=carried.error, heartbeat=await _closed(beats, succeeded=False))
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        # (The step's own: it cancelled something of its own.)
        return StepResult(error=exc, heartbeat=await _closed(beats, succeeded=False))
    except BaseException as exc:
        return StepResult(error=exc, heartbeat=await _closed(beats, succeeded=False))
    finally:
        step_context.leave(token)
    return StepResult(value=result, heartbeat=await _closed(beats, succeeded=True))


async def _within(cmd: StepCmd, coro: Coroutine[Any, Any, Any], deadlines: Deadlines) -> Any:
    """Await ``coro`` (an async step's attempt), cancelled at ``cmd.timeout`` (as
    ``asyncio.timeout`` would, on the worker's one deadline timer)."""
    assert cmd.timeout is not None
    task = asyncio.current_task()
    assert task is not None
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    box = deadlines.add(cmd.timeout, expire)
    try:
        return await coro
    except asyncio.CancelledError:
        # Ours (not a cancel of the worker's own): the attempt ran out of time.
        if expired and task.uncancel() == 0:
            raise StepTimeoutError(cmd.name, cmd.timeout) from None
        raise
    finally:
        deadlines.cancel(box)


async def _closed(beats: Heartbeats, *, succeeded: bool) -> bytes | None:
    """The attempt's heartbeats written out; the last details recorded, if any."""
    with contextlib.suppress(Exception):  # (logged; the attempt's outcome stands)
        await beats.close(succeeded=succeeded)
    return beats.written


async def _settled(future: asyncio.Future[Any]) -> None:
    # (As a Task would: the future has been seen as blocking by the workflow's await.)
    future._asyncio_future_blocking = False
    await asyncio.wait([future])


class _Refused(Exception):
    """The store refused a run's commit ``tries`` times, for what it holds (``cause``)."""

    def __init__(self, tries: int, cause: Exception) -> None:
        super().__init__(f"commit refused {tries} times: {type(cause).__name__}")
        self.tries, self.cause = tries, cause


# The DB-API's name for a failure of the database's operation, not of what was sent
# (a lost connection, a locked or full database, a cancelled statement: sqlite3 and
# psycopg both), and its interface's (a closed connection).
_OPERATIONAL = frozenset({"OperationalError", "InterfaceError"})
# The store's own trouble, as the stores name it.
_STORE_TROUBLE = (StoreFullError, StoreBusyError, StoreConnectionError, StoreConflictError)


def _transient(exc: BaseException) -> bool:
    """Whether a commit's failure is the store's own trouble, to be retried later,
    rather than a refusal of what the commit holds (an integer beyond 64 bits, a NUL
    character in text: the same every time).

    Parkway's stores raise :class:`StoreError` from the driver's error: the chain
    is searched for a conflict, an unknown outcome, an I/O error or the DB-API's
    ``OperationalError``. Anything else (``OverflowError``, a ``DataError``, an
    ``IntegrityError``...) is a refusal.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _STORE_TROUBLE):
            return True
        if isinstance(current, StoreError) and (current.conflict or current.outcome_unknown):
            return True
        if isinstance(current, OSError | TimeoutError | LeaseLostError):
            return True
        if any(cls.__name__ in _OPERATIONAL for cls in type(current).__mro__):
            return True
        current = current.__cause__ or current.__context__
    return False


@contextlib.contextmanager
def _store_errors(run: RunRecord) -> Iterator[None]:
    """The store's failures as :class:`StoreFailedError` (the worker retries the run)."""
    try:
        yield
    except (LeaseLostError, NonDeterminismError, _Refused):
        raise
    except Exception as exc:
        raise StoreFailedError(f"store failed while advancing run {run.id!r}: {exc}") from exc
