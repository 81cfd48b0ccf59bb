"""Load and validate a JSON flow definition (the omega-flow / React Flow shape).

Everything a run would trip over is checked here, at the edge: an error names
the flow, the node (or edge) and the field at fault. Keys the engine does not
use (React Flow's ``position``, ``measured``, ``label``, ``viewport``, ...)
are accepted and ignored.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from parkway.durations import to_seconds
from parkway.errors import FlowDefinitionError, InvalidDurationError
from parkway.flows import templates
from parkway.flows.nodes import LoadChecks, NodeModel, default_node_models

FREQUENCIES = ("one_time", "every_rematch")


@dataclass(frozen=True)
class FlowNode:
    """One node of a definition, as written (extras dropped)."""

    flow_id: str
    id: str
    type: str
    data: dict[str, Any]
    params: dict[str, Any]


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
        start_event: The event that starts the flow.
        nodes: Node models by node id, in definition order.
        edges: The edges.
        start: The start node's id.
    """

    id: str
    name: str | None
    version: str
    enabled: bool
    frequency: str
    interval: float
    start_event: str
    nodes: dict[str, NodeModel]
    edges: tuple[FlowEdge, ...]
    start: str
    _next: dict[tuple[str, str | None], str] = field(default_factory=dict, repr=False)

    def next(self, node_id: str, handle: str | None) -> str | None:
        """The node after ``node_id`` when leaving by ``handle`` (``None``: the run ends)."""
        return self._next.get((node_id, handle))


def read(source: Any) -> Any:
    """A definition given as a dict, a JSON string or a path (str or ``Path``) -> the document.

    Raises:
        FlowDefinitionError: The file is missing or the JSON is malformed.
    """
    if isinstance(source, Mapping):
        return dict(source)
    if isinstance(source, bytes):
        source = source.decode()
    if isinstance(source, str) and source.lstrip().startswith(("{", "[")):
        return _parse_json(source, "the flow definition")
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise FlowDefinitionError(f"no flow definition file at {str(path)!r}") from None
        except OSError as exc:
            raise FlowDefinitionError(f"cannot read flow definition {str(path)!r}: {exc}") from exc
        return _parse_json(text, str(path))
    raise FlowDefinitionError(
        f"a flow definition is a dict, a JSON string or a path, got {type(source).__name__}"
    )


