"""Malformed flows are refused when loaded, with the node (or edge) and the field at fault.

Covers ``engine.add_flow``; ``parkway flows validate FILE`` (in a subprocess) is in
tests/system/test_flows_definitions.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from parkway import (
    DuplicateWorkflowError,
    Engine,
    FlowDefinitionError,
    NodeModel,
    default_node_models,
)


def good() -> dict[str, Any]:
    return {
        "id": "back-in-stock",
        "options": {"frequency": {"type": "one_time"}, "enabled": True},
        "flow": {
            "nodes": [
                {"id": "start", "type": "Trigger", "data": {"params": {"event": "order.create"}}},
                {
                    "id": "wait-product",
                    "type": "TriggerOrTimeout",
                    "data": {
                        "params": {
                            "event": "product.update",
                            "duration": 60000,
                            "match": {"subjectId": "product:{{trigger.products[0].product_id}}"},
                        }
                    },
                },
                {"id": "notify", "type": "Action", "data": {"params": {"action": "send_email"}}},
                {"id": "end", "type": "Exit", "data": {}},
            ],
            "edges": [
                {"id": "e1", "source": "start", "target": "wait-product"},
                {
                    "id": "e2",
                    "source": "wait-product",
                    "target": "notify",
                    "sourceHandle": "trigger",
                },
                {"id": "e3", "source": "wait-product", "target": "end", "sourceHandle": "timeout"},
                {"id": "e4", "source": "notify", "target": "end"},
            ],
        },
    }


def nodes(d: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in d["flow"]["nodes"]}


def params(d: dict[str, Any], node_id: str) -> dict[str, Any]:
    return nodes(d)[node_id]["data"].setdefault("params", {})


def add_condition(d: dict[str, Any], rule: dict[str, Any]) -> None:
    """Put a Condition between the wait's trigger exit and the action."""
    d["flow"]["nodes"].append(
        {
            "id": "check",
            "type": "Condition",
            "data": {"conditions": {"groups": [{"operator": "all", "conditions": [rule]}]}},
        }
    )
    d["flow"]["edges"][1]["target"] = "check"
    d["flow"]["edges"].append({"source": "check", "target": "notify", "sourceHandle": "true"})


def engine_with_handlers() -> Engine:
    engine = Engine("memory://", worker=False)

    @engine.action("send_email")
    def send_email(params: dict[str, Any], context: Any) -> None:
        return None

    return engine


Mutate = Callable[[dict[str, Any]], None]

