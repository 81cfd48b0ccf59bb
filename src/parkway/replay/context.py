"""The ``ctx`` object a workflow receives: every durable operation goes through it."""

from __future__ import annotations

import inspect
import random as _random
import uuid as _uuid
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast, overload

from parkway import _json, forms, limits
from parkway.durations import Duration, to_seconds
from parkway.errors import (
    CallbackFailedError,
    CompensationFailedError,
    InvalidArgumentError,
    InvalidDurationError,
    InvalidInputError,
    shown,
)
from parkway.events import Event, PublishResult, check_message
from parkway.matching import check_match
from parkway.models import Retry
from parkway.replay.commands import (
    ChildResultCmd,
    Command,
    ContinueAsNew,
    EventCmd,
    FirstCmd,
    GatherCmd,
    MessageCmd,
    PersonCmd,
    PublishCmd,
    SignalCmd,
    SleepCmd,
    StartChildCmd,
    StepCmd,
    WaitUntilCmd,
)
from parkway.replay.updates import check_handler
from parkway.schedules import tick_of

T = TypeVar("T")


class SideValues(Protocol):
    """What ``ctx.now()``, ``ctx.uuid()`` and ``ctx.random()`` need from the executor."""

    def side(self, name: str, produce: Callable[[], Any]) -> Any:
        """The journaled value at the next position, produced on first execution."""
        ...

    def clock_now(self) -> float:
        """Engine time."""
        ...

    def patched(self, change_id: str, *, deprecated: bool = False) -> bool:
        """Whether the code after patch ``change_id`` runs (see ``ctx.patched``)."""
        ...

    def set_value(self, key: str, data: bytes) -> None:
        """Journal and set the run's value ``key`` (see ``ctx.set_value``)."""
        ...

    def write_stream(self, key: str, data: bytes) -> None:
        """Journal and append an item to the run's stream ``key``."""
        ...

    def close_stream(self, key: str) -> None:
        """Journal the close of the run's stream ``key``."""
        ...

    def on_update(
        self, name: str, handler: Callable[..., Any], validate: Callable[[Any], Any] | None
    ) -> None:
        """Register the run's handler of updates ``name`` (see ``ctx.on_update``)."""
        ...

    def open_callback(self, timeout: float | None) -> dict[str, Any]:
        """Journal a new callback (see ``ctx.callback``): its token, signal, deadline."""
        ...

    def open_task(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Journal a new human task (see ``ctx.human_task``): its id, signal, deadline."""
        ...

    def register_compensation(
        self, step: str, fn: Callable[..., Any], arg: Any, retry: Retry | None
    ) -> None:
        """Step ``step`` succeeded with ``arg``: ``fn(arg)`` is its undo from now on."""
        ...

    async def run_compensations(self) -> tuple[list[Any], list[str]]:
        """Run the compensations not run yet, newest first: their results, and the
        names of the steps whose compensation failed."""
        ...

    @property
    def reached(self) -> int:
        """The journal's operations the code has reached so far (this generation)."""
        ...

    @property
    def history_threshold(self) -> int:
        """The length past which the run had better continue as new."""
        ...


class ChildHandle:
    """A child run started from a workflow; ``await handle.result()`` waits for it."""

    def __init__(self, run_id: str) -> None:
        self.id = run_id

    async def result(self) -> Any:
        """Park until the child finishes; return its output or raise its failure.

        Raises:
            WorkflowFailedError: The child failed.
            RunCancelledError: The child was cancelled.
        """
        return await ChildResultCmd(self.id)

    def __repr__(self) -> str:
        return f"ChildHandle({shown(self.id)})"


class Callback:
    """A callback made by ``ctx.callback()``: hand ``token`` or ``url`` to a third
    party (in a step), then ``await cb.wait()``.

    Attributes:
        token: The capability that completes it: 256 random bits, URL-safe. Whoever
            holds it can complete or fail the callback, once; keep it out of logs.
        url: ``{public_url}/callbacks/{token}`` when the engine has a public URL
            (``Engine(public_url=...)`` or ``PARKWAY_PUBLIC_URL``), else ``None``.
    """

    def __init__(
        self, token: str, url: str | None, signal: str, deadline: float | None, sides: SideValues
    ) -> None:
        self.token, self.url = token, url
        self._signal, self._deadline, self._sides = signal, deadline, sides

    async def wait(self) -> Any:
        """Park until the callback is completed; return its value.

        A completion that came before the wait is kept, and taken at once. Usable
        inside ``ctx.first`` (say, the callback or a day passes). A callback is
        completed once: wait for it once (keep the value).

        Raises:
            CallbackFailedError: It was failed (``engine.fail_callback``).
            WaitTimeoutError: ``ctx.callback``'s ``timeout`` passed first.
        """
        timeout = None
        if self._deadline is not None:
            # (Live, the time left now; on replay the wait's journaled deadline rules.)
            timeout = max(0.0, self._deadline - self._sides.clock_now())
        command = PersonCmd(self._signal, timeout, what="cb.wait()", convert=_callback_value)
        return _callback_value(await command)

    def __repr__(self) -> str:
        # (The token is a capability: not in a repr that may reach a log.)
        return "Callback(token=<hidden>, url=<hidden>)" if self.url else "Callback(token=<hidden>)"


def _callback_value(payload: Any) -> Any:
    """The value a callback's signal carries, or its failure raised."""
    if isinstance(payload, dict) and "error" in payload:
        raise CallbackFailedError(str(payload["error"]))
    return payload.get("value") if isinstance(payload, dict) else payload


class WorkflowContext:
    """What a workflow run can do durably. Each operation is journaled by position.

    Attributes:
        run_id: This run's id.
        workflow: The workflow's registered name.
        domain: The run's domain (``"default"`` unless set).
        subject: The business entity the run is about, or ``None``.
        trigger: The :class:`Event` that started the run, or ``None``.
    """

    def __init__(
        self,
        *,
        run_id: str,
        workflow: str,
        version: str,
        domain: str,
        subject: str | None,
        trigger: Event | None,
        sides: SideValues,
        public_url: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.version = version
        self.domain = domain
        self.subject = subject
        self.trigger = trigger
        self._sides = sides
        self._public_url = public_url

    @overload
    async def step(
        self,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        name: str | None = None,
        retry: Retry | None = None,
        compensate: Callable[[Any], Any] | None = None,
        timeout: Duration | None = None,
        **kwargs: Any,
    ) -> T: ...

    @overload
    async def step(
        self,
        fn: Callable[..., T],
        *args: Any,
        name: str | None = None,
        retry: Retry | None = None,
        compensate: Callable[[Any], Any] | None = None,
        timeout: Duration | None = None,
        **kwargs: Any,
    ) -> T: ...

    async def step(
        self,
        fn: Callable[..., Any],
        *args: Any,
        name: str | None = None,
        retry: Retry | None = None,
        compensate: Callable[[Any], Any] | None = None,
        timeout: Duration | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` once and journal its result.

        On replay the journaled result is returned and ``fn`` is not called
        again. Sync functions run in a thread so they cannot block the worker.

        Args:
            fn: A sync or async function; its result must be JSON-serialisable.
            name: The step's name in the journal (default: the function's name).
            retry: How to retry failures (default: no retry).
            compensate: The step's undo, a sync or async callable: once the step
                succeeds it is registered with the step's result as its only
                argument, and run (newest first, retried under ``retry``) by
                :meth:`compensate`, or when the workflow raises or the run is
                cancelled or times out. A run that completes leaves it unrun.
            timeout: How long each attempt may take (a ``timedelta``, seconds or
                ``"10s"``; default: no limit). At the deadline an ``async def``
                step is cancelled and a ``def`` step's thread abandoned (its late
                result is ignored); the attempt fails with ``StepTimeoutError``
                and is retried under ``retry`` like any failure.

        Raises:
            StepFailedError: The last attempt failed (``error_type``
                ``"StepTimeoutError"`` when it ran out of time).
            InvalidArgumentError: ``fn``, ``retry`` or ``timeout`` is malformed.
        """
        if not callable(fn):
            raise InvalidArgumentError(f"ctx.step needs a function, got {shown(fn)}")
        if retry is not None and not isinstance(retry, Retry):
            raise InvalidArgumentError(f"retry must be a parkway.Retry, got {shown(retry)}")
        if compensate is not None and not callable(compensate):
            raise InvalidArgumentError(
                f"compensate must be a function taking the step's result, got {shown(compensate)}"
            )
        seconds = None
        if timeout is not None:
            seconds = to_seconds(timeout, "ctx.step timeout")
            if seconds <= 0:
                raise InvalidDurationError(
                    timeout, "ctx.step timeout", detail="must be longer than zero"
                )
        if name is None:
            qualname = getattr(fn, "__qualname__", None)
            name = qualname if isinstance(qualname, str) and qualname else type(fn).__name__
        # Checked here, in the run, the same on every store (PostgreSQL's text takes
        # no NUL): the workflow sees the error at its call and the run says why.
        try:
            step_name = limits.text(
                name, "step name", field="name", max_length=limits.MAX_STEP_NAME_LENGTH,
                blank=False,
            )  # fmt: skip
        except InvalidInputError as exc:  # (it is not the run's input that is at fault)
            raise InvalidArgumentError(
                str(exc).removeprefix("invalid input: "), field="name"
            ) from None
        result = await StepCmd(fn, args, kwargs, step_name, retry, seconds)
        if compensate is not None:
            self._sides.register_compensation(step_name, compensate, result, retry)
        return result

    async def compensate(self) -> list[Any]:
        """Run every registered compensation not run yet, newest first, each as a
        journaled step (retried under its step's ``retry``).

        Returns:
            Their results, in the order they ran.

        Raises:
            CompensationFailedError: A compensation still failed after its retries
                (the others were run all the same); ``failed`` names their steps.
        """
        results, failed = await self._sides.run_compensations()
        if failed:
            raise CompensationFailedError(self.run_id, failed)
        return results

    async def sleep(self, duration: Duration) -> None:
        """Park for ``duration`` (engine time); survives restarts."""
        await SleepCmd(seconds=to_seconds(duration, "ctx.sleep duration"))

    async def sleep_until(self, when: datetime) -> None:
        """Park until ``when`` (a naive datetime is taken as UTC)."""
        if not isinstance(when, datetime):
            raise InvalidArgumentError(f"ctx.sleep_until needs a datetime, got {shown(when)}")
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        await SleepCmd(until=when.timestamp())

    def now(self) -> datetime:
        """The current engine time as an aware UTC ``datetime``, the same on every replay."""
        return datetime.fromtimestamp(self._sides.side("now", self._sides.clock_now), UTC)

    def uuid(self) -> _uuid.UUID:
        """A random UUID, the same on every replay."""
        return _uuid.UUID(self._sides.side("uuid", lambda: str(_uuid.uuid4())))

    def random(self) -> float:
        """A random float in [0, 1), the same on every replay."""
        return float(self._sides.side("random", _random.random))

    def callback(self, *, timeout: Duration | None = None) -> Callback:
        """A callback for a third party (a payment provider, a webhook) to complete.

        The token is made once and journaled: the same on every replay. Hand
        ``cb.url`` or ``cb.token`` over in a step (its row is committed before any
        step runs), then ``value = await cb.wait()``. Completed by
        ``engine.complete_callback(token, value)`` or ``POST /callbacks/{token}``
        (no API token needed: the token is the capability), failed by
        ``engine.fail_callback`` or ``POST /callbacks/{token}/fail``.

        Args:
            timeout: How long the callback may take from now; ``cb.wait()`` raises
                :class:`WaitTimeoutError` once it has passed.
        """
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        made = self._sides.open_callback(seconds)
        url = None if self._public_url is None else f"{self._public_url}/callbacks/{made['token']}"
        return Callback(made["token"], url, made["signal"], made["deadline"], self._sides)

    async def human_task(
        self,
        name: str,
        *,
        title: str | None = None,
        form: Any = None,
        data: Any = None,
        assignees: Any = (),
        timeout: Duration | None = None,
    ) -> Any:
        """Park until a person completes a task; return what they submitted.

        The task is listed by ``engine.tasks()``, ``GET /tasks`` and the dashboard's
        inbox, and completed by ``engine.complete_task``. Usable inside ``ctx.first``.

        Args:
            name: What the task is, for lists and filters (``"approve-refund"``).
            title: A line for the person (``None``: lists show the name).
            form: A pydantic model class (the result is an instance of it, rebuilt
                on replay from the journaled data), a JSON Schema of an object (the
                result is the checked dict), or ``None`` (any JSON).
            data: JSON shown to the person with the form.
            assignees: Who may complete it (names, as ``by=`` gives them); empty:
                anyone.
            timeout: How long the task stays open; then it expires and this raises.

        Raises:
            WaitTimeoutError: ``timeout`` passed first (the task is ``expired``).
            InvalidArgumentError: A malformed argument (the message names it).
        """
        name = limits.name(name, "human task name")
        if title is not None:
            title = limits.text(title, "human task title", field="title", max_length=1000)
        schema, model = forms.schema_of(form)
        people = _assignees(assignees)
        _json.dumps(data, "the data of a human task")
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        spec = {
            "name": name, "title": title, "form_schema": schema, "form_model": model,
            "data": data, "assignees": people, "timeout": seconds,
        }  # fmt: skip
        made = self._sides.open_task(spec)
        convert = _task_result(form if forms.is_model(form) else None)
        command = PersonCmd(
            made["signal"], seconds, what=f"human_task({shown(name)})", task=made["id"],
            convert=convert,
        )  # fmt: skip
        return convert(await command)

    @property
    def scheduled_at(self) -> datetime | None:
        """The tick of the schedule that started this run (an aware UTC ``datetime``),
        or ``None`` for a run no schedule started. Read from the run's id
        (``sched:<schedule id>:<tick>``), so the same on every replay."""
        return tick_of(self.run_id)

    @property
    def history_length(self) -> int:
        """How many journal entries this run's generation has at this point of its
        code: the same on every replay, so code may branch on it."""
        return self._sides.reached

    @property
    def continue_as_new_suggested(self) -> bool:
        """Whether the journal has grown past the engine's ``history_threshold``
        (10,000 entries by default): a long-lived run (an entity receiving an input
        a day, a counter) should then ``ctx.continue_as_new(state)`` at its next
        quiet point, so that a replay (after a restart, on another worker) stays
        cheap. Deterministic, like :attr:`history_length`."""
        return self._sides.reached >= self._sides.history_threshold

    def set_value(self, key: str, value: Any) -> None:
        """Publish a JSON ``value`` under ``key`` for callers (a payment link, a
        progress figure): ``await handle.value(key)`` reads it, ``RunInfo.values``
        holds them all. It is visible once the transaction that journals it
        commits; a later set replaces it.

        Raises:
            InvalidArgumentError: ``key`` is not a valid name.
            SerializationError: ``value`` is not JSON-serialisable (nothing is set).
        """
        key = limits.name(key, "value key", field="key")
        data = _json.dumps(value, f"value {shown(key)}")
        self._sides.set_value(key, data)

    async def write_stream(self, key: str, value: Any) -> None:
        """Append a JSON ``value`` to the run's stream ``key`` (a model's answer as it
        comes, a long job's progress), for readers of ``handle.stream(key)`` or
        ``GET /runs/{id}/streams/{key}``.

        Journaled: the item is appended in the transaction that journals it, so
        exactly once, even if the worker dies and the run is replayed; readers see
        it once that transaction commits (at the run's next wait or step, or its
        end). Its ``attempt`` is ``None``. To make items visible at once from a
        long call, write them from a step: ``parkway.step_context().write_stream``.

        Raises:
            InvalidArgumentError: ``key`` is not a valid name, or the stream was
                closed.
            SerializationError: ``value`` is not JSON-serialisable (nothing is written).
        """
        limits.name(key, "stream key", field="key")
        data = _json.dumps(value, f"stream {key!r} item")
        self._sides.write_stream(key, data)

    async def close_stream(self, key: str) -> None:
        """End the run's stream ``key``: its readers stop after its last item, and
        nothing more can be written to it. Closing a closed stream does nothing; a
        run that ends closes all of its streams.

        Raises:
            InvalidArgumentError: ``key`` is not a valid name.
        """
        limits.name(key, "stream key", field="key")
        self._sides.close_stream(key)

    def on_update(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        validate: Callable[[Any], Any] | None = None,
    ) -> None:
        """Handle synchronous updates called ``name`` (``engine.update(run_id, name,
        payload)``) with ``handler(payload)``, sync or async (it may await ctx
        operations); its return value is the caller's answer.

        Register it in the workflow's own code, before the wait where updates
        should be taken: updates are handled whenever the run is parked (at any
        wait) or reaches its next wait. ``validate(payload)`` runs first, against
        the run's state at that moment; if it raises, the caller gets
        ``UpdateRejectedError`` with its message and nothing is journaled.

        Raises:
            InvalidArgumentError: ``name`` is not a name, or ``handler`` (or
                ``validate``) is not callable.
        """
        name = check_handler(name, handler, validate)
        self._sides.on_update(name, handler, validate)

    def patched(self, change_id: str) -> bool:
        """Whether this run takes the new branch of a change made to deployed code.

        ``True`` when the run executes this point for the first time (the choice
        is journaled, so it stays ``True`` on replay); ``False`` when it replays a
        journal that was written past this point without the marker (a run that
        was already past the change when it was deployed). It lets deployed code
        change in place, without a new ``version=``::

            if ctx.patched("fraud-check"):
                await ctx.step(check_fraud, order)
            await ctx.step(charge, order)

        Remove the old branch once no run that predates the change is left, and
        keep ``ctx.deprecate_patch("fraud-check")`` at that point until then.

        Raises:
            InvalidArgumentError: ``change_id`` is not a non-empty string.
        """
        _check_change_id(change_id)
        return self._sides.patched(change_id)

    def deprecate_patch(self, change_id: str) -> None:
        """Mark where patch ``change_id`` was, once only its new branch is left: runs
        that journaled the marker there still replay (it is consumed), new runs
        journal nothing."""
        _check_change_id(change_id)
        self._sides.patched(change_id, deprecated=True)

    async def wait_until(
        self, predicate: Callable[[], Any], *, timeout: Duration | None = None
    ) -> None:
        """Park until ``predicate()`` (a sync function over the workflow's own
        variables) is true.

        It is checked when the run reaches the wait, and again whenever the run's
        state may have changed while it waits: after an update handler, or when
        another branch of a gather moved on.

        Raises:
            WaitTimeoutError: ``timeout`` passed first.
            InvalidArgumentError: ``predicate`` is not callable.
        """
        if not callable(predicate) or inspect.iscoroutinefunction(predicate):
            raise InvalidArgumentError(
                f"ctx.wait_until needs a plain function returning a bool, got {shown(predicate)}",
                field="predicate",
            )
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        await WaitUntilCmd(predicate, seconds)

    async def wait_for_signal(self, name: str, *, timeout: Duration | None = None) -> Any:
        """Park until a signal called ``name`` reaches this run; return its payload.

        Signals sent before the wait are kept in the run's mailbox and consumed
        oldest first, per name.

        Raises:
            WaitTimeoutError: ``timeout`` passed first.
        """
        name = limits.name(name, "signal name")
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        return await SignalCmd(name, seconds)

    async def wait_for_event(
        self,
        name: str,
        *,
        match: dict[str, Any] | None = None,
        subject: str | None = None,
        timeout: Duration | None = None,
        since_start: bool = False,
        ttl: Duration | None = None,
    ) -> Any:
        """Park until an event called ``name`` matching ``match`` is published; return its payload.

        Args:
            name: The event name.
            match: Payload fields that must deep-equal these values (``None``: any payload).
            subject: Omitted: this run's own subject (any subject if the run has
                none). A subject such as ``"product:456"``: a cross-subject
                subscription. ``"*"``: any subject in the run's domain.
            timeout: Give up after this long.
            since_start: Also accept the earliest matching event published since
                this run was created that it has not consumed yet (within
                ``event_retention``), decided atomically with parking.
            ttl: How long the subscription may live at most, a safety net against
                orphans: past it the sweeper removes it, and the run waits on for its
                timeout alone. Default: the timeout plus one day, or 90 days.

        Raises:
            WaitTimeoutError: ``timeout`` passed first.
        """
        name = limits.name(name, "event name")
        check_match(match)
        subject = limits.subject(subject)
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        ttl_seconds = None if ttl is None else to_seconds(ttl, "ttl")
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise InvalidArgumentError(f"ttl must be positive, got {shown(ttl)}")
        return await EventCmd(name, match, subject, seconds, bool(since_start), ttl_seconds)

    async def wait_for_message(
        self, name: str, key: str, *, timeout: Duration | None = None
    ) -> Any:
        """Park until a message ``(name, key)`` is correlated to this run; return its payload.

        A message buffered before the wait is consumed first, oldest first.

        Raises:
            DuplicateSubscriptionError: Another run already waits for ``(name, key)``.
            WaitTimeoutError: ``timeout`` passed first.
        """
        name, key = check_message(name, key)
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        return await MessageCmd(name, key, seconds)

    async def publish(
        self,
        name: str,
        payload: Any = None,
        *,
        id: str | None = None,
        subject: str | None = None,
    ) -> PublishResult:
        """Publish an event from this run, exactly once (it is journaled with its effects).

        The event is in this run's domain; its subject is ``subject``, else the
        engine's extractor's, else this run's.
        """
        name = limits.name(name, "event name")
        id = limits.optional_identifier(id, "event id", field="id")
        subject = limits.subject(subject)
        result: PublishResult = await PublishCmd(name, payload, id, subject)
        return result

    async def _start_run(self, workflow: str, input: Any, *, trigger: dict[str, Any]) -> str:
        """Internal: start a top-level run of ``workflow`` as if ``trigger`` had started it."""
        run_id: str = await StartChildCmd(workflow, input, None, trigger=trigger)
        return run_id

    async def start_child(
        self, workflow: str | Callable[..., Any], input: Any = None, *, id: str | None = None
    ) -> ChildHandle:
        """Start a child run (exactly once); ``await handle.result()`` waits for it."""
        name = _workflow_name(workflow)
        id = limits.optional_identifier(id, "child run id", field="id")
        child_id: str = await StartChildCmd(name, input, id)
        return ChildHandle(child_id)

    async def child(
        self, workflow: str | Callable[..., Any], input: Any = None, *, id: str | None = None
    ) -> Any:
        """Start a child run and wait for its result."""
        handle = await self.start_child(workflow, input, id=id)
        return await handle.result()

    async def gather(self, *aws: Awaitable[Any], return_exceptions: bool = False) -> list[Any]:
        """Run ``aws`` concurrently; return their results in argument order.

        Each argument is an unawaited ctx operation (``ctx.step(...)``,
        ``ctx.child(...)``, a wait) or a coroutine of yours that awaits ctx
        operations (a branch). Steps of different branches run at the same time;
        waits of different branches are all registered at once. Every operation
        keeps its journal position whatever order the branches finish in, so
        replay is safe. Nested gathers work.

        Args:
            aws: The branches.
            return_exceptions: Return exceptions in place instead of raising the
                first one.

        Raises:
            InvalidArgumentError: An argument is not a coroutine (nothing runs).
            Exception: Without ``return_exceptions``, the first exception a branch
                raised, once the other branches' steps in flight have settled
                (the branches still waiting are withdrawn).
        """
        branches = list(aws)
        for index, branch in enumerate(branches):
            if not inspect.iscoroutine(branch):
                _close_all(branches)
                raise InvalidArgumentError(
                    f"ctx.gather argument {index} must be an unawaited ctx operation or a "
                    f"coroutine (call it without await), got {type(branch).__name__} "
                    f"{shown(branch)}",
                    field=f"aws[{index}]",
                )
        coros = tuple(cast(Coroutine[Any, Any, Any], branch) for branch in branches)
        results: list[Any] = await GatherCmd(coros, bool(return_exceptions))
        return results

    async def first(self, **waits: Awaitable[Any]) -> tuple[str, Any]:
        """Park once on several waits; the first input to arrive wins.

        ``name, value = await ctx.first(paid=ctx.wait_for_event("payment.received",
        match={"order": id}), cancelled=ctx.wait_for_signal("cancel"), late=ctx.sleep("1d"))``

        Each keyword is an unawaited wait: ``ctx.wait_for_signal``,
        ``ctx.wait_for_event``, ``ctx.wait_for_message``, ``ctx.sleep``,
        ``ctx.sleep_until`` or a child's ``handle.result()``. The others are
        withdrawn in the transaction that resumes the run: a signal or message a
        losing wait did not take stays in the mailbox or the buffer.

        Returns:
            The winner's keyword and its value.

        Raises:
            InvalidArgumentError: No waits, or one that is not a wait (a step, say).
            WaitTimeoutError: A wait's own ``timeout`` passed first.
            DuplicateSubscriptionError: Another run already waits for a message wait's
                ``(name, key)``.
        """
        if not waits:
            raise InvalidArgumentError("ctx.first needs at least one wait, as a keyword")
        found: dict[str, Command] = {}
        try:
            for name, wait in waits.items():
                found[name] = _wait_command(name, wait)
        finally:
            _close_all(list(waits.values()))
        name, value = await FirstCmd(found)
        winner = found[name]
        if isinstance(winner, PersonCmd) and winner.convert is not None:
            value = winner.convert(value)  # (a callback's value, a task's result)
        return name, value

    def continue_as_new(self, input: Any = None) -> None:
        """End this generation and restart this run id with ``input`` and a fresh journal.

        Unconsumed signals carry over. Does not return.
        """
        raise ContinueAsNew(input)


# What ctx.first takes: the commands of the waits.
_WAITS = (SignalCmd, EventCmd, MessageCmd, SleepCmd, ChildResultCmd)


def _wait_command(name: str, wait: Any) -> Command:
    """The command an unawaited wait ``wait`` (keyword ``name`` of ctx.first) would
    yield: it is run to its first await, where it yields it."""
    if not inspect.iscoroutine(wait):
        raise InvalidArgumentError(
            f"ctx.first({name}=...) must be an unawaited wait such as "
            f"ctx.wait_for_signal(...), got {type(wait).__name__} {shown(wait)}",
            field=name,
        )
    command = wait.send(None)
    if not isinstance(command, _WAITS):
        what = command.describe() if isinstance(command, Command) else repr(command)
        raise InvalidArgumentError(
            f"ctx.first({name}=...) must be a wait (a signal, event or message wait, a "
            f"sleep, or a child's result), got {what}; run steps before or after it",
            field=name,
        )
    return command


def _assignees(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise InvalidArgumentError(
            f"assignees must be a list or tuple of names, got {type(value).__name__} "
            f"{shown(value)}; one assignee is assignees=({shown(value)},)",
            field="assignees",
        )
    return tuple(
        limits.name(person, "assignee", field=f"assignees[{index}]")
        for index, person in enumerate(value)
    )


def _task_result(model: Any) -> Callable[[Any], Any]:
    """What a task's signal carries, made the task's result."""

    def convert(payload: Any) -> Any:
        result = payload.get("result") if isinstance(payload, dict) else payload
        return result if model is None else model.model_validate(result)

    return convert


def _check_change_id(change_id: Any) -> None:
    if not isinstance(change_id, str) or not change_id.strip():
        raise InvalidArgumentError(
            f"a patch's change id must be a non-empty string, got {shown(change_id)}",
            field="change_id",
        )


def _close_all(coroutines: list[Any]) -> None:
    """Close coroutines handed over but never to be run (no 'never awaited' warning)."""
    for coro in coroutines:
        if inspect.iscoroutine(coro):
            coro.close()


def _workflow_name(workflow: str | Callable[..., Any]) -> str:
    if isinstance(workflow, str):
        return limits.name(workflow, "workflow name", field="workflow")
    name = getattr(workflow, "__parkway_workflow__", None)
    if not isinstance(name, str):
        raise InvalidArgumentError(
            f"{shown(workflow)} is not a registered workflow (nor a workflow name)"
        )
    return name
