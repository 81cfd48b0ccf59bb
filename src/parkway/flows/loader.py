"""Load and validate a JSON flow definition (the omega-flow / React Flow shape).

Everything a run would trip over is checked here, at the edge: an error names
the flow, the node (or edge) and the field at fault. :func:`check` finds every
fault of a definition at once (``parkway flows validate`` lists them);
:func:`load` raises them together. Keys the engine does not use (React Flow's
``position``, ``measured``, ``label``, ``viewport``, ...) are accepted and
ignored.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from parkway.durations import to_seconds
from parkway.errors import FlowDefinitionError, InvalidDurationError, shown
from parkway.flows import templates
from parkway.flows.builtin import default_node_models
from parkway.flows.definition import Checked, FlowDefinition, FlowEdge
from parkway.flows.nodes import FlowNode, LoadChecks, NodeModel
from parkway.flows.reading import read

FREQUENCIES = ("one_time", "every_rematch")

__all__ = ["FREQUENCIES", "Checked", "FlowDefinition", "FlowEdge", "check", "load", "read"]


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
        FlowDefinitionError: Naming the node (or edge) and the field at fault;
            one line per fault when there are several.
    """
    checked = check(source, node_models=node_models, actions=actions)
    if checked.flow is not None:
        return checked.flow
    faults = checked.faults
    if len(faults) == 1:
        raise faults[0]
    lines = "\n".join(f"- {fault}" for fault in faults)
    raise FlowDefinitionError(f"the flow definition has {len(faults)} faults:\n{lines}")


def check(
    source: Any,
    *,
    node_models: Mapping[str, type[NodeModel]] | None = None,
    actions: Collection[str] | None = None,
) -> Checked:
    """Find every fault of a flow definition (arguments as for :func:`load`).

    Checks go on past a fault wherever what follows does not depend on it: a
    node that cannot be built is left out of later checks, and edges to it are
    not reported again.

    Raises:
        FlowDefinitionError: The definition cannot be read at all (no file,
            malformed JSON, not an object).
    """
    models = default_node_models if node_models is None else node_models
    doc = read(source)
    if not isinstance(doc, dict):
        raise FlowDefinitionError("a flow definition must be a JSON object with id and flow")
    faults: list[FlowDefinitionError] = []
    raw_id = doc.get("id")
    if isinstance(raw_id, str) and raw_id.strip():
        flow_id = raw_id
    else:
        flow_id = "(no id)"
        faults.append(
            FlowDefinitionError(f"flow field id: must be a non-empty string, got {shown(raw_id)}")
        )
    name = doc.get("name")
    version = doc.get("version", "1")
    if isinstance(version, bool) or not isinstance(version, str | int) or version == "":
        faults.append(
            _flow_error(flow_id, "version", f"must be a string or a number, got {shown(version)}")
        )
    options = _options(flow_id, doc.get("options"), faults)
    graph = doc.get("flow", doc if "nodes" in doc and "flow" not in doc else None)
    if not isinstance(graph, dict):
        faults.append(
            _flow_error(flow_id, "flow", 'must be an object {"nodes": [...], "edges": [...]}')
        )
        return Checked(None, faults)
    built = _nodes(flow_id, graph.get("nodes"), models, faults)
    if built is None:
        return Checked(None, faults)
    nodes, node_ids = built
    edges = _edges(flow_id, graph.get("edges", []), node_ids, faults)
    start = _start(flow_id, node_ids, nodes, edges, faults)
    usable = tuple(e for e in edges if e.source in nodes and e.target in nodes)
    successors = _successors(nodes, usable, faults)
    checks = LoadChecks(frozenset(node_ids), start or "", actions, faults)
    faulty: set[str] = set()
    for model in nodes.values():
        before = len(faults)
        _validate(model, checks)
        for where, expression in model.templates():
            fault = _template_fault(model, where, expression, checks.node_ids)
            if fault is not None:
                checks.report(fault)
        if len(faults) > before:
            faulty.add(model.id)
    start_events = None
    if start in nodes and start not in faulty:  # (its faults would say it again)
        start_events = _start_events(nodes[start], faults)
    if faults:
        return Checked(None, faults)
    assert start is not None
    enabled, frequency, interval = options
    flow = FlowDefinition(
        id=flow_id,
        name=name if isinstance(name, str) else None,
        version=str(version),
        enabled=enabled,
        frequency=frequency,
        interval=interval,
        start_event=None if start_events is None else start_events[0],
        nodes=nodes,
        edges=edges,
        start=start,
        start_events=start_events,
        _next=successors,
    )
    return Checked(flow, [])


def _flow_error(flow_id: str, field_name: str, problem: str) -> FlowDefinitionError:
    return FlowDefinitionError(f"flow {shown(flow_id)}: field {field_name}: {problem}")


def _validate(model: NodeModel, checks: LoadChecks) -> None:
    """Run the node's own checks; what it raises is one more fault."""
    try:
        model.validate(checks)
    except FlowDefinitionError as exc:
        checks.report(exc)
    except Exception as exc:  # a custom node's checks tripped over the definition
        checks.report(model.fail("data", f"its checks failed with {type(exc).__name__}: {exc}"))


