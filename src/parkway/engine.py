"""The Engine: a façade over the core (configuration, lifecycle, decorators, client calls).

Everything an engine does is done by the core (:mod:`parkway.core`), the
worker (:mod:`parkway.worker`) and the store, all handed one
:class:`parkway.core.runtime.Runtime`; nothing below this module imports it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

from parkway import _json, flows
from parkway.clock import Clock, SystemClock
from parkway.core import accumulate, housekeeping, intake, runs, transitions
from parkway.core import messages as core_messages
from parkway.core import signals as core_signals
from parkway.core.runtime import Runtime, Settings
from parkway.durations import Duration, to_seconds
from parkway.errors import (
    EngineClosedError,
    InvalidArgumentError,
    InvalidInputError,
    InvalidWorkflowError,
    SerializationError,
)
from parkway.events import (
    CorrelationResult,
    Event,
    MessageInfo,
    PublishResult,
    SubscriptionInfo,
    check_message,
)
from parkway.handle import RunHandle
from parkway.models import HistoryEntry, RunInfo, RunStatus, _dt
from parkway.registry import LATEST, Registry, WorkflowDef, WorkflowFn, input_model
from parkway.store import Store, open_store
from parkway.worker import Worker

F = TypeVar("F", bound=WorkflowFn)
A = TypeVar("A", bound=Callable[..., Any])

DEFAULT_URL = "sqlite:///parkway.db"


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
        concurrency: Runs the in-process worker advances at once.
        message_ttl: How long an unmatched message stays buffered.
        event_retention: How long event ids are remembered for de-duplication.
        lease: How long a worker owns a run it advances before another may take it
            over (renewed while the worker lives).

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
        concurrency: int = 16,
        message_ttl: Duration = "1h",
        event_retention: Duration = "24h",
        lease: Duration = "30s",
    ) -> None:
        resolved = url if url is not None else os.environ.get("PARKWAY_URL") or DEFAULT_URL
        if not isinstance(resolved, str):
            raise InvalidArgumentError(
                f"url must be a string such as 'sqlite:///app.db', got {url!r}"
            )
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise InvalidArgumentError(
                f"concurrency must be a whole number >= 1, got {concurrency!r}"
            )
        settings = Settings(
            message_ttl=to_seconds(message_ttl, "message_ttl"),
            event_retention=to_seconds(event_retention, "event_retention"),
            lease=to_seconds(lease, "lease"),
            concurrency=concurrency,
        )
        if settings.lease <= 0:
            raise InvalidArgumentError("lease must be longer than zero")
        self.url = resolved
        self.node_models = dict(flows.default_node_models if node_models is None else node_models)
        self.run_worker = worker
        self._store_url = resolved
        self._rt = Runtime(
            open_store(resolved),
            clock if clock is not None else SystemClock(),
            Registry(),
            settings,
            event_extractor=event_extractor,
        )
        self._worker: Worker | None = None
        self._open = False

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
    ) -> None:
        """Change settings of a closed engine (a command line's options, say).

        Raises:
            InvalidArgumentError: The engine is open, or a value is malformed.
        """
        if self._open:
            raise InvalidArgumentError("configure() needs a closed engine; close it first")
        settings = self._rt.settings
        if concurrency is not None:
            if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
                raise InvalidArgumentError(
                    f"concurrency must be a whole number >= 1, got {concurrency!r}"
                )
            settings = dataclasses.replace(settings, concurrency=concurrency)
        if lease is not None:
            seconds = to_seconds(lease, "lease")
            if seconds <= 0:
                raise InvalidArgumentError("lease must be longer than zero")
            settings = dataclasses.replace(settings, lease=seconds)
        self._rt.settings = settings
        if worker is not None:
            self.run_worker = worker
        if url is not None:
            if not isinstance(url, str):
                raise InvalidArgumentError(f"url must be a string, got {url!r}")
            self.url = url  # the store is made anew by open()

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

        Raises:
            DuplicateWorkflowError: ``name`` and ``version`` are already registered.
            InvalidWorkflowError: An option is malformed (the message names it).
        """

        def register(fn: F) -> F:
            wf_name = name if name is not None else getattr(fn, "__name__", None)
            events = (on_event,) if isinstance(on_event, str) else tuple(on_event or ())
            for event_name in events:
                if not isinstance(event_name, str) or not event_name.strip():
                    raise InvalidWorkflowError(
                        f"on_event of workflow {wf_name!r} must hold event names, "
                        f"got {event_name!r}"
                    )
            if on_message is not None and (not isinstance(on_message, str) or not on_message):
                raise InvalidWorkflowError(
                    f"on_message of workflow {wf_name!r} must be a message name, got {on_message!r}"
                )
            deb, bat = accumulate.normalise(debounce, batch, str(wf_name))
            if (deb or bat) and not events:
                raise InvalidWorkflowError(
                    f"workflow {wf_name!r} has debounce/batch but no on_event to feed it"
                )
            if validate_input is not None and not callable(validate_input):
                raise InvalidWorkflowError(f"validate_input of {wf_name!r} must be callable")
            wf = WorkflowDef(
                name=wf_name,  # type: ignore[arg-type]
                version=version,
                fn=fn,
                validate_input=validate_input,
                on_event=events,
                on_message=on_message,
                debounce=deb,
                batch=bat,
                unique_per_subject=unique_per_subject,
                model=input_model(fn) if callable(fn) else None,
            )
            registry = self._rt.registry
            registry.add(wf)
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
        """Open the store (creating or migrating its schema) and start the worker."""
        if self._open:
            return
        if self.url != self._store_url:  # the url was changed before opening (CLI --url)
            self._rt.store, self._store_url = open_store(self.url), self.url
        await self._rt.store.open()
        self._rt.opened()
        self._open = True
        self._rt.clock.attach(self)
        if self.run_worker:
            self._worker = Worker(self._rt)
            self._rt.worker = self._worker
            self._worker.start()

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

    async def idle(self, timeout: float = 10) -> None:
        """Return once no task is due and no run is in flight.

        Args:
            timeout: Wall-clock seconds to wait at most.

        Raises:
            TimeoutError: Work was still due or in flight after ``timeout``.
        """
        self._require_open()
        await housekeeping.idle(self._rt, timeout)

    def poke(self) -> None:
        """Make this process's worker look for work now (a manual clock moved)."""
        self._rt.poke()

    async def next_due(self, *, after: float | None = None) -> float | None:
        """The earliest task due time in engine seconds (strictly after ``after``)."""
        return await self._rt.next_due(after=after)

    # -- client operations -------------------------------------------------------------------

    async def start(
        self,
        workflow: str | Callable[..., Any],
        input: Any = None,
        *,
        id: str | None = None,
        subject: str | None = None,
        domain: str | None = None,
    ) -> RunHandle:
        """Start a run of ``workflow`` (idempotent: an existing ``id`` returns that run).

        An engine that runs no worker (``worker=False``, a client) and does not
        register ``workflow`` starts it by name: the worker that first runs it
        takes the latest version it has and validates the input then (a rejected
        input fails the run with ``InvalidInputError``).

        Raises:
            UnknownWorkflowError: No workflow has that name, and this engine runs
                a worker (a typo must not become a run nobody advances).
            InvalidInputError: The input was rejected or is not JSON-serialisable.
        """
        self._require_open()
        run_id = _check_id(id)
        _check_optional_str(subject, "subject")
        _check_optional_str(domain, "domain")
        wf = self._workflow_to_start(workflow)
        if wf is None:  # a client starting a workflow by name (see above)
            name = _name_of(workflow)
            version, encode = LATEST, lambda: _json.dumps(input, f"the input of workflow {name!r}")
        else:
            name, version = wf.name, wf.version
            encode = functools.partial(_encode_input, wf, input)
        await runs.start(self._rt, name, version, run_id, encode, subject=subject, domain=domain)
        return RunHandle(self, run_id)

    def _workflow_to_start(self, workflow: str | Callable[..., Any]) -> WorkflowDef | None:
        """The registered workflow to start, or ``None`` for a client that starts an
        unregistered one by name."""
        name = _name_of(workflow)
        registry = self._rt.registry
        if self.run_worker or registry.get(name, LATEST) is not None:
            return registry.latest(name)  # (raises UnknownWorkflowError)
        return None

    def handle(self, run_id: str) -> RunHandle:
        """A handle on an existing run (not checked until used)."""
        return RunHandle(self, run_id)

    async def get_run(self, run_id: str) -> RunInfo:
        """The run's :class:`RunInfo`.

        Raises:
            RunNotFoundError: No run has that id.
        """
        self._require_open()
        return runs.info(await runs.record(self._rt, run_id))

    async def list_runs(
        self,
        *,
        workflow: str | None = None,
        status: RunStatus | str | None = None,
        subject: str | None = None,
        domain: str | None = None,
        limit: int = 100,
    ) -> list[RunInfo]:
        """Runs, newest first, filtered by any of the arguments.

        Internal runs (the engine's own helpers, named ``parkway.*``) are listed
        only when asked for by their own name.
        """
        self._require_open()
        status_value = _status(status)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidArgumentError(f"limit must be a whole number >= 1, got {limit!r}")
        async with self._rt.store.transaction(readonly=True) as tx:
            records = await tx.list_runs(
                workflow=workflow, status=status_value, subject=subject,
                domain=domain, parent_id=None, limit=limit,
            )  # fmt: skip
        return [runs.info(r) for r in records]

    async def history(self, run_id: str) -> list[HistoryEntry]:
        """The run's journal (current generation), in order.

        Raises:
            RunNotFoundError: No run has that id.
        """
        self._require_open()
        return await runs.history(self._rt, run_id)

    async def result(self, run_id: str, timeout: float | None = None) -> Any:
        """Wait for run ``run_id`` to finish and return its output (see ``RunHandle.result``)."""
        self._require_open()
        return await runs.wait_result(self._rt, run_id, timeout)

    async def signal(self, run_id: str, name: str, payload: Any = None) -> None:
        """Send a signal to a run; it waits in the run's mailbox until consumed.

        Raises:
            RunNotFoundError: No run has that id.
            RunClosedError: The run has finished.
        """
        self._require_open()
        _check_name(name, "signal name")
        data = _json.dumps(payload, f"the payload of signal {name!r}")
        await core_signals.signal(self._rt, run_id, name, data)

    async def signal_with_start(
        self,
        workflow: str | Callable[..., Any],
        id: str,
        signal: str,
        payload: Any = None,
        *,
        input: Any = None,
    ) -> RunHandle:
        """Signal run ``id``, starting it first (with ``input``) if it does not exist.

        Both happen in one transaction, so the signal is never lost to a race
        with the run's start.

        Raises:
            RunClosedError: The run exists and has finished.
        """
        self._require_open()
        if not isinstance(id, str) or not id:
            raise InvalidArgumentError(f"signal_with_start needs a run id, got {id!r}")
        _check_name(signal, "signal name")
        data = _json.dumps(payload, f"the payload of signal {signal!r}")
        wf = self._workflow_to_start(workflow)
        if wf is None:  # a client, as in start()
            name = _name_of(workflow)
            input_data = _json.dumps(input, f"the input of workflow {name!r}")
            start = (name, LATEST, input_data)
        else:
            start = (wf.name, wf.version, _encode_input(wf, input))
        await core_signals.signal(self._rt, id, signal, data, start=start)
        return RunHandle(self, id)

    async def cancel(self, run_id: str) -> None:
        """Cancel a run and its active children; a finished run is left as it is.

        Raises:
            RunNotFoundError: No run has that id.
        """
        self._require_open()
        await transitions.cancel_run(self._rt, run_id)

    async def publish(
        self,
        name: str | Event,
        payload: Any = None,
        *,
        id: str | None = None,
        domain: str | None = None,
        subject: str | None = None,
    ) -> PublishResult:
        """Publish an event: start its subscribed workflows, resume its matching waiters.

        All of it is one transaction. Pass a name and fields, or an :class:`Event`.

        Raises:
            InvalidEventError: A field is malformed (the message names it).
            SerializationError: The payload is not JSON-serialisable.
            RoutingError: The engine's event extractor failed on this event.
        """
        self._require_open()
        if isinstance(name, Event):
            event = name
        else:
            event = Event(name, payload, id=id, domain=domain, subject=subject)
        return await intake.publish(self._rt, event)

    async def subscriptions(
        self, run_id: str | None = None, name: str | None = None
    ) -> list[SubscriptionInfo]:
        """Live subscriptions (one per waiting run), oldest first."""
        self._require_open()
        async with self._rt.store.transaction(readonly=True) as tx:
            subs = await tx.list_subscriptions(run_id=run_id, name=name)
        out = []
        for sub in subs:
            is_message = sub.kind == "message"
            out.append(
                SubscriptionInfo(
                    run_id=sub.run_id, kind=sub.kind, domain=sub.domain, name=sub.name,
                    subject=None if is_message else sub.subject,
                    match=_json.loads(sub.match), key=sub.subject if is_message else None,
                    expires_at=_dt(sub.expires_at),
                )
            )  # fmt: skip
        return out

    async def correlate(
        self,
        name: str,
        key: str,
        payload: Any = None,
        *,
        message_id: str | None = None,
        ttl: Duration | None = None,
    ) -> CorrelationResult:
        """Hand a message to exactly one receiver, chosen by ``(name, key)``.

        The run waiting on ``wait_for_message(name, key)`` gets it; else a workflow
        declared with ``on_message=name`` starts a run for the key; else it is
        buffered for ``ttl`` (default ``message_ttl``) for the next such wait.

        Raises:
            CorrelationError: ``ttl=0`` and no receiver now.
            InvalidMessageError: ``name``, ``key`` or ``message_id`` is malformed.
            InvalidDurationError: ``ttl`` is malformed.
        """
        self._require_open()
        check_message(name, key)
        if message_id is not None and (not isinstance(message_id, str) or not message_id):
            raise InvalidArgumentError(f"message_id must be a non-empty string, got {message_id!r}")
        seconds = self.message_ttl if ttl is None else to_seconds(ttl, "ttl")
        data = _json.dumps(payload, f"the payload of message {name!r}")
        return await core_messages.correlate(
            self._rt, name, key, data, message_id=message_id, ttl=seconds
        )

    async def messages(self, status: str | None = None) -> list[MessageInfo]:
        """Buffered messages and dead letters (``status="expired"``), oldest first."""
        self._require_open()
        if status is not None and status not in ("buffered", "expired"):
            raise InvalidArgumentError(
                f"message status must be 'buffered' or 'expired', got {status!r}"
            )
        return await core_messages.listing(self._rt, status)

    async def retry_message(self, id: int, *, ttl: Duration | None = None) -> CorrelationResult:
        """Correlate a buffered message or dead letter again (an operator's action).

        Without a receiver it is buffered again for ``ttl``; with ``ttl=0`` and
        no receiver, ``CorrelationError`` is raised and the message stays as it was.

        Raises:
            MessageNotFoundError: No buffered message or dead letter has that id.
        """
        self._require_open()
        seconds = self.message_ttl if ttl is None else to_seconds(ttl, "ttl")
        return await core_messages.retry(self._rt, id, seconds)

    async def discard_message(self, id: int) -> None:
        """Delete a buffered message or dead letter for good.

        Raises:
            MessageNotFoundError: No buffered message or dead letter has that id.
        """
        self._require_open()
        await core_messages.discard(self._rt, id)

    async def sweep(self) -> int:
        """Sweep now: expired subscriptions, old ids, expired messages (the worker
        does it every minute of engine time). Returns the subscriptions dropped."""
        self._require_open()
        return await housekeeping.sweep(self._rt)

    # -- internals ---------------------------------------------------------------------------

    def _require_open(self) -> None:
        if not self._open:
            raise EngineClosedError()


def _name_of(workflow: str | Callable[..., Any]) -> str:
    if isinstance(workflow, str):
        if not workflow:
            raise InvalidArgumentError("workflow name must not be empty")
        return workflow
    name = getattr(workflow, "__parkway_workflow__", None)
    if isinstance(name, str):
        return name
    raise InvalidArgumentError(f"{workflow!r} is neither a workflow name nor a registered workflow")


def _check_id(run_id: str | None) -> str:
    if run_id is None:
        return uuid.uuid4().hex
    if not isinstance(run_id, str) or not run_id:
        raise InvalidArgumentError(f"run id must be a non-empty string, got {run_id!r}")
    return run_id


def _check_name(name: object, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"{what} must be a non-empty string, got {name!r}")


def _check_optional_str(value: object, what: str) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise InvalidArgumentError(f"{what} must be a non-empty string or None, got {value!r}")


def _encode_input(wf: WorkflowDef, value: Any) -> bytes:
    checked = wf.check_input(value)
    try:
        return _json.dumps(checked, f"the input of workflow {wf.name!r}")
    except SerializationError as exc:
        raise InvalidInputError(str(exc), workflow=wf.name, field=exc.path) from exc


def _status(status: RunStatus | str | None) -> str | None:
    if status is None:
        return None
    try:
        return RunStatus(status).value
    except ValueError:
        valid = ", ".join(s.value for s in RunStatus)
        raise InvalidArgumentError(f"unknown run status {status!r}; use one of: {valid}") from None