CASES: list[tuple[str, Mutate, list[str]]] = [
    (
        "unknown node type",
        lambda d: nodes(d)["end"].update(type="Finish"),
        ["'end'", "type", "'Finish'"],
    ),
    (
        "unknown operator",
        lambda d: add_condition(d, {"fact": "trigger.total", "operator": "like", "value": 1}),
        ["'check'", "data.conditions.groups[0].conditions[0].operator", "'like'"],
    ),
    (
        "state of no node in params",
        lambda d: params(d, "notify").update(text="code {{state.coupon.code}}"),
        ["'notify'", "data.params.text", "state.coupon"],
    ),
    (
        "state of no node in a nested param",
        lambda d: params(d, "notify").update(body={"lines": ["{{state.ghost}}"]}),
        ["'notify'", "data.params.body.lines[0]", "state.ghost"],
    ),
    (
        "state of no node in a fact",
        lambda d: add_condition(d, {"fact": "state.ghost.n", "operator": "equal", "value": 1}),
        ["'check'", "data.conditions.groups[0].conditions[0].fact", "state.ghost"],
    ),
    (
        "state of no node in a rule value",
        lambda d: add_condition(
            d, {"fact": "trigger.n", "operator": "equal", "value": "{{state.ghost}}"}
        ),
        ["'check'", "data.conditions.groups[0].conditions[0].value", "state.ghost"],
    ),
    (
        "state without a node",
        lambda d: params(d, "notify").update(text="{{state}}"),
        ["'notify'", "data.params.text", "state.<node id>"],
    ),
    (
        "unknown template root",
        lambda d: params(d, "notify").update(to="{{customer.email}}"),
        ["'notify'", "data.params.to", "'customer'"],
    ),
    (
        "malformed template",
        lambda d: params(d, "notify").update(to="{{trigger..email}}"),
        ["'notify'", "data.params.to", "trigger..email"],
    ),
    (
        "edge to an unknown node",
        lambda d: d["flow"]["edges"][1].update(target="ghost"),
        ["'e2'", "target", "'ghost'"],
    ),
    (
        "edge from an unknown node",
        lambda d: d["flow"]["edges"][3].update(source="ghost"),
        ["'e4'", "source", "'ghost'"],
    ),
    (
        "edge without id to an unknown node",
        lambda d: d["flow"]["edges"].append({"source": "notify", "target": "nowhere"}),
        ["flow.edges[4]", "target", "'nowhere'"],
    ),
    (
        "missing duration",
        lambda d: params(d, "wait-product").pop("duration"),
        ["'wait-product'", "data.params.duration", "required"],
    ),
    (
        "missing event",
        lambda d: params(d, "wait-product").pop("event"),
        ["'wait-product'", "data.params.event", "required"],
    ),
    (
        "negative duration",
        lambda d: params(d, "wait-product").update(duration=-1),
        ["'wait-product'", "data.params.duration", "milliseconds"],
    ),
    (
        "duration as text",
        lambda d: params(d, "wait-product").update(duration="1h"),
        ["'wait-product'", "data.params.duration", "milliseconds"],
    ),
    (
        "no start node",
        lambda d: d["flow"]["edges"].append({"source": "notify", "target": "start"}),
        ["no start node", "flow.edges"],
    ),
    (
        "several start nodes",
        lambda d: d["flow"]["nodes"].append(
            {"id": "orphan", "type": "Trigger", "data": {"params": {"event": "x"}}}
        ),
        ["several start nodes", "'start'", "'orphan'"],
    ),
    (
        "start node is not a trigger",
        lambda d: nodes(d)["start"].update(type="Wait", data={"params": {"duration": 1}}),
        ["'start'", "type", "Trigger"],
    ),
    (
        "action naming no handler",
        lambda d: params(d, "notify").update(action="send_sms"),
        ["'notify'", "data.params.action", "'send_sms'", "@engine.action"],
    ),
    (
        "action named in data",
        lambda d: nodes(d)["notify"]["data"].update(action="send_fax"),
        ["'notify'", "data.action", "'send_fax'"],
    ),
    (
        "condition without conditions",
        lambda d: add_condition(d, {}) or nodes(d)["check"].update(data={}),
        ["'check'", "data.conditions", "required"],
    ),
    (
        "condition with an unknown handle",
        lambda d: (
            add_condition(d, {"fact": "trigger.a", "operator": "equal", "value": 1})
            or d["flow"]["edges"][-1].update(sourceHandle="yes")
        ),
        ["'check'", "sourceHandle", "'yes'"],
    ),
    (
        "trigger or timeout with an unknown handle",
        lambda d: d["flow"]["edges"][2].update(sourceHandle="later"),
        ["'wait-product'", "sourceHandle", "'later'", "'timeout'"],
    ),
    (
        "two edges from one exit",
        lambda d: d["flow"]["edges"].append({"source": "start", "target": "end"}),
        ["'start'", "edges", "one edge"],
    ),
    (
        "an edge out of exit",
        lambda d: (
            d["flow"]["nodes"].append({"id": "after", "type": "Exit"})
            or d["flow"]["edges"].append({"source": "end", "target": "after"})
        ),
        ["'end'", "edges", "ends the flow"],
    ),
    (
        "duplicate node id",
        lambda d: d["flow"]["nodes"].append({"id": "notify", "type": "Exit"}),
        ["flow.nodes[4].id", "'notify'", "twice"],
    ),
    (
        "node without id",
        lambda d: d["flow"]["nodes"].append({"type": "Exit"}),
        ["flow.nodes[4].id"],
    ),
    (
        "params not an object",
        lambda d: nodes(d)["notify"]["data"].update(params=["send_email"]),
        ["'notify'", "data.params", "object"],
    ),
    (
        "start trigger with match",
        lambda d: params(d, "start").update(match={"subjectId": "x"}),
        ["'start'", "data.params.match", "start trigger"],
    ),
    (
        "match that is not an object",
        lambda d: params(d, "wait-product").update(match="product:1"),
        ["'wait-product'", "data.params.match"],
    ),
    (
        "unknown frequency",
        lambda d: d["options"].update(frequency={"type": "weekly"}),
        ["options.frequency.type", "'weekly'"],
    ),
    (
        "negative interval",
        lambda d: d["options"].update(frequency={"type": "every_rematch", "interval": -5}),
        ["options.frequency.interval"],
    ),
    (
        "enabled not a boolean",
        lambda d: d["options"].update(enabled="yes"),
        ["options.enabled"],
    ),
    ("no id", lambda d: d.pop("id"), ["id"]),
    ("no nodes", lambda d: d["flow"].update(nodes=[]), ["flow.nodes"]),
    ("no flow", lambda d: d.pop("flow"), ["flow"]),
]


