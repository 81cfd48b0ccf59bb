"""The engine's client calls on runs: start, read, signal, cancel, await."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

from parkway import _json, limits
from parkway.admission import check_priority
from parkway.client.base import State, check_id, encode_input, name_of, status_value, timestamp
from parkway.core import operators, runs, transitions
from parkway.core import signals as core_signals
from parkway.core import streams as core_streams
from parkway.core import updates as core_updates
from parkway.durations import Duration, to_seconds
from parkway.errors import shown
from parkway.handle import RunHandle
from parkway.models import HistoryEntry, RunInfo, RunStatus, StreamItem
from parkway.registry import LATEST, WorkflowDef, check_timeout


async def start(
    state: State,
    workflow: str | Callable[..., Any],
    input: Any = None,
    *,
    id: str | None = None,
    subject: str | None = None,
    domain: str | None = None,
    priority: int = 0,
    timeout: Duration | None = None,
) -> RunHandle:
    """Start a run of ``workflow`` (idempotent: an existing ``id`` returns that run).

    ``priority`` (an int): among runs of the workflow queued by its
    ``Concurrency`` limit, a higher one starts first (then arrival order).

    ``timeout`` (a duration): a run still active this long after its start
    (engine time) ends ``failed`` with ``RunTimeoutError``, its compensations
    run first; it overrides the workflow's own ``timeout``.

    An engine that runs no worker (``worker=False``, a client) and does not
    register ``workflow`` starts it by name: the worker that first runs it
    takes the latest version it has and validates the input then (a rejected
    input fails the run with ``InvalidInputError``).

    Raises:
        UnknownWorkflowError: No workflow has that name, and this engine runs
            a worker (a typo must not become a run nobody advances).
        InvalidInputError: The input was rejected or is not JSON-serialisable,
            or lacks the field its admission key names.
        InvalidArgumentError: ``priority`` is not an int, or ``timeout`` is zero.
        InvalidDurationError: ``timeout`` is not a duration.
        ConcurrencyLimitError: The workflow's ``Concurrency(when_full="skip")``
            limit is full for the run's key; nothing was written.
    """
    state.require_open()
    check_priority(priority)
    run_timeout = check_timeout(timeout)
    run_id = check_id(id)
    subject = limits.subject(subject)
    domain = limits.domain(domain)
    wf = _workflow_to_start(state, workflow)
    if wf is None:  # a client starting a workflow by name (see above)
        name = name_of(workflow)
        version, encode = (
            LATEST,
            lambda: _json.dumps(input, f"the input of workflow {shown(name)}"),
        )
    else:
        name, version = wf.name, wf.version
        encode = functools.partial(encode_input, wf, input)
    if run_timeout is None and wf is not None:
        run_timeout = wf.timeout
    started = runs.start(
        state.rt,
        name,
        version,
        run_id,
        encode,
        subject=subject,
        domain=domain,
        priority=priority,
        timeout=run_timeout,
    )
    await state.rt.telemetry.call("start", started, workflow=name, run_id=run_id)
    return state.handle(run_id)


def _workflow_to_start(state: State, workflow: str | Callable[..., Any]) -> WorkflowDef | None:
    """The registered workflow to start, or ``None`` for a client that starts an
    unregistered one by name."""
    name = name_of(workflow)
    registry = state.rt.registry
    if state.starts_by_name and registry.get(name, LATEST) is None:
        return None
    return registry.latest(name)  # (raises UnknownWorkflowError)


def handle(state: State, run_id: str) -> RunHandle:
    """A handle on an existing run (not checked until used)."""
    return state.handle(run_id)


async def get_run(state: State, run_id: str) -> RunInfo:
    """The run's :class:`RunInfo`.

    Raises:
        RunNotFoundError: No run has that id.
    """
    state.require_open()
    run_id = limits.reference(run_id)
    return await runs.describe(state.rt, run_id)


async def list_runs(
    state: State,
    *,
    workflow: str | None = None,
    status: RunStatus | str | None = None,
    subject: str | None = None,
    domain: str | None = None,
    limit: int = 100,
    search: str | None = None,
    parent_id: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    before: str | None = None,
) -> list[RunInfo]:
    """Runs, newest first (by creation time, then id), filtered by any of the arguments.

    Internal runs (the engine's own helpers, named ``parkway.*``) are listed
    only when asked for by their own name.

    Args:
        search: Only runs whose id or subject starts with this text (case-sensitive).
        parent_id: Only the children of this run.
        created_after: Only runs created at or after this (aware) time.
        created_before: Only runs created before this (aware) time.
        before: The id of the last run of the previous page: only the runs
            listed after it (keyset pagination, stable while runs are added).
            Pass ``page[-1].id``; ask for ``limit + 1`` runs to know whether
            another page follows.

    Raises:
        InvalidArgumentError: An argument is malformed, or ``before`` names no run.
    """
    state.require_open()
    wanted = status_value(status)
    limit = limits.row_limit(limit)
    workflow = limits.optional_reference(workflow, "workflow name", field="workflow")
    subject = limits.optional_reference(subject, "subject", field="subject")
    domain = limits.optional_reference(domain, "domain", field="domain")
    search = limits.optional_reference(search, "search text", field="search")
    parent_id = limits.optional_reference(parent_id, "parent run id", field="parent_id")
    before = limits.optional_reference(before, "run id", field="before")
    return await runs.listing(
        state.rt,
        workflow=workflow,
        status=wanted,
        subject=subject,
        domain=domain,
        limit=limit,
        search=search,
        parent_id=parent_id,
        created_after=timestamp(created_after, "created_after"),
        created_before=timestamp(created_before, "created_before"),
        before=before,
    )


async def run_counts(state: State) -> dict[str, dict[str, int]]:
    """How many runs each workflow has in each status: ``{workflow: {status: n}}``.

    Only the statuses a workflow has runs in are given; internal runs are left out.
    """
    state.require_open()
    return await runs.counts(state.rt)


async def history(state: State, run_id: str) -> list[HistoryEntry]:
    """The run's journal (current generation), in order.

    Raises:
        RunNotFoundError: No run has that id.
    """
    state.require_open()
    run_id = limits.reference(run_id)
    return await runs.history(state.rt, run_id)


async def result(state: State, run_id: str, timeout: Duration | None = None) -> Any:
    """Wait for run ``run_id`` to finish and return its output (see ``RunHandle.result``)."""
    state.require_open()
    run_id = limits.reference(run_id)
    seconds = None if timeout is None else to_seconds(timeout, "timeout")
    return await runs.wait_result(state.rt, run_id, seconds)


async def signal(state: State, run_id: str, name: str, payload: Any = None) -> None:
    """Send a signal to a run; it waits in the run's mailbox until consumed.

    Raises:
        RunNotFoundError: No run has that id.
        RunClosedError: The run has finished.
    """
    state.require_open()
    run_id = limits.reference(run_id)
    name = limits.name(name, "signal name")
    data = _json.dumps(payload, f"the payload of signal {shown(name)}")
    sent = core_signals.signal(state.rt, run_id, name, data)
    await state.rt.telemetry.call("signal", sent, name=name, run_id=run_id)


async def signal_with_start(
    state: State,
    workflow: str | Callable[..., Any],
    id: str,
    signal: str,
    payload: Any = None,
    *,
    input: Any = None,
    priority: int = 0,
) -> RunHandle:
    """Signal run ``id``, starting it first (with ``input``) if it does not exist.

    Both happen in one transaction, so the signal is never lost to a race
    with the run's start. ``priority``: as :meth:`start`'s (a run its
    workflow's limit queues keeps the signal until it starts).

    Raises:
        RunClosedError: The run exists and has finished.
        InvalidArgumentError: ``priority`` is not an int.
        ConcurrencyLimitError: As :meth:`start`.
    """
    state.require_open()
    check_priority(priority)
    id = limits.identifier(id)
    signal = limits.name(signal, "signal name", field="signal")
    data = _json.dumps(payload, f"the payload of signal {shown(signal)}")
    wf = _workflow_to_start(state, workflow)
    if wf is None:  # a client, as in start()
        name = name_of(workflow)
        input_data = _json.dumps(input, f"the input of workflow {shown(name)}")
        start = (name, LATEST, input_data)
    else:
        start = (wf.name, wf.version, encode_input(wf, input))
    sent = core_signals.signal(state.rt, id, signal, data, start=start, priority=priority)
    await state.rt.telemetry.call("signal", sent, name=signal, run_id=id, workflow=start[0])
    return state.handle(id)


async def update(
    state: State,
    run_id: str,
    name: str,
    payload: Any = None,
    *,
    id: str | None = None,
    timeout: Duration = 30,
    by: str | None = None,
) -> Any:
    """Send the run a synchronous update; return its handler's answer.

    The run's handler (``ctx.on_update(name, ...)``) takes it when the run is
    parked at a wait, or reaches its next one; its validator runs first. An
    accepted update is journaled and applied exactly once: sent again with
    the same ``id``, it gives the first answer.

    Args:
        run_id: The run.
        name: The update's name.
        payload: A JSON value for the handler.
        id: The update's id (default: a new random one).
        timeout: Wall-clock seconds to wait for the answer.
        by: Who asked, recorded in the run's history as an ``operator`` entry
            and logged (free-form; over HTTP the API token's name, from the
            command line the OS user; ``None``: logged only).

    Raises:
        RunNotFoundError: No run has that id.
        RunClosedError: The run has finished (or finished before it took it).
        UpdateRejectedError: The validator refused it, or the run has no handler
            of that name; nothing was journaled.
        UpdateFailedError: The handler raised (the run goes on).
        ResultTimeoutError: ``timeout`` passed first (an accepted update still
            applies; ask again with its ``id`` for the answer).
    """
    state.require_open()
    run_id = limits.reference(run_id)
    name = limits.name(name, "update name")
    update_id = check_id(id)
    seconds = to_seconds(timeout, "timeout")
    by = operators.checked_by(by)
    data = _json.dumps(payload, f"the payload of update {shown(name)}")
    updated = core_updates.update(state.rt, run_id, name, data, update_id, seconds, by)
    return await state.rt.telemetry.call("update", updated, name=name, run_id=run_id)


async def value(state: State, run_id: str, key: str, *, timeout: Duration = 0) -> Any:
    """The run's latest value ``key`` (``ctx.set_value``), or ``None`` if it has not
    set it within ``timeout`` wall-clock seconds (0: do not wait).

    Raises:
        RunNotFoundError: No run has that id.
    """
    state.require_open()
    run_id = limits.reference(run_id)
    key = limits.name(key, "value key", field="key")
    seconds = to_seconds(timeout, "timeout")
    return await core_updates.value(state.rt, run_id, key, seconds)


async def values(state: State, run_id: str) -> dict[str, Any]:
    """Every value the run has set, by key.

    Raises:
        RunNotFoundError: No run has that id.
    """
    state.require_open()
    run_id = limits.reference(run_id)
    return await core_updates.values(state.rt, run_id)


async def read_stream(
    state: State, run_id: str, key: str, *, offset: int = 0, limit: int = 100
) -> list[StreamItem]:
    """The items of the run's stream ``key`` from ``offset`` on, at most ``limit``
    (1 to 1000), without waiting for more (see :meth:`RunHandle.read_stream`).

    Raises:
        RunNotFoundError: No run has that id.
        InvalidArgumentError: ``key``, ``offset`` or ``limit`` is malformed.
    """
    state.require_open()
    limits.reference(run_id)
    core_streams.check_key(key)
    core_streams.check_offset(offset)
    core_streams.check_limit(limit)
    items, _ = await core_streams.read(state.rt, run_id, key, offset, limit)
    return items


def stream(state: State, run_id: str, key: str, *, offset: int = 0) -> AsyncIterator[StreamItem]:
    """Follow the run's stream ``key`` from ``offset`` on: its items in order, as
    they are committed, until the stream is closed or the run ends (see
    :meth:`RunHandle.stream`).

    Raises:
        RunNotFoundError: No run has that id (on the first iteration).
        InvalidArgumentError: ``key`` or ``offset`` is malformed (at once).
    """
    state.require_open()
    limits.reference(run_id)
    core_streams.check_key(key)
    core_streams.check_offset(offset)
    return core_streams.follow(state.rt, run_id, key, offset)


async def cancel(state: State, run_id: str, *, by: str | None = None) -> None:
    """Cancel a run and its active children; a finished run is left as it is.

    Args:
        run_id: The run.
        by: Who asked, recorded in the run's history as an ``operator`` entry
            and logged (free-form; over HTTP the API token's name, from the
            command line the OS user; ``None``: logged only).

    Raises:
        RunNotFoundError: No run has that id.
    """
    state.require_open()
    run_id = limits.reference(run_id)
    await transitions.cancel_run(state.rt, run_id, operators.checked_by(by))
