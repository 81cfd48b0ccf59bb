"""Node types of JSON flows, and the base class for your own.

A node type is a :class:`NodeModel` subclass registered under its ``type``
name in ``Engine(node_models={**default_node_models, "MyNode": MyNode})``.
The engine makes one instance per node of a flow when the flow is added
(``validate`` runs then), and calls ``execute`` each time a run reaches the
node. ``execute`` must be deterministic: a run is replayed from its first
node on every resume, and only ``ctx`` operations are journaled.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from parkway.errors import FlowDefinitionError, WaitTimeoutError
from parkway.flows import conditions, templates
from parkway.flows.templates import Scope

if TYPE_CHECKING:
    from parkway.flows.interpreter import FlowRun
    from parkway.flows.loader import FlowNode

log = logging.getLogger("parkway.flows")

DAY = 86400.0
# A subscription's safety-net lifetime when its wait has no timeout (the engine's default too).
NO_TIMEOUT_TTL = 90 * DAY


@dataclass(frozen=True)
class SubscriptionRequest:
    """What a node waits for: an event, from which subject.

    Args:
        event: The event name.
        subject: ``None``: the run's own subject. ``"product:456"``: another
            subject (cross-subject). ``"*"``: any subject of the run's domain.
        ttl_seconds: How long the subscription may live at most, a safety net
            against orphans (``None``: the wait's timeout plus one day, or 90 days).
        match: Payload fields the event must deep-equal (``None``: any payload).
    """

    event: str
    subject: str | None = None
    ttl_seconds: float | None = None
    match: dict[str, Any] | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class FlowContext:
    """What templates, node models and action handlers see of a flow run.

    Attributes:
        run_id: The run's id.
        domain: The run's domain.
        subject: The run's subject (``"client:5"``), or ``None``.
        trigger: The payload of the event that started the run.
        event: The payload of the event that last resumed the run (at first,
            the starting event's).
        state: Action results so far, by node id (a copy).
        flow_id: The flow's id.
        node_id: The node being executed.
    """

    run_id: str
    domain: str
    subject: str | None
    trigger: Any
    event: Any
    state: dict[str, Any]
    flow_id: str
    node_id: str
    scope: Scope = field(repr=False, compare=False)

    def resolve(self, value: Any) -> Any:
        """``value`` with its ``{{...}}`` placeholders resolved against this run."""
        return templates.resolve(value, self.scope)


@dataclass(frozen=True)
class LoadChecks:
    """What a node may check its definition against when a flow is loaded.

    Attributes:
        node_ids: Every node id of the flow.
        start: The id of the flow's start node.
        actions: Names of the registered action handlers, or ``None`` when they
            are not known (``parkway flows validate`` without ``--app``).
    """

    node_ids: frozenset[str]
    start: str
    actions: Collection[str] | None


class NodeModel:
    """Base class of a flow node type; subclass it for custom nodes.

    Override :meth:`get_subscription` to make the node wait for an event
    (possibly of another subject); the run parks there and goes on along the
    node's outgoing edge when the event arrives. Override :meth:`execute` for
    anything else, using only ``ctx`` operations (``run.ctx``) for effects.

    Attributes:
        id: The node's id.
        type: Its type name.
        data: Its ``data`` section.
        params: ``data.params`` (an empty dict if absent).
        required_params: Params a definition must give (checked at load).
        handles: Named exits (``sourceHandle`` of outgoing edges); empty for
            one unnamed exit.
        starts_flow: The node may be a flow's start node.
        ends_flow: Reaching the node ends the run; it has no outgoing edges.
    """

    required_params: ClassVar[tuple[str, ...]] = ()
    handles: ClassVar[tuple[str, ...]] = ()
    starts_flow: ClassVar[bool] = False
    ends_flow: ClassVar[bool] = False

    def __init__(self, node: FlowNode) -> None:
        self.node = node
        self.id = node.id
        self.type = node.type
        self.data = node.data
        self.params = node.params

    def fail(self, field_name: str, problem: str) -> FlowDefinitionError:
        """A :class:`FlowDefinitionError` naming the flow, this node and ``field_name``."""
        return FlowDefinitionError(
            f"flow {self.node.flow_id!r}: node {self.id!r} ({self.type}): {field_name}: {problem}"
        )

    def validate(self, checks: LoadChecks) -> None:
        """Check the definition when the flow is loaded; raise :meth:`fail` errors.

        The default checks :attr:`required_params`; call it from overrides.
        """
        for name in self.required_params:
            if self.params.get(name) is None:
                raise self.fail(f"data.params.{name}", "is required")

    def templates(self) -> Iterator[tuple[str, str]]:
        """``(field, expression)`` of every placeholder resolved at run time (checked at load)."""
        yield from templates.walk(self.params, "data.params")

    def get_subscription(self, context: FlowContext) -> SubscriptionRequest | None:
        """The event this node waits for, resolved for this run; ``None``: it does not wait."""
        return None

    async def execute(self, run: FlowRun) -> str | None:
        """Carry the run through this node; return the handle to leave by (``None``: unnamed).

        The default waits for :meth:`get_subscription`'s event, if any.
        """
        request = self.get_subscription(run.context(self.id))
        if request is not None:
            await run.wait_for(request)
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"


def _duration_ms(node: NodeModel, name: str) -> None:
    value = node.params.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise node.fail(
            f"data.params.{name}", f"must be a number of milliseconds >= 0, got {value!r}"
        )


class Trigger(NodeModel):
    """Start node: the flow starts on ``params.event``. Later in a flow: park until it arrives.

    Later in a flow the event is awaited in the run's own subject, unless
    ``params.match`` is given: ``match.subjectId`` (a template, resolved once,
    when the run parks) names another subject, and a ``match`` without it
    listens to any subject of the domain. Other ``match`` keys are payload
    fields the event must equal (templates too).
    """

    required_params: ClassVar[tuple[str, ...]] = ("event",)
    starts_flow = True

    def validate(self, checks: LoadChecks) -> None:
        super().validate(checks)
        event = self.params["event"]
        if not isinstance(event, str) or not event.strip():
            raise self.fail("data.params.event", f"must be an event name, got {event!r}")
        match = self.params.get("match")
        if match is None:
            return
        if not isinstance(match, dict):
            raise self.fail("data.params.match", 'must be an object such as {"subjectId": "..."}')
        if checks.start == self.id:
            raise self.fail(
                "data.params.match",
                "a start trigger cannot subscribe (it has no run yet); use match on a later node",
            )
        subject = match.get("subjectId")
        if subject is not None and (not isinstance(subject, str) or not subject):
            raise self.fail("data.params.match.subjectId", f"must be a subject, got {subject!r}")

    def timeout(self) -> float | None:
        """Seconds to wait at most (``None``: no timeout)."""
        return None

    def get_subscription(self, context: FlowContext) -> SubscriptionRequest | None:
        """Resolve the subscription; ``None`` (with a warning) when a template cannot be."""
        timeout = self.timeout()
        ttl = NO_TIMEOUT_TTL if timeout is None else timeout + DAY
        event: str = self.params["event"]
        match = self.params.get("match")
        if match is None:
            return SubscriptionRequest(event, None, ttl)
        raw_subject = match.get("subjectId")
        extra = {k: v for k, v in match.items() if k != "subjectId"}
        missing = templates.unresolved([raw_subject, extra], context.scope)
        subject = (
            "*" if raw_subject is None else templates.scalar_text(context.resolve(raw_subject))
        )
        if missing or not subject:
            log.warning(
                "flow %r run %s node %r: cannot resolve %s in params.match; no subscription to "
                "%r is registered, the run stays parked%s",
                context.flow_id, context.run_id, self.id, ", ".join(missing) or repr(raw_subject),
                event, "" if timeout is None else " until its timeout",
            )  # fmt: skip
            return None
        return SubscriptionRequest(event, subject, ttl, match=context.resolve(extra) or None)

    async def execute(self, run: FlowRun) -> str | None:
        request = self.get_subscription(run.context(self.id))
        if request is None:
            await run.park(self.id, self.timeout())
        else:
            await run.wait_for(request, timeout=self.timeout())
        return None


class TriggerOrTimeout(Trigger):
    """Park until ``params.event`` arrives (leave by ``trigger``) or ``params.duration`` ms
    pass (leave by ``timeout``). ``params.match`` as for :class:`Trigger`."""

    required_params = ("event", "duration")
    handles = ("trigger", "timeout")
    starts_flow = False

    def validate(self, checks: LoadChecks) -> None:
        super().validate(checks)
        _duration_ms(self, "duration")

    def timeout(self) -> float | None:
        return float(self.params["duration"]) / 1000.0

    async def execute(self, run: FlowRun) -> str | None:
        try:
            await super().execute(run)
        except WaitTimeoutError:
            return "timeout"
        return "trigger"


class Wait(NodeModel):
    """Park for ``params.duration`` milliseconds."""

    required_params = ("duration",)

    def validate(self, checks: LoadChecks) -> None:
        super().validate(checks)
        _duration_ms(self, "duration")

    async def execute(self, run: FlowRun) -> str | None:
        await run.ctx.sleep(float(self.params["duration"]) / 1000.0)
        return None


class Action(NodeModel):
    """Call the handler registered with ``@engine.action(name)`` as a durable step.

    The handler is named by ``data.action`` or ``params.action``; it is called
    as ``handler(params, context)`` with the resolved params and a
    :class:`FlowContext`, and its return value becomes ``state.<node id>``.
    """

    def action_field(self) -> tuple[str, Any]:
        """``(field, value)`` of the handler's name."""
        if "action" in self.data:
            return "data.action", self.data["action"]
        return "data.params.action", self.params.get("action")

    @property
    def action(self) -> str:
        """The handler's name."""
        name: str = self.action_field()[1]
        return name

    def validate(self, checks: LoadChecks) -> None:
        super().validate(checks)
        where, name = self.action_field()
        if not isinstance(name, str) or not name:
            raise self.fail(where, f"must name an action handler, got {name!r}")
        if checks.actions is not None and name not in checks.actions:
            known = ", ".join(sorted(checks.actions)) or "none"
            raise self.fail(
                where,
                f"no action handler named {name!r} is registered (registered: {known}); "
                f"register it with @engine.action({name!r}) before adding the flow",
            )

    async def execute(self, run: FlowRun) -> str | None:
        params = run.resolve(self.params)
        run.state[self.id] = await run.call_action(self.id, self.action, params)
        return None


class Condition(NodeModel):
    """Leave by ``true`` when any group of ``data.conditions`` holds, else by ``false``."""

    handles = ("true", "false")
    groups: tuple[conditions.Group, ...] = ()

    def conditions_field(self) -> tuple[str, Any]:
        """``(field, value)`` of ``data.conditions`` (else of ``params.conditions``)."""
        if "conditions" not in self.data and "conditions" in self.params:
            return "data.params.conditions", self.params["conditions"]
        return "data.conditions", self.data.get("conditions")

    def validate(self, checks: LoadChecks) -> None:
        super().validate(checks)
        where, raw = self.conditions_field()
        if raw is None:
            raise self.fail(where, 'is required: {"groups": [{"operator": "all", ...}]}')
        try:
            self.groups = conditions.parse(raw, where)
        except conditions.ConditionError as exc:
            raise self.fail(exc.field, exc.problem) from None

    def templates(self) -> Iterator[tuple[str, str]]:
        for rule in conditions.rules(self.groups):
            yield f"{rule.field}.fact", rule.fact
            yield from templates.walk(rule.value, f"{rule.field}.value")

    async def execute(self, run: FlowRun) -> str | None:
        return "true" if conditions.evaluate(self.groups, run.scope()) else "false"


class Exit(NodeModel):
    """End the run."""

    ends_flow = True

    async def execute(self, run: FlowRun) -> str | None:
        return None


default_node_models: dict[str, type[NodeModel]] = {
    "Trigger": Trigger,
    "TriggerOrTimeout": TriggerOrTimeout,
    "Wait": Wait,
    "Action": Action,
    "Condition": Condition,
    "Exit": Exit,
}
"""The built-in node types by name; extend a copy for custom ones."""
