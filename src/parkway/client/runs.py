"""The engine's client operations on runs: start, read, signal, cancel, await."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from parkway import _json, limits
from parkway.admission import check_priority
from parkway.client.base import (
    Facade,
    check_id,
    encode_input,
    name_of,
    status_value,
)
from parkway.core import controls, deadlines, operators, runs, transitions
from parkway.core import signals as core_signals
from parkway.core import streams as core_streams
from parkway.core import updates as core_updates
from parkway.durations import Duration, to_seconds
from parkway.errors import InvalidArgumentError, shown
from parkway.handle import RunHandle
from parkway.models import HistoryEntry, RunInfo, RunStatus, StreamItem
from parkway.registry import LATEST, WorkflowDef


class RunOperations(Facade):
    """Starting, reading, signalling, cancelling and awaiting runs."""

    async def start(
        self,
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
        self._require_open()
        check_priority(priority)
        run_timeout = deadlines.check_timeout(timeout)
        run_id = check_id(id)
        subject = limits.subject(subject)
        domain = limits.domain(domain)
        wf = self._workflow_to_start(workflow)
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
            self._rt, name, version, run_id, encode,
            subject=subject, domain=domain, priority=priority, timeout=run_timeout,
        )  # fmt: skip
        await self._rt.telemetry.call("start", started, workflow=name, run_id=run_id)
        return RunHandle(self, run_id)

    def _workflow_to_start(self, workflow: str | Callable[..., Any]) -> WorkflowDef | None:
        """The registered workflow to start, or ``None`` for a client that starts an
        unregistered one by name."""
        name = name_of(workflow)
        registry = self._rt.registry
        if self._client and not self.run_worker and registry.get(name, LATEST) is None:
            return None
        return registry.latest(name)  # (raises UnknownWorkflowError)

    def handle(self, run_id: str) -> RunHandle:
        """A handle on an existing run (not checked until used)."""
        return RunHandle(self, run_id)

    async def get_run(self, run_id: str) -> RunInfo:
        """The run's :class:`RunInfo`.

        Raises:
            RunNotFoundError: No run has that id.
        """
        self._require_open()
        run_id = limits.reference(run_id)
        return await runs.describe(self._rt, run_id)

    async def list_runs(
        self,
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
        self._require_open()
        wanted = status_value(status)
        limit = limits.row_limit(limit)
        workflow = limits.optional_reference(workflow, "workflow name", field="workflow")
        subject = limits.optional_reference(subject, "subject", field="subject")
        domain = limits.optional_reference(domain, "domain", field="domain")
        search = limits.optional_reference(search, "search text", field="search")
        parent_id = limits.optional_reference(parent_id, "parent run id", field="parent_id")
        before = limits.optional_reference(before, "run id", field="before")
        return await runs.listing(
            self._rt,
            workflow=workflow,
            status=wanted,
            subject=subject,
            domain=domain,
            limit=limit,
            search=search,
            parent_id=parent_id,
            created_after=_timestamp(created_after, "created_after"),
            created_before=_timestamp(created_before, "created_before"),
            before=before,
        )

    async def run_counts(self) -> dict[str, dict[str, int]]:
        """How many runs each workflow has in each status: ``{workflow: {status: n}}``.

        Only the statuses a workflow has runs in are given; internal runs are left out.
        """
        self._require_open()
        return await runs.counts(self._rt)

    async def history(self, run_id: str) -> list[HistoryEntry]:
        """The run's journal (current generation), in order.

        Raises:
            RunNotFoundError: No run has that id.
        """
        self._require_open()
        run_id = limits.reference(run_id)
        return await runs.history(self._rt, run_id)

    async def result(self, run_id: str, timeout: Duration | None = None) -> Any:
        """Wait for run ``run_id`` to finish and return its output (see ``RunHandle.result``)."""
        self._require_open()
        run_id = limits.reference(run_id)
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        return await runs.wait_result(self._rt, run_id, seconds)

    async def signal(self, run_id: str, name: str, payload: Any = None) -> None:
        """Send a signal to a run; it waits in the run's mailbox until consumed.

        Raises:
            RunNotFoundError: No run has that id.
            RunClosedError: The run has finished.
        """
        self._require_open()
        run_id = limits.reference(run_id)
        name = limits.name(name, "signal name")
        data = _json.dumps(payload, f"the payload of signal {shown(name)}")
        sent = core_signals.signal(self._rt, run_id, name, data)
        await self._rt.telemetry.call("signal", sent, name=name, run_id=run_id)

    async def signal_with_start(
        self,
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
        self._require_open()
        check_priority(priority)
        id = limits.identifier(id)
        signal = limits.name(signal, "signal name", field="signal")
        data = _json.dumps(payload, f"the payload of signal {shown(signal)}")
        wf = self._workflow_to_start(workflow)
        if wf is None:  # a client, as in start()
            name = name_of(workflow)
            input_data = _json.dumps(input, f"the input of workflow {shown(name)}")
            start = (name, LATEST, input_data)
        else:
            start = (wf.name, wf.version, encode_input(wf, input))
        sent = core_signals.signal(self._rt, id, signal, data, start=start, priority=priority)
        await self._rt.telemetry.call("signal", sent, name=signal, run_id=id, workflow=start[0])
        return RunHandle(self, id)

    async def update(
        self,
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
        self._require_open()
        run_id = limits.reference(run_id)
        name = limits.name(name, "update name")
        update_id = check_id(id)
        seconds = to_seconds(timeout, "timeout")
        by = operators.checked_by(by)
        data = _json.dumps(payload, f"the payload of update {shown(name)}")
        updated = core_updates.update(self._rt, run_id, name, data, update_id, seconds, by)
        return await self._rt.telemetry.call("update", updated, name=name, run_id=run_id)

    async def value(self, run_id: str, key: str, *, timeout: Duration = 0) -> Any:
        """The run's latest value ``key`` (``ctx.set_value``), or ``None`` if it has not
        set it within ``timeout`` wall-clock seconds (0: do not wait).

        Raises:
            RunNotFoundError: No run has that id.
        """
        self._require_open()
        run_id = limits.reference(run_id)
        key = limits.name(key, "value key", field="key")
        seconds = to_seconds(timeout, "timeout")
        return await core_updates.value(self._rt, run_id, key, seconds)

    async def values(self, run_id: str) -> dict[str, Any]:
        """Every value the run has set, by key.

        Raises:
            RunNotFoundError: No run has that id.
        """
        self._require_open()
        run_id = limits.reference(run_id)
        return await core_updates.values(self._rt, run_id)

    async def read_stream(
        self, run_id: str, key: str, *, offset: int = 0, limit: int = 100
    ) -> list[StreamItem]:
        """The items of the run's stream ``key`` from ``offset`` on, at most ``limit``
        (1 to 1000), without waiting for more (see :meth:`RunHandle.read_stream`).

        Raises:
            RunNotFoundError: No run has that id.
            InvalidArgumentError: ``key``, ``offset`` or ``limit`` is malformed.
        """
        self._require_open()
        limits.reference(run_id)
        core_streams.check_key(key)
        core_streams.check_offset(offset)
        core_streams.check_limit(limit)
        items, _ = await core_streams.read(self._rt, run_id, key, offset, limit)
        return items

    def stream(self, run_id: str, key: str, *, offset: int = 0) -> AsyncIterator[StreamItem]:
        """Follow the run's stream ``key`` from ``offset`` on: its items in order, as
        they are committed, until the stream is closed or the run ends (see
        :meth:`RunHandle.stream`).

        Raises:
            RunNotFoundError: No run has that id (on the first iteration).
            InvalidArgumentError: ``key`` or ``offset`` is malformed (at once).
        """
        self._require_open()
        limits.reference(run_id)
        core_streams.check_key(key)
        core_streams.check_offset(offset)
        return core_streams.follow(self._rt, run_id, key, offset)

    async def cancel(self, run_id: str, *, by: str | None = None) -> None:
        """Cancel a run and its active children; a finished run is left as it is.

        Args:
            run_id: The run.
            by: Who asked, recorded in the run's history as an ``operator`` entry
                and logged (free-form; over HTTP the API token's name, from the
                command line the OS user; ``None``: logged only).

        Raises:
            RunNotFoundError: No run has that id.
        """
        self._require_open()
        run_id = limits.reference(run_id)
        await transitions.cancel_run(self._rt, run_id, operators.checked_by(by))

    # -- operator controls -------------------------------------------------------------------

    async def pause(self, run_id: str, *, by: str | None = None) -> RunInfo:
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
        self._require_open()
        run_id = limits.reference(run_id)
        record = await controls.pause(self._rt, run_id, operators.checked_by(by))
        return await runs.describe(self._rt, record.id)

    async def resume(self, run_id: str, *, by: str | None = None) -> RunInfo:
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
        self._require_open()
        run_id = limits.reference(run_id)
        record = await controls.resume(self._rt, run_id, operators.checked_by(by))
        return await runs.describe(self._rt, record.id)

    async def retry(self, run_id: str, *, by: str | None = None) -> RunInfo:
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
        self._require_open()
        run_id = limits.reference(run_id)
        record = await controls.retry(self._rt, run_id, operators.checked_by(by))
        return await runs.describe(self._rt, record.id)

    async def cancel_runs(
        self,
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
        self._require_open()
        filters = self._bulk_filters(workflow, status, subject, created_before)
        return await controls.cancel_runs(self._rt, filters, operators.checked_by(by))

    async def retry_runs(
        self,
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
        self._require_open()
        filters = self._bulk_filters(workflow, status, subject, created_before)
        if filters.status not in (None, *controls.RETRYABLE):
            raise InvalidArgumentError(
                f"retry_runs retries failed and held runs; status {shown(filters.status)} has none",
                field="status",
            )
        return await controls.retry_runs(self._rt, filters, operators.checked_by(by))

    def _bulk_filters(
        self,
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
            created_before=_instant(created_before, "created_before"),
        )


def _instant(value: datetime | str | None, field: str) -> float | None:
    """A datetime or an ISO 8601 string as epoch seconds (no time zone: UTC)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(str.__str__(value))
        except ValueError:
            raise InvalidArgumentError(
                f"{field} must be an ISO 8601 time such as '2026-01-31T12:00:00Z', got "
                f"{shown(value)}",
                field=field,
            ) from None
    if not isinstance(value, datetime):
        raise InvalidArgumentError(
            f"{field} must be a datetime or an ISO 8601 string, got {shown(value)}", field=field
        )
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _timestamp(when: datetime | None, field: str) -> float | None:
    """An aware datetime as the store's epoch seconds (a naive one is ambiguous)."""
    if when is None:
        return None
    if not isinstance(when, datetime) or when.utcoffset() is None:
        raise InvalidArgumentError(
            f"{field} must be an aware datetime (with a timezone), got {shown(when)}", field=field
        )
    return when.timestamp()
