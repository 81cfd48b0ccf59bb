"""omega-flow's evaluation rules, piece by piece: JavaScript number printing, condition forms
and legacy facts, node state in templates, and finding every fault of a definition."""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

import pytest

from parkway.flows import LoadChecks, NodeModel, check, conditions, default_node_models
from parkway.flows.conditions import ConditionError
from parkway.flows.templates import Scope, js_number, resolve

# -- numbers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (42.0, "42"),
        (-42.0, "-42"),
        (0.0, "0"),
        (-0.0, "0"),
        (0.5, "0.5"),
        (120.5, "120.5"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (123456789012345680000.0, "123456789012345680000"),
        (1.5e300, "1.5e+300"),
        (1e-6, "0.000001"),
        (1.5e-6, "0.0000015"),
        (1e-7, "1e-7"),
        (-2.5e-8, "-2.5e-8"),
        (5e-324, "5e-324"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        (float("nan"), "NaN"),
    ],
)
def test_floats_print_as_javascript_prints_them(value: float, text: str) -> None:
    assert js_number(value) == text


def test_interpolation_prints_numbers_as_javascript() -> None:
    scope = Scope({"trigger": {"id": 456.0, "n": 7, "big": 2**64}, "event": {}, "state": {}})
    assert resolve("product:{{trigger.id}}", scope) == "product:456"
    assert resolve("{{trigger.n}}/{{trigger.big}}", scope) == f"7/{2**64}"  # ints stay exact
    assert resolve("{{trigger.id}}", scope) == 456.0  # a whole value keeps its type


# -- conditions --------------------------------------------------------------------------------

EVENT = {"total": 120, "user": {"plan": "pro"}, "tags": ["vip"], "trigger": "by hand"}
TRIGGER = {"total": 5}


def scope(node_state: dict[str, Any] | None = None, state: dict[str, Any] | None = None) -> Scope:
    node_state = node_state or {}
    return Scope(
        {"trigger": TRIGGER, "event": EVENT, "state": {**node_state, **(state or {})}},
        {"event": {"name": "order.update", "subject": "client:5", "payload": EVENT}},
        node_state,
    )


def holds(raw: Any, within: Scope | None = None) -> bool:
    return conditions.evaluate(conditions.parse(raw, "c"), within or scope())


def rule(name: str, operator: str, value: Any) -> dict[str, Any]:
    return {"fact": name, "operator": operator, "value": value}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"all": [rule("total", "equal", 120)]}, True),
        ({"all": [rule("total", "equal", 120), rule("trigger.total", "equal", 120)]}, False),
        ({"any": [rule("total", "equal", 0), rule("trigger.total", "equal", 5)]}, True),
        (
            {
                "any": [
                    {"all": [rule("total", "equal", 0)]},
                    {"any": [rule("tags", "contains", "vip")]},
                ]
            },
            True,
        ),
        ({"all": []}, True),
        ({"any": []}, False),
        ({"all": [{"any": []}]}, False),
    ],
)
def test_json_rules_engine_form(raw: Any, expected: bool) -> None:
    assert holds(raw) is expected


@pytest.mark.parametrize(
    ("fact", "value", "expected"),
    [
        ("total", 120, True),  # the event's data, not the trigger's
        ("event.total", 120, True),
        ("trigger.total", 5, True),
        ("user.plan", "pro", True),
        ("trigger", "by hand", True),  # no dot: a field of the event, not the root
        ("{{trigger.total}}", 5, True),  # braces: always a path of the scope
        ("subject", "client:5", False),  # legacy facts read the data, never the envelope
        ("event.subject", "client:5", True),
        ("name", "order.update", False),
    ],
)
def test_legacy_facts_read_the_current_events_data(fact: str, value: Any, expected: bool) -> None:
    assert holds({"all": [rule(fact, "equal", value)]}) is expected


