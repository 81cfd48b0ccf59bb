"""Runs: creating them, reading them, cancelling them, and awaiting their ends.

Every way a run comes to exist (``engine.start``, an event's subscriber, a
message's starter, ``signal_with_start``, an accumulator) goes through
:func:`insert_run`, inside the transaction of its cause; ``engine.start`` goes
through :func:`start`, which is the same row with the store's one-operation
insert (idempotent by id).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from parkway import _json
from parkway.core import admission, cancel_on
from parkway.core.conflicts import again_on_conflict
from parkway.core.deadlines import add_deadline
from parkway.core.handover import handing_over
from parkway.core.operators import OPERATOR
from parkway.core.polling import Polls
from parkway.core.runtime import Runtime
from parkway.core.waiting import waiting
from parkway.errors import (
    InvalidArgumentError,
    NonDeterminismError,
    ResultTimeoutError,
    RunCancelledError,
    RunNotFoundError,
    WorkflowFailedError,
)
from parkway.models import ErrorInfo, HistoryEntry, RunInfo, RunStatus, _dt, rebuild_error
from parkway.registry import LATEST, WorkflowDef
from parkway.replay.state import wait_named
from parkway.store.base import ENDED, AttemptRecord, NewTask, RunRecord, Tx
from parkway.store.fleet import OperatorRecord
from parkway.store.runs import RunFilter
from parkway.store.vocabulary import EntryKind, EntryState, TaskKind


def new_run(
    rt: Runtime,
    workflow: str,
    version: str,
    run_id: str,
    data: bytes,
    *,
    domain: str | None = None,
    subject: str | None = None,
    parent_id: str | None = None,
    trigger: bytes | None = None,
) -> RunRecord:
    """The row of a new pending run, created now."""
    now = rt.now()
    return RunRecord(
        id=run_id,
        workflow=workflow,
        version=version,
        status=RunStatus.PENDING,
        input=data,
        output=None,
        error=None,
        domain=domain or "default",
        subject=subject,
        parent_id=parent_id,
        trigger=trigger,
        generation=0,
        created_at=now,
        updated_at=now,
    )


async def insert_run(
    rt: Runtime,
    tx: Tx,
    workflow: str,
    version: str,
    run_id: str,
    data: bytes,
    *,
    priority: int | None = None,
    **fields: Any,
) -> bool:
    """Insert a new run and its start task (``fields``: as :func:`new_run` takes).

    A run of a workflow under an admission limit is admitted first
    (:func:`parkway.core.admission.admit`): it may be queued (no start task yet) or
    start later (its rate window). ``priority``: its place among queued runs
    (``None``: the workflow's ``priority`` callable's, else 0). Returns whether
    it can start now (``False``: queued, or waiting for its rate window), so a
    caller hands it to this process's worker only then.

    Raises:
        ConcurrencyLimitError: Its key is full and the limit skips (nothing written).
    """
    record = new_run(rt, workflow, version, run_id, data, **fields)
    due: float | None = record.created_at
    wf = rt.registry.get(workflow, version)
    if wf is not None and admission.limited(wf):
        if priority is None:
            priority = admission.priority_of(wf, _json.loads(data))
        due = await admission.admit(tx, wf, record, priority)
    await tx.runs.insert(record)
    if due is not None:
        payload = rt.telemetry.task_payload()  # (the caller's trace context, when traced)
        await tx.tasks.add([NewTask(run_id, due, TaskKind.START, payload=payload)])
    if wf is not None and wf.timeout is not None:
        await add_deadline(tx, record, wf.timeout)
    await cancel_on.register(rt.registry, tx, record, record.created_at)
    return due is not None and due <= record.created_at


async def start(
    rt: Runtime,
    workflow: str,
    version: str,
    run_id: str,
    encode: Callable[[], bytes],
    *,
    subject: str | None,
    domain: str | None,
    priority: int = 0,
    timeout: float | None = None,
) -> None:
    """The run, with ``encode()`` as its input, and its start task (unless the id exists),
    handed to this process's worker when it has a place; ``timeout``: the run's
    deadline task with it (see :mod:`parkway.core.deadlines`).

    A workflow under an admission limit admits the run first (see
    :func:`insert_run`; ``priority`` orders its queue).

    Raises:
        ConcurrencyLimitError: Its key is full and the limit skips (nothing written).
    """
    record = new_run(rt, workflow, version, run_id, encode(), domain=domain, subject=subject)
    wf = rt.registry.get(workflow, version)
    if wf is not None and admission.limited(wf):
        admission.keys(
            wf, _json.loads(record.input)
        )  # (a missing key field: raised here, at the edge)
    if not await again_on_conflict(lambda: _start(rt, record, wf, priority, timeout)):
        rt.after_commit()


async def _start(
    rt: Runtime, record: RunRecord, wf: WorkflowDef | None, priority: int, timeout: float | None
) -> bool:
    """One attempt of the start; whether its only task went to this process's worker
    with the run (then no claim is needed for it)."""
    run_id = record.id
    limited = wf is not None and admission.limited(wf)
    with handing_over(rt) as hand_over:
        async with rt.store.transaction() as tx:
            traced = rt.telemetry.task_payload()  # (the caller's trace context, if traced)
            hand = True
            if wf is not None and limited:
                # Admitted in this transaction, after the limit's key row is locked
                # (not the one-statement start_run, nor PostgreSQL's fused path: the
                # limit decides whether the run gets a start task at all).
                hand = False  # (an existing run: left to the claims, queued or not)
                if await tx.runs.get(run_id) is None:
                    due = await admission.admit(tx, wf, record, priority)
                    await tx.runs.insert(record)
                    await cancel_on.register(rt.registry, tx, record, record.created_at)
                    await add_deadline(tx, record, timeout)
                    # (queued, due None: a slot's release gives it its start task)
                    if due is not None:
                        await tx.tasks.add([NewTask(run_id, due, TaskKind.START, payload=traced)])
                    # (later, at its rate window: a claim takes it then)
                    hand = due is not None and due <= record.created_at
            elif (wf is not None and wf.cancel_on) or timeout is not None:
                # Its cancel conditions and deadline go with a run inserted now, not with
                # one that was there: the one-statement start_run would not say which.
                if await tx.runs.get(run_id) is None:
                    await tx.runs.start(record, record.created_at, task_payload=traced)
                    await cancel_on.register(rt.registry, tx, record, record.created_at)
                    await add_deadline(tx, record, timeout)
            else:
                await tx.runs.start(record, record.created_at, task_payload=traced)
            if hand:
                await hand_over(tx, run_id)
    # (A limited start may have given another run a task: its admission's cancel_oldest.)
    return hand_over.handed and not limited


async def record(rt: Runtime, run_id: str) -> RunRecord:
    """The run's row.

    Raises:
        RunNotFoundError: No run has that id.
    """
    async with rt.store.transaction(readonly=True) as tx:
        run = await tx.runs.get(run_id)
    if run is None:
        raise RunNotFoundError(run_id)
    return run


async def history(rt: Runtime, run_id: str) -> list[HistoryEntry]:
    """The run's journal (current generation), in order; each failed attempt of a
    step (kind ``attempt``) just before the step's own entry."""
    async with rt.store.transaction(readonly=True) as tx:
        if await tx.runs.get(run_id) is None:
            raise RunNotFoundError(run_id)
        entries = await tx.journal.read(run_id)
        attempts = await tx.journal.attempts(run_id)
        actions = await tx.operators.list(run_id)
    by_pos: dict[int, list[AttemptRecord]] = {}
    for a in attempts:
        by_pos.setdefault(a.pos, []).append(a)
    out = []
    for e in entries:
        for a in by_pos.pop(e.pos, ()):
            out.append(_attempt_entry(a))
        value = _json.loads(e.value)
        error, attempt, deadline = None, None, None
        if e.state == EntryState.ERROR:
            error, value = ErrorInfo.from_dict(value), None
        elif e.state == EntryState.PENDING:
            # What a pending operation stores is its own bookkeeping; a step's is
            # the attempt that failed and its error (it waits to be tried again).
            # (One without an error is an attempt under way that recorded a heartbeat.)
            if (
                e.kind in (EntryKind.STEP, EntryKind.COMPENSATION)
                and isinstance(value, dict)
                and "error" in value
            ):
                attempt, error = value["attempt"], ErrorInfo.from_dict(value.get("error"))
            value = None
            deadline = None if e.deadline is None else _dt(e.deadline)
        if e.kind == EntryKind.VALUE and e.name == "callback" and isinstance(value, dict):
            # The token is a capability: whoever reads a run's history may not
            # complete its callbacks.
            value = {key: item for key, item in value.items() if key != "token"}
        at = _dt(e.at)
        kind, name = wait_named(e.kind, e.name)
        out.append(HistoryEntry(e.pos, kind, name, e.state, value, error, at, deadline, attempt))
    for pos in sorted(by_pos):  # (a step whose entry is not written yet)
        out.extend(_attempt_entry(a) for a in by_pos[pos])
    if actions:
        out = _with_operators(out, actions)
    return out


