"""The Engine: a façade over the core (configuration, lifecycle, decorators, client calls).

Everything an engine does is done by the core (:mod:`parkway.core`), the
worker (:mod:`parkway.worker`) and the store, all handed one
:class:`parkway.core.runtime.Runtime`; nothing below this module imports it.
Its client calls are the functions of :mod:`parkway.client`, given the engine's
:class:`parkway.client.base.State` and listed here as methods by
:func:`parkway.client.base.delegate`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from parkway import flows
from parkway.client import (
    controls,
    fleet,
    housekeeping,
    people,
    publishing,
    registration,
    repairs,
    runs,
)
from parkway.client import schedules as scheduling
from parkway.client.base import State, delegate
from parkway.clock import Clock, SystemClock
from parkway.core import schedules as core_schedules
from parkway.core.runtime import Runtime
from parkway.durations import Duration
from parkway.errors import InvalidArgumentError
from parkway.registry import Registry
from parkway.settings import Settings
from parkway.store import Store, open_store
from parkway.worker import Worker


class Engine:
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
        settings = Settings.of(
            url=url,
            concurrency=concurrency,
            message_ttl=message_ttl,
            event_retention=event_retention,
            lease=lease,
            cached_runs=cached_runs,
            history_threshold=history_threshold,
            retention=retention,
            tune_gc=tune_gc,
            busy_claim_interval=busy_claim_interval,
            public_url=public_url,
        )
        models = dict(flows.default_node_models if node_models is None else node_models)
        self._store_url: str | None = settings.url  # the URL the store was made on
        self._rt = Runtime(
            open_store(settings.url),
            clock if clock is not None else SystemClock(),
            Registry(),
            settings,
            event_extractor=event_extractor,
        )
        self._rt.telemetry.configure(metrics=metrics, tracing=tracing)
        self._state = State(self._rt, self, worker=worker, node_models=models)
        self._worker: Worker | None = None

    # -- settings ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The store's URL (the next :meth:`open` makes the store anew if it changed)."""
        return self._rt.settings.url

    @url.setter
    def url(self, value: str) -> None:
        self._rt.settings = self._rt.settings.changed(url=value)

    @property
    def run_worker(self) -> bool:
        """Whether the engine runs a worker in this process while it is open."""
        return self._state.run_worker

    @run_worker.setter
    def run_worker(self, value: bool) -> None:
        self._state.run_worker = value

    @property
    def node_models(self) -> dict[str, Any]:
        """The node types available to JSON flows, by type name."""
        return self._state.node_models

    @node_models.setter
    def node_models(self, value: dict[str, Any]) -> None:
        self._state.node_models = value

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
        if self._state.open:
            raise InvalidArgumentError("configure() needs a closed engine; close it first")
        rt = self._rt
        rt.settings = rt.settings.changed(
            url=url, concurrency=concurrency, lease=lease, cached_runs=cached_runs
        )
        if metrics is not None or tracing is not None:
            rt.telemetry.configure(
                metrics=rt.telemetry.metrics_option if metrics is None else metrics,
                tracing=rt.telemetry.tracing_option if tracing is None else tracing,
            )
        if worker is not None:
            self._state.run_worker = worker
        if url is not None:
            self._store_url = None  # (made anew by open(), even on the same URL)
        if clock is not None:
            rt.clock = clock

    @property
    def clock(self) -> Clock:
        """Engine time: a :class:`parkway.testing.ManualClock` in tests, else real time."""
        return self._rt.clock

    @property
    def is_open(self) -> bool:
        """Whether the engine is open (between :meth:`open` and :meth:`close`)."""
        return self._state.open

    @property
    def store(self) -> Store:
        """The engine's storage backend (for tools and tests of the store itself)."""
        return self._rt.store

    @property
    def worker(self) -> Worker | None:
        """The worker running in this process while the engine is open, if any."""
        return self._worker

    @property
    def metrics_enabled(self) -> bool:
        """Whether this engine counts for Prometheus (it was given ``metrics=``)."""
        return self._rt.telemetry.metrics is not None

    # -- registration (parkway.client.registration) -----------------------------------------

    workflow = delegate(registration.workflow)
    workflows = delegate(registration.workflows)
    action = delegate(registration.action)
    add_flow = delegate(registration.add_flow)

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the store (creating or migrating its schema) and start the worker, which
        first retries the held runs of the workflows this engine registers."""
        if self._state.open:
            return
        rt = self._rt
        if self.url != self._store_url:  # the url was set before opening (CLI --url)
            rt.store, self._store_url = open_store(self.url), self.url
        await rt.store.open()
        rt.opened()
        rt.telemetry.opened()
        try:
            for schedule_id, declared in self._state.declared.items():
                await core_schedules.put(rt, schedule_id, *declared)
        except BaseException:
            await rt.store.close()
            raise
        self._state.open = True
        rt.clock.attach(self)
        if self.run_worker:
            self._worker = rt.worker = Worker(rt)
            # Listed among the store's workers (engine.workers()) before open returns.
            await self._worker.beat()
            self._worker.start()
            await self._worker.retry_held()

    async def close(self, *, grace: float = 30.0) -> None:
        """Stop the worker gracefully (in-flight runs finish or are released), close the store."""
        if not self._state.open:
            return
        if self._worker is not None:
            await self._worker.stop(grace)
            self._worker = self._rt.worker = None
        self._rt.clock.detach(self)
        await self._rt.store.close()
        self._state.open = False

    async def __aenter__(self) -> Engine:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def poke(self) -> None:
        """Make this process's worker look for work now (a manual clock moved)."""
        self._rt.poke()

    idle = delegate(housekeeping.idle)
    next_due = delegate(housekeeping.next_due)
    sweep = delegate(housekeeping.sweep)
    render_metrics = delegate(housekeeping.render_metrics)

    # -- client calls (parkway.client) -------------------------------------------------------

    start = delegate(runs.start)
    handle = delegate(runs.handle)
    get_run = delegate(runs.get_run)
    list_runs = delegate(runs.list_runs)
    run_counts = delegate(runs.run_counts)
    history = delegate(runs.history)
    result = delegate(runs.result)
    signal = delegate(runs.signal)
    signal_with_start = delegate(runs.signal_with_start)
    update = delegate(runs.update)
    value = delegate(runs.value)
    values = delegate(runs.values)
    read_stream = delegate(runs.read_stream)
    stream = delegate(runs.stream)
    cancel = delegate(runs.cancel)

    pause = delegate(controls.pause)
    resume = delegate(controls.resume)
    retry = delegate(controls.retry)
    cancel_runs = delegate(controls.cancel_runs)
    retry_runs = delegate(controls.retry_runs)

    publish = delegate(publishing.publish)
    subscriptions = delegate(publishing.subscriptions)
    correlate = delegate(publishing.correlate)
    messages = delegate(publishing.messages)
    retry_message = delegate(publishing.retry_message)
    discard_message = delegate(publishing.discard_message)

    add_schedule = delegate(scheduling.add_schedule)
    remove_schedule = delegate(scheduling.remove_schedule)
    pause_schedule = delegate(scheduling.pause_schedule)
    resume_schedule = delegate(scheduling.resume_schedule)
    schedules = delegate(scheduling.schedules)

    complete_callback = delegate(people.complete_callback)
    fail_callback = delegate(people.fail_callback)
    tasks = delegate(people.tasks)
    get_task = delegate(people.get_task)
    complete_task = delegate(people.complete_task)

    check_replay = delegate(repairs.check_replay)
    export_run = delegate(repairs.export_run)
    fork = delegate(repairs.fork)
    fork_runs = delegate(repairs.fork_runs)

    workers = delegate(fleet.workers)
    unserved_runs = delegate(fleet.unserved_runs)
    events = delegate(fleet.events)
