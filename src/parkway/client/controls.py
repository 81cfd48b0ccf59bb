"""The engine's client calls that operators make: pause, resume and retry a run;
cancel and retry runs in bulk."""

from __future__ import annotations

from datetime import datetime

from parkway import limits
from parkway.client.base import State, instant, status_value
from parkway.core import controls, operators, runs
from parkway.errors import InvalidArgumentError, shown
from parkway.models import RunInfo, RunStatus


async def pause(state: State, run_id: str, *, by: str | None = None) -> RunInfo:
    """Pause a run: no worker advances it until :meth:`resume`. Inputs sent to it
    meanwhile (signals, events, messages, updates, its timers firing) are kept
    and take effect after the resume. Pausing a paused run changes nothing.

    A worker advancing the run right now stops at its next commit, which is
    not saved (as if it had died there): a step in flight then runs again
    after the resume.

    Args:
        run_id: The run.
        by: Who asked, recorded in the run's history as an ``operator`` entry
            and logged (free-form; over HTTP the API token's name, from the
            command line the OS user; ``None``: logged only).

    Raises:
        RunNotFoundError: No run has that id.
        RunStateError: The run has finished.
    """
    state.require_open()
    run_id = limits.reference(run_id)
    record = await controls.pause(state.rt, run_id, operators.checked_by(by))
    return await runs.describe(state.rt, record.id)


async def resume(state: State, run_id: str, *, by: str | None = None) -> RunInfo:
    """Resume a paused run: what reached it while paused is acted on now.
    Resuming a run that is not paused changes nothing.

    Args:
        run_id: The run.
        by: Who asked, recorded in the run's history as an ``operator`` entry
            and logged (free-form; over HTTP the API token's name, from the
            command line the OS user; ``None``: logged only).

    Raises:
        RunNotFoundError: No run has that id.
        RunStateError: The run has finished.
    """
    state.require_open()
    run_id = limits.reference(run_id)
    record = await controls.resume(state.rt, run_id, operators.checked_by(by))
    return await runs.describe(state.rt, record.id)


async def retry(state: State, run_id: str, *, by: str | None = None) -> RunInfo:
    """Retry a failed run from its last committed step: the step that failed runs
    again with fresh attempts (deploy the fix first), and the steps before it
    are replayed from the journal, not run again.

    A held run (status ``held``: its code no longer replayed its journal) is
    due again where it was, with the inputs sent to it meanwhile: a worker
    replays it with the code it has now, and it goes on if that replays its
    journal (else it is held again).

    A parent that already saw the run fail, and a message key that an ended
    message-started run handed on, are not taken back.

    Args:
        run_id: The run.
        by: Who asked, recorded in the run's history as an ``operator`` entry
            and logged (free-form; over HTTP the API token's name, from the
            command line the OS user; ``None``: logged only).

    Raises:
        RunNotFoundError: No run has that id.
        RunStateError: The run has neither failed nor is held.
    """
    state.require_open()
    run_id = limits.reference(run_id)
    record = await controls.retry(state.rt, run_id, operators.checked_by(by))
    return await runs.describe(state.rt, record.id)


async def cancel_runs(
    state: State,
    *,
    workflow: str | None = None,
    status: RunStatus | str | None = None,
    subject: str | None = None,
    created_before: datetime | str | None = None,
    by: str | None = None,
) -> int:
    """Cancel every active run the filters select (all of them given; none: every
    active run), as :meth:`cancel` would; the number cancelled.

    Done in batches of ``parkway.core.controls.BULK_BATCH`` runs, each its own
    transaction: interrupted, the batches done stay done.

    Args:
        workflow: Runs of this workflow only.
        status: Runs in this status only (``pending``, ``running``, ``parked``,
            ``held``).
        subject: Runs about this subject only.
        created_before: Runs created before this time only (a datetime, or an
            ISO 8601 string; one without a time zone is UTC).
        by: Who asked, recorded in each run's history as an ``operator`` entry
            and logged (free-form; over HTTP the API token's name, from the
            command line the OS user).
    """
    state.require_open()
    filters = _bulk_filters(state, workflow, status, subject, created_before)
    return await controls.cancel_runs(state.rt, filters, operators.checked_by(by))


async def retry_runs(
    state: State,
    *,
    workflow: str | None = None,
    status: RunStatus | str | None = None,
    subject: str | None = None,
    created_before: datetime | str | None = None,
    by: str | None = None,
) -> int:
    """Retry every failed or held run the filters select, as :meth:`retry` would;
    the number retried (in batches, as :meth:`cancel_runs`).

    Raises:
        InvalidArgumentError: ``status`` is given and is neither ``failed`` nor ``held``.
    """
    state.require_open()
    filters = _bulk_filters(state, workflow, status, subject, created_before)
    if filters.status not in (None, *controls.RETRYABLE):
        raise InvalidArgumentError(
            f"retry_runs retries failed and held runs; status {shown(filters.status)} has none",
            field="status",
        )
    return await controls.retry_runs(state.rt, filters, operators.checked_by(by))


def _bulk_filters(
    state: State,
    workflow: str | None,
    status: RunStatus | str | None,
    subject: str | None,
    created_before: datetime | str | None,
) -> controls.Filters:
    workflow = limits.optional_reference(workflow, "workflow name", field="workflow")
    subject = limits.optional_reference(subject, "subject", field="subject")
    return controls.Filters(
        workflow=workflow,
        status=status_value(status),
        subject=subject,
        created_before=instant(created_before, "created_before"),
    )
