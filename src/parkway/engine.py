"""The Engine: a façade over the core (configuration, lifecycle, decorators, client calls).

Everything an engine does is done by the core (:mod:`parkway.core`), the
worker (:mod:`parkway.worker`) and the store, all handed one
:class:`parkway.core.runtime.Runtime`; nothing below this module imports it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

from parkway import flows, limits
from parkway.admission import Concurrency, RateLimit
from parkway.client.fleet import FleetOperations
from parkway.client.intake import IntakeOperations
from parkway.client.people import PeopleOperations
from parkway.client.repairs import RepairOperations
from parkway.client.runs import RunOperations
from parkway.client.schedules import ScheduleOperations
from parkway.clock import Clock, SystemClock
from parkway.core import accumulate, deadlines, fleet, housekeeping
from parkway.core import cancel_on as cancel_conditions
from parkway.core import schedules as core_schedules
from parkway.core.runtime import Runtime, Settings
from parkway.durations import Duration, to_seconds
from parkway.errors import (
    InvalidArgumentError,
    InvalidInputError,
    InvalidScheduleError,
    InvalidWorkflowError,
    shown,
)
from parkway.events import CancelOn
from parkway.registry import Registry, WorkflowDef, WorkflowFn, input_model
from parkway.schedules import Schedule
from parkway.store import Store, open_store
from parkway.worker import Worker

F = TypeVar("F", bound=WorkflowFn)
A = TypeVar("A", bound=Callable[..., Any])

DEFAULT_URL = "sqlite:///parkway.db"

# @engine.workflow(retention=...) not given: the engine's retention applies.
_ENGINE_RETENTION: Any = object()


class Engine(
    RunOperations,
    IntakeOperations,
    ScheduleOperations,
    PeopleOperations,
    RepairOperations,
    FleetOperations,
):
    """A parkway engine: register workflows, start and steer runs, and (optionally) work.

    Args:
        url: ``"memory://"``, ``"sqlite:///path/to.db"`` or ``"postgresql://..."``;
            ``None`` reads ``PARKWAY_URL``, else ``sqlite:///parkway.db``.
        event_extractor: ``event -> (domain, subject)`` for events without routing.
        node_models: Node types available to JSON flows, by type name (default:
            ``parkway.default_node_models``; extend a copy for custom nodes).
        clock: A :class:`parkway.testing.ManualClock` in tests; real time otherwise.
        worker: Run a worker in this process while the engine is open.
        concurrency: Runs the in-process worker advances at once (default 100, as
            Temporal's workers and Hatchet's slots: runs mostly wait on steps and
            commits, and more of them at once share commits and step threads).
        message_ttl: How long an unmatched message stays buffered.
        event_retention: How long event ids are remembered for de-duplication.
        lease: How long a worker owns a run it advances before another may take it
            over (renewed while the worker lives).
        cached_runs: Parked runs the worker keeps in memory, least recently parked
            dropped first, so that their next input resumes them where they parked
            instead of replaying their journal (``0``: none; each costs a few KB).
        retention: How long finished runs (completed, failed, cancelled) are kept,
            with their journals, mailboxes and values, before the worker's
            housekeeping deletes them; ``None`` keeps them for ever. A workflow may
            set its own (``@engine.workflow(retention=...)``).
        history_threshold: The journal length past which a run's
            ``ctx.continue_as_new_suggested`` is true, and a warning is logged.
        metrics: Count what runs do for Prometheus: ``True`` (prometheus_client's
            default registry) or a ``CollectorRegistry``; see :meth:`render_metrics`.
            Needs the ``metrics`` extra.
        tracing: OpenTelemetry spans for client calls, advances and steps: ``True``
            (the global tracer provider), a ``TracerProvider``, ``False``; ``None``
            (the default): on if the application configured an SDK by the time the
            engine opens. Needs the ``tracing`` extra.
        tune_gc: While the worker runs, collect the youngest generation of Python's
            garbage collector after 10,000 allocations instead of 700, so that the
            short-lived objects of many runs die before a collection promotes them
            and full collections (a pause of the whole process) become rare.
            ``None`` (the default): only if the process still has CPython's
            default thresholds; ``True``: always; ``False``: never. The previous
            thresholds are put back when the last worker stops.
        busy_claim_interval: On SQLite, while the event loop's thread is busy
            (over 75 % of its time on the CPU) and runs come several at a time, the
            worker no longer takes each run the moment it is given an input; it
            claims them at most this often, in batches that share statements and
            commits, so that a steady load does not cost twice what a burst does;
            while the loop is saturated (over 95 % on the CPU, until under 85 %),
            2.5 times this often, so that larger batches let it catch up.
            ``0``: every run at once, whatever the load (lower latency while the
            loop keeps up, less throughput when it does not). PostgreSQL's
            worker does not batch this way: its costs are round trips.
        public_url: Where this engine's HTTP API (``parkway serve``) is reached
            from outside, such as ``"https://flows.example.com"``: callbacks' URLs
            (``cb.url``) are ``{public_url}/callbacks/{token}``. ``None`` reads
            ``PARKWAY_PUBLIC_URL``; without either, ``cb.url`` is ``None``.

    Use it as ``async with Engine(...) as engine:`` or with :meth:`open`/:meth:`close`.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        event_extractor: Callable[[Any], tuple[str | None, str | None]] | None = None,
        node_models: dict[str, Any] | None = None,
        clock: Clock | None = None,
        worker: bool = True,
        concurrency: int = 100,
        message_ttl: Duration = "1h",
        event_retention: Duration = "24h",
        lease: Duration = "30s",
        cached_runs: int = 1000,
        history_threshold: int = 10_000,
        retention: Duration | None = "30d",
        metrics: Any = None,
        tracing: Any = None,
        tune_gc: bool | None = None,
        busy_claim_interval: Duration = "2ms",
        public_url: str | None = None,
    ) -> None:
        resolved = url if url is not None else os.environ.get("PARKWAY_URL") or DEFAULT_URL
        resolved = _store_url(resolved)
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise InvalidArgumentError(
                f"concurrency must be a whole number >= 1, got {shown(concurrency)}"
            )
        settings = Settings(
            message_ttl=to_seconds(message_ttl, "message_ttl"),
            event_retention=to_seconds(event_retention, "event_retention"),
            lease=to_seconds(lease, "lease"),
            concurrency=concurrency,
            cached_runs=_count(cached_runs, "cached_runs", least=0),
            history_threshold=_count(history_threshold, "history_threshold", least=1),
            retention=_retention(retention, "retention"),
            tune_gc=_optional_flag(tune_gc, "tune_gc"),
            busy_claim_interval=to_seconds(busy_claim_interval, "busy_claim_interval"),
            public_url=_public_url(public_url),
        )
        if settings.lease <= 0:
            raise InvalidArgumentError("lease must be longer than zero")
        if settings.busy_claim_interval > 1.0:
            # Runs wait up to this long under load: more than a second is a mistake.
            raise InvalidArgumentError(
                f"busy_claim_interval must be at most 1s, got {shown(busy_claim_interval)}"
            )
        self.url = resolved
        self.node_models = dict(flows.default_node_models if node_models is None else node_models)
        self.run_worker = worker
        # Made a client (worker=False): it may start workflows it does not register
        # (see RunOperations.start). The command line opens an app's engine without
        # its worker for one command; that engine stays what its app made it.
        self._client = not worker
        self._store_url: str | None = resolved
        self._rt = Runtime(
            open_store(resolved),
            clock if clock is not None else SystemClock(),
            Registry(),
            settings,
            event_extractor=event_extractor,
        )
        self._rt.telemetry.configure(metrics=metrics, tracing=tracing)
        self._worker: Worker | None = None
        self._open = False
        # Decorator schedules (schedule=), by workflow name: validated when declared,
        # written to the store when the engine opens. (workflow, cron, zone, catch-up, input)
        self._declared: dict[str, tuple[str, str, str, str, bytes]] = {}

    # -- settings ----------------------------------------------------------------------------

    @property
    def event_extractor(self) -> Callable[[Any], tuple[str | None, str | None]] | None:
        """``event -> (domain, subject)`` for events without routing, or ``None``."""
        return self._rt.event_extractor

    @property
    def concurrency(self) -> int:
        """Runs the in-process worker advances at once."""
        return self._rt.settings.concurrency

    @property
    def lease(self) -> float:
        """Seconds a worker owns a run it advances before another may take it over."""
        return self._rt.settings.lease

    @property
    def message_ttl(self) -> float:
        """Seconds an unmatched message stays buffered by default."""
        return self._rt.settings.message_ttl

    @property
    def event_retention(self) -> float:
        """Seconds event and message ids are remembered for de-duplication."""
        return self._rt.settings.event_retention

    @property
    def retention(self) -> float | None:
        """Seconds finished runs are kept before they are deleted (``None``: for ever)."""
        return self._rt.settings.retention

    @property
    def actions(self) -> Mapping[str, Callable[..., Any]]:
        """The Action handlers registered with :meth:`action`, by name."""
        return MappingProxyType(self._rt.actions)

    def configure(
        self,
        *,
        url: str | None = None,
        worker: bool | None = None,
        concurrency: int | None = None,
        lease: Duration | None = None,
        cached_runs: int | None = None,
        metrics: Any = None,
        tracing: Any = None,
        clock: Clock | None = None,
    ) -> None:
        """Change settings of a closed engine (a command line's options, a test's).

        ``url``: the next :meth:`open` makes its store anew on it (an empty one,
        for ``memory://``). ``metrics`` and ``tracing``, if given, replace the
        engine's (as its constructor takes them); ``None`` keeps each setting.

        Raises:
            InvalidArgumentError: The engine is open, or a value is malformed.
        """
        if self._open:
            raise InvalidArgumentError("configure() needs a closed engine; close it first")
        settings = self._rt.settings
        if concurrency is not None:
            if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
                raise InvalidArgumentError(
                    f"concurrency must be a whole number >= 1, got {shown(concurrency)}"
                )
            settings = dataclasses.replace(settings, concurrency=concurrency)
        if lease is not None:
            seconds = to_seconds(lease, "lease")
            if seconds <= 0:
                raise InvalidArgumentError("lease must be longer than zero")
            settings = dataclasses.replace(settings, lease=seconds)
        if cached_runs is not None:
            settings = dataclasses.replace(
                settings, cached_runs=_count(cached_runs, "cached_runs", least=0)
            )
        self._rt.settings = settings
        telemetry = self._rt.telemetry
        if metrics is not None or tracing is not None:
            telemetry.configure(
                metrics=telemetry.metrics_option if metrics is None else metrics,
                tracing=telemetry.tracing_option if tracing is None else tracing,
            )
        if worker is not None:
            self.run_worker = worker
        if url is not None:
            self.url = _store_url(url)
            self._store_url = None  # (made anew by open(), even on the same URL)
        if clock is not None:
            self._rt.clock = clock

    @property
    def clock(self) -> Clock:
        """Engine time: a :class:`parkway.testing.ManualClock` in tests, else real time."""
        return self._rt.clock

    @property
    def is_open(self) -> bool:
        """Whether the engine is open (between :meth:`open` and :meth:`close`)."""
        return self._open

    @property
    def store(self) -> Store:
        """The engine's storage backend (for tools and tests of the store itself)."""
        return self._rt.store

    @property
    def worker(self) -> Worker | None:
        """The worker running in this process while the engine is open, if any."""
        return self._worker

    # -- registration ------------------------------------------------------------------------

    def workflow(
        self,
        name: str | None = None,
        *,
        version: str = "1",
        on_event: str | Sequence[str] | None = None,
        on_message: str | None = None,
        debounce: Any = None,
        batch: Any = None,
        validate_input: Callable[[Any], Any] | None = None,
        unique_per_subject: bool = False,
        cancel_on: Sequence[CancelOn] | None = None,
        schedule: str | Schedule | None = None,
        concurrency: Concurrency | None = None,
        rate_limit: RateLimit | None = None,
        priority: Callable[[Any], int] | None = None,
        retention: Any = _ENGINE_RETENTION,
        timeout: Duration | None = None,
    ) -> Callable[[F], F]:
        """Register an ``async def workflow(ctx, input)``; returns the function unchanged.

        Args:
            name: The workflow's name (default: the function's name).
            version: Runs keep the version they started with; new runs take the
                version registered last.
            on_event: Event names that start a run with the payload as input.
            on_message: A message name that starts a run per correlation key.
            debounce: One run per quiet window, with the last payload.
            batch: One run per batch of events.
            validate_input: Called with the input; its return value becomes the
                input, and an exception it raises rejects the run.
            unique_per_subject: At most one active run per (domain, subject).
            cancel_on: Events that cancel a run while it is active (``CancelOn``).
            schedule: A cron expression (``"*/5 * * * *"``, read in UTC) or a
                :class:`parkway.Schedule`: one run per tick, from the first tick after
                the schedule was first registered on the store. Its id is the
                workflow's name (see :meth:`add_schedule`).
            concurrency: At most this many active runs per key value
                (``Concurrency(limit, key=None, when_full="queue")``).
            rate_limit: At most this many starts per period per key value
                (``RateLimit(limit, period, key=None)``).
            priority: A callable ``input -> int``: the priority of the runs an
                event or a message starts (``engine.start`` takes its own).
            retention: How long its finished runs are kept (``None``: for ever);
                default: the engine's ``retention``.
            timeout: A run still active this long after its start (engine time,
                across ``continue_as_new``) ends ``failed`` with ``RunTimeoutError``,
                its compensations run first and its active children cancelled;
                ``engine.start(timeout=)`` overrides it. Default: no deadline.

        Raises:
            DuplicateWorkflowError: ``name`` and ``version`` are already registered.
            InvalidWorkflowError: An option is malformed (the message names it).
            InvalidScheduleError: ``schedule`` is malformed (the message names the field).
        """

        def register(fn: F) -> F:
            wf_name = limits.name(
                name if name is not None else getattr(fn, "__name__", None),
                "workflow name",
                field="name",
            )
            wf_version = _option_name(version, "version", wf_name, "a version string")
            if isinstance(on_event, str):
                events: tuple[str, ...] = (_option_name(on_event, "on_event", wf_name),)
            elif on_event is None or isinstance(on_event, list | tuple):
                events = tuple(_option_name(e, "on_event", wf_name) for e in on_event or ())
            else:
                raise InvalidWorkflowError(
                    f"on_event of workflow {shown(wf_name)} must be an event name or a list "
                    f"of them, got {type(on_event).__name__} {shown(on_event)}",
                    field="on_event",
                )
            message_name = (
                None if on_message is None else _option_name(on_message, "on_message", wf_name)
            )
            if not isinstance(unique_per_subject, bool):
                raise InvalidWorkflowError(
                    f"unique_per_subject of workflow {shown(wf_name)} must be True or False, "
                    f"got {shown(unique_per_subject)}",
                    field="unique_per_subject",
                )
            own_retention = retention is not _ENGINE_RETENTION
            kept = _retention(retention, "retention") if own_retention else None
            deb, bat = accumulate.normalise(debounce, batch, wf_name)
            if (deb or bat) and not events:
                raise InvalidWorkflowError(
                    f"workflow {shown(wf_name)} has debounce/batch but no on_event to feed it"
                )
            if validate_input is not None and not callable(validate_input):
                raise InvalidWorkflowError(
                    f"validate_input of {shown(wf_name)} must be callable", field="validate_input"
                )
            _check_admission(wf_name, concurrency, rate_limit, priority)
            run_timeout = deadlines.check_timeout(timeout)
            wf = WorkflowDef(
                name=wf_name,
                version=wf_version,
                fn=fn,
                validate_input=validate_input,
                on_event=events,
                on_message=message_name,
                debounce=deb,
                batch=bat,
                unique_per_subject=unique_per_subject,
                model=input_model(fn) if callable(fn) else None,
                cancel_on=cancel_conditions.check(cancel_on, wf_name),
                concurrency=concurrency,
                rate_limit=rate_limit,
                priority=priority,
                retention=kept,
                own_retention=own_retention,
                timeout=run_timeout,
            )
            declared = _declared_schedule(self._rt, wf, schedule)
            registry = self._rt.registry
            registry.add(wf)
            if declared is not None:
                self._declared[wf.name] = declared
                if self._open:  # (else written when it opens)
                    # (No event loop running here: it is written at the next open.)
                    with contextlib.suppress(RuntimeError):
                        core_schedules.declare(self._rt, wf.name, *declared)
            if (deb or bat) and registry.get(accumulate.accumulator_name(wf), "1") is None:
                registry.add(accumulate.accumulator_for(wf))
            fn.__parkway_workflow__ = wf.name  # type: ignore[attr-defined]
            return fn

        if callable(name):  # used bare: @engine.workflow
            fn, name = name, None
            return register(fn)
        return register

    def workflows(self) -> list[str]:
        """The names of the workflows registered here (not the engine's own helpers)."""
        return self._rt.registry.names()

    def action(self, name: str | None = None) -> Callable[[A], A]:
        """Register a handler for JSON flows' Action nodes; returns it unchanged.

        The handler, sync or async, is called as ``handler(params, context)``
        with the node's resolved params and a :class:`parkway.flows.FlowContext`
        (``run_id domain subject trigger event state``), once, as a durable
        step; its return value becomes ``state.<node id>``.

        Args:
            name: The name Action nodes use (default: the function's name).

        Raises:
            InvalidWorkflowError: The name is taken or the handler not callable.
        """

        def register(fn: A) -> A:
            action_name = name if isinstance(name, str) else getattr(fn, "__name__", "")
            flows.register_action(self._rt.actions, action_name, fn)
            return fn

        if callable(name):  # used bare: @engine.action
            fn, name = name, None
            return register(fn)
        return register

    def add_flow(self, definition: Any, *, domain: str = "default") -> flows.FlowDefinition:
        """Load a JSON flow and register it as a workflow named by its ``id``.

        Args:
            definition: A dict, a JSON string, or a path (``str`` or ``Path``).
            domain: The domain whose events start and resume it.

        Returns:
            The validated :class:`parkway.flows.FlowDefinition`.

        Raises:
            FlowDefinitionError: The definition is malformed (the message names
                the node and the field).
            DuplicateWorkflowError: A workflow of that id and version exists.
        """
        return flows.add_flow(self._rt, self.node_models, definition, domain=domain)

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the store (creating or migrating its schema) and start the worker, which
        first retries the held runs of the workflows this engine registers."""
        if self._open:
            return
        if self.url != self._store_url:  # the url was set before opening (CLI --url)
            self._rt.store, self._store_url = open_store(self.url), self.url
        await self._rt.store.open()
        self._rt.opened()
        self._rt.telemetry.opened()
        try:
            for schedule_id, declared in self._declared.items():
                await core_schedules.put(self._rt, schedule_id, *declared)
        except BaseException:
            await self._rt.store.close()
            raise
        self._open = True
        self._rt.clock.attach(self)
        if self.run_worker:
            self._worker = Worker(self._rt)
            self._rt.worker = self._worker
            # Listed among the store's workers (engine.workers()) before open returns.
            await self._worker.beat()
            self._worker.start()
            await self._worker.retry_held()

    async def close(self, *, grace: float = 30.0) -> None:
        """Stop the worker gracefully (in-flight runs finish or are released), close the store."""
        if not self._open:
            return
        if self._worker is not None:
            await self._worker.stop(grace)
            self._worker = self._rt.worker = None
        self._rt.clock.detach(self)
        await self._rt.store.close()
        self._open = False

    async def __aenter__(self) -> Engine:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def idle(self, timeout: Duration = 10) -> None:
        """Return once no task is due and no run is in flight.

        Args:
            timeout: Wall-clock time to wait at most (seconds, a ``timedelta`` or a
                string such as ``"10s"``).

        Raises:
            TimeoutError: Work was still due or in flight after ``timeout``.
            InvalidDurationError: ``timeout`` is not a duration.
        """
        self._require_open()
        await housekeeping.idle(self._rt, to_seconds(timeout, "timeout"))

    @property
    def metrics_enabled(self) -> bool:
        """Whether this engine counts for Prometheus (it was given ``metrics=``)."""
        return self._rt.telemetry.metrics is not None

    async def render_metrics(self) -> tuple[bytes, str]:
        """This engine's metrics in Prometheus's text format, and its content type.

        The counters are this process's; the store's gauges (parked runs, the
        due-task backlog, the oldest due task's age, dead letters, the runs no
        live worker serves) are read now.

        Raises:
            MetricsDisabledError: The engine was not given ``metrics=``.
        """
        self._require_open()
        rt = self._rt

        async def unserved() -> int:
            return len(await fleet.unserved(rt))

        return await rt.telemetry.render_metrics(rt.store, rt.now(), unserved)

    def poke(self) -> None:
        """Make this process's worker look for work now (a manual clock moved)."""
        self._rt.poke()

    async def next_due(self, *, after: float | None = None) -> float | None:
        """The earliest task due time or schedule tick in engine seconds (strictly
        after ``after``)."""
        due = await self._rt.next_due(after=after)
        tick = await core_schedules.next_fire(self._rt, fresh=True)
        if tick is not None and (after is None or tick > after):
            due = tick if due is None else min(due, tick)
        return due


