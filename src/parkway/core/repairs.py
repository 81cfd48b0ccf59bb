"""Repairs a run lives through a deploy: checking code against stored runs, exporting a
run to check it in a test, and forking a run from a prefix of its journal.

A check replays a run's journal against the registered code with the pure replay
machine (:mod:`parkway.replay.machine`) and stops at the first thing the code asks
for (a step to run, a read, a commit): the journal is replayed by then, so nothing
runs and nothing is written. A divergence is what would hold the run
(:class:`parkway.errors.NonDeterminismError`).

A fork is a new run whose journal starts as a copy of the first entries of its
source's: the worker replays them (no step runs again) and goes on live from
there, with the code registered now.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

from parkway import _json
from parkway.core import controls, operators
from parkway.core.publishing import prepare
from parkway.core.runs import insert_run
from parkway.core.runtime import Runtime
from parkway.errors import (
    InvalidArgumentError,
    NonDeterminismError,
    RunNotFoundError,
)
from parkway.models import ReplayDivergence, ReplayReport, RunStatus
from parkway.registry import LATEST, WorkflowDef
from parkway.replay.machine import Machine
from parkway.store.base import (
    JournalEntry,
    RunRecord,
    SignalRecord,
    TaskRecord,
    Tx,
    UpdateRecord,
)
from parkway.store.runs import RunSelection
from parkway.store.vocabulary import EntryState

log = logging.getLogger("parkway.runs")

# Runs a check reads in one (read-only) transaction, and a bulk fork forks in one.
BATCH = 500
# The statuses whose runs a check replays when not given ids: the runs a deploy must
# not break (a pending run has journaled nothing yet).
CHECKED = (RunStatus.RUNNING, RunStatus.PARKED, RunStatus.HELD)


# -- checking code against stored runs --------------------------------------------------------


def divergence(
    rt: Runtime, wf: WorkflowDef, run: RunRecord, journal: list[JournalEntry]
) -> NonDeterminismError | None:
    """Where ``wf``'s code diverges from ``run``'s journal, if it does (no I/O)."""
    machine = Machine(
        wf,
        run,
        journal,
        [],
        registry=rt.registry,
        clock=rt.now,
        prepare_event=functools.partial(prepare, rt),
        event_retention=rt.settings.event_retention,
        signals=[],
        history_threshold=rt.settings.history_threshold,
    )
    try:
        # start() replays every journaled operation it meets without asking for
        # anything; it stops where the code needs something live (past the journal),
        # parks, ends, or is held.
        machine.start()
        return machine.held
    finally:
        machine.close()


def code_for(rt: Runtime, run: RunRecord) -> WorkflowDef | None:
    """The registered code a run replays with (``None``: this registry has none)."""
    return rt.registry.get(run.workflow, run.version)


async def check_replay(
    rt: Runtime,
    *,
    workflow: str | None = None,
    run_ids: Sequence[str] | None = None,
    limit: int | None = None,
) -> ReplayReport:
    """Replay stored runs against the registered code, read-only (see the module).

    Without ``run_ids``: the running, parked and held runs (of ``workflow``, if
    given) whose workflow and version this registry has, up to ``limit``. With
    ``run_ids``: those runs, whatever their status.

    Raises:
        RunNotFoundError: A run of ``run_ids`` does not exist.
    """
    checked, diverged = 0, []

    def check(run: RunRecord, journal: list[JournalEntry]) -> None:
        nonlocal checked
        wf = code_for(rt, run)
        if wf is None:
            return
        checked += 1
        held = divergence(rt, wf, run, journal)
        if held is not None:
            diverged.append(
                ReplayDivergence(
                    run.id, run.workflow, run.version, held.position, held.expected, held.got
                )
            )

    if run_ids is not None:
        wanted = list(run_ids)[:limit] if limit is not None else list(run_ids)
        for start in range(0, len(wanted), BATCH):
            async with rt.store.transaction(readonly=True) as tx:
                for run_id in wanted[start : start + BATCH]:
                    run = await tx.runs.get(run_id)
                    if run is None:
                        raise RunNotFoundError(run_id)
                    check(run, await tx.journal.read(run_id))
        return ReplayReport(checked, diverged)
    after: str | None = None
    while limit is None or checked < limit:
        async with rt.store.transaction(readonly=True) as tx:
            batch = await tx.runs.find(
                RunSelection(statuses=CHECKED, workflow=workflow, after=after, limit=BATCH)
            )
            for run in batch:
                if limit is not None and checked >= limit:
                    break
                if code_for(rt, run) is not None:
                    check(run, await tx.journal.read(run.id))
        if len(batch) < BATCH:
            break
        after = batch[-1].id
    return ReplayReport(checked, diverged)


# -- exporting a run -----------------------------------------------------------------------------

EXPORT_FORMAT = "parkway.run/1"


def _decoded(data: bytes | None) -> Any:
    return _json.loads(data)


async def export_run(rt: Runtime, run_id: str) -> dict[str, Any]:
    """The run as JSON-able data: its row, its journal, and the inputs waiting for it
    (its mailbox's signals, its tasks due now, its updates not handled yet).

    Raises:
        RunNotFoundError: No run has that id.
    """
    async with rt.store.transaction(readonly=True) as tx:
        run = await tx.runs.get(run_id)
        if run is None:
            raise RunNotFoundError(run_id)
        journal = await tx.journal.read(run_id)
        signals = await tx.signals.list(run_id)
        tasks = await tx.tasks.due(run_id, rt.now())
        updates = await tx.updates.pending(run_id)
    return {
        "format": EXPORT_FORMAT,
        "run": {
            "id": run.id,
            "workflow": run.workflow,
            "version": run.version,
            "status": run.status,
            "input": _decoded(run.input),
            "output": _decoded(run.output),
            "error": _decoded(run.error),
            "domain": run.domain,
            "subject": run.subject,
            "parent_id": run.parent_id,
            "trigger": _decoded(run.trigger),
            "generation": run.generation,
            "created_at": run.created_at,
            "updated_at": run.updated_at,
        },
        "journal": [
            {
                "pos": e.pos,
                "kind": e.kind,
                "name": e.name,
                "state": e.state,
                "value": _decoded(e.value),
                "deadline": e.deadline,
                "at": e.at,
                "branch": e.branch,
                "seq": e.seq,
            }
            for e in journal
        ],
        "inputs": {
            "signals": [_signal(s) for s in signals],
            "tasks": [_task(t) for t in tasks],
            "updates": [_update(u) for u in updates],
        },
    }


def _signal(signal: SignalRecord) -> dict[str, Any]:
    return {"name": signal.name, "payload": _decoded(signal.payload), "at": signal.at}


def _task(task: TaskRecord) -> dict[str, Any]:
    try:
        payload = _json.loads(task.payload)
    except ValueError:  # (not JSON: a payload only the engine reads)
        payload = None
    return {"kind": task.kind, "pos": task.pos, "due_at": task.due_at, "payload": payload}


def _update(update: UpdateRecord) -> dict[str, Any]:
    return {"id": update.id, "name": update.name, "payload": _decoded(update.payload)}


def imported(exported: Any) -> tuple[RunRecord, list[JournalEntry]]:
    """The run and journal of :func:`export_run`'s output.

    Raises:
        InvalidArgumentError: ``exported`` is not such output.
    """
    try:
        if exported.get("format") != EXPORT_FORMAT:
            raise ValueError(f"format is {exported.get('format')!r}, not {EXPORT_FORMAT!r}")
        r = exported["run"]
        run = RunRecord(
            id=r["id"],
            workflow=r["workflow"],
            version=r["version"],
            status=r["status"],
            input=_json.dumps(r["input"]),
            output=_json.dumps(r["output"]),
            error=None if r["error"] is None else _json.dumps(r["error"]),
            domain=r["domain"],
            subject=r["subject"],
            parent_id=r["parent_id"],
            trigger=None if r["trigger"] is None else _json.dumps(r["trigger"]),
            generation=int(r["generation"]),
            created_at=float(r["created_at"]),
            updated_at=float(r["updated_at"]),
        )
        journal = [
            JournalEntry(
                pos=int(e["pos"]),
                kind=e["kind"],
                name=e["name"],
                state=e["state"],
                value=None if e["value"] is None else _json.dumps(e["value"]),
                deadline=e["deadline"],
                at=float(e["at"]),
                branch=e["branch"],
                seq=e["seq"],
            )
            for e in exported["journal"]
        ]
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise InvalidArgumentError(
            f"exported: not a run as engine.export_run exports it ({exc})", field="exported"
        ) from None
    return run, journal


# -- forking -------------------------------------------------------------------------------------


def default_at(outline: Sequence[tuple[int, str]]) -> int:
    """How many entries a fork copies when not told: those before the first failed one
    (a step or wait that raised), else all of them (``outline``: ``(pos, state)``
    pairs in position order)."""
    for index, (_, state) in enumerate(outline):
        if state == EntryState.ERROR:
            return index
    return len(outline)


def check_at(at: Any, entries: int) -> int:
    """``at`` as a fork takes it: a whole number from 0 to the journal's length."""
    if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at <= entries:
        raise InvalidArgumentError(
            f"at must be a whole number from 0 to {entries} (the source's journal entries), "
            f"got {at!r}",
            field="at",
        )
    return at


async def fork(
    rt: Runtime,
    source_id: str,
    run_id: str,
    *,
    at: int | None,
    encode: Callable[[WorkflowDef | None], bytes] | None,
    by: str | None = None,
) -> RunRecord:
    """Fork ``source_id`` into the new run ``run_id`` (see the module); its row.

    ``encode``: the fork's input, given the workflow it runs (``None``: the source's).
    Forking again with the same ``run_id`` from the same source changes nothing.

    Raises:
        RunNotFoundError: The source does not exist.
        InvalidArgumentError: ``at`` is out of range, or ``run_id`` is another run's.
        InvalidInputError: The input was rejected.
    """
    async with rt.store.transaction() as tx:
        record = await _fork_in(rt, tx, source_id, run_id, at=at, encode=encode)
        # (Who forked it is the source's history: the fork names its source itself.)
        await operators.record(rt, tx, source_id, "fork", by)
    rt.after_commit()
    if log.isEnabledFor(logging.INFO):
        log.info(
            "run %s forked from run %s at %s",
            record.id,
            source_id,
            record.forked_at,
            extra={"run_id": record.id, "source": source_id},
        )
    return record


async def _fork_in(
    rt: Runtime,
    tx: Tx,
    source_id: str,
    run_id: str,
    *,
    at: int | None,
    encode: Callable[[WorkflowDef | None], bytes] | None,
) -> RunRecord:
    source = await tx.runs.get(source_id)
    if source is None:
        raise RunNotFoundError(source_id)
    # Only positions and states are read: the entries are copied in the store, their
    # values never decoded (a journal of thousands of entries forks in one statement).
    outline = await tx.journal.outline(source_id)
    at = default_at(outline) if at is None else check_at(at, len(outline))
    existing = await tx.runs.get(run_id)
    if existing is not None:
        if existing.forked_from == source_id:
            return existing  # (the same fork asked for again: a client's retry)
        raise InvalidArgumentError(
            f"id: a run with id {run_id!r} exists already; give a new id for the fork",
            field="id",
        )
    # The code registered now (a client that does not register it: the source's version).
    wf = rt.registry.get(source.workflow, LATEST)
    version = source.version if wf is None else wf.version
    data = source.input if encode is None else encode(wf)
    await insert_run(
        rt,
        tx,
        source.workflow,
        version,
        run_id,
        data or b"null",
        domain=source.domain,
        subject=source.subject,
        trigger=source.trigger,
    )
    # The first ``at`` entries, but the waits still pending there: the fork waits again,
    # live (its own subscriptions and timers), where the source was waiting.
    if at:
        await tx.journal.copy(source_id, run_id, None if at == len(outline) else outline[at][0])
    await tx.runs.update(run_id, {"forked_from": source_id, "forked_at": at})
    record = await tx.runs.get(run_id)
    assert record is not None  # (inserted above, in this transaction)
    return record


async def fork_runs(
    rt: Runtime,
    filters: controls.Filters,
    new_id: Callable[[], str],
    *,
    by: str | None = None,
) -> list[str]:
    """Fork every run ``filters`` select (by default, each failed run) at its default
    point, ``BATCH`` forks a transaction; the new runs' ids.

    Raises:
        InvalidArgumentError: ``filters.status`` is ``pending`` (such a run has
            journaled nothing to fork from).
    """
    if filters.status == RunStatus.PENDING:
        raise InvalidArgumentError(
            "status: a pending run has journaled nothing to fork from", field="status"
        )
    statuses = [filters.status or RunStatus.FAILED]
    forked: list[str] = []
    after: str | None = None
    while True:
        async with rt.store.transaction() as tx:
            batch = await tx.runs.find(
                RunSelection(
                    statuses=statuses,
                    workflow=filters.workflow,
                    subject=filters.subject,
                    created_before=filters.created_before,
                    after=after,
                    limit=BATCH,
                )
            )
            for run in batch:
                fork_id = new_id()
                await _fork_in(rt, tx, run.id, fork_id, at=None, encode=None)
                forked.append(fork_id)
        if batch:
            rt.after_commit()
        if len(batch) < BATCH:
            break
        after = batch[-1].id
    if forked:
        log.info(
            "forked %d run(s)",
            len(forked),
            extra={"action": "fork", "by": by, "runs": len(forked)},
        )
    return forked
