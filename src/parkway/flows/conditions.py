"""Condition nodes: groups of rules in the shape of json-rules-engine.

``data.conditions`` is omega-flow's form,
``{"groups": [{"operator": "all", "conditions": [rule, ...]}]}`` (groups are
OR-ed; a group is ``all``, every item holds, or ``any``, one does), or
json-rules-engine's, ``{"all": [...]}`` / ``{"any": [...]}``. A rule is
``{"fact": "trigger.total", "operator": "greaterThan", "value": 100}``; an item
may also be a nested ``{"all": [...]}`` / ``{"any": [...]}``. Empty lists follow
JavaScript's ``every``/``some``: ``all`` of nothing holds, ``any`` of nothing
does not, no groups at all does not.

``fact`` is a path: ``trigger.x`` / ``event.x`` / ``state.<node id>.x`` (braces
optional) read the scope as templates do; any other fact (``total``,
``user.plan``) is omega-flow's "legacy" fact and reads the data of the current
event (``event``'s payload, not its envelope). ``value`` is resolved like params.

A fact that leads nowhere is *missing*: it equals nothing, is in nothing,
contains nothing, and never satisfies a numeric comparison (so ``notEqual``
and ``notIn`` hold for it). Numeric comparisons take numbers only (not
booleans, not numeric strings). Equality is JSON equality, arrays and objects
compared by value (omega-flow's ``===`` compares them by identity, so two
equal arrays never are; see docs/guides/flows.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from parkway.flows import templates
from parkway.flows.templates import MISSING, ROOTS, Path, Scope
from parkway.matching import deep_equal


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _compare(test: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def op(fact: Any, value: Any) -> bool:
        return _number(fact) and _number(value) and test(fact, value)

    return op


def _equal(fact: Any, value: Any) -> bool:
    return fact is not MISSING and deep_equal(fact, value)


def _in(fact: Any, value: Any) -> bool:
    return (
        fact is not MISSING and isinstance(value, list) and any(deep_equal(fact, v) for v in value)
    )


def _contains(fact: Any, value: Any) -> bool | None:
    """Whether ``fact`` contains ``value``; ``None`` when ``fact`` is not a container of it."""
    if isinstance(fact, list):
        return any(deep_equal(item, value) for item in fact)
    if isinstance(fact, str) and isinstance(value, str):
        return value in fact
    return None


OPERATORS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "equal": _equal,
    "notEqual": lambda fact, value: not _equal(fact, value),
    "greaterThan": _compare(lambda a, b: a > b),
    "greaterThanInclusive": _compare(lambda a, b: a >= b),
    "lessThan": _compare(lambda a, b: a < b),
    "lessThanInclusive": _compare(lambda a, b: a <= b),
    "in": _in,
    "notIn": lambda fact, value: isinstance(value, list) and not _in(fact, value),
    "contains": lambda fact, value: _contains(fact, value) is True,
    "doesNotContain": lambda fact, value: _contains(fact, value) is False,
}
GROUP_OPERATORS: Final = ("all", "any")
_LIST_OPERATORS: Final = ("in", "notIn")


@dataclass(frozen=True)
class Rule:
    """One comparison: the fact at ``path``, ``operator``, the (resolved) ``value``.

    ``field`` is where the rule sits in the node (``data.conditions.groups[0].conditions[1]``).
    ``legacy``: the fact has no ``trigger.`` / ``event.`` / ``state.`` prefix and is
    read from the current event's payload.
    """

    field: str
    fact: str
    path: Path
    operator: str
    value: Any
    legacy: bool = False

    def holds(self, scope: Scope) -> bool:
        if self.legacy:
            fact = templates.descend(scope.values.get("event"), self.path)
        else:
            fact = templates.lookup(self.path, scope)
        return OPERATORS[self.operator](fact, templates.resolve(self.value, scope))


@dataclass(frozen=True)
class Group:
    """``all`` or ``any`` of its items (rules or nested groups)."""

    operator: str
    items: tuple[Rule | Group, ...]

    def holds(self, scope: Scope) -> bool:
        results = (item.holds(scope) for item in self.items)
        return all(results) if self.operator == "all" else any(results)


class ConditionError(Exception):
    """Internal: a malformed condition; the node turns it into a FlowDefinitionError."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field, self.problem = field, problem