def test_legacy_facts_are_marked_and_not_template_checked() -> None:
    groups = conditions.parse(
        {"all": [rule("total", "equal", 1), rule("trigger.a", "equal", 1)]}, "c"
    )
    assert [(r.fact, r.legacy) for r in conditions.rules(groups)] == [
        ("total", True),
        ("trigger.a", False),
    ]


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ({"all": 3}, "c.all", "list"),
        ({"all": [], "any": []}, "c", "both all and any"),
        (
            {"any": [{"all": [{"fact": "x", "operator": "equal"}]}]},
            "c.any[0].all[0].value",
            "required",
        ),
        ({"all": [rule("x", "like", 1)]}, "c.all[0].operator", "unknown operator 'like'"),
        ({}, "c.groups", '{"all": [...]}'),
    ],
)
def test_malformed_json_rules_engine_conditions(raw: Any, field: str, words: str) -> None:
    with pytest.raises(ConditionError) as caught:
        conditions.parse(raw, "c")
    assert caught.value.field == field
    assert words in caught.value.problem


# -- node state --------------------------------------------------------------------------------


def test_a_named_actions_state_is_its_return_value_with_its_node_state_behind() -> None:
    node_state = {"2": {"resolvedParams": {"x": 7}}, "3": {"conditionResult": True}}
    within = scope(node_state, state={"2": {"count": 1}})
    assert resolve("{{state.2}}", within) == {"count": 1}
    assert resolve("{{state.2.count}}", within) == 1
    assert resolve("{{state.2.resolvedParams.x}}", within) == 7
    assert resolve("{{state.3.conditionResult}}", within) is True
    assert resolve("{{state.2.missing}}", within) is None
    shadowed = scope(node_state, state={"2": {"resolvedParams": "mine"}})
    assert resolve("{{state.2.resolvedParams}}", shadowed) == "mine"  # the return value wins
    assert resolve("{{state.2.resolvedParams.x}}", scope(node_state, state={"2": None})) == 7


# -- every fault at once -----------------------------------------------------------------------


def flow(*nodes: dict[str, Any]) -> dict[str, Any]:
    chain = [{"source": a["id"], "target": b["id"]} for a, b in itertools.pairwise(nodes)]
    return {"id": "f", "flow": {"nodes": list(nodes), "edges": chain}}


START = {"id": "start", "type": "Trigger", "data": {"params": {"event": "go"}}}


class Ping(NodeModel):
    """Needs host and port; its own check trips over a missing port."""

    required_params: ClassVar[tuple[str, ...]] = ("host",)

    def validate(self, checks: LoadChecks) -> None:
        super().validate(checks)
        if int(self.params["port"]) < 1:
            raise self.fail("data.params.port", "must be positive")


def test_a_node_reports_each_of_its_faults() -> None:
    node: dict[str, Any] = {"id": "w", "type": "TriggerOrTimeout", "data": {"params": {}}}
    faults = [str(f) for f in check(flow(START, node)).faults]
    assert [f.split(": ", 3)[2] for f in faults] == ["data.params.event", "data.params.duration"]
    node["data"]["params"].update(event="e", duration=-1, match=[1])
    faults = [str(f) for f in check(flow(START, node)).faults]
    assert [f.split(": ", 3)[2] for f in faults] == ["data.params.match", "data.params.duration"]


def test_a_custom_nodes_check_that_trips_is_a_fault() -> None:
    models = {**default_node_models, "Ping": Ping}
    ping = {"id": "p", "type": "Ping", "data": {"params": {"host": "h"}}}
    [fault] = check(flow(START, ping), node_models=models).faults
    assert "'p' (Ping): data: its checks failed with KeyError" in str(fault)
    ping["data"]["params"] = {}
    [fault] = check(flow(START, ping), node_models=models).faults
    assert "'p' (Ping): data.params.host: is required" in str(fault)


def test_edges_to_a_node_that_could_not_be_built_are_not_faults_again() -> None:
    bad = {"id": "b", "type": "Nope"}
    end = {"id": "end", "type": "Exit"}
    faults = [str(f) for f in check(flow(START, bad, end)).faults]
    assert len(faults) == 1 and "'b': type: unknown node type 'Nope'" in faults[0]


def test_a_definition_without_faults_checks_clean() -> None:
    checked = check(flow(START, {"id": "end", "type": "Exit"}))
    assert checked.faults == [] and checked.flow is not None
    assert checked.flow.start_events == ("go",)
    any_event = check(flow({"id": "s", "type": "Trigger"}, {"id": "end", "type": "Exit"}))
    assert any_event.flow is not None and any_event.flow.start_events is None
