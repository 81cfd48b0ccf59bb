"""Committing what an advance decided: its writes, and how the run ended.

Every commit of an advance is fenced by the run's lease (``tx.runs.update_leased``
first), so a worker that lost its lease can never write. The writes are data
(:class:`parkway.replay.writes.Writes`); this is where they meet the store:
publishes are published, waits are registered (with the look-back of
``since_start``, or consuming a buffered message), and message deliveries a
run can no longer take are buffered again rather than dropped.
"""

from __future__ import annotations

import logging

from parkway import _json
from parkway.core import admission, cancel_on, publishing, streams
from parkway.core import messages as core_messages
from parkway.core.deadlines import add_deadline
from parkway.core.runtime import Runtime
from parkway.errors import InvalidInputError
from parkway.replay.writes import EventWait, Writes
from parkway.store.base import JournalEntry, RunRecord, Tx
from parkway.store.vocabulary import EntryKind, EntryState

log = logging.getLogger("parkway.worker")


async def apply_writes(rt: Runtime, tx: Tx, writes: Writes, *, ending: bool = False) -> None:
    """Write ``writes`` in ``tx``.

    ``ending``: the run ends in this transaction, and ``transitions.finish``
    drops all its tasks and subscriptions after (buffering again each message
    delivery it did not take): no wait's need go one by one.
    """
    now = rt.now()
    run_id = writes.run_id
    for pos, event, payload, branch in writes.publishes:
        result = await publishing.publish_in_tx(rt, tx, event, payload, now)
        value = _json.dumps(result.to_dict())
        writes.journal[pos] = JournalEntry(
            pos, EntryKind.PUBLISH, event.name, EntryState.DONE, value, None, now, branch
        )
    for run in writes.runs:
        if await tx.runs.get(run.id) is None:
            await _admit(rt, tx, writes, run)
            await tx.runs.insert(run)
            await cancel_on.register(rt.registry, tx, run, now)
            wf = rt.registry.get(run.workflow, run.version)
            if wf is not None and wf.timeout is not None:
                await add_deadline(tx, run, wf.timeout)
    if writes.journal:
        await tx.journal.put(run_id, list(writes.journal.values()))
    if writes.attempts:
        await tx.journal.add_attempts(writes.attempts)
    # Message waits that may have deliveries to buffer again. Not one that took
    # its delivery: the correlate that made it removed the wait's subscription
    # (under the key's lock), so no other message can have reached it.
    messages = [
        pos
        for pos in writes.finished_waits
        if pos not in writes.delivered
        and (pos not in writes.journal or writes.journal[pos].kind == EntryKind.MESSAGE)
    ]
    for pos in writes.finished_waits:
        if pos not in messages and not ending:
            # No delivery to buffer again: its timer (say) goes without a read. The
            # tasks this advance claimed stay until its final commit (see below).
            await tx.subscriptions.delete(run_id, pos)
            await tx.tasks.delete_waits(run_id, pos, keep=sorted(writes.claimed_tasks))
    if messages and not ending:  # (finish buffers again what the run did not take)
        keep = frozenset(writes.consumed_tasks)
        # The tasks this advance claimed stay until its final commit: deleting
        # them in an earlier flush would leave a run that crashes mid-advance
        # with nothing due, so no worker would ever take it over.
        finished = set(messages)
        # One read serves both: the deliveries to buffer again, the rest to drop.
        tasks = await tx.tasks.due(run_id, float("inf"))
        rebuffered: set[int] = set()
        for pos in messages:
            rebuffered |= await core_messages.rebuffer(
                rt, tx, run_id, now, pos=pos, keep=keep, tasks=tasks
            )
            await tx.subscriptions.delete(run_id, pos)
        stale = [
            task.id
            for task in tasks
            if task.pos in finished
            and task.id not in writes.claimed_tasks
            and task.id not in rebuffered
        ]
        await tx.tasks.delete(stale)
    for wait in writes.subscriptions:
        if isinstance(wait, EventWait):
            await publishing.register_wait(tx, wait.sub, wait.since, wait.consumed, now)
        else:
            await core_messages.register_wait(tx, wait.sub, now)
    if writes.tasks:
        await tx.tasks.add(writes.tasks)
    if writes.consumed_signals:
        await tx.signals.delete(writes.consumed_signals)
    if writes.values:
        await tx.values.put(run_id, writes.values, now)
    if writes.streams:
        await streams.apply(tx, run_id, writes.streams, now)
    for update_id, status, answer in writes.updates:
        await tx.updates.finish(run_id, update_id, status, answer, now)
    for callback in writes.callbacks:
        await tx.callbacks.add(callback)
    if writes.human_tasks:
        await tx.human_tasks.add(writes.human_tasks)
    for task_id, status in writes.ended_tasks:
        await tx.human_tasks.finish(task_id, status, now)


async def _admit(rt: Runtime, tx: Tx, writes: Writes, run: RunRecord) -> None:
    """A run this advance starts (a child, an accumulator's run) under an admission
    limit: admitted as any start is, its start task (among ``writes.tasks``) dropped
    while it is queued, or moved to its rate window. A ``"skip"`` limit queues it:
    the run that started it has journaled its id already."""
    wf = rt.registry.get(run.workflow, run.version)
    if wf is None or not admission.limited(wf):
        return
    try:
        priority = admission.priority_of(wf, _json.loads(run.input))
        due = await admission.admit(tx, wf, run, priority, queue_when_skipped=True)
    except InvalidInputError as exc:  # (refusing it now would fail this commit forever)
        log.warning("run %s: starts %s outside its limits: %s", run.id, wf.name, exc)
        return
    kept = []
    for task in writes.tasks:
        if task.run_id == run.id and task.kind == admission.START:
            if due is None:
                continue
            task.due_at = due
        kept.append(task)
    writes.tasks = kept
