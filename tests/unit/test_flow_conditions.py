"""Condition groups and operators (json-rules-engine-like), as Condition nodes evaluate them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parkway.flows import conditions
from parkway.flows.conditions import ConditionError
from parkway.flows.templates import Scope

FACTS = {
    "total": 120,
    "price": 9.5,
    "country": "DE",
    "tags": ["vip", "new"],
    "note": "fragile glass",
    "flag": True,
    "nothing": None,
    "address": {"city": "Berlin"},
    "limit": 100,
}


def holds(rule: dict[str, Any], facts: Any = FACTS) -> bool:
    groups = conditions.parse({"groups": [{"operator": "all", "conditions": [rule]}]}, "c")
    return conditions.evaluate(groups, Scope({"trigger": facts, "event": {}, "state": {}}))


def rule(fact: str, operator: str, value: Any) -> dict[str, Any]:
    return {"fact": f"trigger.{fact}", "operator": operator, "value": value}


@pytest.mark.parametrize(
    ("fact", "operator", "value", "expected"),
    [
        ("total", "equal", 120, True),
        ("total", "equal", 120.0, True),
        ("total", "equal", "120", False),
        ("flag", "equal", 1, False),
        ("flag", "equal", True, True),
        ("address", "equal", {"city": "Berlin"}, True),
        ("nothing", "equal", None, True),
        ("country", "notEqual", "FR", True),
        ("country", "notEqual", "DE", False),
        ("total", "greaterThan", 100, True),
        ("total", "greaterThan", 120, False),
        ("total", "greaterThanInclusive", 120, True),
        ("total", "greaterThanInclusive", 121, False),
        ("price", "lessThan", 10, True),
        ("price", "lessThan", 9.5, False),
        ("price", "lessThanInclusive", 9.5, True),
        ("price", "lessThanInclusive", 9, False),
        ("country", "greaterThan", "A", False),  # numbers only
        ("total", "greaterThan", "100", False),
        ("flag", "greaterThan", 0, False),  # a boolean is not a number
        ("nothing", "lessThan", 1, False),
        ("country", "in", ["DE", "AT"], True),
        ("country", "in", ["FR"], False),
        ("total", "in", [120.0], True),
        ("country", "notIn", ["FR"], True),
        ("country", "notIn", ["DE"], False),
        ("tags", "contains", "vip", True),
        ("tags", "contains", "old", False),
        ("note", "contains", "glass", True),
        ("total", "contains", 1, False),
        ("tags", "doesNotContain", "old", True),
        ("tags", "doesNotContain", "vip", False),
        ("note", "doesNotContain", "wood", True),
        ("total", "doesNotContain", 1, False),  # not a container: neither holds
        ("total", "greaterThan", "{{trigger.limit}}", True),
        ("total", "lessThan", "{{trigger.limit}}", False),
        ("country", "equal", "{{trigger.address.city}}", False),
    ],
)
def test_operators(fact: str, operator: str, value: Any, expected: bool) -> None:
    assert holds(rule(fact, operator, value)) is expected


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        ("equal", None, False),
        ("equal", 1, False),
        ("notEqual", 1, True),
        ("greaterThan", 0, False),
        ("greaterThanInclusive", 0, False),
        ("lessThan", 0, False),
        ("lessThanInclusive", 0, False),
        ("in", [None], False),
        ("notIn", [1], True),
        ("contains", 1, False),
        ("doesNotContain", 1, False),
    ],
)
def test_a_missing_fact(operator: str, value: Any, expected: bool) -> None:
    assert holds(rule("absent", operator, value)) is expected
    assert holds(rule("address.street.number", operator, value)) is expected


@given(
    st.sampled_from(["greaterThan", "greaterThanInclusive", "lessThan", "lessThanInclusive"]),
    st.integers() | st.floats(allow_nan=False),
)
def test_a_missing_fact_never_satisfies_a_numeric_comparison(operator: str, value: Any) -> None:
    assert holds(rule("absent", operator, value)) is False
    assert holds({"fact": "state.x.y", "operator": operator, "value": value}) is False


@given(st.integers(), st.integers())
def test_numeric_operators_agree_with_python(a: int, b: int) -> None:
    facts = {"n": a}
    assert holds(rule("n", "greaterThan", b), facts) is (a > b)
    assert holds(rule("n", "greaterThanInclusive", b), facts) is (a >= b)
    assert holds(rule("n", "lessThan", b), facts) is (a < b)
    assert holds(rule("n", "lessThanInclusive", b), facts) is (a <= b)
    assert holds(rule("n", "equal", b), facts) is (a == b)
    assert holds(rule("n", "notEqual", b), facts) is (a != b)


def evaluate(raw: dict[str, Any], facts: Any = FACTS) -> bool:
    groups = conditions.parse(raw, "c")
    return conditions.evaluate(groups, Scope({"trigger": facts, "event": {}, "state": {}}))


YES = rule("total", "equal", 120)
NO = rule("total", "equal", 0)


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        ([{"operator": "all", "conditions": [YES, YES]}], True),
        ([{"operator": "all", "conditions": [YES, NO]}], False),
        ([{"operator": "any", "conditions": [NO, YES]}], True),
        ([{"operator": "any", "conditions": [NO, NO]}], False),
        ([{"operator": "all", "conditions": [NO]}, {"operator": "any", "conditions": [YES]}], True),
        ([{"operator": "all", "conditions": [NO]}, {"operator": "all", "conditions": [NO]}], False),
        ([{"conditions": [YES]}], True),  # all by default
        ([{"operator": "all", "conditions": []}], True),
        ([{"operator": "any", "conditions": []}], False),
        ([], False),
        ([{"operator": "all", "conditions": [YES, {"any": [NO, YES]}]}], True),
        ([{"operator": "all", "conditions": [YES, {"all": [NO, YES]}]}], False),
        ([{"operator": "any", "conditions": [{"operator": "all", "conditions": [YES]}]}], True),
    ],
)
def test_groups(groups: list[Any], expected: bool) -> None:
    assert evaluate({"groups": groups}) is expected


def test_facts_may_be_written_as_templates() -> None:
    assert holds({"fact": "{{ trigger.total }}", "operator": "equal", "value": 120})


@pytest.mark.parametrize("operator", ["in", "notIn"])
def test_a_list_operators_template_value_that_is_no_list_holds_neither_way(operator: str) -> None:
    # Loading cannot check a templated value; a list operator whose value turns out
    # not to be a list is false, "notIn" included (the rule says nothing then).
    assert holds(rule("country", operator, "{{ trigger.note }}")) is False
    assert holds(rule("country", operator, "{{ trigger.tags }}")) is (operator == "notIn")


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ([], "c", "object"),
        ({}, "c.groups", "list"),
        ({"groups": [1]}, "c.groups[0]", "object"),
        ({"groups": [{"operator": "some", "conditions": []}]}, "c.groups[0].operator", "'some'"),
        ({"groups": [{"operator": "all"}]}, "c.groups[0].conditions", "list"),
        ({"groups": [{"conditions": [1]}]}, "c.groups[0].conditions[0]", "object"),
        (
            {
                "groups": [
                    {"conditions": [YES, {"fact": "trigger.a", "operator": "like", "value": 1}]}
                ]
            },
            "c.groups[0].conditions[1].operator",
            "unknown operator 'like'",
        ),
        ({"groups": [{"conditions": [{"operator": "equal", "value": 1}]}]}, ".fact", "path"),
        (
            {"groups": [{"conditions": [{"fact": "a b", "operator": "equal", "value": 1}]}]},
            ".fact",
            "",
        ),
        ({"groups": [{"conditions": [{"fact": "trigger.a", "operator": "equal"}]}]}, ".value", ""),
        (
            {"groups": [{"conditions": [{"fact": "trigger.a", "operator": "in", "value": 1}]}]},
            "c.groups[0].conditions[0].value",
            "list",
        ),
        ({"groups": [{"conditions": [{"all": 3}]}]}, "c.groups[0].conditions[0].all", "list"),
    ],
)
def test_malformed_conditions_name_the_field(raw: Any, field: str, words: str) -> None:
    with pytest.raises(ConditionError) as caught:
        conditions.parse(raw, "c")
    assert field in caught.value.field
    assert words in caught.value.problem


def test_rules_know_where_they_are() -> None:
    groups = conditions.parse(
        {"groups": [{"conditions": [YES]}, {"conditions": [{"any": [NO]}]}]}, "data.conditions"
    )
    assert [r.field for r in conditions.rules(groups)] == [
        "data.conditions.groups[0].conditions[0]",
        "data.conditions.groups[1].conditions[0].any[0]",
    ]
