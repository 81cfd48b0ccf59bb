"""The Engine: workflow registry, client API and lifecycle."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar

import orjson

from parkway import _json, accumulate, flows, limits, messages
from parkway.clock import Clock, SystemClock
from parkway.committer import Committer
from parkway.durations import Duration, to_seconds
from parkway.errors import (
    InvalidInputError,
    MessageNotFoundError,
    ParkwayError,
    ResultTimeoutError,
    RunCancelledError,
    RunClosedError,
    RunNotFoundError,
    SerializationError,
    StoreError,
    WorkflowFailedError,
)
from parkway.events import Event, PublishResult, SubscriptionInfo
from parkway.handle import RunHandle
from parkway.intake import prepare, publish_in_tx, published
from parkway.messages import CorrelationResult, MessageInfo
from parkway.models import ErrorInfo, HistoryEntry, RunInfo, RunStatus, _dt
from parkway.registry import LATEST, Registry, WorkflowDef, WorkflowFn, input_model
from parkway.replay import rebuild_error
from parkway.store import Store, open_store
from parkway.store.base import Delivery, EventDelivery, EventRecord, Lease, NewTask, RunRecord, Tx
from parkway.transitions import TERMINAL, cancel
from parkway.worker import Worker

log = logging.getLogger("parkway")

F = TypeVar("F", bound=WorkflowFn)
A = TypeVar("A", bound=Callable[..., Any])
T = TypeVar("T")

DEFAULT_URL = "sqlite:///parkway.db"
# How many rows of runs that ended here the engine keeps for result() (see _final).
FINAL_ROWS = 1024
# How often (engine time) expired subscriptions, old events and dead letters are swept.
SWEEP_INTERVAL = 60.0


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
            raise ParkwayError(f"url must be a string such as 'sqlite:///app.db', got {url!r}")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise ParkwayError(f"concurrency must be a whole number >= 1, got {concurrency!r}")
        self.url = resolved
        self.event_extractor = event_extractor
        self.node_models = dict(flows.default_node_models if node_models is None else node_models)
        self._flow_actions: dict[str, Callable[..., Any]] = {}
        # Workflows added disabled (JSON flows with enabled false): publishes in this
        # process do not resume their runs, which wait for a later event.
        self._paused_workflows: set[str] = set()
        self.message_ttl = to_seconds(message_ttl, "message_ttl")
        self.event_retention = to_seconds(event_retention, "event_retention")
        self.lease = to_seconds(lease, "lease")
        if self.lease <= 0:
            raise ParkwayError("lease must be longer than zero")
        self.concurrency = concurrency
        self.run_worker = worker
        # Made a client (worker=False): it may start workflows it does not register
        # (see _starts_by_name). The CLI opens an app's engine without its worker for
        # one command; that engine stays what its app made it.
        self._client = not worker
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._store: Store = open_store(resolved)
        self._store_url = resolved
        self._registry = Registry()
        self._worker: Worker | None = None
        self._sends: Committer | None = None
        self._sending = 0  # a sender's jobs in flight (see _send)
        self._open = False
        self._terminal: dict[str, list[asyncio.Event]] = {}
        # The rows of runs that ended lately in this process's worker, as committed
        # (an ended run never changes again): result() takes them instead of
        # reading them back. The oldest go first.
        self._final: collections.OrderedDict[str, RunRecord] = collections.OrderedDict()
        self._last_sweep: float | None = None

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
        """

        def register(fn: F) -> F:
            wf_name = name if name is not None else getattr(fn, "__name__", None)
            limits.name(wf_name, "workflow name", field="name")
            events = (on_event,) if isinstance(on_event, str) else tuple(on_event or ())
            for event_name in events:
                if not isinstance(event_name, str) or not event_name.strip():
                    raise ParkwayError(
                        f"on_event of workflow {wf_name!r} must hold event names, "
                        f"got {event_name!r}"
                    )
            if on_message is not None and (not isinstance(on_message, str) or not on_message):
                raise ParkwayError(
                    f"on_message of workflow {wf_name!r} must be a message name, got {on_message!r}"
                )
            deb, bat = accumulate.normalise(debounce, batch, str(wf_name))
            if (deb or bat) and not events:
                raise ParkwayError(
                    f"workflow {wf_name!r} has debounce/batch but no on_event to feed it"
                )
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
            if validate_input is not None and not callable(validate_input):
                raise ParkwayError(f"validate_input of {wf_name!r} must be callable")
            self._registry.add(wf)
            if (deb or bat) and self._registry.get(accumulate.accumulator_name(wf), "1") is None:
                self._registry.add(accumulate.accumulator_for(wf))
            fn.__parkway_workflow__ = wf.name  # type: ignore[attr-defined]
            return fn

        if callable(name):  # used bare: @engine.workflow
            fn, name = name, None
            return register(fn)
        return register

    def action(self, name: str | None = None) -> Callable[[A], A]:
        """Register a handler for JSON flows' Action nodes; returns it unchanged.

        The handler, sync or async, is called as ``handler(params, context)``
        with the node's resolved params and a :class:`parkway.flows.FlowContext`
        (``run_id domain subject trigger event state``), once, as a durable
        step; its return value becomes ``state.<node id>``.

        Args:
            name: The name Action nodes use (default: the function's name).

        Raises:
            ParkwayError: The name is taken.
        """

        def register(fn: A) -> A:
            action_name = name if isinstance(name, str) else getattr(fn, "__name__", "")
            flows.register_action(self._flow_actions, action_name, fn)
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
        return flows.add_flow(self, definition, domain=domain)

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the store (creating or migrating its schema) and start the worker."""
        if self._open:
            return
        if self.url != self._store_url:  # the url was changed before opening (CLI --url)
            self._store, self._store_url = open_store(self.url), self.url
        await self._store.open()
        # Messages and events this process sends at once share a transaction (see
        # parkway.committer): one sender with many in flight pays one commit for
        # them, not one each.
        capable = "group_commit" in self._store.capabilities
        self._sends = Committer(self._store, fenced=False) if capable else None
        self._open = True
        self._clock.attach(self)
        if self.run_worker:
            self._worker = Worker(self, concurrency=self.concurrency, lease=self.lease)
            self._worker.start()

    async def close(self, *, grace: float = 30.0) -> None:
        """Stop the worker gracefully (in-flight runs finish or are released), close the store."""
        if not self._open:
            return
        if self._worker is not None:
            await self._worker.stop(grace)
            self._worker = None
        self._clock.detach(self)
        await self._store.close()
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
        deadline = time.monotonic() + timeout
        if self._worker is not None:
            await self._maybe_sweep()  # so that time moved by a test clock sweeps at once
        while True:
            busy = self._worker is not None and self._worker.busy
            if not busy and not await self._store.has_due(self._clock.now()):
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the engine was still busy after {timeout:g}s")
            if self._worker is not None:
                await self._worker.wait_progress(0.005)
            else:
                await asyncio.sleep(0.005)

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

        An engine made with ``worker=False`` (a client) starts a name it does not
        register by name: the worker that first runs it pins the version and
        validates the input.

        Raises:
            UnknownWorkflowError: No workflow has that name (and this engine works).
            InvalidInputError: The input was rejected or is not JSON-serialisable,
                or an id, subject or domain is past its limit (see parkway.limits).
        """
        self._require_open()
        name = _name_of(workflow)
        if self._starts_by_name(name):
            return await self._start_unregistered(
                name, input, id=id, subject=subject, domain=domain
            )
        wf = self._registry.latest(name)
        return await self._start_run(
            wf.name, wf.version, lambda: _encode_input(wf, input),
            id=id, subject=subject, domain=domain,
        )  # fmt: skip

    def _starts_by_name(self, name: str) -> bool:
        """Whether a start of ``name`` goes to the store by name alone: this engine is a
        client (no worker) that does not register it, and a worker elsewhere will pin
        its version and validate its input. An engine that works and does not know the
        name refuses it (a typo must not become a run nobody can advance)."""
        return self._client and not self.run_worker and self._registry.get(name, LATEST) is None

    async def _start_unregistered(
        self,
        workflow: str,
        input: Any = None,
        *,
        id: str | None = None,
        subject: str | None = None,
        domain: str | None = None,
    ) -> RunHandle:
        """Start a run of a workflow this engine does not register (a client without
        the app, as ``parkway start`` without ``--app``): the worker that first runs it
        takes the latest version it has and validates the input (a rejected input
        fails the run with ``InvalidInputError``)."""
        self._require_open()
        limits.name(workflow, "workflow name", field="workflow")
        return await self._start_run(
            workflow, LATEST, lambda: _json.dumps(input, f"the input of workflow {workflow!r}"),
            id=id, subject=subject, domain=domain,
        )  # fmt: skip

    async def _start_run(
        self,
        workflow: str,
        version: str,
        encode: Callable[[], bytes],
        *,
        id: str | None,
        subject: str | None,
        domain: str | None,
    ) -> RunHandle:
        """The run, with ``encode()`` as its input, and its start task (unless the id exists)."""
        run_id = uuid.uuid4().hex if id is None else limits.identifier(id)
        limits.subject(subject)
        limits.domain(domain)
        record = self._new_run(workflow, version, run_id, encode(), domain=domain, subject=subject)
        with self._handing_over() as hand_over:
            async with self._store.transaction() as tx:
                await tx.start_run(record, record.created_at)
                await hand_over(tx, run_id)
        self._after_commit()
        return RunHandle(self, run_id)

    async def _insert_run(
        self, tx: Tx, wf: WorkflowDef, run_id: str, data: bytes, **fields: Any
    ) -> None:
        """Insert a new run and its start task (``fields``: as :meth:`_new_run` takes)."""
        record = self._new_run(wf.name, wf.version, run_id, data, **fields)
        await tx.insert_run(record)
        await tx.add_tasks([NewTask(run_id, record.created_at, "start")])

    def _new_run(
        self,
        workflow: str,
        version: str,
        run_id: str,
        data: bytes,
        *,
        domain: str | None = None,
        subject: str | None = None,
        parent_id: str | None = None,
        trigger: bytes | None = None,
    ) -> RunRecord:
        now = self._clock.now()
        return RunRecord(
            id=run_id, workflow=workflow, version=version,
            status=RunStatus.PENDING.value, input=data, output=None, error=None,
            domain=domain or "default", subject=subject, parent_id=parent_id,
            trigger=trigger, generation=0, created_at=now, updated_at=now,
        )  # fmt: skip

    def handle(self, run_id: str) -> RunHandle:
        """A handle on an existing run (not checked until used)."""
        return RunHandle(self, run_id)

    async def get_run(self, run_id: str) -> RunInfo:
        """The run's :class:`RunInfo`.

        Raises:
            RunNotFoundError: No run has that id.
        """
        return _info(await self._record(run_id))

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
        limit = limits.row_limit(limit)
        limits.optional_reference(workflow, "workflow name", field="workflow")
        limits.optional_reference(subject, "subject", field="subject")
        limits.optional_reference(domain, "domain", field="domain")
        async with self._store.transaction(readonly=True) as tx:
            records = await tx.list_runs(
                workflow=workflow, status=status_value, subject=subject,
                domain=domain, parent_id=None, limit=limit,
            )  # fmt: skip
        return [_info(r) for r in records]

    async def history(self, run_id: str) -> list[HistoryEntry]:
        """The run's journal (current generation), in order.

        Raises:
            RunNotFoundError: No run has that id.
        """
        self._require_open()
        limits.reference(run_id)
        async with self._store.transaction(readonly=True) as tx:
            if await tx.get_run(run_id) is None:
                raise RunNotFoundError(run_id)
            entries = await tx.journal(run_id)
        out = []
        for e in entries:
            value = _json.loads(e.value)
            error = None
            if e.state == "error":
                error, value = ErrorInfo.from_dict(value), None
            elif e.state == "pending":
                value = None  # what a pending wait stores is its own bookkeeping
            out.append(HistoryEntry(e.pos, e.kind, e.name, e.state, value, error, _dt(e.at)))
        return out

    async def signal(self, run_id: str, name: str, payload: Any = None) -> None:
        """Send a signal to a run; it waits in the run's mailbox until consumed.

        Raises:
            RunNotFoundError: No run has that id.
            RunClosedError: The run has finished.
        """
        self._require_open()
        limits.reference(run_id)
        limits.name(name, "signal name")
        data = _json.dumps(payload, f"the payload of signal {name!r}")
        with self._handing_over() as hand_over:
            async with self._store.transaction() as tx:
                sent = await tx.send_signal(run_id, name, data, self._clock.now())
                # Unless known refused: a store may learn what the signal found only
                # at commit, and the lease it rides with is only taken for a live run.
                if not sent.known or (sent.status is not None and sent.status not in TERMINAL):
                    await hand_over(tx, run_id)
        if not sent.known:
            raise StoreError(f"signal {name!r} to {run_id!r}: the store did not say what it found")
        status = sent.status
        if status is None:
            raise RunNotFoundError(run_id)
        if status in TERMINAL:
            raise RunClosedError(run_id, status, f"signal {name!r}")
        self._after_commit()

    async def _push_signal(self, tx: Tx, run_id: str, name: str, data: bytes) -> None:
        now = self._clock.now()
        await tx.add_signal(run_id, name, data, now)
        await tx.add_tasks([NewTask(run_id, now, "signal")])

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
        """
        self._require_open()
        name = _name_of(workflow)
        wf = None if self._starts_by_name(name) else self._registry.latest(name)
        limits.identifier(id)
        limits.name(signal, "signal name", field="signal")
        data = _json.dumps(payload, f"the payload of signal {signal!r}")
        if wf is None:  # (see _starts_by_name)
            version, input_data = LATEST, _json.dumps(input, f"the input of workflow {name!r}")
        else:
            version, input_data = wf.version, _encode_input(wf, input)
        async with self._store.transaction() as tx:
            run = await tx.get_run(id)
            if run is None:
                record = self._new_run(name, version, id, input_data)
                await tx.insert_run(record)
                await tx.add_tasks([NewTask(id, record.created_at, "start")])
            elif run.status in TERMINAL:
                raise RunClosedError(id, run.status, f"signal {signal!r}")
            await self._push_signal(tx, id, signal, data)
        self._after_commit()
        return RunHandle(self, id)

    async def cancel(self, run_id: str) -> None:
        """Cancel a run and its active children; a finished run is left as it is.

        Raises:
            RunNotFoundError: No run has that id.
        """
        self._require_open()
        limits.reference(run_id)
        now = self._clock.now()
        async with self._store.transaction() as tx:
            run = await tx.get_run(run_id)
            if run is None:
                raise RunNotFoundError(run_id)
            if run.status in TERMINAL:
                return
            if run.lease_owner is None:
                await cancel(tx, run, now, self)
            else:  # a worker is advancing it: it will see this task next
                await tx.add_tasks([NewTask(run_id, now, "cancel")])
        self._notify_terminal(run_id)
        self._after_commit()

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
            ParkwayError: A field is malformed (the message names it).
            SerializationError: The payload is not JSON-serialisable.
            RoutingError: The engine's event extractor failed on this event.
        """
        self._require_open()
        if isinstance(name, Event):
            event = name
        else:
            event = Event(name, payload, id=id, domain=domain, subject=subject)
        limits.optional_identifier(event.id, "event id", field="id")
        event, data = prepare(self, event)
        if not self._paused_workflows and not self._registry.subscribers(event.name):
            # Nothing to start and no flow disabled: one store operation, which a
            # store may send with the COMMIT (unless it declines).
            published = await self._publish_at_once(event, data)
            if published is not None:
                return published
        with self._handing_over() as hand_over:
            async with self._store.transaction() as tx:
                result = await publish_in_tx(self, tx, event, data, self._clock.now())
                for run_id in result.resumed[:1] or result.started[:1]:
                    await hand_over(tx, run_id)
        if not result.duplicate:  # accumulators get tasks too, without touching anyone
            self._after_commit()
        return result

    async def subscriptions(
        self, run_id: str | None = None, name: str | None = None
    ) -> list[SubscriptionInfo]:
        """Live subscriptions (one per waiting run), oldest first."""
        self._require_open()
        limits.optional_reference(run_id, "run id", field="run_id")
        limits.optional_reference(name, "name", field="name")
        async with self._store.transaction(readonly=True) as tx:
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
            ParkwayError: ``name``, ``key``, ``message_id`` or ``ttl`` is malformed.
        """
        self._require_open()
        messages.check(name, key)
        limits.optional_identifier(message_id, "message_id", field="message_id")
        seconds = self.message_ttl if ttl is None else to_seconds(ttl, "ttl")
        data = _json.dumps(payload, f"the payload of message {name!r}")
        with self._handing_over() as hand_over:
            if self._registry.message_starter(name) is None:
                # Most messages find their run waiting: then the delivery is one
                # statement, which a store may send with the COMMIT. Only a message
                # nobody waits for takes the transaction below (buffer, or refuse).
                delivered = await self._deliver(name, key, data, message_id, hand_over)
                if delivered is not None:
                    return delivered
            async with self._store.transaction() as tx:
                result = await messages.correlate_in_tx(
                    self, tx, name=name, key=key, payload=data, message_id=message_id,
                    ttl=seconds, now=self._clock.now(),
                )  # fmt: skip
                if result.run_id is not None:
                    await hand_over(tx, result.run_id)
        if result.run_id is not None:
            self._after_commit()
        return result

    async def _deliver(
        self, name: str, key: str, data: bytes, message_id: str | None, hand_over: _HandOver
    ) -> CorrelationResult | None:
        """A message to the run waiting for it, if one does (``None``: none does)."""
        body = messages.envelope(name, key, data, message_id)

        async def job(tx: Tx) -> Delivery:
            # (Run again on its own after a batch that failed: that lease was void.)
            hand_over.forget()
            now = self._clock.now()
            delivery = await tx.deliver_message(
                name, key, body, now, message_id=message_id,
                fresh_after=now - self.event_retention, **hand_over.terms(),
            )  # fmt: skip
            hand_over.took(delivery.lease)
            return delivery

        delivery = await self._send(job, order=key)
        if not delivery.known:
            raise StoreError(
                f"message {name!r} with key {key!r}: the store did not say what it did with it"
            )
        if delivery.outcome == "duplicate":
            return CorrelationResult("duplicate")
        if delivery.outcome != "delivered" or delivery.run_id is None:
            hand_over.forget()  # nothing was leased: the place is for what comes next
            return None
        self._after_commit()
        return CorrelationResult("delivered", delivery.run_id)

    async def _publish_at_once(self, event: Event, data: bytes) -> PublishResult | None:
        """A publish that starts nothing, as one store operation (``Tx.deliver_event``);
        ``None``: the store declined (nothing was written)."""
        assert event.id is not None and event.domain is not None
        event_id, domain = event.id, event.domain
        envelope = orjson.dumps(event.to_dict())  # (prepare() validated the payload)
        with self._handing_over() as hand_over:

            async def job(tx: Tx) -> EventDelivery:
                hand_over.forget()  # (as in _deliver)
                now = self._clock.now()
                record = EventRecord(event_id, event.name, domain, event.subject, data, now)
                delivery = await tx.deliver_event(
                    record, event.payload, envelope, fresh_after=now - self.event_retention,
                    **hand_over.terms(),
                )  # fmt: skip
                hand_over.took(delivery.lease)
                return delivery

            delivery = await self._send(job, order=event_id)
            if not delivery.waits:
                hand_over.forget()  # nothing was leased: the place is for what comes next
        if not delivery.known:
            raise StoreError(
                f"event {event.name!r} (id {event_id!r}): the store did not say what it did with it"
            )
        if delivery.outcome is None:
            return None
        if delivery.outcome == "duplicate":
            return PublishResult(duplicate=True, event_id=event_id)
        if delivery.waits:
            self._after_commit()
        return published(event, delivery.waits)

    async def _send(self, job: Callable[[Tx], Awaitable[T]], *, order: str) -> T:
        """Run a sender's ``job`` (a publish, a correlate) in a transaction: through
        this engine's committer, where the jobs of its senders in flight share one."""
        self._sending += 1
        try:
            if self._sends is not None:
                # Alone: no other job of this process could share the commit. In a
                # batch, by ``order``: two batches take the keys' locks in one order.
                done: T = await self._sends.run(job, alone=self._sending == 1, order=order)
                return done
            async with self._store.transaction() as tx:
                return await job(tx)
        finally:
            self._sending -= 1

    async def messages(self, status: str | None = None) -> list[MessageInfo]:
        """Buffered messages and dead letters (``status="expired"``), oldest first."""
        self._require_open()
        if status is not None and status not in ("buffered", "expired"):
            raise ParkwayError(f"message status must be 'buffered' or 'expired', got {status!r}")
        async with self._store.transaction() as tx:
            await messages.expire(tx, self._clock.now())
            records = await tx.list_messages(status)
        return [messages.info(m) for m in records]

    async def retry_message(self, id: int, *, ttl: Duration | None = None) -> CorrelationResult:
        """Correlate a buffered message or dead letter again (an operator's action).

        Without a receiver it is buffered again for ``ttl``; with ``ttl=0`` and
        no receiver, ``CorrelationError`` is raised and the message stays as it was.
        """
        self._require_open()
        limits.message_id(id)
        seconds = self.message_ttl if ttl is None else to_seconds(ttl, "ttl")
        async with self._store.transaction() as tx:
            message = await tx.get_message(id)
            if message is None:
                raise MessageNotFoundError(id)
            await tx.delete_message(id)
            result = await messages.correlate_in_tx(
                self, tx, name=message.name, key=message.key, payload=message.payload or b"null",
                message_id=message.message_id, ttl=seconds, now=self._clock.now(), dedup=False,
            )  # fmt: skip
        if result.run_id is not None:
            self._after_commit()
        return result

    async def discard_message(self, id: int) -> None:
        """Delete a buffered message or dead letter for good."""
        self._require_open()
        limits.message_id(id)
        async with self._store.transaction() as tx:
            if await tx.get_message(id) is None:
                raise MessageNotFoundError(id)
            await tx.delete_message(id)

    async def _maybe_sweep(self) -> None:
        """Sweep if ``SWEEP_INTERVAL`` of engine time passed since the last sweep."""
        now = self._clock.now()
        if self._last_sweep is None:
            self._last_sweep = now
        if now - self._last_sweep < SWEEP_INTERVAL:
            return
        self._last_sweep = now
        try:
            await self._sweep()
        except Exception:
            log.warning("sweep failed", exc_info=True)

    async def _sweep(self) -> int:
        """Drop expired subscriptions, dead-letter expired messages, forget old ids."""
        now = self._clock.now()
        async with self._store.transaction() as tx:
            count = await tx.sweep_subscriptions(now)
            await tx.prune_events(now - self.event_retention)
            await tx.prune_message_ids(now - self.event_retention)
            await messages.expire(tx, now)
        if count:
            log.info("swept %d expired subscriptions", count)
        return count

    # -- internals ---------------------------------------------------------------------------

    def _require_open(self) -> None:
        if not self._open:
            raise ParkwayError(
                "the engine is not open; use `async with engine:` or `await engine.open()` first"
            )

    async def _record(self, run_id: str) -> RunRecord:
        self._require_open()
        limits.reference(run_id)
        async with self._store.transaction(readonly=True) as tx:
            run = await tx.get_run(run_id)
        if run is None:
            raise RunNotFoundError(run_id)
        return run

    async def _result(self, run_id: str, timeout: float | None) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        # In-process completions are announced; another process's are polled.
        poll = 0.002 if "shared" in self._store.capabilities else 0.05
        final = self._final.get(run_id)
        worker = self._worker
        while True:
            # A run this process's worker is advancing announces its end here: no
            # read while it is (on PostgreSQL a round trip, on the cores and the
            # server the advance itself needs). Once the advance is over (the run
            # parked, say, or its lease was lost), the poll reads again.
            if final is not None or worker is None or run_id not in worker.inflight:
                run = final if final is not None else await self._record(run_id)
                final = None
                if run.status == RunStatus.COMPLETED:
                    return _json.loads(run.output)
                if run.status == RunStatus.FAILED:
                    raise WorkflowFailedError(run_id, ErrorInfo.from_dict(_json.loads(run.error)))
                if run.status == RunStatus.CANCELLED:
                    raise RunCancelledError(run_id)
                if run.error is not None:
                    error = _json.loads(run.error)
                    if error.get("type") == "NonDeterminismError":
                        raise rebuild_error(error)
            wait = poll
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ResultTimeoutError(run_id, timeout or 0.0)
                wait = min(wait, remaining)
            event = asyncio.Event()
            waiters = self._terminal.setdefault(run_id, [])
            waiters.append(event)
            try:
                await asyncio.wait_for(event.wait(), wait)
            except TimeoutError:
                pass
            else:
                final = self._final.get(run_id)
            finally:
                waiters.remove(event)
                if not waiters:
                    self._terminal.pop(run_id, None)
            poll = min(poll * 2, 0.05)

    def _notify_terminal(self, run_id: str, final: RunRecord | None = None) -> None:
        """The run ended (or is held): wake whoever awaits its result here.

        ``final``: its row as just committed, if known and ended (see ``_final``).
        """
        if final is not None and final.status in TERMINAL:
            self._final[run_id] = final
            if len(self._final) > FINAL_ROWS:
                self._final.popitem(last=False)
        for event in self._terminal.get(run_id, ()):
            event.set()

    def _poke(self) -> None:
        if self._worker is not None:
            self._worker.poke()

    @contextlib.contextmanager
    def _handing_over(self) -> Iterator[_HandOver]:
        """The in-process fast path: a run this process gives a task goes straight to
        its worker, leased in the same transaction, with no claim.

        Yields ``hand_over``: ``await hand_over(tx, run_id)`` inside the
        transaction, for (at most) one run; or, for a store operation that
        leases the run it finds (``Tx.deliver_message``), ``hand_over.terms()``
        as its arguments and ``hand_over.took(lease)`` with what it got. The
        run is handed over once the block has exited (the transaction
        committed). Without a worker, or a free place in it, the run is left to
        a claim.
        """
        worker = self._worker
        hand_over = _HandOver(self, worker.reserve() if worker is not None else None)
        try:
            yield hand_over
        except BaseException:
            if hand_over.lease is not None:
                # Rolled back, most likely; but a commit cut off may have gone
                # through. The worker loads the run and sees whose lease it is
                # (unless which run it was is not known: then its lease expires).
                run_id = hand_over.lease.run_id
                hand_over.lease = Lease(run_id) if run_id else None
            raise
        finally:
            if worker is not None and hand_over.owner is not None:
                worker.adopt(hand_over.lease)

    def _after_commit(self) -> None:
        """A commit of this process may have added tasks: wake the local worker.

        A store that pushes does it itself, for exactly the commits that added
        tasks: a poke after every commit would cost a claim that finds nothing.
        """
        if "push" not in self._store.capabilities:
            self._poke()

    async def _next_due(self, *, after: float | None = None) -> float | None:
        return await self._store.next_due(after=after)


