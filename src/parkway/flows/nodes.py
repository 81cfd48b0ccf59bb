"""The base class of flow node types, and what it sees (``FlowContext``, ``LoadChecks``).

A node type is a :class:`NodeModel` subclass registered under its ``type``
name in ``Engine(node_models={**default_node_models, "MyNode": MyNode})``.
The engine makes one instance per node of a flow when the flow is added
(``validate`` runs then), and calls ``execute`` each time a run reaches the
node (``start`` instead, for the node a run starts at). Both must be
deterministic: a run is replayed from its first node on every resume, and only
``ctx`` operations are journaled. The built-in types are in
:mod:`parkway.flows.builtin`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from parkway.errors import FlowDefinitionError
from parkway.flows import templates
from parkway.flows.templates import Scope

if TYPE_CHECKING:
    from parkway.replay.context import WorkflowContext


@dataclass(frozen=True)
class FlowNode:
    """One node of a definition, as written (extras dropped)."""

    flow_id: str
    id: str
    type: str
    data: dict[str, Any]
    params: dict[str, Any]


class NodeRun(Protocol):
    """What a node type sees of the run it executes in (the interpreter's
    :class:`parkway.flows.FlowRun`): every effect goes through its ``ctx``.

    Attributes:
        ctx: The run's workflow context.
        trigger: The starting event's payload.
        event: The payload of the event that last resumed the run.
        state: Named Action results, by node id.
    """

    ctx: WorkflowContext
    trigger: Any
    event: Any
    state: dict[str, Any]

    def scope(self) -> Scope:
        """What templates resolve against now."""
        ...

    def resolve(self, value: Any) -> Any:
        """``value`` with its placeholders resolved."""
        ...

    def update_state(self, node_id: str, changes: Mapping[str, Any]) -> None:
        """Merge ``changes`` into node ``node_id``'s state."""
        ...

    def now_ms(self) -> int:
        """Engine time in epoch milliseconds, the same on every replay."""
        ...

    def context(self, node_id: str) -> FlowContext:
        """A snapshot of the run for node ``node_id``."""
        ...

    async def wait_for(self, request: SubscriptionRequest, *, timeout: float | None = None) -> Any:
        """Park until ``request``'s event arrives; return its payload."""
        ...

    async def park(self, node_id: str, timeout: float | None) -> None:
        """Park without a subscription: only ``timeout`` moves the run on."""
        ...

    async def call_action(self, node_id: str, name: str, params: dict[str, Any]) -> Any:
        """Call action handler ``name`` as a durable step; return its result."""
        ...


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
        state: Named Action results so far, by node id (a copy).
        flow_id: The flow's id.
        node_id: The node being executed.
        node_state: Every node's state so far, by node id, in omega-flow's
            shape (``resolvedParams``, ``conditionResult``, ``waitStartsAt``,
            ``waitEndsAt``, ``resolvedBy``; a copy).
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
    node_state: dict[str, Any] = field(default_factory=dict)

    def resolve(self, value: Any) -> Any:
        """``value`` with its ``{{...}}`` placeholders resolved against this run."""
        return templates.resolve(value, self.scope)


@dataclass(frozen=True)
class LoadChecks:
    """What a node may check its definition against when a flow is loaded.

    Attributes:
        node_ids: Every node id of the flow.
        start: The id of the flow's start node (``""`` if the graph has none).
        actions: Names of the registered action handlers, or ``None`` when they
            are not known (``parkway flows validate`` without ``--app``).
    """

    node_ids: frozenset[str]
    start: str
    actions: Collection[str] | None
    faults: list[FlowDefinitionError] = field(default_factory=list, repr=False, compare=False)

    def report(self, error: FlowDefinitionError) -> None:
        """Record a fault and carry on checking (raising one ends the node's checks).

        ``parkway flows validate`` lists every fault reported, ``add_flow`` raises
        them together.
        """
        if not any(known is error for known in self.faults):
            self.faults.append(error)


class NodeModel:
    """Base class of a flow node type; subclass it for custom nodes.

    Override :meth:`get_subscription` to make the node wait for an event
    (possibly of another subject); the run parks there and goes on along the
    node's outgoing edge when the event arrives. Override :meth:`execute` for
    anything else, using only ``ctx`` operations (``run.ctx``) for effects, and
    ``run.update_state(self.id, {...})`` for what later nodes read as
    ``state.<node id>``.

    A node type that may start flows sets :attr:`starts_flow`; which events
    start them is :meth:`start_events` (by default ``params.event``, or any
    event when it is absent), what happens at the start is :meth:`start`.

    Attributes:
        id: The node's id.
        type: Its type name.
        data: Its ``data`` section.
        params: ``data.params`` (an empty dict if absent).
        required_params: Params a definition must give (checked at load).
        handles: Named exits (``sourceHandle`` of outgoing edges); empty for
            one unnamed exit.
        starts_flow: The node may be a flow's start node (the one no edge leads to).
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
        """Check the definition when the flow is loaded.

        Report each fault with ``checks.report(self.fail(field, problem))`` and go
        on, or raise ``self.fail(...)`` to stop checking this node. The default
        reports every missing :attr:`required_params`, then raises if any was
        missing (so an override calling it first may rely on them); call it from
        overrides.
        """
        missing = [name for name in self.required_params if self.params.get(name) is None]
        for name in missing:
            checks.report(self.fail(f"data.params.{name}", "is required"))
        if missing:
            raise checks.faults[-1]

    def templates(self) -> Iterator[tuple[str, str]]:
        """``(field, expression)`` of every placeholder resolved at run time (checked at load)."""
        yield from templates.walk(self.params, "data.params")

    def start_events(self) -> tuple[str, ...] | None:
        """As a flow's start node, the names of the events that start the flow.

        ``None``: any event (of the flow's domain). The default is
        ``(params.event,)``, or ``None`` when ``params.event`` is absent; override
        it for a start node that names its trigger otherwise.
        """
        event = self.params.get("event")
        return None if event is None else (event,)

    async def start(self, run: NodeRun) -> str | None:
        """Carry a run through this node when the run starts here (``run.trigger`` is
        the starting event); return the handle to leave by (``None``: unnamed).

        The default does nothing: the starting event has already arrived.
        """
        return None

    def get_subscription(self, context: FlowContext) -> SubscriptionRequest | None:
        """The event this node waits for, resolved for this run; ``None``: it does not wait."""
        return None

    async def execute(self, run: NodeRun) -> str | None:
        """Carry the run through this node; return the handle to leave by (``None``: unnamed).

        The default waits for :meth:`get_subscription`'s event, if any.
        """
        request = self.get_subscription(run.context(self.id))
        if request is not None:
            await run.wait_for(request)
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"
