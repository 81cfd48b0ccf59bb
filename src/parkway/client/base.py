"""What every client call of the engine stands on: the state it is given, the
delegation that makes it a method of :class:`parkway.Engine`, and edge checks.

A client call is a plain function whose first parameter is the engine's
:class:`State`; ``Engine`` lists each as a method with :func:`delegate`, so the
calls know nothing of the engine but what the state gives them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from parkway import _json, limits
from parkway.core.runtime import Runtime
from parkway.errors import (
    EngineClosedError,
    InvalidArgumentError,
    InvalidInputError,
    SerializationError,
    shown,
)
from parkway.handle import RunClient, RunHandle
from parkway.ids import new_id
from parkway.models import RunStatus
from parkway.registry import WorkflowDef

P = ParamSpec("P")
R = TypeVar("R")


class State:
    """What the engine's client calls are given: its runtime and what it is now.

    Attributes:
        rt: The engine's runtime.
        engine: What the :class:`parkway.RunHandle` a call returns is made on (the
            engine itself).
        run_worker: Whether the engine runs a worker while it is open.
        client: Whether the engine was made a client (``worker=False``): one that
            may start and schedule workflows it does not register. The command line
            opens an app's engine without its worker for one command; that engine
            stays what its app made it.
        node_models: The node types available to JSON flows, by type name.
        open: Whether the engine is open.
        declared: Decorator schedules (``schedule=``), by workflow name: validated
            when declared, written to the store when the engine opens (workflow,
            cron, time zone, catch-up, input).
    """

    def __init__(
        self, rt: Runtime, engine: RunClient, *, worker: bool, node_models: dict[str, Any]
    ) -> None:
        self.rt = rt
        self.engine = engine
        self.node_models = node_models
        self.run_worker = worker
        self.client = not worker
        self.open = False
        self.declared: dict[str, tuple[str, str, str, str, bytes]] = {}

    def require_open(self) -> None:
        """Raise :class:`parkway.EngineClosedError` unless the engine is open."""
        if not self.open:
            raise EngineClosedError()

    @property
    def starts_by_name(self) -> bool:
        """Whether a workflow this engine does not register is started (or scheduled)
        by name, for a worker that has it: only by a client engine."""
        return self.client and not self.run_worker

    def handle(self, run_id: str) -> RunHandle:
        """A handle on run ``run_id``, through the engine."""
        return RunHandle(self.engine, run_id)


class HasState(Protocol):
    """What a method :func:`delegate` makes is bound to: the engine."""

    @property
    def _state(self) -> State: ...


def delegate(call: Callable[Concatenate[State, P], R]) -> Callable[Concatenate[HasState, P], R]:
    """An engine method that makes the client call ``call`` with the engine's state.

    The method has ``call``'s name, docstring and parameters but the first (mypy
    keeps them, through ``ParamSpec``), and is a coroutine function if ``call`` is
    one, so ``help(engine.start)``, ``inspect`` and the API reference show the call
    as the engine offers it.
    """
    if inspect.iscoroutinefunction(call):
        coroutine = cast(Callable[..., Coroutine[Any, Any, Any]], call)

        @functools.wraps(call)
        async def awaited(engine: HasState, /, *args: Any, **kwargs: Any) -> Any:
            return await coroutine(engine._state, *args, **kwargs)

        method: Callable[..., Any] = awaited
    else:

        @functools.wraps(call)
        def called(engine: HasState, /, *args: Any, **kwargs: Any) -> Any:
            return call(engine._state, *args, **kwargs)

        method = called
    signature = inspect.signature(call)
    first, *rest = signature.parameters.values()
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[first.replace(name="self", annotation=inspect.Parameter.empty), *rest]
    )
    return cast(Callable[Concatenate[HasState, P], R], method)


def name_of(workflow: str | Callable[..., Any]) -> str:
    """The name of ``workflow``: a name, or a function ``@engine.workflow`` registered."""
    if isinstance(workflow, str):
        return limits.name(workflow, "workflow name", field="workflow")
    name = getattr(workflow, "__parkway_workflow__", None)
    if isinstance(name, str):
        return name
    raise InvalidArgumentError(
        f"{shown(workflow)} is neither a workflow name nor a registered workflow"
    )


def check_id(run_id: str | None) -> str:
    """A run id a caller gives (a new random one for ``None``)."""
    return new_id() if run_id is None else limits.identifier(run_id)


def encode_input(wf: WorkflowDef, value: Any) -> bytes:
    """A new run's input, validated by ``wf`` and encoded."""
    checked = wf.check_input(value)
    try:
        return _json.dumps(checked, f"the input of workflow {shown(wf.name)}")
    except SerializationError as exc:
        raise InvalidInputError(str(exc), workflow=wf.name, field=exc.path) from exc


def status_value(status: RunStatus | str | None) -> str | None:
    """A run status filter's value (``None``: any)."""
    if status is None:
        return None
    try:
        return RunStatus(status).value
    except Exception:  # (ValueError; or what a hostile __eq__ or __repr__ raises inside enum)
        valid = ", ".join(s.value for s in RunStatus)
        raise InvalidArgumentError(
            f"unknown run status {shown(status)}; use one of: {valid}"
        ) from None


def instant(value: datetime | str | None, field: str) -> float | None:
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


def timestamp(when: datetime | None, field: str) -> float | None:
    """An aware datetime as the store's epoch seconds (a naive one is ambiguous)."""
    if when is None:
        return None
    if not isinstance(when, datetime) or when.utcoffset() is None:
        raise InvalidArgumentError(
            f"{field} must be an aware datetime (with a timezone), got {shown(when)}", field=field
        )
    return when.timestamp()