def _name_of(workflow: str | Callable[..., Any]) -> str:
    if isinstance(workflow, str):
        return limits.name(workflow, "workflow name", field="workflow")
    name = getattr(workflow, "__parkway_workflow__", None)
    if isinstance(name, str):
        return name
    raise ParkwayError(f"{workflow!r} is neither a workflow name nor a registered workflow")


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
        raise ParkwayError(f"unknown run status {status!r}; use one of: {valid}") from None


def _info(run: RunRecord) -> RunInfo:
    return RunInfo(
        id=run.id,
        workflow=run.workflow,
        version=run.version,
        status=RunStatus(run.status),
        input=_json.loads(run.input),
        output=_json.loads(run.output),
        error=ErrorInfo.from_dict(_json.loads(run.error)),
        domain=run.domain,
        subject=run.subject,
        parent_id=run.parent_id,
        created_at=_dt(run.created_at),
        updated_at=_dt(run.updated_at),
    )


class _HandOver:
    """One run handed to this process's worker (see :meth:`Engine._handing_over`)."""

    def __init__(self, engine: Engine, owner: str | None) -> None:
        self.engine, self.owner = engine, owner
        self.lease: Lease | None = None

    async def __call__(self, tx: Tx, run_id: str) -> None:
        terms = self.terms()
        if terms:
            self.took(await tx.lease_run(run_id, now=self.engine._clock.now(), **terms))

    def terms(self) -> dict[str, Any]:
        """The lease's terms (owner, wall_now, lease_until); none once it was used,
        or without a free place in the worker."""
        if self.owner is None or self.lease is not None:
            return {}
        wall = time.time()
        return {"owner": self.owner, "wall_now": wall, "lease_until": wall + self.engine.lease}

    def took(self, lease: Lease | None) -> None:
        if lease is not None:
            self.lease = lease

    def forget(self) -> None:
        """The lease taken was for nothing (the operation found no run): unused again."""
        self.lease = None
