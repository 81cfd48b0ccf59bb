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
from parkway.core import cancel_on
from parkway.core.handover import handing_over
from parkway.core.runtime import Runtime
from parkway.errors import (
    NonDeterminismError,
    ResultTimeoutError,
    RunCancelledError,
    RunNotFoundError,
    WorkflowFailedError,
)
from parkway.models import ErrorInfo, HistoryEntry, RunInfo, RunStatus, _dt, rebuild_error
from parkway.store.base import ENDED, NewTask, RunRecord, Tx


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
        id=run_id, workflow=workflow, version=version,
        status=RunStatus.PENDING.value, input=data, output=None, error=None,
        domain=domain or "default", subject=subject, parent_id=parent_id,
        trigger=trigger, generation=0, created_at=now, updated_at=now,
    )  # fmt: skip


async def insert_run(
    rt: Runtime, tx: Tx, workflow: str, version: str, run_id: str, data: bytes, **fields: Any
) -> None:
    """Insert a new run and its start task (``fields``: as :func:`new_run` takes)."""
    record = new_run(rt, workflow, version, run_id, data, **fields)
    await tx.insert_run(record)
    payload = rt.telemetry.task_payload()  # (the caller's trace context, when traced)
    await tx.add_tasks([NewTask(run_id, record.created_at, "start", payload=payload)])
    await cancel_on.register(rt.registry, tx, record, record.created_at)


async def start(
    rt: Runtime,
    workflow: str,
    version: str,
    run_id: str,
    encode: Callable[[], bytes],
    *,
    subject: str | None,
    domain: str | None,
) -> None:
    """The run, with ``encode()`` as its input, and its start task (unless the id exists),
    handed to this process's worker when it has a place."""
    record = new_run(rt, workflow, version, run_id, encode(), domain=domain, subject=subject)
    wf = rt.registry.get(workflow, version)
    with handing_over(rt) as hand_over:
        async with rt.store.transaction() as tx:
            traced = rt.telemetry.task_payload()  # (the caller's trace context, if traced)
            if wf is not None and wf.cancel_on:
                # Its cancel conditions go with a run inserted now, not with one that was
                # there: the one-statement start_run would not say which it was.
                if await tx.get_run(run_id) is None:
                    await tx.start_run(record, record.created_at, task_payload=traced)
                    await cancel_on.register(rt.registry, tx, record, record.created_at)
            else:
                await tx.start_run(record, record.created_at, task_payload=traced)
            await hand_over(tx, run_id)
    rt.after_commit()


async def record(rt: Runtime, run_id: str) -> RunRecord:
    """The run's row.

    Raises:
        RunNotFoundError: No run has that id.
    """
    async with rt.store.transaction(readonly=True) as tx:
        run = await tx.get_run(run_id)
    if run is None:
        raise RunNotFoundError(run_id)
    return run


async def history(rt: Runtime, run_id: str) -> list[HistoryEntry]:
    """The run's journal (current generation), in order."""
    async with rt.store.transaction(readonly=True) as tx:
        if await tx.get_run(run_id) is None:
            raise RunNotFoundError(run_id)
        entries = await tx.journal(run_id)
    out = []
    for e in entries:
        value = _json.loads(e.value)
        error = None
        if e.state == "error":
            error, value = ErrorInfo.from_dict(value), None
        elif e.state == "pending":
            value = None  # what a pending wait stores is its own bookkeeping
        out.append(HistoryEntry(e.pos, e.kind, e.name, e.state, value, error, _dt(e.at)))
    return out


async def describe(rt: Runtime, run_id: str) -> RunInfo:
    """The run's :class:`RunInfo`, its values with it.

    Raises:
        RunNotFoundError: No run has that id.
    """
    async with rt.store.transaction(readonly=True) as tx:
        run = await tx.get_run(run_id)
        if run is None:
            raise RunNotFoundError(run_id)
        values = await tx.run_values([run_id])
    return info(run, values.get(run_id))


async def listing(rt: Runtime, **filters: Any) -> list[RunInfo]:
    """Runs as ``Tx.list_runs`` finds them, each with its values."""
    async with rt.store.transaction(readonly=True) as tx:
        records = await tx.list_runs(parent_id=None, **filters)
        values = await tx.run_values([r.id for r in records]) if records else {}
    return [info(r, values.get(r.id)) for r in records]


def info(run: RunRecord, values: dict[str, bytes] | None = None) -> RunInfo:
    """The public view of a run's row (and its values)."""
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
    )


async def wait_result(rt: Runtime, run_id: str, timeout: float | None) -> Any:
    """The run's output once it has ended (see ``RunHandle.result``)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    # In-process completions are announced; another process's are polled.
    poll = 0.002 if "shared" in rt.store.capabilities else 0.05
    final = rt.results.final(run_id)
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
        wait = poll
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ResultTimeoutError(run_id, timeout or 0.0)
            wait = min(wait, remaining)
        if await rt.results.wait(run_id, wait):
            final = rt.results.final(run_id)
        poll = min(poll * 2, 0.05)


_RUNNING = object()


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
