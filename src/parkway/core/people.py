"""Callbacks and human tasks: completing them, and reading tasks.

A completion is a signal to the waiting run, under a name only it sends (see
``parkway.replay.state.CALLBACK_SIGNAL``), written in the transaction that
records the outcome: a completion that comes before the run waits stays in the
mailbox until it does, and the run resumes by the path every signal takes (the
same hand-over to this process's worker, the same wake-ups).

A callback's outcome is kept: a second completion finds it and changes nothing.
"""

from __future__ import annotations

import hmac
from typing import Any

from parkway import _json, forms
from parkway.core.conflicts import again_on_conflict
from parkway.core.handover import handing_over
from parkway.core.runtime import Runtime
from parkway.errors import (
    CallbackNotFoundError,
    RunClosedError,
    RunStateError,
    TaskAssignmentError,
    TaskNotFoundError,
)
from parkway.models import CallbackResult, HumanTask, _dt
from parkway.store.base import ENDED, Sent, Tx
from parkway.store.people import (
    TASK_OPEN,
    CallbackRecord,
    HumanTaskFilter,
    HumanTaskRecord,
    token_digest,
)

COMPLETED, FAILED = "completed", "failed"


async def settle_callback(rt: Runtime, token: str, status: str, outcome: Any) -> CallbackResult:
    """Complete (``status="completed"``, ``outcome``: the value) or fail (``"failed"``,
    ``outcome``: the message) the callback whose token is ``token``.

    Raises:
        CallbackNotFoundError: No callback has that token.
        RunClosedError: Its run has ended without taking it.
    """
    digest = token_digest(token)
    data = _json.dumps(outcome, "the value of a callback")
    body = {"value": outcome} if status == COMPLETED else {"error": outcome}
    payload = _json.dumps(body, "the value of a callback")

    async def attempt() -> tuple[CallbackResult, bool]:
        now = rt.now()
        with handing_over(rt) as hand_over:
            async with rt.store.transaction() as tx:
                record = await tx.callbacks.get(digest)
                # (Found by the hash; compared again in constant time all the same.)
                if record is None or not hmac.compare_digest(record.token_hash, digest):
                    raise CallbackNotFoundError()
                if record.status != "open":
                    return _callback_result(record, duplicate=True), False
                sent = await _deliver(rt, tx, record.run_id, record.signal, payload, now)
                await tx.callbacks.finish(digest, status, data, now)
                await hand_over(tx, record.run_id)
        _refused(record.run_id, sent)  # (a store that learns it at commit wrote nothing)
        record.status, record.outcome = status, data
        return _callback_result(record, duplicate=False), hand_over.handed

    result, handed = await again_on_conflict(attempt)
    if not result.duplicate and not handed:
        rt.after_commit()
    return result


async def _deliver(
    rt: Runtime, tx: Tx, run_id: str, signal: str, payload: bytes, now: float
) -> Sent:
    """Send the run its completion's signal, unless it has ended (then nothing is
    written: refused at once if the store knows now, else at commit, see ``_refused``)."""
    carrier = rt.telemetry.task_payload()
    sent = await tx.signals.send(run_id, signal, payload, now, task_payload=carrier)
    _refused(run_id, sent)
    return sent


def _refused(run_id: str, sent: Sent) -> None:
    """Raise if the signal found its run ended (or gone)."""
    if sent.known and (sent.status is None or sent.status in ENDED):
        raise RunClosedError(run_id, sent.status or "deleted", "a completion")


def _callback_result(record: CallbackRecord, *, duplicate: bool) -> CallbackResult:
    outcome = None if record.outcome is None else _json.loads(record.outcome)
    if record.status == COMPLETED:
        return CallbackResult(COMPLETED, outcome, None, duplicate, record.run_id)
    return CallbackResult(FAILED, None, str(outcome), duplicate, record.run_id)


