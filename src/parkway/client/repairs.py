"""The engine's client calls for deploys and repairs: checking the registered code
against stored runs, exporting a run, forking runs."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from parkway import _json, limits
from parkway.client.base import State, check_id, encode_input, instant, status_value
from parkway.core import controls, repairs
from parkway.errors import InvalidArgumentError
from parkway.handle import RunHandle
from parkway.ids import new_id
from parkway.models import UNSET, ReplayReport, RunStatus
from parkway.registry import WorkflowDef


async def check_replay(
    state: State,
    *,
    workflow: str | None = None,
    run_ids: Sequence[str] | None = None,
    limit: int | None = None,
) -> ReplayReport:
    """Replay stored runs against this engine's registered code, read-only: no step
    runs and nothing is written. Run it before a deploy (``parkway check`` in CI):
    a run listed in ``diverged`` would be held by the new code.

    Without ``run_ids``, the running, parked and held runs (of ``workflow``, if
    given) whose workflow and version this engine registers are replayed; with
    ``run_ids``, those runs, whatever their status. A run is replayed up to the
    end of its journal.

    Args:
        workflow: Only runs of this workflow (which this engine must register).
        run_ids: Only these runs.
        limit: Replay at most this many runs.

    Returns:
        How many runs were replayed, and a :class:`ReplayDivergence` for each run
        whose code no longer replays its journal (the position, what the journal
        holds there, and what the code now does).

    Raises:
        UnknownWorkflowError: This engine does not register ``workflow``.
        RunNotFoundError: A run of ``run_ids`` does not exist.
        InvalidArgumentError: An argument is malformed.
    """
    state.require_open()
    if workflow is not None:
        state.rt.registry.latest(limits.name(workflow, "workflow name", field="workflow"))
    ids: list[str] | None = None
    if run_ids is not None:
        if isinstance(run_ids, str) or not isinstance(run_ids, Sequence):
            raise InvalidArgumentError(
                f"run_ids must be a list of run ids, got {run_ids!r}", field="run_ids"
            )
        ids = [limits.reference(r, field="run_ids") for r in run_ids]
    if limit is not None:
        limit = limits.row_limit(limit, field="limit")
    return await repairs.check_replay(state.rt, workflow=workflow, run_ids=ids, limit=limit)


async def export_run(state: State, run_id: str) -> dict[str, Any]:
    """The run as JSON-able data (``run``, ``journal``, ``inputs``), to check the
    code against it in a test: ``parkway.testing.check_replay(engine, exported)``.

    Raises:
        RunNotFoundError: No run has that id.
    """
    state.require_open()
    limits.reference(run_id)
    return await repairs.export_run(state.rt, run_id)


async def fork(
    state: State,
    run_id: str,
    *,
    at: int | None = None,
    input: Any = UNSET,
    id: str | None = None,
    by: str | None = None,
) -> RunHandle:
    """Start a new run whose journal begins as a copy of the first ``at`` entries of
    run ``run_id``'s: it replays them without running their steps again, then goes
    on live with the code registered now (the workflow's latest version). The
    source is left as it is, whatever its status.

    Args:
        run_id: The run to fork.
        at: How many of its journal entries (in order) the fork starts with; by
            default those before its first failed one, or all of them. Waits still
            pending among them are waited for again by the fork.
        input: The fork's input (validated as a start's); by default the source's.
        id: The fork's id (a new random one if omitted). Forking again with the
            same id from the same source returns that fork.
        by: Who asked (logged with the fork).

    Returns:
        A handle on the fork; ``RunInfo.forked_from`` is ``{"run_id", "at"}``.

    Raises:
        RunNotFoundError: No run has that id.
        InvalidArgumentError: ``at`` is out of range, or ``id`` is another run's.
        InvalidInputError: ``input`` was rejected.
    """
    state.require_open()
    limits.reference(run_id)
    fork_id = check_id(id)
    if by is not None:
        limits.name(by, "operator name", field="by")
    encode = None if input is UNSET else functools.partial(_fork_input, input)
    record = await repairs.fork(state.rt, run_id, fork_id, at=at, encode=encode, by=by)
    return state.handle(record.id)


async def fork_runs(
    state: State,
    *,
    workflow: str | None = None,
    status: RunStatus | str | None = None,
    subject: str | None = None,
    created_before: datetime | str | None = None,
    by: str | None = None,
) -> int:
    """Fork every run the filters select, each as :meth:`fork` would with its
    defaults (from before its first failed entry, with its input); the number
    forked. Done in batches, each its own transaction.

    Args:
        workflow: Runs of this workflow only.
        status: Runs in this status only (default ``failed``; not ``pending``).
        subject: Runs about this subject only.
        created_before: Runs created before this time only (a datetime, or an
            ISO 8601 string; one without a time zone is UTC).
        by: Who asked (logged).

    Raises:
        InvalidArgumentError: A filter is malformed, or ``status`` is ``pending``.
    """
    state.require_open()
    limits.optional_reference(workflow, "workflow name", field="workflow")
    limits.optional_reference(subject, "subject", field="subject")
    if by is not None:
        limits.name(by, "operator name", field="by")
    filters = controls.Filters(
        workflow=workflow,
        status=status_value(status),
        subject=subject,
        created_before=instant(created_before, "created_before"),
    )
    return len(await repairs.fork_runs(state.rt, filters, new_id, by=by))


def _fork_input(value: Any, wf: WorkflowDef | None) -> bytes:
    """A fork's given input, validated as a start of ``wf`` validates it (a client
    that does not register the workflow: as JSON only)."""
    if wf is None:
        return _json.dumps(value, "the input of the fork")
    return encode_input(wf, value)
