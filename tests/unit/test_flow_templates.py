"""``{{...}}`` templates in flow params: the rules of docs/guides/flows.md, by example and
property."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parkway.flows.templates import MISSING, Scope, parse_path, resolve, unresolved

TRIGGER = {
    "email": "ann@example.com",
    "total": 120.5,
    "vip": True,
    "note": None,
    "products": [{"product_id": 456, "tags": ["lamp"]}, {"product_id": 7}],
}
STATE = {"coupon": {"code": "C-10", "valid": [2030, 2031]}, "empty": None}
EVENT = {"stock": 3}


def scope(trigger: Any = TRIGGER, event: Any = EVENT, state: Any = STATE) -> Scope:
    return Scope(
        {"trigger": trigger, "event": event, "state": state},
        {
            "trigger": {"name": "order.create", "payload": trigger, "subject": "client:5"},
            "event": {"name": "product.update", "payload": event},
        },
    )


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{trigger.email}}", "ann@example.com"),
        ("{{trigger.total}}", 120.5),
        ("{{trigger.vip}}", True),
        ("{{trigger.products[0].product_id}}", 456),
        ("{{trigger.products[1]}}", {"product_id": 7}),
        ("{{trigger.products.0.tags}}", ["lamp"]),
        ("{{ trigger.products[0].tags[0] }}", "lamp"),
        ("{{\ttrigger.email\n}}", "ann@example.com"),
        ("{{trigger.payload.products[0].product_id}}", 456),  # through the envelope
        ("{{trigger.subject}}", "client:5"),
        ("{{trigger.name}}", "order.create"),
        ("{{event.stock}}", 3),
        ("{{event.payload.stock}}", 3),
        ("{{event.name}}", "product.update"),
        ("{{state.coupon.code}}", "C-10"),
        ("{{state.coupon.valid[1]}}", 2031),
        ("{{state.coupon}}", {"code": "C-10", "valid": [2030, 2031]}),
        ("{{trigger}}", TRIGGER),
        ("{{trigger.note}}", None),
        ("{{trigger.nope}}", None),
        ("{{trigger.products[5].product_id}}", None),
        ("{{trigger.email.more}}", None),
        ("{{nothing.here}}", None),
        ("{{trigger.products[}}", None),
    ],
)
def test_a_single_placeholder_keeps_the_type(template: str, expected: Any) -> None:
    assert resolve(template, scope()) == expected


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("product:{{trigger.products[0].product_id}}", "product:456"),
        ("{{trigger.email}} spent {{trigger.total}}", "ann@example.com spent 120.5"),
        ("vip={{trigger.vip}}", "vip=true"),
        (" {{trigger.email}}", " ann@example.com"),
        ("code {{state.coupon.code}}!", "code C-10!"),
        ("{{trigger.email}}{{event.stock}}", "ann@example.com3"),
        ("x {{trigger.nope}}", None),  # missing
        ("x {{trigger.note}}", None),  # null
        ("x {{trigger.products}}", None),  # not a scalar
        ("{{trigger.email}} {{state.coupon}}", None),
    ],
)
def test_placeholders_in_a_longer_string_are_interpolated(template: str, expected: Any) -> None:
    assert resolve(template, scope()) == expected


@pytest.mark.parametrize("text", ["{{}}", "a {{}} b", "{{  }}", "{ {trigger.email} }", "", "{{"])
def test_empty_braces_and_plain_text_are_left_alone(text: str) -> None:
    assert resolve(text, scope()) == text


def test_empty_braces_next_to_a_placeholder() -> None:
    assert resolve("{{}} {{trigger.email}}", scope()) == "{{}} ann@example.com"


def test_resolution_is_recursive_and_leaves_keys_and_other_values() -> None:
    params = {
        "to": "{{trigger.email}}",
        "{{trigger.email}}": 1,
        "items": ["{{trigger.products[0].product_id}}", {"deep": "{{event.stock}} left"}],
        "n": 5,
        "flag": False,
        "none": None,
    }
    assert resolve(params, scope()) == {
        "to": "ann@example.com",
        "{{trigger.email}}": 1,
        "items": [456, {"deep": "3 left"}],
        "n": 5,
        "flag": False,
        "none": None,
    }


def test_the_payload_wins_over_the_envelope() -> None:
    trigger = {"payload": {"x": 1}, "name": "mine"}
    assert resolve("{{trigger.payload.x}}", scope(trigger=trigger)) == 1
    assert resolve("{{trigger.name}}", scope(trigger=trigger)) == "mine"


def test_resolved_values_are_copies() -> None:
    value = resolve("{{state.coupon}}", scope())
    value["code"] = "changed"
    assert STATE["coupon"]["code"] == "C-10"


def test_unresolved_names_the_placeholders_at_fault() -> None:
    assert unresolved("product:{{trigger.nope}}", scope()) == ["{{trigger.nope}}"]
    assert unresolved("{{trigger.products}}", scope()) == []  # a whole value may be a list
    assert unresolved("x{{trigger.products}}", scope()) == ["{{trigger.products}}"]
    assert unresolved({"a": ["{{ event.gone }}"]}, scope()) == ["{{ event.gone }}"]
    assert unresolved("product:{{trigger.products[0].product_id}}", scope()) == []


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("trigger", ("trigger",)),
        ("trigger.a.b", ("trigger", "a", "b")),
        ("state.wait-product.x[2][0]", ("state", "wait-product", "x", 2, 0)),
        (" event.x ", ("event", "x")),
        ("trigger.", None),
        ("trigger..a", None),
        ("trigger[a]", None),
        ("a b", None),
        ("", None),
    ],
)
def test_paths(text: str, path: Any) -> None:
    assert parse_path(text) == path


# -- properties --------------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=10)
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
keys = st.text(alphabet="abcdefghij_-", min_size=1, max_size=6)
plain = st.text(max_size=30).filter(lambda s: "{{" not in s)


@given(plain)
def test_text_without_placeholders_is_unchanged(text: str) -> None:
    assert resolve(text, scope()) == text


@given(keys, json_values)
def test_a_single_placeholder_returns_the_value_itself(key: str, value: Any) -> None:
    assert resolve("{{trigger." + key + "}}", scope(trigger={key: value})) == value


@given(keys, json_values)
def test_a_missing_key_resolves_to_none(key: str, value: Any) -> None:
    assert resolve("{{trigger." + key + "x}}", scope(trigger={key: value})) is None
    assert resolve("at {{trigger." + key + "x}}", scope(trigger={key: value})) is None


@given(plain, keys, st.text(max_size=10) | st.integers(), plain)
def test_scalars_interpolate(before: str, key: str, value: Any, after: str) -> None:
    text = before + "{{trigger." + key + "}}" + after
    if text == "{{trigger." + key + "}}":
        return  # exactly one placeholder: the typed case
    assert resolve(text, scope(trigger={key: value})) == before + str(value) + after


@given(plain, keys, st.lists(json_values, min_size=1) | st.none(), plain)
def test_non_scalars_void_an_interpolated_string(
    before: str, key: str, value: Any, after: str
) -> None:
    text = before + "{{trigger." + key + "}}" + after
    if not (before or after):
        return
    assert resolve(text, scope(trigger={key: value})) is None


@given(json_values)
def test_structures_without_placeholders_resolve_to_themselves(value: Any) -> None:
    def has_braces(v: Any) -> bool:
        if isinstance(v, str):
            return "{{" in v
        if isinstance(v, dict):
            return any(has_braces(x) for x in v.values())
        if isinstance(v, list):
            return any(has_braces(x) for x in v)
        return False

    if not has_braces(value):
        assert resolve(value, scope()) == value


@given(st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=3), json_values)
def test_indices_walk_nested_lists(indices: list[int], leaf: Any) -> None:
    value: Any = leaf
    for i in reversed(indices):
        value = [None] * i + [value]
    path = "".join(f"[{i}]" for i in indices)
    assert resolve("{{trigger.x" + path + "}}", scope(trigger={"x": value})) == leaf


def test_missing_is_falsy_and_singular() -> None:
    assert not MISSING
    assert repr(MISSING) == "MISSING"