def _options(
    flow_id: str, options: Any, faults: list[FlowDefinitionError]
) -> tuple[bool, str, float]:
    if options is None:
        return True, "one_time", 0.0
    if not isinstance(options, dict):
        faults.append(_flow_error(flow_id, "options", "must be an object"))
        return True, "one_time", 0.0
    enabled = options.get("enabled", True)
    if not isinstance(enabled, bool):
        faults.append(
            _flow_error(flow_id, "options.enabled", f"must be true or false, got {shown(enabled)}")
        )
    frequency = options.get("frequency") or {}
    if not isinstance(frequency, dict):
        faults.append(_flow_error(flow_id, "options.frequency", 'must be an object {"type": ...}'))
        frequency = {}
    kind = frequency.get("type", "one_time")
    if kind not in FREQUENCIES:
        problem = f"{shown(kind)} is not one of {', '.join(FREQUENCIES)}"
        faults.append(_flow_error(flow_id, "options.frequency.type", problem))
    raw = frequency.get("interval", 0)
    try:
        interval = 0.0 if raw is None else to_seconds(raw, "options.frequency.interval")
    except InvalidDurationError:
        interval = -1.0
    if interval < 0:
        problem = f"must be a number of seconds >= 0, got {shown(raw)}"
        faults.append(_flow_error(flow_id, "options.frequency.interval", problem))
    return enabled is not False, str(kind), max(interval, 0.0)


def _nodes(
    flow_id: str,
    raw: Any,
    models: Mapping[str, type[NodeModel]],
    faults: list[FlowDefinitionError],
) -> tuple[dict[str, NodeModel], list[str]] | None:
    """The node models that could be built, and every node id given (``None``: no list)."""
    if not isinstance(raw, list) or not raw:
        faults.append(_flow_error(flow_id, "flow.nodes", "must be a non-empty list of nodes"))
        return None
    nodes: dict[str, NodeModel] = {}
    node_ids: list[str] = []
    for i, item in enumerate(raw):
        where = f"flow.nodes[{i}]"
        if not isinstance(item, dict):
            faults.append(_flow_error(flow_id, where, "must be an object with id, type and data"))
            continue
        node_id = item.get("id")
        if not isinstance(node_id, str) or not node_id:
            faults.append(
                _flow_error(
                    flow_id, f"{where}.id", f"must be a non-empty string, got {shown(node_id)}"
                )
            )
            continue
        if node_id in node_ids:
            faults.append(
                _flow_error(flow_id, f"{where}.id", f"node id {shown(node_id)} is used twice")
            )
            continue
        node_ids.append(node_id)
        model = _node(flow_id, node_id, item, models, faults)
        if model is not None:
            nodes[node_id] = model
    return nodes, node_ids


def _node(
    flow_id: str,
    node_id: str,
    item: dict[str, Any],
    models: Mapping[str, type[NodeModel]],
    faults: list[FlowDefinitionError],
) -> NodeModel | None:
    node_type = item.get("type")
    cls = models.get(node_type) if isinstance(node_type, str) else None
    if cls is None:
        known = ", ".join(sorted(models))
        faults.append(
            FlowDefinitionError(
                f"flow {shown(flow_id)}: node {shown(node_id)}: type: unknown node type "
                f"{shown(node_type)}; "
                f"known types: {known}"
            )
        )
        return None
    if not (isinstance(cls, type) and issubclass(cls, NodeModel)):
        faults.append(
            FlowDefinitionError(
                f"flow {shown(flow_id)}: node {shown(node_id)}: type: "
                f"node_models[{shown(node_type)}] is not "
                "a NodeModel subclass"
            )
        )
        return None
    label = f"flow {shown(flow_id)}: node {shown(node_id)} ({node_type})"
    data = item.get("data")
    data = {} if data is None else data
    if not isinstance(data, dict):
        faults.append(FlowDefinitionError(f"{label}: data: must be an object"))
        return None
    params = data.get("params")
    params = {} if params is None else params
    if not isinstance(params, dict):
        faults.append(FlowDefinitionError(f"{label}: data.params: must be an object"))
        return None
    assert isinstance(node_type, str)
    return cls(FlowNode(flow_id, node_id, node_type, data, params))