def _declared_schedule(
    rt: Runtime, wf: WorkflowDef, schedule: Any
) -> tuple[str, str, str, str, bytes] | None:
    """A decorator's ``schedule=``, validated: what :func:`parkway.core.schedules.put`
    writes when the engine opens.

    Raises:
        InvalidScheduleError: It is malformed (the message names the field).
    """
    if schedule is None:
        return None
    if isinstance(schedule, str):
        schedule = Schedule(schedule)
    if not isinstance(schedule, Schedule):
        raise InvalidScheduleError(
            f"schedule of workflow {shown(wf.name)} must be a cron string or a parkway.Schedule, "
            f"got {shown(schedule)}",
            "schedule",
        )
    _, name, data = core_schedules.prepare(
        rt, wf.name, wf.name, schedule.cron, input=schedule.input,
        timezone=schedule.timezone, catch_up=schedule.catch_up, wf=wf,
    )  # fmt: skip
    return name, schedule.cron, schedule.timezone, schedule.catch_up, data


def _retention(value: Duration | None, name: str) -> float | None:
    """A retention in seconds (``None``: keep for ever)."""
    if value is None:
        return None
    seconds = to_seconds(value, name)
    if seconds <= 0:
        raise InvalidArgumentError(
            f"{name} must be longer than zero (None keeps finished runs for ever)", field=name
        )
    return seconds


