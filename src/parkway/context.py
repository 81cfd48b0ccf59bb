"""The ``ctx`` object a workflow receives: every durable operation goes through it."""

from __future__ import annotations

import random as _random
import uuid as _uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from parkway import limits
from parkway.commands import (
    ChildResultCmd,
    ContinueAsNew,
    EventCmd,
    MessageCmd,
    PublishCmd,
    SignalCmd,
    SleepCmd,
    StartChildCmd,
    StepCmd,
)
from parkway.durations import Duration, to_seconds
from parkway.errors import ParkwayError
from parkway.models import Retry

if TYPE_CHECKING:
    from parkway.events import Event, PublishResult

T = TypeVar("T")


class SideValues(Protocol):
    """What ``ctx.now()``, ``ctx.uuid()`` and ``ctx.random()`` need from the executor."""

    def side(self, name: str, produce: Callable[[], Any]) -> Any:
        """The journaled value at the next position, produced on first execution."""
        ...

    def clock_now(self) -> float:
        """Engine time."""
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
        return f"ChildHandle({self.id!r})"


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
    ) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.version = version
        self.domain = domain
        self.subject = subject
        self.trigger = trigger
        self._sides = sides

    @overload
    async def step(
        self,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        name: str | None = None,
        retry: Retry | None = None,
        **kwargs: Any,
    ) -> T: ...

    @overload
    async def step(
        self,
        fn: Callable[..., T],
        *args: Any,
        name: str | None = None,
        retry: Retry | None = None,
        **kwargs: Any,
    ) -> T: ...

    async def step(
        self,
        fn: Callable[..., Any],
        *args: Any,
        name: str | None = None,
        retry: Retry | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` once and journal its result.

        On replay the journaled result is returned and ``fn`` is not called
        again. Sync functions run in a thread so they cannot block the worker.

        Args:
            fn: A sync or async function; its result must be JSON-serialisable.
            name: The step's name in the journal (default: the function's name).
            retry: How to retry failures (default: no retry).

        Raises:
            StepFailedError: The last attempt failed.
        """
        if not callable(fn):
            raise ParkwayError(f"ctx.step needs a function, got {fn!r}")
        if retry is not None and not isinstance(retry, Retry):
            raise ParkwayError(f"retry must be a parkway.Retry, got {retry!r}")
        step_name = name or getattr(fn, "__qualname__", None) or repr(fn)
        return await StepCmd(fn, args, kwargs, step_name, retry)

    async def sleep(self, duration: Duration) -> None:
        """Park for ``duration`` (engine time); survives restarts."""
        await SleepCmd(seconds=to_seconds(duration, "ctx.sleep duration"))

    async def sleep_until(self, when: datetime) -> None:
        """Park until ``when`` (a naive datetime is taken as UTC)."""
        if not isinstance(when, datetime):
            raise ParkwayError(f"ctx.sleep_until needs a datetime, got {when!r}")
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

    async def wait_for_signal(self, name: str, *, timeout: Duration | None = None) -> Any:
        """Park until a signal called ``name`` reaches this run; return its payload.

        Signals sent before the wait are kept in the run's mailbox and consumed
        oldest first, per name.

        Raises:
            WaitTimeoutError: ``timeout`` passed first.
        """
        limits.name(name, "signal name")
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
        limits.name(name, "event name")
        limits.match(match)
        limits.subject(subject)
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        ttl_seconds = None if ttl is None else to_seconds(ttl, "ttl")
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise ParkwayError(f"ttl must be positive, got {ttl!r}")
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
        from parkway.messages import check

        check(name, key)
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
        limits.name(name, "event name")
        limits.optional_identifier(id, "event id", field="id")
        limits.subject(subject)
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
        limits.optional_identifier(id, "child run id", field="id")
        child_id: str = await StartChildCmd(name, input, id)
        return ChildHandle(child_id)

    async def child(
        self, workflow: str | Callable[..., Any], input: Any = None, *, id: str | None = None
    ) -> Any:
        """Start a child run and wait for its result."""
        handle = await self.start_child(workflow, input, id=id)
        return await handle.result()

    def continue_as_new(self, input: Any = None) -> None:
        """End this generation and restart this run id with ``input`` and a fresh journal.

        Unconsumed signals carry over. Does not return.
        """
        raise ContinueAsNew(input)


def _workflow_name(workflow: str | Callable[..., Any]) -> str:
    if isinstance(workflow, str):
        return limits.name(workflow, "workflow name", field="workflow")
    name = getattr(workflow, "__parkway_workflow__", None)
    if not isinstance(name, str):
        raise ParkwayError(f"{workflow!r} is not a registered workflow (nor a workflow name)")
    return name