def parse(raw: Any, field: str) -> tuple[Group, ...]:
    """Parse ``data.conditions``; returns the OR-ed groups.

    Raises:
        ConditionError: Naming the field at fault (``<field>.groups[0].conditions[1].operator``).
    """
    if not isinstance(raw, dict):
        raise ConditionError(field, 'must be an object such as {"groups": [...]} or {"all": [...]}')
    if "groups" not in raw and any(key in raw for key in GROUP_OPERATORS):
        # json-rules-engine's form: the whole condition is one group.
        top = _item(raw, field)
        return (top,) if isinstance(top, Group) else (Group("all", (top,)),)
    groups = raw.get("groups")
    if not isinstance(groups, list):
        raise ConditionError(
            f"{field}.groups",
            'must be a list of condition groups (or write {"all": [...]} / {"any": [...]})',
        )
    return tuple(_group(g, f"{field}.groups[{i}]") for i, g in enumerate(groups))


def _group(raw: Any, field: str) -> Group:
    if not isinstance(raw, dict):
        raise ConditionError(
            field, 'must be an object such as {"operator": "all", "conditions": []}'
        )
    operator = raw.get("operator", "all")
    if operator not in GROUP_OPERATORS:
        raise ConditionError(f"{field}.operator", f"{operator!r} is not 'all' or 'any'")
    items = raw.get("conditions")
    if not isinstance(items, list):
        raise ConditionError(f"{field}.conditions", "must be a list of conditions")
    return Group(operator, tuple(_item(c, f"{field}.conditions[{i}]") for i, c in enumerate(items)))


def _item(raw: Any, field: str) -> Rule | Group:
    if not isinstance(raw, dict):
        raise ConditionError(field, "must be an object with fact, operator and value")
    if "fact" not in raw and all(key in raw for key in GROUP_OPERATORS):
        raise ConditionError(field, "has both all and any; nest one in the other")
    for nested in GROUP_OPERATORS:
        if nested in raw and "fact" not in raw:
            items = raw[nested]
            if not isinstance(items, list):
                raise ConditionError(f"{field}.{nested}", "must be a list of conditions")
            return Group(
                nested, tuple(_item(c, f"{field}.{nested}[{i}]") for i, c in enumerate(items))
            )
    if "conditions" in raw and "fact" not in raw:
        return _group(raw, field)
    fact = raw.get("fact")
    if not isinstance(fact, str) or not fact.strip():
        raise ConditionError(f"{field}.fact", "must be a path such as 'trigger.total'")
    expression = fact.strip()
    braced = expression.startswith("{{") and expression.endswith("}}")
    if braced:
        expression = expression[2:-2].strip()
    path = templates.parse_path(expression)
    # omega-flow reads the scope only for these prefixes; any other fact is the event's data.
    legacy = not braced and not expression.startswith(tuple(f"{root}." for root in ROOTS))
    if path is None:
        raise ConditionError(f"{field}.fact", f"{fact!r} is not a path such as 'trigger.total'")
    operator = raw.get("operator")
    if operator not in OPERATORS:
        known = ", ".join(OPERATORS)
        raise ConditionError(
            f"{field}.operator", f"unknown operator {operator!r}; use one of: {known}"
        )
    if "value" not in raw:
        raise ConditionError(f"{field}.value", "is required")
    value = raw["value"]
    if operator in _LIST_OPERATORS and not isinstance(value, list) and not _is_template(value):
        raise ConditionError(f"{field}.value", f"operator {operator!r} needs a list")
    return Rule(field, expression, path, operator, value, legacy)


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and any(True for _ in templates.placeholders(value))


def rules(groups: tuple[Group, ...]) -> list[Rule]:
    """Every rule, nested ones included, in order (for load-time checks)."""
    out: list[Rule] = []

    def visit(item: Rule | Group) -> None:
        if isinstance(item, Rule):
            out.append(item)
        else:
            for child in item.items:
                visit(child)

    for group in groups:
        visit(group)
    return out


def evaluate(groups: tuple[Group, ...], scope: Scope) -> bool:
    """Whether any group holds."""
    return any(group.holds(scope) for group in groups)
