"""The engine's client calls on callbacks and human tasks."""

from __future__ import annotations

from typing import Any

from parkway import _json, limits
from parkway.client.base import State
from parkway.core import people
from parkway.errors import CallbackNotFoundError, InvalidArgumentError, shown
from parkway.models import CallbackResult, HumanTask
from parkway.store.people import TASK_STATUSES

# A token ctx.callback makes is 43 characters; anything much longer is no token.
MAX_TOKEN_LENGTH = 255


async def complete_callback(state: State, token: str, value: Any = None) -> CallbackResult:
    """Complete the callback with ``value``: the run's ``cb.wait()`` returns it.

    A completion that comes before the run waits is kept until it does. The
    first completion (or failure) decides: any later one changes nothing and
    returns that first outcome again, with ``duplicate=True``.

    Args:
        token: ``cb.token`` (the last part of ``cb.url``).
        value: Any JSON value.

    Returns:
        A :class:`parkway.models.CallbackResult` (``status``, ``value``,
        ``message``, ``duplicate``, ``run_id``).

    Raises:
        CallbackNotFoundError: No callback has that token.
        RunClosedError: Its run has ended.
        SerializationError: ``value`` is not JSON.
    """
    state.require_open()
    _check_token(token)
    _json.dumps(value, "the value of a callback")
    return await people.settle_callback(state.rt, token, people.COMPLETED, value)


async def fail_callback(state: State, token: str, message: str) -> CallbackResult:
    """Fail the callback: the run's ``cb.wait()`` raises ``CallbackFailedError(message)``.

    As :meth:`complete_callback`: the first completion or failure decides.

    Raises:
        CallbackNotFoundError: No callback has that token.
        RunClosedError: Its run has ended.
        InvalidArgumentError: ``message`` is not a string.
    """
    state.require_open()
    _check_token(token)
    message = limits.text(message, "message", field="message", max_length=10_000)
    return await people.settle_callback(state.rt, token, people.FAILED, message)


async def tasks(
    state: State,
    *,
    status: str | None = "open",
    assignee: str | None = None,
    workflow: str | None = None,
    limit: int = 100,
) -> list[HumanTask]:
    """Human tasks, oldest first.

    Args:
        status: ``open`` (the default), ``completed``, ``cancelled``, ``expired``,
            or ``None`` for all.
        assignee: Only the tasks this person may complete: those assigned to
            them and those assigned to nobody in particular.
        workflow: Only the tasks of runs of this workflow.
        limit: At most this many (1 to 1000).

    Raises:
        InvalidArgumentError: An unknown status, or a bad limit.
    """
    state.require_open()
    if status is not None and status not in TASK_STATUSES:
        raise InvalidArgumentError(
            f"unknown task status {shown(status)}; use one of: {', '.join(TASK_STATUSES)}",
            field="status",
        )
    if assignee is not None:
        assignee = limits.name(assignee, "assignee", field="assignee")
    if workflow is not None:
        workflow = limits.name(workflow, "workflow name", field="workflow")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 1000:
        raise InvalidArgumentError(
            f"limit must be a whole number from 1 to 1000, got {shown(limit)}", field="limit"
        )
    return await people.list_tasks(
        state.rt, status=status, assignee=assignee, workflow=workflow, limit=limit
    )


async def get_task(state: State, task_id: str) -> HumanTask:
    """The human task with this id, whatever its status.

    Raises:
        TaskNotFoundError: No task has that id.
    """
    state.require_open()
    task_id = limits.reference(task_id, "task id", field="task_id")
    return await people.get_task(state.rt, task_id)


async def complete_task(
    state: State, task_id: str, result: Any, *, by: str | None = None
) -> HumanTask:
    """Complete an open human task with ``result``; its run resumes with it.

    Args:
        task_id: The task's id (``HumanTask.id``).
        result: What the person submitted: checked against the task's form.
        by: Who completes it; must be among its assignees if it has any.

    Returns:
        The task, completed.

    Raises:
        TaskNotFoundError: No task has that id.
        RunStateError: The task is not open (completed, cancelled or expired).
        TaskAssignmentError: The task has assignees and ``by`` is not one of them.
        InvalidInputError: ``result`` does not fit the form; ``field`` names where.
    """
    state.require_open()
    task_id = limits.reference(task_id, "task id", field="task_id")
    if by is not None:
        by = limits.name(by, "by", field="by")
    _json.dumps(result, "the result of a human task")
    return await people.complete_task(state.rt, task_id, result, by)


def _check_token(token: Any) -> None:
    """A token's shape: a string (a malformed one is simply no callback's)."""
    if not isinstance(token, str):
        raise InvalidArgumentError(
            f"token must be a string (cb.token), got {type(token).__name__}", field="token"
        )
    if not token or len(token) > MAX_TOKEN_LENGTH or not token.isascii():
        raise CallbackNotFoundError()