def _attempt_entry(a: AttemptRecord) -> HistoryEntry:
    return HistoryEntry(
        a.pos,
        "attempt",
        a.step,
        "error",
        None,
        ErrorInfo.from_dict(_json.loads(a.error)),
        _dt(a.ended_at),
        attempt=a.attempt,
        started_at=_dt(a.started_at),
        ended_at=_dt(a.ended_at),
    )


def _with_operators(
    journal: list[HistoryEntry], actions: list[OperatorRecord]
) -> list[HistoryEntry]:
    """The journal's entries with the operators' among them, each after the entries
    journaled at or before its time (position -1: no operation of the run's own)."""
    out: list[HistoryEntry] = []
    pending = sorted(actions, key=lambda a: a.at)  # (stable: recorded order within a time)
    i = 0
    for entry in journal:
        while i < len(pending) and _dt(pending[i].at) < entry.at:
            out.append(_operator_entry(pending[i]))
            i += 1
        out.append(entry)
    out += [_operator_entry(action) for action in pending[i:]]
    return out


def _operator_entry(action: OperatorRecord) -> HistoryEntry:
    at = _dt(action.at)
    result = {"action": action.action, "by": action.by, "at": at.isoformat()}
    return HistoryEntry(-1, OPERATOR, action.action, "done", result, None, at)