def _parse_json(text: str, where: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise FlowDefinitionError(f"{where} is not valid JSON: {exc}") from None


def load(
    source: Any,
    *,
    node_models: Mapping[str, type[NodeModel]] | None = None,
    actions: Collection[str] | None = None,
) -> FlowDefinition:
    """Parse and validate a flow definition.

    Args:
        source: A dict, a JSON string, or a path to a JSON file.
        node_models: Node types by name (default: :data:`default_node_models`).
        actions: Registered action handler names; ``None`` skips that check.

    Raises:
        FlowDefinitionError: Naming the node (or edge) and the field at fault.
    """
    models = default_node_models if node_models is None else node_models
    doc = read(source)
    if not isinstance(doc, dict):
        raise FlowDefinitionError("a flow definition must be a JSON object with id and flow")
    flow_id = doc.get("id")
    if not isinstance(flow_id, str) or not flow_id.strip():
        raise FlowDefinitionError(f"flow field id: must be a non-empty string, got {flow_id!r}")
    name = doc.get("name")
    version = doc.get("version", "1")
    if isinstance(version, bool) or not isinstance(version, str | int) or version == "":
        raise _flow_error(flow_id, "version", f"must be a string or a number, got {version!r}")
    enabled, frequency, interval = _options(flow_id, doc.get("options"))
    graph = doc.get("flow", doc if "nodes" in doc and "flow" not in doc else None)
    if not isinstance(graph, dict):
        raise _flow_error(flow_id, "flow", 'must be an object {"nodes": [...], "edges": [...]}')
    nodes = _nodes(flow_id, graph.get("nodes"), models)
    edges = _edges(flow_id, graph.get("edges", []), nodes)
    start = _start(flow_id, nodes, edges)
    successors = _successors(flow_id, nodes, edges)
    checks = LoadChecks(frozenset(nodes), start, actions)
    for model in nodes.values():
        model.validate(checks)
        for where, expression in model.templates():
            _check_template(model, where, expression, checks.node_ids)
    start_event = nodes[start].params.get("event")
    if not isinstance(start_event, str) or not start_event.strip():
        raise nodes[start].fail("data.params.event", "is required: the event that starts the flow")
    return FlowDefinition(
        id=flow_id, name=name if isinstance(name, str) else None, version=str(version),
        enabled=enabled, frequency=frequency, interval=interval, start_event=start_event,
        nodes=nodes, edges=edges, start=start, _next=successors,
    )  # fmt: skip


def _flow_error(flow_id: str, field_name: str, problem: str) -> FlowDefinitionError:
    return FlowDefinitionError(f"flow {flow_id!r}: field {field_name}: {problem}")


def _options(flow_id: str, options: Any) -> tuple[bool, str, float]:
    if options is None:
        return True, "one_time", 0.0
    if not isinstance(options, dict):
        raise _flow_error(flow_id, "options", "must be an object")
    enabled = options.get("enabled", True)
    if not isinstance(enabled, bool):
        raise _flow_error(flow_id, "options.enabled", f"must be true or false, got {enabled!r}")
    frequency = options.get("frequency") or {}
    if not isinstance(frequency, dict):
        raise _flow_error(flow_id, "options.frequency", 'must be an object {"type": ...}')
    kind = frequency.get("type", "one_time")
    if kind not in FREQUENCIES:
        raise _flow_error(
            flow_id, "options.frequency.type", f"{kind!r} is not one of {', '.join(FREQUENCIES)}"
        )
    raw = frequency.get("interval", 0)
    try:
        interval = 0.0 if raw is None else to_seconds(raw, "options.frequency.interval")
    except InvalidDurationError:
        interval = -1.0
    if interval < 0:
        raise _flow_error(
            flow_id, "options.frequency.interval", f"must be a number of seconds >= 0, got {raw!r}"
        )
    return enabled, kind, interval


def _nodes(flow_id: str, raw: Any, models: Mapping[str, type[NodeModel]]) -> dict[str, NodeModel]:
    if not isinstance(raw, list) or not raw:
        raise _flow_error(flow_id, "flow.nodes", "must be a non-empty list of nodes")
    nodes: dict[str, NodeModel] = {}
    for i, item in enumerate(raw):
        where = f"flow.nodes[{i}]"
        if not isinstance(item, dict):
            raise _flow_error(flow_id, where, "must be an object with id, type and data")
        node_id = item.get("id")
        if not isinstance(node_id, str) or not node_id:
            raise _flow_error(
                flow_id, f"{where}.id", f"must be a non-empty string, got {node_id!r}"
            )
        if node_id in nodes:
            raise _flow_error(flow_id, f"{where}.id", f"node id {node_id!r} is used twice")
        node_type = item.get("type")
        cls = models.get(node_type) if isinstance(node_type, str) else None
        if cls is None:
            known = ", ".join(sorted(models))
            raise FlowDefinitionError(
                f"flow {flow_id!r}: node {node_id!r}: type: unknown node type {node_type!r}; "
                f"known types: {known}"
            )
        if not (isinstance(cls, type) and issubclass(cls, NodeModel)):
            raise FlowDefinitionError(
                f"flow {flow_id!r}: node {node_id!r}: type: node_models[{node_type!r}] is not "
                "a NodeModel subclass"
            )
        data = item.get("data")
        data = {} if data is None else data
        if not isinstance(data, dict):
            raise FlowDefinitionError(
                f"flow {flow_id!r}: node {node_id!r} ({node_type}): data: must be an object"
            )
        params = data.get("params")
        params = {} if params is None else params
        if not isinstance(params, dict):
            raise FlowDefinitionError(
                f"flow {flow_id!r}: node {node_id!r} ({node_type}): data.params: must be an object"
            )
        assert isinstance(node_type, str)
        nodes[node_id] = cls(FlowNode(flow_id, node_id, node_type, data, params))
    return nodes


def _edges(flow_id: str, raw: Any, nodes: dict[str, NodeModel]) -> tuple[FlowEdge, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _flow_error(flow_id, "flow.edges", "must be a list of edges")
    edges = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise _flow_error(flow_id, f"flow.edges[{i}]", "must be an object with source, target")
        edge_id = item.get("id")
        label = f"edge {edge_id!r}" if isinstance(edge_id, str) else f"flow.edges[{i}]"
        label += f" ({item.get('source')!r} -> {item.get('target')!r})"
        ends = []
        for end in ("source", "target"):
            node_id = item.get(end)
            if not isinstance(node_id, str) or node_id not in nodes:
                raise FlowDefinitionError(
                    f"flow {flow_id!r}: {label}: {end}: no node {node_id!r} in the flow"
                )
            ends.append(node_id)
        handle = item.get("sourceHandle")
        if handle is not None and not isinstance(handle, str):
            raise FlowDefinitionError(
                f"flow {flow_id!r}: {label}: sourceHandle: must be a string, got {handle!r}"
            )
        edges.append(
            FlowEdge(ends[0], ends[1], handle, edge_id if isinstance(edge_id, str) else None)
        )
    return tuple(edges)


def _start(flow_id: str, nodes: dict[str, NodeModel], edges: tuple[FlowEdge, ...]) -> str:
    targets = {edge.target for edge in edges}
    starts = [node_id for node_id in nodes if node_id not in targets]
    if not starts:
        raise _flow_error(
            flow_id, "flow.edges", "no start node: every node has an incoming edge; "
            "the start node is the Trigger no edge leads to",
        )  # fmt: skip
    if len(starts) > 1:
        names = ", ".join(repr(s) for s in starts)
        raise _flow_error(
            flow_id, "flow.edges", f"several start nodes ({names}) have no incoming edge; "
            "a flow has one start Trigger, and every other node is reached by an edge",
        )  # fmt: skip
    model = nodes[starts[0]]
    if not model.starts_flow:
        raise model.fail("type", f"the start node must be a Trigger, not a {model.type}")
    return starts[0]


def _successors(
    flow_id: str, nodes: dict[str, NodeModel], edges: tuple[FlowEdge, ...]
) -> dict[tuple[str, str | None], str]:
    out: dict[tuple[str, str | None], str] = {}
    for edge in edges:
        model = nodes[edge.source]
        label = f"edge {edge.id!r}" if edge.id else f"edge {edge.source!r} -> {edge.target!r}"
        if model.ends_flow:
            raise model.fail("edges", f"{label}: this node ends the flow; no edge may leave it")
        handle: str | None = None
        if model.handles:
            if edge.handle not in model.handles:
                wanted = " or ".join(repr(h) for h in model.handles)
                raise model.fail("edges", f"{label}: sourceHandle: {edge.handle!r} is not {wanted}")
            handle = edge.handle
        if (edge.source, handle) in out:
            exit_name = "" if handle is None else f" by {handle!r}"
            raise model.fail(
                "edges",
                f"{label}: the node already leaves{exit_name} to {out[(edge.source, handle)]!r}; "
                "a node leaves by one edge per exit",
            )
        out[(edge.source, handle)] = edge.target
    return out


def _check_template(
    model: NodeModel, where: str, expression: str, node_ids: frozenset[str]
) -> None:
    path = templates.parse_path(expression)
    if path is None:
        raise model.fail(where, f"{{{{{expression}}}}} is not a path such as trigger.items[0].id")
    root = path[0]
    if root not in templates.ROOTS:
        roots = ", ".join(templates.ROOTS)
        raise model.fail(where, f"{{{{{expression}}}}}: unknown root {root!r}; use one of {roots}")
    if root == "state":
        if len(path) < 2 or not isinstance(path[1], str):
            raise model.fail(where, f"{{{{{expression}}}}}: name a node, as in state.<node id>")
        if path[1] not in node_ids:
            raise model.fail(
                where, f"{{{{{expression}}}}}: state.{path[1]} names no node of the flow"
            )
