"""Admission in the store: a workflow's ``Concurrency`` and ``RateLimit``, and
the priority order of its queued runs (see docs/guides/admission.md).

Everything happens in the transaction that starts or ends a run, so the limits
hold across every process on the store without a coordinator:

- :func:`admit` (a new run of a limited workflow): takes a slot of its key, or
  queues the run (``pending``, no task: nothing claims it), or refuses it
  (``"skip"``), or cancels the key's oldest run to make room
  (``"cancel_oldest"``); then gives it its start time under the rate limit.
- :func:`release` (from ``transitions.finish``, as the run ends: completed,
  failed, cancelled): frees its slot, or hands it on to the key's next queued
  run (highest priority, then first arrived: an index lookup) with its start task.
- :func:`hold` (from the worker): a run that is not admitted yet but was given a
  task anyway (a signal, an update) is put back, its tasks deferred until it is.

A key's slot row (``tx.admission.slot``) is locked first by each of these, so one
key's changes are serialised while other keys go on. ``continue_as_new`` keeps
the run's slot: it is the same run, still active.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from parkway import _json
from parkway.admission import Concurrency, RateLimit, check_priority, key_of
from parkway.errors import ConcurrencyLimitError, InvalidInputError
from parkway.models import RunStatus
from parkway.registry import WorkflowDef
from parkway.store.base import ENDED, NewTask, RunRecord, TaskRecord, Tx
from parkway.store.records import FlowSlot
from parkway.store.vocabulary import TaskKind

START = TaskKind.START


def limited(wf: WorkflowDef | None) -> bool:
    """Whether runs of ``wf`` are under a concurrency or rate limit."""
    return wf is not None and (wf.concurrency is not None or wf.rate_limit is not None)


def keys(wf: WorkflowDef, value: Any) -> tuple[str | None, str | None]:
    """The run's concurrency and rate-limit key values (``None``: no such limit).

    Raises:
        InvalidInputError: The input lacks a key field (the error names it).
    """
    conc: Concurrency | None = wf.concurrency
    rate: RateLimit | None = wf.rate_limit
    return (
        None if conc is None else key_of(conc.key, value, wf.name),
        None if rate is None else key_of(rate.key, value, wf.name),
    )


def lock_order(wf: WorkflowDef | None, run: RunRecord) -> str:
    """Where the commit that ends ``run`` goes in a batch of commits (sorted by it).

    That commit locks its concurrency key's slot row (:func:`release`). Two batches
    that end runs of two keys in opposite orders would each hold one row and wait
    for the other's: a deadlock, whose victim may be a client's start of either
    key. Sorted by key, every batch takes the rows in one order. ``""`` (first):
    no slot to lock.
    """
    if wf is None or wf.concurrency is None:
        return ""
    try:
        key = key_of(wf.concurrency.key, _json.loads(run.input), wf.name)
    except Exception:  # (its start validated the key: a failure here only unorders it)
        return ""
    return f"{wf.name}\x00{key}"


def priority_of(wf: WorkflowDef, value: Any) -> int:
    """The priority of a run of ``wf`` started without one (by an event, a message):
    the workflow's ``priority`` callable's, else 0.

    Raises:
        InvalidInputError: The callable raised or returned no int (names ``priority``).
    """
    if wf.priority is None:
        return 0
    try:
        return check_priority(wf.priority(value))
    except Exception as exc:  # (a rejected input: an event start is left out)
        raise InvalidInputError(
            f"the priority callable failed: {exc}", workflow=wf.name, field="priority"
        ) from exc


async def admit(
    tx: Tx, wf: WorkflowDef, run: RunRecord, priority: int, *, queue_when_skipped: bool = False
) -> float | None:
    """Admit the new run ``run`` of ``wf`` (a limited workflow) in ``tx``: the due time
    of its start task, or ``None`` when it is queued (it gets no task until a slot
    frees). Call it before writing anything of the run.

    ``queue_when_skipped``: a ``"skip"`` limit queues instead (a run that a worker's
    commit starts, such as a child, cannot be refused after the fact).

    Raises:
        ConcurrencyLimitError: The key is full and the limit's ``when_full`` is
            ``"skip"``; nothing was written.
        InvalidInputError: The input lacks a key field.
    """
    now = run.created_at
    ckey, rkey = keys(wf, _json.loads(run.input))
    conc: Concurrency | None = wf.concurrency
    if conc is not None and ckey is not None:
        slot = await tx.admission.slot(wf.name, ckey)
        if slot.active >= conc.limit:
            mode = conc.when_full
            if mode == "skip" and not queue_when_skipped:
                raise ConcurrencyLimitError(wf.name, ckey, conc.limit)
            if mode == "cancel_oldest":
                await _make_room(tx, wf.name, ckey, slot, conc.limit, now)
            if slot.active >= conc.limit:  # queued ("cancel_oldest" found no run to cancel)
                await tx.admission.enter(run.id, wf.name, ckey, priority, queued=True)
                return None
        slot.active += 1
        slot.limit = conc.limit
        await tx.admission.put_slot(wf.name, ckey, slot)
        await tx.admission.enter(run.id, wf.name, ckey, priority, queued=False)
    rate: RateLimit | None = wf.rate_limit
    if rate is not None and rkey is not None:
        return await _rate_due(tx, wf.name, rkey, rate, now)
    return now


async def _make_room(
    tx: Tx, workflow: str, key: str, slot: FlowSlot, limit: int, now: float
) -> None:
    """``cancel_oldest``: cancel the key's oldest runs until a slot is free.

    The run loses its slot in this transaction and gets a cancel task, due now,
    as ``engine.cancel`` gives a run a worker is advancing: the next worker to
    take it cancels it (its children, its waits, its parent's wake-up:
    ``transitions.cancel``), at once if it is parked or pending, after the step
    in flight if one runs. Its slot is not handed on twice: its entry is gone,
    so its end frees nothing.
    """
    while slot.active >= limit:
        victim = await tx.admission.oldest(workflow, key)
        if victim is None:
            return
        await tx.admission.leave(victim)
        slot.active -= 1
        await tx.tasks.add([NewTask(victim, now, TaskKind.CANCEL)])


async def _rate_due(tx: Tx, workflow: str, key: str, rate: RateLimit, now: float) -> float:
    """The start time of the key's next run under ``rate``: no earlier than ``now``,
    nor than ``period`` after the start time given ``limit`` runs before it.

    The key keeps a ring of the last ``limit`` start times given (place
    ``started % limit``); start times only grow, so that place holds the one
    ``limit`` runs back, and no window of ``period`` holds more than ``limit``
    starts. One row read and two written, whatever the number of runs waiting.
    """
    slot = await tx.admission.slot(workflow, key)
    place = slot.started % rate.limit
    last = await tx.admission.rate_mark(workflow, key, place)
    due = now if last is None else max(now, last + rate.seconds)
    await tx.admission.put_rate_mark(workflow, key, place, due)
    slot.started += 1
    await tx.admission.put_slot(workflow, key, slot)
    return due


async def release(tx: Tx, wf: WorkflowDef | None, run: RunRecord, now: float) -> None:
    """The run ends (``transitions.finish``): its slot frees, or passes to the key's
    next queued runs, each given its start task now (or at its rate window). A
    queued run that ends (cancelled) just leaves its queue.

    ``wf``: the run's workflow as registered here (``None``: not registered; the
    slot row's last limit is used, and no rate limit).
    """
    entry = await tx.admission.entry(run.id)
    if entry is None:
        return
    slot = await tx.admission.slot(entry.workflow, entry.key)  # the key's lock, first
    left = await tx.admission.leave(run.id)  # (read again under the lock)
    if left is None or left.queued:
        return
    conc: Concurrency | None = None if wf is None else wf.concurrency
    limit = conc.limit if conc is not None else slot.limit
    slot.active = max(slot.active - 1, 0)
    admitted: list[str] = []
    # (a loop, not one: a limit raised since the queue formed lets several start)
    while slot.active < limit:
        following = await tx.admission.next(entry.workflow, entry.key)
        if following is None:
            break
        slot.active += 1
        admitted.append(following)
    await tx.admission.put_slot(entry.workflow, entry.key, slot)
    for run_id in admitted:
        await _start_queued(tx, wf, run_id, now)


async def _start_queued(tx: Tx, wf: WorkflowDef | None, run_id: str, now: float) -> None:
    """A queued run takes its slot: its start task (and what it was given while
    queued, deferred until now) comes due, at its rate window if it has one."""
    due = now
    rate: RateLimit | None = None if wf is None else wf.rate_limit
    if wf is not None and rate is not None:
        queued = await tx.runs.get(run_id)
        if queued is not None:
            _, rkey = keys(wf, _json.loads(queued.input))
            if rkey is not None:
                due = await _rate_due(tx, wf.name, rkey, rate, now)
    await tx.tasks.add([NewTask(run_id, due, START)])
    await tx.tasks.wake_deferred(run_id, due)


def unadmitted(run: RunRecord, tasks: Sequence[TaskRecord], journal: object) -> bool:
    """Whether a claimed run has not been admitted yet: it never started (first
    generation, empty journal) and no start task of it is due, so the tasks it
    was claimed for came while it waits for a slot or its rate window."""
    return (
        run.generation == 0
        and journal == []
        and run.status not in ENDED
        and not any(t.kind == START for t in tasks)
    )


async def put_back(tx: Tx, run: RunRecord, tasks: Sequence[TaskRecord], owner: str) -> None:
    """Put back a run claimed before it was admitted (see :func:`unadmitted`): it is
    ``pending`` again, unleased, and its tasks wait for its start (the start task's
    due time, or its admission)."""
    changes = {"status": RunStatus.PENDING, "advanced_by": None}
    if await tx.runs.update(run.id, changes, owner=owner):
        await tx.tasks.defer(run.id, [t.id for t in tasks])