async def describe(rt: Runtime, run_id: str) -> RunInfo:
    """The run's :class:`RunInfo`, its values with it.

    Raises:
        RunNotFoundError: No run has that id.
    """
    async with rt.store.transaction(readonly=True) as tx:
        run = await tx.runs.get(run_id)
        if run is None:
            raise RunNotFoundError(run_id)
        values = await tx.values.of_runs([run_id])
        journal = await tx.journal.read(run_id) if run.status in _MAY_WAIT else []
    return info(run, values.get(run_id), waiting(journal))


async def listing(rt: Runtime, *, parent_id: str | None = None, **filters: Any) -> list[RunInfo]:
    """Runs as ``tx.runs.list`` finds them, each with its values.

    Raises:
        InvalidArgumentError: ``before`` (the keyset cursor) names no run.
    """
    async with rt.store.transaction(readonly=True) as tx:
        before = filters.get("before")
        if before is not None and await tx.runs.get(before) is None:
            raise InvalidArgumentError(
                f"before: no run with id {before!r} to list the runs after; pass the id "
                "of the last run of the previous page",
                field="before",
            )
        records = await tx.runs.list(RunFilter(parent_id=parent_id, **filters))
        values = await tx.values.of_runs([r.id for r in records]) if records else {}
        waits = {
            r.id: waiting(await tx.journal.read(r.id)) for r in records if r.status in _MAY_WAIT
        }
    return [info(r, values.get(r.id), waits.get(r.id)) for r in records]


