"""Operator controls: pausing and resuming a run, retrying a failed or held one, and
doing either (or a cancel) to every run a filter selects, in bounded batches.

A pause is a flag on the run's row (``RunRecord.paused``) beside its status, so a
paused parked run still shows what it waits for. No claim leases a paused run,
on any backend or process; what reaches it meanwhile (signals, events, messages,
timers, updates) is stored as for any run, as tasks that wait, and is acted on
after the resume. A retry takes the failed run back to its last committed step:
the journal entries of the step that failed go, so that step runs again with
fresh attempts, and everything before it is replayed from the journal. A retry
of a held run (its code no longer replayed its journal) changes no journal: the
run is due again, with the inputs that reached it while held, and a worker
replays it with the code it has now (held again if that still diverges).

Both write the run's row (and a retry its journal) outside any advance of it,
so both clear ``advanced_by``: no worker's cached machine of the run is used
after them (see :mod:`parkway.worker.cache`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from parkway.core import cancel_on, operators
from parkway.core.runtime import Runtime
from parkway.core.transitions import cancel
from parkway.errors import RunNotFoundError, RunStateError
from parkway.models import RunStatus
from parkway.store.base import ACTIVE, ENDED, JournalEntry, NewTask, RunRecord, Tx
from parkway.store.runs import RunSelection
from parkway.store.vocabulary import EntryKind, EntryState, TaskKind

# Runs a bulk operation (cancel_runs, retry_runs) changes in one transaction: each
# batch commits on its own, so a bulk operation over a million runs never holds
# the store's write lock (SQLite) or row locks (PostgreSQL) for long.
BULK_BATCH = 500

FAILED = RunStatus.FAILED
RETRIED = frozenset({EntryKind.STEP, EntryKind.COMPENSATION})
HELD = RunStatus.HELD
# The statuses a retry takes a run out of.
RETRYABLE = (FAILED, HELD)


@dataclass(frozen=True)
class Filters:
    """What a bulk operation selects (``None``: anything); ``created_before`` in
    engine time (epoch seconds)."""

    workflow: str | None = None
    status: str | None = None
    subject: str | None = None
    created_before: float | None = None


async def _locked(tx: Tx, run_id: str) -> RunRecord:
    run = await tx.runs.get(run_id)  # (PostgreSQL: locked, as a read-write transaction's)
    if run is None:
        raise RunNotFoundError(run_id)
    return run


async def pause(rt: Runtime, run_id: str, by: str | None = None) -> RunRecord:
    """Pause an active run; pausing a paused run changes nothing. ``by``: who asked
    (an operator entry in the run's history, see :mod:`parkway.core.operators`).

    A worker advancing the run at that moment loses its lease: its next commit
    fails and saves nothing, as if it had died there (a step in flight then runs
    again after the resume), so that the run stops where it last committed.

    Raises:
        RunNotFoundError: No run has that id.
        RunStateError: The run has finished.
    """
    async with rt.store.transaction() as tx:
        run = await _locked(tx, run_id)
        if run.status in ENDED:
            raise RunStateError(run_id, run.status, "pause", "only an active run can be paused")
        if not run.paused:
            # With the owner given, the update also drops the lease (see tx.runs.update).
            await tx.runs.update(
                run_id, {"paused": True, "advanced_by": None}, owner=run.lease_owner
            )
            await operators.record(rt, tx, run_id, "pause", by)
        run.paused, run.lease_owner, run.lease_until = True, None, None
    return run


async def resume(rt: Runtime, run_id: str, by: str | None = None) -> RunRecord:
    """Resume a paused run: it becomes claimable again and, if inputs arrived while it
    was paused (or it was due), it is due now. Resuming a run that is not paused
    changes nothing.

    Raises:
        RunNotFoundError: No run has that id.
        RunStateError: The run has finished.
    """
    now = rt.now()
    async with rt.store.transaction() as tx:
        run = await _locked(tx, run_id)
        if run.status in ENDED:
            raise RunStateError(run_id, run.status, "resume", "it has finished")
        if run.paused:
            await tx.runs.update(run_id, {"paused": False, "advanced_by": None})
            await operators.record(rt, tx, run_id, "resume", by)
            if await tx.tasks.due(run_id, now):
                # Its tasks are due already; this one is for the workers of stores that
                # push (PostgreSQL's NOTIFY goes with added tasks), so that one claims
                # the run now rather than at its next poll.
                await tx.tasks.add([NewTask(run_id, now, TaskKind.WAKE)])
            run.paused = False
    rt.after_commit()
    return run


def retried_journal(journal: Sequence[JournalEntry]) -> list[JournalEntry]:
    """The journal a retry continues from: without the steps that failed last on
    their line (a step whose error the workflow caught and went past has later
    entries on its branch, and stays as journaled), nor, for a step that failed in
    a ``ctx.gather`` branch, the waits of that gather that its failure withdrew
    (the last entry on their branch): they wait again."""
    last: dict[str | None, JournalEntry] = {}
    for entry in sorted(journal, key=lambda e: e.pos):
        last[entry.branch] = entry
    # (A compensation is a step too: a retry runs a failed one again.)
    failed = [e for e in last.values() if e.kind in RETRIED and e.state == EntryState.ERROR]
    dropped = {entry.pos for entry in failed}
    # A branch's path starts with its outermost gather's ("1.0/2.1": gather 1's
    # branch 0, and in it gather 2's branch 1): the failure ended that gather.
    gathers = {_outermost(e.branch) for e in failed if e.branch is not None}
    dropped |= {
        entry.pos
        for branch, entry in last.items()
        if entry.state == EntryState.WITHDRAWN
        and branch is not None
        and _outermost(branch) in gathers
    }
    return [entry for entry in journal if entry.pos not in dropped]


def _outermost(branch: str) -> str:
    return branch.split("/", 1)[0].split(".", 1)[0]


async def _retry_in(rt: Runtime, tx: Tx, run: RunRecord, now: float) -> None:
    """Retry the failed or held ``run`` in ``tx``: a failed run's failed step goes; it
    is running and due."""
    if run.status == HELD:
        await _retry_held(tx, run, now)
        return
    journal = await tx.journal.read(run.id)
    kept = retried_journal(journal)
    if len(kept) != len(journal):
        await tx.journal.clear(run.id)
        await tx.journal.put(run.id, kept)
    changes = {
        "status": RunStatus.RUNNING,
        "error": None,
        "updated_at": now,
        "advanced_by": None,
        "paused": False,
    }
    await tx.runs.update(run.id, changes)
    # A run that failed before journaling anything starts again from the top: its
    # task is a start (a task of another kind, with no journal, is how the worker
    # knows a run its admission limit has not admitted yet: see core.admission).
    await tx.tasks.add([NewTask(run.id, now, TaskKind.WAKE if kept else TaskKind.START)])
    # Its end dropped its cancel conditions with its subscriptions: they hold anew.
    await cancel_on.register(rt.registry, tx, run, now)


async def _retry_held(tx: Tx, run: RunRecord, now: float) -> None:
    """The held ``run`` is due again, as it was (its journal, its subscriptions and the
    tasks its inputs left are all still there): replayed by whichever worker claims
    it, with the code that worker has."""
    changes = {
        "status": RunStatus.RUNNING,
        "error": None,
        "updated_at": now,
        "advanced_by": None,
        "paused": False,
    }
    await tx.runs.update(run.id, changes)
    await tx.tasks.add([NewTask(run.id, now, TaskKind.WAKE)])


async def retry(rt: Runtime, run_id: str, by: str | None = None) -> RunRecord:
    """Retry a failed run from its last committed step (see :func:`retried_journal`),
    or a held run where it was.

    Raises:
        RunNotFoundError: No run has that id.
        RunStateError: The run has neither failed nor is held.
    """
    now = rt.now()
    async with rt.store.transaction() as tx:
        run = await _locked(tx, run_id)
        if run.status not in RETRYABLE:
            raise RunStateError(
                run_id, run.status, "retry", "only a failed run (or a held one) can be retried"
            )
        await _retry_in(rt, tx, run, now)
        await operators.record(rt, tx, run_id, "retry", by)
    rt.results.forget(run_id)
    rt.after_commit()
    run.status, run.error, run.updated_at, run.paused = RunStatus.RUNNING, None, now, False
    return run


async def _in_batches(
    rt: Runtime,
    statuses: Sequence[str],
    filters: Filters,
    act: Callable[[Tx, RunRecord, float], Awaitable[bool]],
) -> int:
    """Act on every run ``filters`` select among ``statuses``, ``BULK_BATCH`` a
    transaction, walking the runs by id (a run acted on is not met again, whether
    or not it still matches); the number acted on."""
    if filters.status is not None:
        statuses = [s for s in statuses if s == filters.status]
        if not statuses:
            return 0
    count, after = 0, None
    while True:
        now = rt.now()
        async with rt.store.transaction() as tx:
            batch = await tx.runs.find(
                RunSelection(
                    statuses=statuses,
                    workflow=filters.workflow,
                    subject=filters.subject,
                    created_before=filters.created_before,
                    after=after,
                    limit=BULK_BATCH,
                )
            )
            done = [run for run in batch if await act(tx, run, now)]
        for run in done:
            rt.results.notify(run.id)
        if done:
            rt.after_commit()
        count += len(done)
        if len(batch) < BULK_BATCH:
            return count
        after = batch[-1].id


async def _cancel_one(rt: Runtime, tx: Tx, run: RunRecord, now: float) -> bool:
    if run.lease_owner is None:
        return await cancel(rt, tx, run, now)
    await tx.tasks.add([NewTask(run.id, now, TaskKind.CANCEL)])  # (its worker sees it next)
    return True


async def cancel_runs(rt: Runtime, filters: Filters, by: str | None = None) -> int:
    """Cancel every active run ``filters`` select; the number cancelled."""

    async def act(tx: Tx, run: RunRecord, now: float) -> bool:
        if not await _cancel_one(rt, tx, run, now):
            return False
        await operators.record(rt, tx, run.id, "cancel", by)
        return True

    return await _in_batches(rt, sorted(ACTIVE), filters, act)


async def retry_runs(rt: Runtime, filters: Filters, by: str | None = None) -> int:
    """Retry every failed or held run ``filters`` select; the number retried."""

    async def act(tx: Tx, run: RunRecord, now: float) -> bool:
        await _retry_in(rt, tx, run, now)
        await operators.record(rt, tx, run.id, "retry", by)
        rt.results.forget(run.id)
        return True

    return await _in_batches(rt, list(RETRYABLE), filters, act)


async def retry_held(rt: Runtime) -> int:
    """Retry the held runs this process's registry has the code of (their workflow
    at their version), in batches; the number retried.

    A worker that opens does this: a deploy with fixed code frees the runs the old
    code held, and a run whose code still diverges is held again by its advance.
    """

    async def act(tx: Tx, run: RunRecord, now: float) -> bool:
        if rt.registry.get(run.workflow, run.version) is None:
            return False  # (a worker that has its version will retry it)
        await _retry_in(rt, tx, run, now)
        rt.results.forget(run.id)
        return True

    count = 0
    for name in rt.registry.names(internal=True):
        count += await _in_batches(rt, [HELD], Filters(workflow=name), act)
    return count
