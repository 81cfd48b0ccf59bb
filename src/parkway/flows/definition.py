"""A validated JSON flow: its nodes, its edges and the options of its workflow
(what :func:`parkway.flows.loader.load` returns)."""

from __future__ import annotations

from dataclasses import dataclass, field

from parkway.errors import FlowDefinitionError
from parkway.flows.nodes import NodeModel


@dataclass(frozen=True)
class FlowEdge:
    """One edge: from ``source`` (leaving by ``handle``) to ``target``."""

    source: str
    target: str
    handle: str | None = None
    id: str | None = None


@dataclass(frozen=True)
class FlowDefinition:
    """A validated flow.

    Attributes:
        id: The flow's id, also the name of its workflow.
        name: Its display name.
        version: The workflow version its runs keep (``"1"`` unless given).
        enabled: ``False``: nothing starts or resumes.
        frequency: ``"one_time"`` or ``"every_rematch"``.
        interval: With ``every_rematch``, seconds between the starts of two runs
            of one subject, at least.
        start_event: The (first) event that starts the flow; ``None``: any event.
        nodes: Node models by node id, in definition order.
        edges: The edges.
        start: The start node's id.
        start_events: Every event that starts the flow; ``None``: any event.
    """

    id: str
    name: str | None
    version: str
    enabled: bool
    frequency: str
    interval: float
    start_event: str | None
    nodes: dict[str, NodeModel]
    edges: tuple[FlowEdge, ...]
    start: str
    start_events: tuple[str, ...] | None = None
    _next: dict[tuple[str, str | None], str] = field(default_factory=dict, repr=False)

    def next(self, node_id: str, handle: str | None) -> str | None:
        """The node after ``node_id`` when leaving by ``handle`` (``None``: the run ends)."""
        return self._next.get((node_id, handle))


@dataclass(frozen=True)
class Checked:
    """What :func:`check` found: the flow, if it has no fault, and every fault."""

    flow: FlowDefinition | None
    faults: list[FlowDefinitionError]