def _edges(
    flow_id: str, raw: Any, node_ids: list[str], faults: list[FlowDefinitionError]
) -> tuple[FlowEdge, ...]:
    """The well-formed edges between given nodes (they may be nodes that failed to build)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        faults.append(_flow_error(flow_id, "flow.edges", "must be a list of edges"))
        return ()
    known = set(node_ids)
    edges = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            faults.append(
                _flow_error(flow_id, f"flow.edges[{i}]", "must be an object with source, target")
            )
            continue
        edge_id = item.get("id")
        label = f"edge {shown(edge_id)}" if isinstance(edge_id, str) else f"flow.edges[{i}]"
        label += f" ({item.get('source')!r} -> {item.get('target')!r})"
        ends: list[str] = []
        for end in ("source", "target"):
            node_id = item.get(end)
            if isinstance(node_id, str) and node_id in known:
                ends.append(node_id)
            else:
                faults.append(
                    FlowDefinitionError(
                        f"flow {shown(flow_id)}: {label}: {end}: no node {shown(node_id)} "
                        f"in the flow"
                    )
                )
        handle = item.get("sourceHandle")
        if handle is not None and not isinstance(handle, str):
            faults.append(
                FlowDefinitionError(
                    f"flow {shown(flow_id)}: {label}: sourceHandle: must be a string, got "
                    f"{shown(handle)}"
                )
            )
            continue
        if len(ends) == 2:
            edges.append(
                FlowEdge(ends[0], ends[1], handle, edge_id if isinstance(edge_id, str) else None)
            )
    return tuple(edges)


def _start(
    flow_id: str,
    node_ids: list[str],
    nodes: dict[str, NodeModel],
    edges: tuple[FlowEdge, ...],
    faults: list[FlowDefinitionError],
) -> str | None:
    """The start node (the one no edge leads to), if there is exactly one that may start."""
    targets = {edge.target for edge in edges}
    starts = [node_id for node_id in node_ids if node_id not in targets]
    if not starts:
        problem = (
            "no start node: every node has an incoming edge; "
            "the start node is the Trigger no edge leads to"
        )
        faults.append(_flow_error(flow_id, "flow.edges", problem))
        return None
    if len(starts) > 1:
        names = ", ".join(repr(s) for s in starts)
        problem = (
            f"several start nodes ({names}) have no incoming edge; "
            "a flow has one start Trigger, and every other node is reached by an edge"
        )
        faults.append(_flow_error(flow_id, "flow.edges", problem))
        return None
    model = nodes.get(starts[0])
    if model is not None and not model.starts_flow:
        faults.append(
            model.fail(
                "type",
                f"a {model.type} cannot start a flow; the start node (the one no edge leads "
                "to) must be a Trigger, a TriggerOrTimeout or a node type whose NodeModel "
                "sets starts_flow",
            )
        )
        return None
    return starts[0]


def _start_events(model: NodeModel, faults: list[FlowDefinitionError]) -> tuple[str, ...] | None:
    try:
        events = model.start_events()
    except Exception as exc:
        faults.append(model.fail("start_events()", f"raised {type(exc).__name__}: {exc}"))
        return None
    if events is None:
        return None
    if (
        not isinstance(events, tuple | list)
        or not events
        or not all(isinstance(e, str) and e.strip() for e in events)
    ):
        faults.append(
            model.fail(
                "start_events()",
                f"must give event names (or None for any event), got {shown(events)}",
            )
        )
        return None
    return tuple(dict.fromkeys(events))


def _successors(
    nodes: dict[str, NodeModel],
    edges: tuple[FlowEdge, ...],
    faults: list[FlowDefinitionError],
) -> dict[tuple[str, str | None], str]:
    out: dict[tuple[str, str | None], str] = {}
    for edge in edges:
        model = nodes[edge.source]
        label = (
            f"edge {shown(edge.id)}"
            if edge.id
            else f"edge {shown(edge.source)} -> {shown(edge.target)}"
        )
        if model.ends_flow:
            faults.append(
                model.fail("edges", f"{label}: this node ends the flow; no edge may leave it")
            )
            continue
        handle: str | None = None
        if model.handles:
            if edge.handle not in model.handles:
                wanted = " or ".join(repr(h) for h in model.handles)
                faults.append(
                    model.fail(
                        "edges", f"{label}: sourceHandle: {shown(edge.handle)} is not {wanted}"
                    )
                )
                continue
            handle = edge.handle
        if (edge.source, handle) in out:
            exit_name = "" if handle is None else f" by {shown(handle)}"
            faults.append(
                model.fail(
                    "edges",
                    f"{label}: the node already leaves{exit_name} to "
                    f"{out[(edge.source, handle)]!r}; a node leaves by one edge per exit",
                )
            )
            continue
        out[(edge.source, handle)] = edge.target
    return out


def _template_fault(
    model: NodeModel, where: str, expression: str, node_ids: frozenset[str]
) -> FlowDefinitionError | None:
    path = templates.parse_path(expression)
    if path is None:
        return model.fail(where, f"{{{{{expression}}}}} is not a path such as trigger.items[0].id")
    root = path[0]
    if root not in templates.ROOTS:
        roots = ", ".join(templates.ROOTS)
        return model.fail(
            where, f"{{{{{expression}}}}}: unknown root {shown(root)}; use one of {roots}"
        )
    if root == "state":
        if len(path) < 2 or not isinstance(path[1], str):
            return model.fail(where, f"{{{{{expression}}}}}: name a node, as in state.<node id>")
        if path[1] not in node_ids:
            return model.fail(
                where, f"{{{{{expression}}}}}: state.{path[1]} names no node of the flow"
            )
    return None