async def list_tasks(
    rt: Runtime, *, status: str | None, assignee: str | None, workflow: str | None, limit: int
) -> list[HumanTask]:
    """Human tasks, oldest first (see ``tx.human_tasks.list``)."""
    async with rt.store.transaction(readonly=True) as tx:
        records = await tx.human_tasks.list(
            HumanTaskFilter(status=status, assignee=assignee, workflow=workflow, limit=limit)
        )
    return [task_info(record) for record in records]


async def get_task(rt: Runtime, task_id: str) -> HumanTask:
    """The task.

    Raises:
        TaskNotFoundError: No task has that id.
    """
    async with rt.store.transaction(readonly=True) as tx:
        record = await tx.human_tasks.get(task_id)
    if record is None:
        raise TaskNotFoundError(task_id)
    return task_info(record)


async def complete_task(rt: Runtime, task_id: str, result: Any, by: str | None) -> HumanTask:
    """Complete an open task with ``result`` (checked against its form) and resume its run.

    Raises:
        TaskNotFoundError: No task has that id.
        RunStateError: The task is not open (completed, cancelled or expired).
        TaskAssignmentError: ``by`` is not among its assignees.
        InvalidInputError: ``result`` does not fit the form (``field`` names where).
    """
    # Checked before the writing transaction (and again in it, but for the form):
    # a refused result costs no lock.
    async with rt.store.transaction(readonly=True) as tx:
        record = await tx.human_tasks.get(task_id)
    if record is None:
        raise TaskNotFoundError(task_id)
    assignees = tuple(_json.loads(record.assignees))
    _may_complete(rt, task_id, record.status, record.due_at, by, assignees, record.run_id)
    schema = None if record.form_schema is None else _json.loads(record.form_schema)
    checked = forms.check(result, schema, record.form_model)
    data = _json.dumps(checked, "the result of a human task")
    payload = _json.dumps({"result": checked})

    async def attempt() -> tuple[HumanTaskRecord, bool]:
        now = rt.now()
        with handing_over(rt) as hand_over:
            async with rt.store.transaction() as tx:
                found = await tx.human_tasks.get(task_id)
                if found is None:
                    raise TaskNotFoundError(task_id)
                assignees = tuple(_json.loads(found.assignees))
                _may_complete(rt, task_id, found.status, found.due_at, by, assignees, found.run_id)
                sent = await _deliver(rt, tx, found.run_id, found.signal, payload, now)
                await tx.human_tasks.finish(task_id, "completed", now, by=by, result=data)
                await hand_over(tx, found.run_id)
        _refused(found.run_id, sent)
        found.status, found.completed_at, found.completed_by, found.result = (
            "completed",
            now,
            by,
            data,
        )
        return found, hand_over.handed

    done, handed = await again_on_conflict(attempt)
    if not handed:
        rt.after_commit()
    return task_info(done)


def _may_complete(
    rt: Runtime,
    task_id: str,
    status: str,
    due_at: float | None,
    by: str | None,
    assignees: tuple[str, ...],
    run_id: str,
) -> None:
    if status == TASK_OPEN and due_at is not None and rt.now() >= due_at:
        status = "expired"  # (its run's timer has not been handled yet)
    if status != TASK_OPEN:
        raise RunStateError(
            run_id,
            status,
            f"complete human task {task_id!r} of",
            "only an open task can be completed",
        )
    if assignees and by not in assignees:
        raise TaskAssignmentError(task_id, by, assignees)


def task_info(record: HumanTaskRecord) -> HumanTask:
    """The public view of a task's row."""
    return HumanTask(
        id=record.id,
        run_id=record.run_id,
        workflow=record.workflow,
        name=record.name,
        title=record.title,
        form_schema=None if record.form_schema is None else _json.loads(record.form_schema),
        data=None if record.data is None else _json.loads(record.data),
        assignees=tuple(_json.loads(record.assignees)),
        status=record.status,
        created_at=_dt(record.created_at),
        due_at=None if record.due_at is None else _dt(record.due_at),
        completed_by=record.completed_by,
        completed_at=None if record.completed_at is None else _dt(record.completed_at),
        result=None if record.result is None else _json.loads(record.result),
    )