def _optional_flag(value: Any, name: str) -> bool | None:
    """``True``, ``False`` or ``None``."""
    if value is not None and not isinstance(value, bool):
        raise InvalidArgumentError(
            f"{name} must be True, False or None, got {shown(value)}", field=name
        )
    return value


def _count(value: Any, name: str, *, least: int) -> int:
    """A whole-number setting, at least ``least``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise InvalidArgumentError(
            f"{name} must be a whole number >= {least}, got {shown(value)}", field=name
        )
    return value


def _store_url(url: Any) -> str:
    """A store URL: a string without control characters (a NUL is no file name,
    nor any server's), at most :data:`parkway.limits.MAX_URL_LENGTH` characters."""
    if not isinstance(url, str):
        raise InvalidArgumentError(
            f"url must be a string such as 'sqlite:///app.db', got {shown(url)}", field="url"
        )
    # (The URL itself is not shown: it may hold a password.)
    bad = limits.bad_character(url)
    if bad is not None:
        raise InvalidArgumentError(f"the store url holds {bad}", field="url")
    if len(url) > limits.MAX_URL_LENGTH:
        raise InvalidArgumentError(
            f"the store url is {len(url)} characters long; "
            f"at most {limits.MAX_URL_LENGTH} are allowed",
            field="url",
        )
    return url


def _option_name(value: Any, option: str, workflow: str, what: str = "a name") -> str:
    """An option of ``@engine.workflow`` that holds a name (an event's, a message's,
    the version): held to the limits of names, the error naming the option."""
    try:
        return limits.name(value, option, field=option)
    except InvalidInputError as exc:
        detail = str(exc).removeprefix("invalid input: ")
        raise InvalidWorkflowError(
            f"{option} of workflow {shown(workflow)} must be {what}: {detail}", field=option
        ) from None


def _check_admission(name: str, concurrency: Any, rate_limit: Any, priority: Any) -> None:
    """The admission options of ``@engine.workflow``, checked at registration."""
    if concurrency is not None and not isinstance(concurrency, Concurrency):
        raise InvalidWorkflowError(
            f"concurrency of workflow {shown(name)} must be a parkway.Concurrency, got "
            f"{shown(concurrency)}",
            field="concurrency",
        )
    if rate_limit is not None and not isinstance(rate_limit, RateLimit):
        raise InvalidWorkflowError(
            f"rate_limit of workflow {shown(name)} must be a parkway.RateLimit, got "
            f"{shown(rate_limit)}",
            field="rate_limit",
        )
    if priority is not None and not callable(priority):
        raise InvalidWorkflowError(
            f"priority of workflow {shown(name)} must be a callable input -> int, got "
            f"{shown(priority)}",
            field="priority",
        )


def _public_url(value: Any) -> str | None:
    """The base of callbacks' URLs: ``value``, else ``PARKWAY_PUBLIC_URL``, else ``None``."""
    found = value if value is not None else os.environ.get("PARKWAY_PUBLIC_URL") or None
    if found is None:
        return None
    where = "public_url" if value is not None else "PARKWAY_PUBLIC_URL"
    if not isinstance(found, str) or not found.startswith(("http://", "https://")):
        raise InvalidArgumentError(
            f"{where} must be an http:// or https:// URL such as "
            f"'https://flows.example.com', got {found!r:.80}",
            field="public_url",
        )
    limits.text(found, where, field="public_url", max_length=2000)
    return found.rstrip("/")
