"""Advancing one run: load it, make or wake its replay machine, drive it, commit.

The replay machine (:mod:`parkway.replay.machine`) decides; the worker does the
I/O it asks for. :class:`Advancer` loads the run (or takes what came with its
lease), settles what needs no replay (an ended run, a stop with no
compensation to run, a run its flow limit has not admitted, a workflow this
worker does not serve), pins the version of a run started by name, makes the
machine (or wakes the one this worker kept, :mod:`parkway.worker.cache`),
has :class:`~parkway.worker.drive.Driver` drive it to its outcome, and
:class:`~parkway.worker.outcome.FinalCommit` commit that outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging

from parkway import _json
from parkway.core import admission, cancel_on, deadlines
from parkway.core.committer import Job
from parkway.core.publishing import prepare
from parkway.core.runtime import Runtime
from parkway.core.transitions import cancel, time_out
from parkway.errors import (
    InvalidInputError,
    LeaseLostError,
    RunTimeoutError,
    SerializationError,
)
from parkway.events import Event
from parkway.models import RunStatus, error_dict
from parkway.registry import LATEST, WorkflowDef
from parkway.replay.machine import Machine
from parkway.replay.writes import Outcome, Writes
from parkway.store.base import (
    ENDED,
    LoadedRun,
    NewTask,
    RunRecord,
    TaskRecord,
    Tx,
    UpdateRecord,
)
from parkway.store.vocabulary import TaskKind
from parkway.worker.cache import RunCache
from parkway.worker.drive import Driver
from parkway.worker.outcome import FinalCommit
from parkway.worker.refusals import Commit, Refused
from parkway.worker.threads import StepThreads

log = logging.getLogger("parkway.worker")

# A run whose worker raised unexpectedly is retried after this long.
RETRY_DELAY = 5.0


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
        self.cache = cache  # parked runs' machines, to wake without a replay
        # Runs whose row a flush of their current advance has set running.
        self._running: set[str] = set()
        self._driver = Driver(rt, owner, commit, executor, self._running)
        self._final = FinalCommit(rt, owner, commit, cache, self._running)

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
                    "left to the workers that do",
                    run_id,
                    run.workflow,
                    run.version,
                )
                async with store.transaction() as tx:
                    await tx.runs.update(run.id, {"updated_at": run.updated_at}, owner=self.owner)
                return
            if run.version == LATEST:
                pinned = await self._pin(run, tasks, wf)
                if pinned is None:
                    return
                run = pinned
            updates = None
            if any(t.kind == TaskKind.UPDATE for t in tasks):
                async with self._driver.store_call(run) as tx:
                    updates = await tx.updates.pending(run.id)
            rt.telemetry.begin(run, tasks, rt.now())
            if cached is not None and cached.fits(loaded, wf):
                machine, cached = cached.machine, None
                machine.wake(run, tasks, signals=loaded.signals, updates=updates)
            else:
                machine = await self._machine(run, wf, loaded, updates, stop)
                machine.start()
            outcome = await self._driver.drive(run, machine)
            keep = machine.parked and self.cache.size > 0
            await self._final.commit(run, tasks, machine.take_writes(), outcome, machine, keep=keep)
            if machine.history_crossed:
                log.warning(
                    "run %s: its journal has %d entries, past the engine's history_threshold "
                    "of %d; a replay of it (after a restart, on another worker) grows with "
                    "it: have the workflow call ctx.continue_as_new when "
                    "ctx.continue_as_new_suggested",
                    run.id,
                    len(machine.entries),
                    machine.history_threshold,
                )
            if keep:
                self.cache.put(run.id, machine, wf)
                machine = None
        except LeaseLostError:
            log.warning("run %s: lease lost; another worker has taken it over", run_id)
        except asyncio.CancelledError:
            raise
        except Refused as refused:
            try:
                await self._final.fail_refused(run, tasks, machine, refused)
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
            wf,
            run,
            journal,
            loaded.tasks,
            registry=rt.registry,
            clock=rt.now,
            prepare_event=self._prepare,
            event_retention=rt.settings.event_retention,
            signals=loaded.signals,
            updates=updates,
            history_threshold=rt.settings.history_threshold,
            public_url=rt.settings.public_url,
            stop=stop,
        )

    async def _with_journal(self, run: RunRecord, loaded: LoadedRun) -> LoadedRun:
        """``loaded`` with the run's journal (read now if the load did not)."""
        if loaded.journal is not None:
            return loaded
        # (This worker parked it last, and may no longer keep it.)
        async with self._driver.store_call(run) as tx:
            journal = await tx.journal.read(run.id)
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
                await tx.tasks.delete([t.id for t in tasks])
        rt.results.notify(run.id)

    def _unpause(self, run: RunRecord) -> Job:
        async def job(tx: Tx) -> None:
            changes = {"paused": False, "updated_at": self.rt.now()}
            await tx.runs.update_leased(run.id, changes, owner=self.owner, release=False)

        run.paused = False
        return job

    def _prepare(self, event: Event) -> tuple[Event, bytes]:
        return prepare(self.rt, event)

    # -- before the machine runs ------------------------------------------------------------

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
            await self._final.commit(
                run, tasks, Writes(run.id), failed, pin={"version": wf.version}
            )
            return None
        changes = {"version": wf.version, "input": data, "updated_at": self.rt.now()}

        pinned = dataclasses.replace(run, version=wf.version, input=data)

        async def job(tx: Tx) -> None:
            await tx.runs.update_leased(run.id, changes, owner=self.owner, release=False)
            # (Its starter did not know the workflow: its cancel conditions start now.)
            await cancel_on.register(self.rt.registry, tx, pinned, self.rt.now())

        await self.commit(run.id, job)
        return pinned

    async def _commit_simple(
        self, run: RunRecord, tasks: list[TaskRecord], changes: dict[str, object]
    ) -> None:
        async with self.rt.store.transaction() as tx:
            if await tx.runs.update(run.id, changes, owner=self.owner):
                await tx.tasks.delete([t.id for t in tasks])

    async def _postpone(self, run: RunRecord, tasks: list[TaskRecord]) -> None:
        later = self.rt.now() + RETRY_DELAY
        async with self.rt.store.transaction() as tx:
            if await tx.runs.update(run.id, {"updated_at": run.updated_at}, owner=self.owner):
                await tx.tasks.delete([t.id for t in tasks])
                await tx.tasks.add(
                    [NewTask(t.run_id, later, t.kind, t.pos, t.payload) for t in tasks]
                )
