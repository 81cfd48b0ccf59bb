"""Telemetry: what runs do, told to the logs always, to metrics and traces when configured.

The core and the worker report through the one :class:`Telemetry` the runtime
carries (``rt.telemetry``): a run started, woke, ran a step, parked, ended.
Each report goes to

- the ``parkway.runs`` logger, at INFO (a failed step attempt at WARNING, a
  failed run at ERROR with its traceback), with structured fields on the record
  (``run_id``, ``workflow``, ``version``, ``lifecycle``, what it waits for, how
  long a step took) that a JSON formatter prints as they are;
- Prometheus metrics (:mod:`parkway.core.metrics`), when the engine was given
  ``metrics=``;
- OpenTelemetry spans (:mod:`parkway.core.tracing`), when tracing is on: a span
  per client call, per advance of a run and per step. The sender's trace context
  rides in what it stores (an event's envelope, a message's body, a start or
  signal task), so the advance it wakes, in any process, is that span's child.

Both are imported only when configured: with neither, a report is a log call
the logger's level usually turns down at once.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from parkway.errors import MetricsDisabledError, MissingExtraError
from parkway.models import RunStatus, exception_text
from parkway.replay.requests import RunStep, StepResult
from parkway.replay.state import wait_named
from parkway.store.base import RunRecord, Store, TaskRecord, Tx
from parkway.store.vocabulary import Ending, EntryKind, TaskKind

if TYPE_CHECKING:
    from parkway.core.metrics import Metrics
    from parkway.core.tracing import Tracing
    from parkway.replay.machine import Machine
    from parkway.replay.writes import Outcome

T = TypeVar("T")

log = logging.getLogger("parkway.runs")

# The tasks that wake a parked run (a "start" begins one; a "cancel" ends it).
START = TaskKind.START
WAKES = frozenset(
    {
        TaskKind.DELIVERY,
        TaskKind.MESSAGE,
        TaskKind.SIGNAL,
        TaskKind.TIMER,
        TaskKind.CHILD,
        TaskKind.WAKE,
        TaskKind.UPDATE,
    }
)
# Pending journal entries that are not waits of their own (ctx.first's marker).
_NOT_WAITS = frozenset({EntryKind.FIRST})


@dataclass
class Advance:
    """One advance of one run, as telemetry follows it (in a context variable of
    the advance's task, so a gather's steps see it too)."""

    run_id: str
    workflow: str
    version: str
    began: float  # perf_counter
    span: Any = None  # the advance's span, while tracing
    token: Any = None  # its context, attached for the advance's task


_ADVANCE: ContextVar[Advance | None] = ContextVar("parkway_advance", default=None)


class Telemetry:
    """Where the core reports what runs do (see the module's docstring).

    Attributes:
        metrics: The Prometheus metrics, when configured.
        tracing: The tracer, when tracing is on.
    """

    def __init__(self) -> None:
        self.metrics: Metrics | None = None
        self.tracing: Tracing | None = None
        self.metrics_option: Any = None  # (as the engine was given them)
        self.tracing_option: Any = None

    def configure(self, *, metrics: Any = None, tracing: Any = None) -> None:
        """Set up what an engine's ``metrics=`` and ``tracing=`` options ask for.

        ``metrics``: ``True`` (prometheus_client's default registry), a
        ``CollectorRegistry``, or ``None``/``False`` (off). ``tracing``: see
        :func:`parkway.core.tracing.tracing_for`; ``None`` is decided when the
        engine opens (:meth:`opened`), once the application had the chance to
        configure an OpenTelemetry SDK.

        Raises:
            MissingExtraError: An option asks for an extra that is not installed.
            InvalidArgumentError: An option is malformed.
        """
        self.metrics, self.metrics_option = None, metrics
        if metrics is not None and metrics is not False:
            try:
                from parkway.core.metrics import metrics_for
            except ModuleNotFoundError as exc:
                if exc.name != "prometheus_client":
                    raise
                missing = "prometheus_client"
                raise MissingExtraError("metrics", "Engine(metrics=...)", missing) from exc
            self.metrics = metrics_for(metrics)
        self.tracing_option, self.tracing = tracing, None
        if tracing is not None and tracing is not False:
            try:
                from parkway.core.tracing import tracing_for
            except ModuleNotFoundError as exc:
                if not (exc.name or "").startswith("opentelemetry"):
                    raise
                missing = "opentelemetry-api"
                raise MissingExtraError("tracing", "Engine(tracing=...)", missing) from exc
            self.tracing = tracing_for(tracing)

    def opened(self) -> None:
        """The engine opened: with ``tracing=None``, trace if the application configured
        an OpenTelemetry SDK (without importing OpenTelemetry if it did not)."""
        if self.tracing_option is None:
            self.tracing = None
            if "opentelemetry.trace" in sys.modules:  # (an SDK configured imported it)
                from parkway.core.tracing import tracing_for

                self.tracing = tracing_for(None)

    async def render_metrics(
        self, store: Store, now: float, unserved: Callable[[], Awaitable[int]] | None = None
    ) -> tuple[bytes, str]:
        """The Prometheus exposition (see ``Engine.render_metrics``); ``unserved``
        counts the runs no live worker serves (see :mod:`parkway.core.fleet`).

        Raises:
            MetricsDisabledError: Metrics are off.
        """
        if self.metrics is None:
            raise MetricsDisabledError()
        count = None if unserved is None else await unserved()
        return await self.metrics.render(store, now, unserved=count)

    # -- the sender's side -------------------------------------------------------------------

    def call(self, kind: str, coro: Coroutine[Any, Any, T], **attrs: Any) -> Awaitable[T]:
        """A client call (``publish``, ``correlate``, ``signal``, ``start``): in a span of
        its own, its outcome counted. Without metrics and tracing, ``coro`` itself."""
        if self.metrics is None and self.tracing is None:
            return coro
        return self._observed(kind, coro, attrs)

    async def _observed(self, kind: str, coro: Coroutine[Any, Any, T], attrs: dict[str, Any]) -> T:
        metrics, tracing = self.metrics, self.tracing
        span = token = None
        if tracing is not None:
            span, token = tracing.begin_client(kind, attrs)
        try:
            result = await coro
        except BaseException as exc:
            if span is not None and tracing is not None:
                tracing.end(span, token, exc)
            if metrics is not None and isinstance(exc, Exception):
                metrics.called(kind, failure_outcome(exc))
            raise
        if span is not None and tracing is not None:
            tracing.end(span, token)
        if metrics is not None:
            metrics.called(kind, outcome_of(kind, result))
        return result

    def stamp(self, envelope: dict[str, Any]) -> dict[str, Any]:
        """``envelope`` (an event's, a message's), with the caller's trace context if
        tracing is on: the run it wakes is traced as this call's child."""
        if self.tracing is not None:
            carrier = self.tracing.carrier()
            if carrier:
                envelope["trace"] = carrier
        return envelope

    def carrier(self) -> dict[str, str] | None:
        """The caller's trace context, to store with what it sends (``None``: none)."""
        return self.tracing.carrier() if self.tracing is not None else None

    def task_payload(self) -> bytes | None:
        """The payload of a start or signal task: the caller's trace context, if any."""
        carrier = self.carrier()
        return orjson.dumps({"trace": carrier}) if carrier else None

    def bind(self, job: Callable[[Tx], Awaitable[T]]) -> Callable[[Tx], Awaitable[T]]:
        """A commit job that runs in the caller's trace context wherever the committer
        runs it (a batch runs every job in the task of its first)."""
        if self.tracing is None:
            return job
        return self.tracing.bind(job)

    # -- the worker's side -------------------------------------------------------------------

    def advancing(self, coro: Coroutine[Any, Any, None]) -> Coroutine[Any, Any, None]:
        """The advance of a run (a task's coroutine): its span ends with it."""
        if self.tracing is None:
            return coro
        return self._traced_advance(coro)

    async def _traced_advance(self, coro: Coroutine[Any, Any, None]) -> None:
        _ADVANCE.set(None)  # (inherited from the task that made this one: not its own)
        try:
            await coro
        finally:
            advance = _ADVANCE.get()
            if advance is not None and advance.span is not None and self.tracing is not None:
                self.tracing.end_advance(advance.span, advance.token)
                advance.span = advance.token = None

    def begin(self, run: RunRecord, tasks: list[TaskRecord], now: float) -> None:
        """An advance of ``run`` begins, for its due ``tasks``, at engine time ``now``."""
        advance = Advance(run.id, run.workflow, run.version, time.perf_counter())
        _ADVANCE.set(advance)
        metrics = self.metrics
        if any(t.kind == START for t in tasks):
            if log.isEnabledFor(logging.INFO):
                log.info(
                    "run %s started (%s v%s)",
                    run.id,
                    run.workflow,
                    run.version,
                    extra=_fields(run, "started", generation=run.generation),
                )
            if metrics is not None:
                metrics.run_started(run.workflow)
        else:
            woken = [t for t in tasks if t.kind in WAKES]
            if woken:
                latency = max(0.0, now - min(t.due_at for t in woken))
                kinds = sorted({t.kind for t in woken})
                if log.isEnabledFor(logging.INFO):
                    log.info(
                        "run %s resumed by %s, %.1f ms after it was due",
                        run.id,
                        "+".join(kinds),
                        latency * 1000,
                        extra=_fields(run, "resumed", woken_by=kinds, wake_latency_ms=_ms(latency)),
                    )
                if metrics is not None:
                    for kind in kinds:
                        metrics.woke(run.workflow, kind, latency)
        if self.tracing is not None:
            advance.span, advance.token = self.tracing.begin_advance(run, tasks)

    async def step(self, request: RunStep, attempt: Awaitable[StepResult]) -> StepResult:
        """One attempt of a step (``attempt``: it running): timed, logged, counted, traced."""
        advance = _ADVANCE.get()
        tracing = self.tracing
        began = time.perf_counter()
        # Under an advance the sampler dropped, a step's span would be dropped too (its
        # parent is not sampled): none is made, and the step runs in the advance's context.
        if tracing is not None and (
            advance is None or advance.span is None or advance.span.is_recording()
        ):
            span, token = tracing.begin_step(request)
            try:
                result = await attempt
            except BaseException as exc:  # (cancelled: a step's own error is in its result)
                tracing.end(span, token, exc)
                raise
            tracing.end(span, token, result.error)
        else:
            result = await attempt
        took = time.perf_counter() - began
        cmd, error = request.cmd, result.error
        run_id, workflow, version = (
            (advance.run_id, advance.workflow, advance.version) if advance else ("?", "?", "?")
        )
        if error is not None:
            if log.isEnabledFor(logging.WARNING):
                # (The user's exception: its str() may raise, see exception_text.)
                text = exception_text(error)
                log.warning(
                    "run %s step %r attempt %d failed after %.1f ms: %s: %s",
                    run_id,
                    cmd.name,
                    request.attempt,
                    took * 1000,
                    type(error).__name__,
                    text,
                    extra={
                        "run_id": run_id,
                        "workflow": workflow,
                        "version": version,
                        "lifecycle": "step_failed",
                        "step": cmd.name,
                        "attempt": request.attempt,
                        "duration_ms": _ms(took),
                        "error_type": type(error).__name__,
                        "error": text,
                    },
                )
        elif log.isEnabledFor(logging.INFO):
            log.info(
                "run %s step %r done in %.1f ms",
                run_id,
                cmd.name,
                took * 1000,
                extra={
                    "run_id": run_id,
                    "workflow": workflow,
                    "version": version,
                    "lifecycle": "step",
                    "step": cmd.name,
                    "attempt": request.attempt,
                    "duration_ms": _ms(took),
                },
            )
        if self.metrics is not None:
            self.metrics.step(workflow, cmd.name, error is None, took)
        return result

    def committed(self, run: RunRecord, outcome: Outcome, machine: Machine | None) -> None:
        """An advance of ``run`` committed ``outcome`` (``machine``: what it replayed)."""
        status = outcome.status
        if status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED):
            self._ended(run, status, outcome.error)
        elif status in (RunStatus.PARKED, RunStatus.RUNNING):
            if log.isEnabledFor(logging.INFO):
                waits = waiting_for(machine)
                log.info(
                    "run %s parked on %s",
                    run.id,
                    describe(waits) or "nothing it names",
                    extra=_fields(run, "parked", waiting_for=waits),
                )
        elif status == Ending.CONTINUED and log.isEnabledFor(logging.INFO):
            log.info(
                "run %s continued as new (generation %d)",
                run.id,
                run.generation + 1,
                extra=_fields(run, "continued", generation=run.generation + 1),
            )
        advance = _ADVANCE.get()
        # (The advance's own: not one inherited from the task of another run's.)
        if self.tracing is not None and advance is not None and advance.run_id == run.id:
            self.tracing.outcome(advance, status, outcome.error)

    def cancelled(self, run: RunRecord) -> None:
        """``run`` was cancelled (by a client, or as a cancelled run's child)."""
        self._ended(run, RunStatus.CANCELLED, None)

    def timed_out(self, run: RunRecord, error: dict[str, Any]) -> None:
        """``run`` failed at its deadline, with no compensation to run (no advance)."""
        self._ended(run, RunStatus.FAILED, error)

    def _ended(self, run: RunRecord, status: str, error: dict[str, Any] | None) -> None:
        if self.metrics is not None:
            self.metrics.run_ended(run.workflow, status)
        if status == RunStatus.FAILED:
            if log.isEnabledFor(logging.ERROR):
                _log_failure(run, error or {})
            return
        if log.isEnabledFor(logging.INFO):
            log.info(
                "run %s %s (%s v%s)",
                run.id,
                status,
                run.workflow,
                run.version,
                extra=_fields(run, status),
            )


def waiting_for(machine: Machine | None) -> list[dict[str, Any]]:
    """What a parked run waits for: each wait its journal holds as pending (its kind,
    its name, and when its timeout fires, if it has one)."""
    if machine is None:
        return []
    waits = []
    for e in machine.waiting:
        if e.kind not in _NOT_WAITS:
            kind, name = wait_named(e.kind, e.name)
            waits.append({"kind": kind, "name": name, "until": _iso(e.deadline)})
    return waits


def describe(waits: list[dict[str, Any]]) -> str:
    """``waiting_for`` for people: ``signal 'approve' (until 2030-01-02T00:00:00+00:00)``."""
    parts = []
    for wait in waits:
        kind = "retry of step" if wait["kind"] == "step" else wait["kind"]
        until = f" (until {wait['until']})" if wait["until"] else ""
        parts.append(f"{kind} {wait['name']!r}{until}")
    return ", ".join(parts)


def outcome_of(kind: str, result: Any) -> str:
    """The outcome label of a client call's result."""
    if kind == EntryKind.PUBLISH:
        if result.duplicate:
            return "duplicate"
        return "delivered" if result.touched else "unmatched"
    if kind == "correlate":
        return str(result.outcome)
    return "ok"


def failure_outcome(exc: BaseException) -> str:
    """The outcome label of a client call that raised ``exc``."""
    from parkway.errors import CorrelationError, InvalidInputError

    if isinstance(exc, CorrelationError):
        return "refused"
    if isinstance(exc, InvalidInputError):
        return "invalid"
    return "error"


def _log_failure(run: RunRecord, error: dict[str, Any]) -> None:
    """The ERROR line of a failed run, with the traceback its error recorded."""
    kind, message = error.get("type", "Error"), error.get("message", "")
    record = log.makeRecord(
        log.name,
        logging.ERROR,
        __file__,
        0,
        "run %s failed (%s v%s): %s: %s",
        (run.id, run.workflow, run.version, kind, message),
        None,
        extra=_fields(run, "failed", error_type=kind, error=message),
    )
    # (The exception is gone: the run's error holds its traceback as text, which
    # formatters print where they print an exception's.)
    traceback = error.get("traceback")
    if traceback:
        record.exc_text = traceback.rstrip("\n")
    log.handle(record)


def _fields(run: RunRecord, lifecycle: str, **more: Any) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "workflow": run.workflow,
        "version": run.version,
        "lifecycle": lifecycle,
        **more,
    }


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat()
