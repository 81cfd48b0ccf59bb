"""One workflow per flow: a function that walks the graph with ``ctx`` operations.

The function is replayed from the start node on every resume, like any
workflow, so everything it decides comes from the run's trigger and from
journaled results (event payloads, action results, ``ctx.now()``): the same
journal walks the same path. Waits are ``ctx.wait_for_event`` / ``ctx.sleep``;
actions are ``ctx.step``.

Which events start a run, and which resume one from its own subject while its
wait listens to another, is decided in the publish transaction
(:mod:`parkway.flows.starting`).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from parkway.errors import FlowDefinitionError, InvalidArgumentError
from parkway.flows import starting, templates
from parkway.flows.loader import FlowDefinition, load
from parkway.flows.nodes import FlowContext, NodeModel, SubscriptionRequest
from parkway.flows.templates import Scope
from parkway.registry import WorkflowDef

if TYPE_CHECKING:
    from parkway.core.runtime import Runtime
    from parkway.replay.context import WorkflowContext

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
        state: Named Action results by node id.
        node_state: Every node's state by node id (omega-flow's ``nodeState``).
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
                "name": None,
                "payload": input,
                "id": None,
                "domain": ctx.domain,
                "subject": ctx.subject,
            }
        self.event: Any = self.trigger
        self._event_envelope: dict[str, Any] = self._trigger_envelope
        self.state: dict[str, Any] = {}
        self.node_state: dict[str, dict[str, Any]] = {}

    def scope(self) -> Scope:
        """What templates resolve against now."""
        # state.<id> is the node's state, a named Action's return value in its place.
        state = {**self.node_state, **self.state}
        return Scope(
            {"trigger": self.trigger, "event": self.event, "state": state},
            {"trigger": self._trigger_envelope, "event": self._event_envelope},
            self.node_state,
        )

    def resolve(self, value: Any) -> Any:
        """``value`` with its placeholders resolved."""
        return templates.resolve(value, self.scope())

    def update_state(self, node_id: str, changes: Mapping[str, Any]) -> None:
        """Merge ``changes`` into the state of node ``node_id`` (omega-flow's ``updateState``).

        Values must be JSON; they are recomputed on every replay, so they must
        come from the run's journal (event payloads, ``ctx`` results).
        """
        self.node_state.setdefault(node_id, {}).update(changes)

    def now_ms(self) -> int:
        """Engine time in epoch milliseconds (replay-safe: ``ctx.now()``, journaled)."""
        return round(self.ctx.now().timestamp() * 1000)

    def context(self, node_id: str) -> FlowContext:
        """A snapshot for node ``node_id`` that shares nothing mutable with the run."""
        scope = copy.deepcopy(self.scope())
        return FlowContext(
            run_id=self.ctx.run_id,
            domain=self.ctx.domain,
            subject=self.ctx.subject,
            trigger=scope.values["trigger"],
            event=scope.values["event"],
            state=copy.deepcopy(self.state),
            flow_id=self.flow.id,
            node_id=node_id,
            scope=scope,
            node_state=dict(scope.node_state),
        )

    async def wait_for(self, request: SubscriptionRequest, *, timeout: float | None = None) -> Any:
        """Park until ``request``'s event arrives; it becomes ``event``. Returns its payload.

        Raises:
            WaitTimeoutError: ``timeout`` seconds passed first.
        """
        payload = await self.ctx.wait_for_event(
            request.event,
            match=request.match,
            subject=request.subject,
            timeout=timeout,
            ttl=request.ttl_seconds,
        )
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


def _exit(flow: FlowDefinition, model: NodeModel, handle: str | None) -> str | None:
    """The node after ``model`` left by ``handle``."""
    if not model.handles:
        return flow.next(model.id, None)
    if handle not in model.handles:
        raise FlowDefinitionError(
            f"flow {flow.id!r}: node {model.id!r} ({model.type}) left by {handle!r}, "
            f"which is not one of its handles {list(model.handles)}"
        )
    return flow.next(model.id, handle)


def workflow_fn(
    flow: FlowDefinition, actions: Mapping[str, ActionHandler]
) -> Callable[[WorkflowContext, Any], Awaitable[Any]]:
    """The workflow function that interprets ``flow``.

    It returns ``{"last_node": <id of the last node run>, "state": {...}}``
    (``state``: named Action results by node id).
    """

    async def run_flow(ctx: WorkflowContext, input: Any) -> Any:
        run = FlowRun(flow, ctx, input, actions)
        model = flow.nodes[flow.start]
        node_id = _exit(flow, model, await model.start(run))  # the start event is here already
        last = flow.start
        while node_id is not None:
            model = flow.nodes[node_id]
            handle = await model.execute(run)
            last = node_id
            if model.ends_flow:
                break
            node_id = _exit(flow, model, handle)
        return {"last_node": last, "state": run.state}

    run_flow.__name__ = run_flow.__qualname__ = f"flow:{flow.id}"
    return run_flow


def register_action(
    actions: dict[str, ActionHandler], name: str, handler: Callable[..., Any]
) -> None:
    """Register ``handler`` under ``name`` for Action nodes.

    Raises:
        InvalidArgumentError: ``name`` is empty or taken, or ``handler`` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"an action name must be a non-empty string, got {name!r}")
    if not callable(handler):
        raise InvalidArgumentError(f"action {name!r} needs a function, got {handler!r}")
    if name in actions:
        raise InvalidArgumentError(f"an action named {name!r} is already registered")
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
    resuming = starting.own_subject_events(flow)
    rt.registry.add(
        WorkflowDef(
            name=flow.id,
            version=flow.version,
            fn=fn,
            on_event=tuple(dict.fromkeys((*(flow.start_events or ()), *resuming))),
            on_any_event=flow.start_events is None,
            start_rule=starting.start_rule(flow, domain),
            resume_rule=starting.resume_rule(flow, domain, resuming) if resuming else None,
        )
    )
    return flow
