"""The engine's decorators and what they register: workflows (with their decorator
schedules and the accumulators their debounce or batch needs), JSON flows, and
the handlers of flows' Action nodes.

The checks of ``@engine.workflow``'s options are the registry's
(:func:`parkway.registry.define`); what needs the runtime (the schedule, which
is encoded as a start would be) is checked here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from parkway import flows
from parkway.admission import Concurrency, RateLimit
from parkway.client.base import State
from parkway.core import accumulate
from parkway.core import schedules as core_schedules
from parkway.core.runtime import Runtime
from parkway.durations import Duration
from parkway.errors import InvalidScheduleError, shown
from parkway.events import CancelOn
from parkway.registry import ENGINE_RETENTION, WorkflowDef, WorkflowFn, define
from parkway.schedules import Schedule

F = TypeVar("F", bound=WorkflowFn)
A = TypeVar("A", bound=Callable[..., Any])


def workflow(
    state: State,
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
    retention: Any = ENGINE_RETENTION,
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
        wf = define(
            fn,
            name=name,
            version=version,
            on_event=on_event,
            on_message=on_message,
            debounce=debounce,
            batch=batch,
            validate_input=validate_input,
            unique_per_subject=unique_per_subject,
            cancel_on=cancel_on,
            concurrency=concurrency,
            rate_limit=rate_limit,
            priority=priority,
            retention=retention,
            timeout=timeout,
        )
        _add(state, wf, schedule)
        fn.__parkway_workflow__ = wf.name  # type: ignore[attr-defined]
        return fn

    if callable(name):  # used bare: @engine.workflow
        fn, name = name, None
        return register(fn)
    return register


def workflows(state: State) -> list[str]:
    """The names of the workflows registered here (not the engine's own helpers)."""
    return state.rt.registry.names()


def action(state: State, name: str | None = None) -> Callable[[A], A]:
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
        flows.register_action(state.rt.actions, action_name, fn)
        return fn

    if callable(name):  # used bare: @engine.action
        fn, name = name, None
        return register(fn)
    return register


def add_flow(state: State, definition: Any, *, domain: str = "default") -> flows.FlowDefinition:
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
    return flows.add_flow(state.rt, state.node_models, definition, domain=domain)


def _add(state: State, wf: WorkflowDef, schedule: Any) -> None:
    """Register ``wf`` (:func:`parkway.registry.define` made it), with its schedule
    (``schedule=``, written to the store when the engine opens, or now if it is open)
    and its accumulator.

    Raises:
        DuplicateWorkflowError: ``wf``'s name and version are already registered.
        InvalidScheduleError: ``schedule`` is malformed (the message names the field).
    """
    declared = _declared_schedule(state.rt, wf, schedule)
    registry = state.rt.registry
    registry.add(wf)
    if declared is not None:
        state.declared[wf.name] = declared
        if state.open:  # (else written when it opens)
            # (No event loop running here: it is written at the next open.)
            with contextlib.suppress(RuntimeError):
                core_schedules.declare(state.rt, wf.name, *declared)
    if (wf.debounce or wf.batch) and registry.get(accumulate.accumulator_name(wf), "1") is None:
        registry.add(accumulate.accumulator_for(wf))


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
        rt,
        wf.name,
        wf.name,
        schedule.cron,
        input=schedule.input,
        timezone=schedule.timezone,
        catch_up=schedule.catch_up,
        wf=wf,
    )
    return name, schedule.cron, schedule.timezone, schedule.catch_up, data