async def counts(rt: Runtime) -> dict[str, dict[str, int]]:
    """``{workflow: {status: runs}}``, as ``tx.runs.counts`` counts them."""
    async with rt.store.transaction(readonly=True) as tx:
        rows = await tx.runs.counts()
    out: dict[str, dict[str, int]] = {}
    for workflow, status, n in rows:
        # (A plain str key: a store may hand back the RunStatus member it was given,
        # and a JSON encoder takes only str keys.)
        out.setdefault(workflow, {})[str(status)] = n
    return out


# The statuses of a run that may wait for something (a retry's: running).
_MAY_WAIT = frozenset({RunStatus.PARKED, RunStatus.RUNNING})


def info(
    run: RunRecord,
    values: dict[str, bytes] | None = None,
    waits: list[dict[str, Any]] | None = None,
) -> RunInfo:
    """The public view of a run's row (its values, what it waits for)."""
    return RunInfo(
        id=run.id,
        workflow=run.workflow,
        version=run.version,
        status=RunStatus(run.status),
        input=_json.loads(run.input),
        output=_json.loads(run.output),
        error=ErrorInfo.from_dict(_json.loads(run.error)),
        domain=run.domain,
        subject=run.subject,
        parent_id=run.parent_id,
        created_at=_dt(run.created_at),
        updated_at=_dt(run.updated_at),
        values={k: _json.loads(v) for k, v in (values or {}).items()},
        # (A run that ended while paused, its advance in flight then, is not paused.)
        paused=bool(run.paused) and run.status not in ENDED,
        waiting=waits or [],
        forked_from=None
        if run.forked_from is None
        else {
            "run_id": run.forked_from,
            "at": run.forked_at,
        },
    )


async def wait_result(rt: Runtime, run_id: str, timeout: float | None) -> Any:
    """The run's output once it has ended (see ``RunHandle.result``)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    # In-process completions are announced; another process's are polled.
    polls = Polls(rt.store)
    # A row kept from a run that ended here is taken without a read only while
    # retention cannot have deleted that run yet: once it may have, its id may
    # belong to a new run (started in any process), so the run is read. A row
    # announced while this caller waits is the current one.
    final = _kept(rt, run_id)
    while True:
        worker = rt.worker
        # A run this process's worker is advancing announces its end here: no
        # read while it is (on PostgreSQL a round trip, on the cores and the
        # server the advance itself needs). Once the advance is over (the run
        # parked, say, or its lease was lost), the poll reads again.
        if final is not None or worker is None or run_id not in worker.inflight:
            run = final if final is not None else await record(rt, run_id)
            final = None
            outcome = _ended(run)
            if outcome is not _RUNNING:
                return outcome
        remaining = None
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ResultTimeoutError(run_id, timeout or 0.0)
        if await rt.results.wait(run_id, polls.next(remaining)):
            final = rt.results.final(run_id)


_RUNNING = object()


def _kept(rt: Runtime, run_id: str) -> RunRecord | None:
    """The row kept of ``run_id``'s end here, while retention cannot have deleted
    that run (this engine's retention for its workflow; ``None``: kept for ever)."""
    final = rt.results.final(run_id)
    if final is None:
        return None
    wf = rt.registry.get(final.workflow, LATEST)
    kept_for = wf.retention if wf is not None and wf.own_retention else rt.settings.retention
    if kept_for is not None and rt.now() - final.updated_at >= kept_for:
        return None
    return final


def _ended(run: RunRecord) -> Any:
    """The run's output, or its failure raised; ``_RUNNING`` if it goes on."""
    if run.status == RunStatus.COMPLETED:
        return _json.loads(run.output)
    if run.status == RunStatus.FAILED:
        raise WorkflowFailedError(run.id, ErrorInfo.from_dict(_json.loads(run.error)))
    if run.status == RunStatus.CANCELLED:
        raise RunCancelledError(run.id)
    if run.error is not None:
        error = _json.loads(run.error)
        if error.get("type") == "NonDeterminismError":
            held = rebuild_error(error)
            assert isinstance(held, NonDeterminismError)
            raise held
    return _RUNNING