# Refused until omega-flow's semantics were adopted (they were CASES above): omega-flow runs
# them, so they load. What they do is tested in test_flows_omega.py.
ACCEPTED: list[tuple[str, Mutate]] = [
    ("start trigger without an event", lambda d: params(d, "start").pop("event")),
    ("wait without duration", lambda d: nodes(d)["notify"].update(type="Wait", data={})),
    ("action without a handler name", lambda d: params(d, "notify").pop("action")),
    (
        "action with an empty handler name",
        lambda d: nodes(d)["notify"].update(data={"action": "", "params": {}}),
    ),
]


@pytest.mark.parametrize("mutate", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_what_omega_flow_runs_loads(mutate: Mutate) -> None:
    """omega-flow's Trigger/Wait/Action accept these definitions (and run them)."""
    definition = good()
    mutate(definition)
    assert engine_with_handlers().add_flow(definition).id == "back-in-stock"


@pytest.mark.parametrize(("mutate", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_malformed_flow_is_refused_with_node_and_field(mutate: Mutate, words: list[str]) -> None:
    definition = good()
    mutate(definition)
    engine = engine_with_handlers()
    with pytest.raises(FlowDefinitionError) as caught:
        engine.add_flow(definition)
    message = str(caught.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"


def test_the_good_definition_loads() -> None:
    flow = engine_with_handlers().add_flow(good())
    assert (flow.id, len(flow.nodes), len(flow.edges), flow.start) == (
        "back-in-stock",
        4,
        4,
        "start",
    )


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ('{"id": "x", "flow": ', ["not valid JSON"]),
        ("[1, 2]", ["JSON object"]),
        ("/no/such/flow.json", ["no flow definition file", "/no/such/flow.json"]),
        (42, ["dict, a JSON string or a path"]),
    ],
)
def test_unreadable_definitions(source: Any, words: list[str]) -> None:
    with pytest.raises(FlowDefinitionError) as caught:
        engine_with_handlers().add_flow(source)
    for word in words:
        assert word in str(caught.value)


def test_a_flow_id_is_registered_once() -> None:
    engine = engine_with_handlers()
    engine.add_flow(good())
    with pytest.raises(DuplicateWorkflowError):
        engine.add_flow(good())
    newer = good()
    newer["version"] = 2
    assert engine.add_flow(newer).version == "2"


def test_a_custom_node_checks_its_own_params() -> None:
    class Ping(NodeModel):
        """Needs a host."""

        required_params = ("host",)

    engine = Engine("memory://", worker=False, node_models={**default_node_models, "Ping": Ping})
    definition = good()
    nodes(definition)["notify"].update(type="Ping", data={"params": {}})
    with pytest.raises(FlowDefinitionError, match=r"'notify' \(Ping\): data.params.host"):
        engine.add_flow(definition)
    params(definition, "notify")["host"] = "example.com"
    assert engine.add_flow(definition).nodes["notify"].params == {"host": "example.com"}


def test_node_models_must_be_node_models() -> None:
    engine = Engine("memory://", worker=False, node_models={**default_node_models, "Bad": dict})
    definition = good()
    nodes(definition)["notify"].update(type="Bad")
    with pytest.raises(FlowDefinitionError, match=r"'notify'.*NodeModel"):
        engine.add_flow(definition)


def test_the_default_node_models() -> None:
    assert set(default_node_models) == {
        "Trigger",
        "TriggerOrTimeout",
        "Wait",
        "Action",
        "Condition",
        "Exit",
    }
    assert all(issubclass(m, NodeModel) for m in default_node_models.values())


def test_action_names_are_unique() -> None:
    engine = engine_with_handlers()
    with pytest.raises(Exception, match="already registered"):
        engine.action("send_email")(lambda params, context: None)


# -- parkway flows validate FILE -------------------------------------------------------------


def test_add_flow_raises_every_fault_together() -> None:
    definition = good()
    params(definition, "wait-product").pop("duration")
    params(definition, "notify").update(action="send_sms")
    with pytest.raises(FlowDefinitionError) as caught:
        engine_with_handlers().add_flow(definition)
    message = str(caught.value)
    assert message.startswith("the flow definition has 2 faults:\n")
    assert "'wait-product'" in message and "data.params.duration" in message
    assert "'notify'" in message and "'send_sms'" in message
