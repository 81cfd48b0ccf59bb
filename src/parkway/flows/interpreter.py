"""One workflow per flow: a function that walks the graph with ``ctx`` operations.

The function is replayed from the start node on every resume, like any
workflow, so everything it decides comes from the run's trigger and from
journaled results (event payloads, action results): the same journal walks
the same path. Waits are ``ctx.wait_for_event`` / ``ctx.sleep``; actions are
``ctx.step``.

Starting is decided in the publish transaction by the workflow's start rule:
one run per ``(domain, flow id, subject)`` at a time, with run ids
``flow:<flow id>:<domain>:<subject>`` and then ``...:2``, ``...:3`` for later
runs of the same subject (``every_rematch``).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from parkway.errors import FlowDefinitionError, ParkwayError
from parkway.flows import templates
from parkway.flows.loader import FlowDefinition, load
from parkway.flows.nodes import FlowContext, SubscriptionRequest
from parkway.flows.templates import Scope
from parkway.registry import WorkflowDef
from parkway.store.base import ENDED

if TYPE_CHECKING:
    from parkway.core.runtime import Runtime
    from parkway.events import Event
    from parkway.replay.context import WorkflowContext
    from parkway.store.base import RunRecord, Tx

log = logging.getLogger("parkway.flows")

ActionHandler = Callable[[dict[str, Any], FlowContext], Any]
# A run parked on a wait whose subscription could not be resolved waits on this
# signal (per node), which nothing sends: only the wait's timeout moves it on.
UNRESOLVED_SIGNAL = "parkway.flow.unresolved"


class FlowRun:
    """A flow run as node models see it while the interpreter walks the graph.

    Attributes:
        ctx: The run's workflow context (every effect goes through it).
        flow: The flow definition.
        trigger: The starting event's payload.
        event: The payload of the event that last resumed the run.
        state: Action results by node id.
    """

    def __init__(
        self,
        flow: FlowDefinition,
        ctx: WorkflowContext,
        input: Any,
        actions: Mapping[str, ActionHandler],
    ) -> None:
        self.ctx = ctx
        self.flow = flow
        self._actions = actions
        started = ctx.trigger
        if started is not None:
            self.trigger = started.payload
            self._trigger_envelope = started.to_dict()
        else:  # started with engine.start(flow id, input)
            self.trigger = input
            self._trigger_envelope = {
                "name": None, "payload": input, "id": None,
                "domain": ctx.domain, "subject": ctx.subject,
            }  # fmt: skip
        self.event: Any = self.trigger
        self._event_envelope: dict[str, Any] = self._trigger_envelope
        self.state: dict[str, Any] = {}

    def scope(self) -> Scope:
        """What templates resolve against now."""
        return Scope(
            {"trigger": self.trigger, "event": self.event, "state": self.state},
            {"trigger": self._trigger_envelope, "event": self._event_envelope},
        )

    def resolve(self, value: Any) -> Any:
        """``value`` with its placeholders resolved."""
        return templates.resolve(value, self.scope())

    def context(self, node_id: str) -> FlowContext:
        """A snapshot for node ``node_id`` that shares nothing mutable with the run."""
        scope = copy.deepcopy(self.scope())
        return FlowContext(
            run_id=self.ctx.run_id, domain=self.ctx.domain, subject=self.ctx.subject,
            trigger=scope.values["trigger"], event=scope.values["event"],
            state=scope.values["state"], flow_id=self.flow.id, node_id=node_id, scope=scope,
        )  # fmt: skip

    async def wait_for(self, request: SubscriptionRequest, *, timeout: float | None = None) -> Any:
        """Park until ``request``'s event arrives; it becomes ``event``. Returns its payload.

        Raises:
            WaitTimeoutError: ``timeout`` seconds passed first.
        """
        payload = await self.ctx.wait_for_event(
            request.event, match=request.match, subject=request.subject, timeout=timeout,
            ttl=request.ttl_seconds,
        )  # fmt: skip
        envelope: dict[str, Any] = {"name": request.event, "payload": payload}
        subject = self.ctx.subject if request.subject is None else request.subject
        if subject is not None and subject != "*":
            envelope["subject"] = subject
        self.event, self._event_envelope = payload, envelope
        return payload

    async def park(self, node_id: str, timeout: float | None) -> None:
        """Park without a subscription: only ``timeout`` (if any) moves the run on.

        Raises:
            WaitTimeoutError: ``timeout`` seconds passed.
        """
        await self.ctx.wait_for_signal(f"{UNRESOLVED_SIGNAL}:{node_id}", timeout=timeout)

    async def call_action(self, node_id: str, name: str, params: dict[str, Any]) -> Any:
        """Call action handler ``name`` as a durable step; return its result."""
        handler = self._actions.get(name)
        if handler is None:
            raise FlowDefinitionError(
                f"flow {self.flow.id!r}: node {node_id!r} (Action): action: no action handler "
                f"named {name!r} is registered; register it with @engine.action({name!r})"
            )
        return await self.ctx.step(handler, params, self.context(node_id), name=f"{name}@{node_id}")


def workflow_fn(
    flow: FlowDefinition, actions: Mapping[str, ActionHandler]
) -> Callable[[WorkflowContext, Any], Awaitable[Any]]:
    """The workflow function that interprets ``flow``.

    It returns ``{"last_node": <id of the last node run>, "state": {...}}``.
    """

    async def run_flow(ctx: WorkflowContext, input: Any) -> Any:
        run = FlowRun(flow, ctx, input, actions)
        last = flow.start
        node_id = flow.next(flow.start, None)  # the start trigger is the event that started us
        while node_id is not None:
            model = flow.nodes[node_id]
            handle = await model.execute(run)
            last = node_id
            if model.ends_flow:
                break
            if not model.handles:
                handle = None
            elif handle not in model.handles:
                raise ParkwayError(
                    f"flow {flow.id!r}: node {node_id!r} ({model.type}) left by {handle!r}, "
                    f"which is not one of its handles {list(model.handles)}"
                )
            node_id = flow.next(node_id, handle)
        return {"last_node": last, "state": run.state}

    run_flow.__name__ = run_flow.__qualname__ = f"flow:{flow.id}"
    return run_flow


def run_id_base(flow_id: str, domain: str, subject: str | None) -> str:
    """The id of the first run of a flow for a subject (later runs add ``:2``, ``:3``...)."""
    return f"flow:{flow_id}:{domain}" if subject is None else f"flow:{flow_id}:{domain}:{subject}"


def _nth(base: str, n: int) -> str:
    return base if n == 1 else f"{base}:{n}"


async def _latest(tx: Tx, base: str) -> tuple[int, RunRecord] | None:
    """The newest run numbered from ``base`` and its number (runs are never renumbered)."""
    found = await tx.get_run(base)
    if found is None:
        return None
    low, high = 1, 2
    while (run := await tx.get_run(_nth(base, high))) is not None:  # double...
        low, found, high = high, run, high * 2
    while high - low > 1:  # ...then bisect between the last found and the first missing
        middle = (low + high) // 2
        run = await tx.get_run(_nth(base, middle))
        if run is None:
            high = middle
        else:
            low, found = middle, run
    return low, found


def start_rule(
    flow: FlowDefinition, domain: str
) -> Callable[[Tx, Event, float], Awaitable[str | None]]:
    """Decide, inside the publish transaction, whether ``event`` starts a run of ``flow``.

    Returns the new run's id, or ``None``: the event is of another domain; the
    subject already has an active run; ``one_time`` and the subject had a run;
    ``every_rematch`` and the last run started less than ``interval`` ago.
    """

    async def admit(tx: Tx, event: Event, now: float) -> str | None:
        if event.domain != domain:
            return None
        subject = event.subject
        active = await tx.active_run(flow.id, domain, subject)
        if active is not None:
            log.info(
                "flow %r: subject %r has active run %s; not starting", flow.id, subject, active
            )
            return None
        base = run_id_base(flow.id, domain, subject)
        latest = await _latest(tx, base)
        if latest is None:
            return base
        number, run = latest
        if flow.frequency == "one_time":
            log.info("flow %r runs once per subject; %r had run %s", flow.id, subject, run.id)
            return None
        if run.status not in ENDED or now < run.created_at + flow.interval:
            log.info(
                "flow %r: run %s of subject %r started less than %gs ago; not starting",
                flow.id, run.id, subject, flow.interval,
            )  # fmt: skip
            return None
        return _nth(base, number + 1)

    return admit


def register_action(
    actions: dict[str, ActionHandler], name: str, handler: Callable[..., Any]
) -> None:
    """Register ``handler`` under ``name`` for Action nodes.

    Raises:
        ParkwayError: ``name`` is empty or taken, or ``handler`` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise ParkwayError(f"an action name must be a non-empty string, got {name!r}")
    if not callable(handler):
        raise ParkwayError(f"action {name!r} needs a function, got {handler!r}")
    if name in actions:
        raise ParkwayError(f"an action named {name!r} is already registered")
    actions[name] = handler


def add_flow(
    rt: Runtime, node_models: Mapping[str, Any], definition: Any, *, domain: str = "default"
) -> FlowDefinition:
    """Load ``definition`` and register its workflow in ``rt`` (see ``Engine.add_flow``)."""
    if not isinstance(domain, str) or not domain:
        raise FlowDefinitionError(f"domain must be a non-empty string, got {domain!r}")
    flow = load(definition, node_models=node_models, actions=rt.actions)
    if not flow.enabled:
        # Not registered: no event starts it; publishes here pass its parked runs by
        # (they stay subscribed and wait for an event after it is enabled again).
        log.info(
            "flow %r is disabled (options.enabled is false): it starts and resumes no runs",
            flow.id,
        )
        rt.paused.add(flow.id)
        return flow
    rt.paused.discard(flow.id)
    fn = workflow_fn(flow, rt.actions)
    rt.registry.add(
        WorkflowDef(
            name=flow.id, version=flow.version, fn=fn, on_event=(flow.start_event,),
            start_rule=start_rule(flow, domain),
        )
    )  # fmt: skip
    return flow
