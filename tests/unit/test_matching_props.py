"""Property tests of the match rule and of the subscription index, against a reference.

The reference rule (README, ``wait_for_event(match=...)``): a payload satisfies a
``match`` when every key of the match is in the payload and the values are
JSON-equal: numbers by value (``1 == 1.0``), booleans apart from numbers,
objects and arrays structurally.

Two promises are checked:

- ``matches(match, payload)`` *is* that rule, exactly.
- The index never hides a match: when the rule says "matches", the digest a
  publish computes for the payload under the wait's shape is the digest the wait
  is stored under (``payload_digest(payload, shape_of(match)) == match_digest(match)``).
  The index is also precise: equal digests only for JSON-equal values.

The reference below is written independently of ``parkway.matching``: values are
turned into a canonical tree (numbers as exact fractions), and trees compare with
``==``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tests.helpers import examples

from parkway import ParkwayError
from parkway.matching import check_match, match_digest, matches, payload_digest, shape_of

SETTINGS = settings(
    max_examples=examples(200),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# ---------------------------------------------------------------------------------------------
# The reference rule


def canonical(value: Any) -> Any:
    """A tree that is ``==`` exactly when two JSON values are JSON-equal."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", Fraction(value))
    if value is None:
        return ("null",)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list | tuple):
        return ("array", tuple(canonical(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, canonical(v)) for k, v in value.items()))
    raise TypeError(f"not a JSON value: {value!r}")


def json_equal(a: Any, b: Any) -> bool:
    return canonical(a) == canonical(b)


def reference_matches(match: dict[str, Any] | None, payload: Any) -> bool:
    if not match:
        return True  # no condition: any payload
    if not isinstance(payload, dict):
        return False
    return all(key in payload and json_equal(value, payload[key]) for key, value in match.items())


def index_finds(match: dict[str, Any] | None, payload: Any) -> bool:
    """What a publish of ``payload`` does for a wait with ``match``: look up its index entry."""
    return payload_digest(payload, shape_of(match)) == match_digest(match)


# ---------------------------------------------------------------------------------------------
# JSON-like values: what a payload can hold once it has gone through JSON (integers within
# orjson's range, finite floats), plus tuples, which Python callers may pass for arrays.
#
# Integers at the very edge of that range, [2**63, 2**64) and -2**63, have a float twin
# the index misses; a separate, expected-to-fail test pins that down, and the strategies
# keep integers inside (-2**63, 2**63) so that the properties state the rest.

keys = st.sampled_from(["a", "b", "c", "id", "order_id", "é", "a.b", " "])
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1),
    st.integers(min_value=-3, max_value=3),  # small ints collide with bools and floats often
    st.sampled_from(
        [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 1e-300, 2.0**53, 2.0**53 + 2, 1e20, -1e20, 2.0**64, 1e300]
    ),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(keys, children, max_size=3),
    ),
    max_leaves=10,
)
match_dicts = st.dictionaries(keys, json_values, max_size=4)
payloads = st.one_of(st.dictionaries(keys, json_values, max_size=5), json_values)


@st.composite
def twin(draw: st.DrawFn, value: Any) -> Any:
    """A value JSON-equal to ``value`` but written differently (1 <-> 1.0, key order, tuples)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if float(value) == value and draw(st.booleans()):  # exactly representable
            return float(value)
        return value
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 2**63 and draw(st.booleans()):
            return int(value)
        return value
    if isinstance(value, list | tuple):
        items = [draw(twin(v)) for v in value]
        return tuple(items) if draw(st.booleans()) else items
    if isinstance(value, dict):
        items = [(k, draw(twin(v))) for k, v in value.items()]
        order = draw(st.permutations(items)) if items else items
        return dict(order)
    raise AssertionError(value)


@st.composite
def near_pairs(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    """A match and a payload built from it: often matching, sometimes off by one detail."""
    match = draw(match_dicts)
    payload = {k: draw(twin(v)) for k, v in match.items()}
    payload.update(draw(st.dictionaries(keys.filter(lambda k: k not in match), json_values)))
    change = draw(st.sampled_from(["none", "none", "drop", "replace", "bool-for-number"]))
    if match and change != "none":
        key = draw(st.sampled_from(sorted(match)))
        if change == "drop":
            del payload[key]
        elif change == "replace":
            payload[key] = draw(json_values)
        else:
            value = match[key]
            if isinstance(value, int | float) and not isinstance(value, bool) and value in (0, 1):
                payload[key] = bool(value)
    return match, payload


# ---------------------------------------------------------------------------------------------
# The reference itself (so that the properties below mean what they say)


def test_reference_rule_examples() -> None:
    assert json_equal(1, 1.0)
    assert json_equal(-0.0, 0)
    assert not json_equal(True, 1)
    assert not json_equal(False, 0)
    assert not json_equal(None, False)
    assert json_equal({"a": [1, {"b": 2.0}]}, {"a": (1.0, {"b": 2})})
    assert not json_equal([1, 2], [2, 1])
    assert not json_equal({"a": 1}, {"a": 1, "b": None})
    assert reference_matches({"a": 1}, {"a": 1.0, "z": "extra"})
    assert not reference_matches({"a": None}, {})
    assert reference_matches(None, 5)
    assert reference_matches({}, "anything")
    assert not reference_matches({"a": 1}, [("a", 1)])


# ---------------------------------------------------------------------------------------------
# matches == the reference


@SETTINGS
@given(match_dicts, payloads)
def test_matches_equals_the_reference_on_random_pairs(match, payload) -> None:
    assert matches(match, payload) is reference_matches(match, payload)


@SETTINGS
@given(json_values, st.data())
def test_a_json_equal_twin_always_matches(value, data) -> None:
    other = data.draw(twin(value))
    assert json_equal(value, other)
    assert matches({"k": value}, {"k": other})
    assert matches({"k": other}, {"k": value})
    assert index_finds({"k": value}, {"k": other})


@SETTINGS
@given(payloads)
def test_no_match_accepts_every_payload(payload) -> None:
    assert matches(None, payload)
    assert matches({}, payload)
    assert index_finds(None, payload)
    assert index_finds({}, payload)


# ---------------------------------------------------------------------------------------------
# The index agrees with the reference: no false negatives (and, digests being exact, no
# false positives either)


@SETTINGS
@given(match_dicts, payloads)
def test_index_finds_every_matching_wait_on_random_pairs(match, payload) -> None:
    if reference_matches(match, payload):
        assert index_finds(match, payload), (match, payload)


@SETTINGS
@given(near_pairs())
def test_rule_and_index_agree_with_the_reference_on_near_pairs(pair) -> None:
    match, payload = pair
    expected = reference_matches(match, payload)
    assert matches(match, payload) is expected
    # No false negatives: a matching wait is always found. Digests being exact, no false
    # positives either (the rule re-checks anyway, so those would only cost time).
    assert index_finds(match, payload) is expected, (match, payload)


@SETTINGS
@given(json_values, json_values)
def test_digests_equal_only_for_json_equal_values(a, b) -> None:
    assert (match_digest({"k": a}) == match_digest({"k": b})) is json_equal(a, b)


@SETTINGS
@given(match_dicts, payloads)
def test_payload_digest_is_none_exactly_when_a_key_is_missing(match, payload) -> None:
    assume(match)
    digest = payload_digest(payload, shape_of(match))
    has_keys = isinstance(payload, dict) and all(k in payload for k in match)
    assert (digest is not None) is has_keys


@SETTINGS
@given(match_dicts, st.data())
def test_shape_and_digest_ignore_key_order(match, data) -> None:
    shuffled = dict(data.draw(st.permutations(list(match.items()))))
    assert shape_of(shuffled) == shape_of(match)
    assert match_digest(shuffled) == match_digest(match)


@SETTINGS
@given(match_dicts, match_dicts)
def test_shapes_are_the_key_sets(m1, m2) -> None:
    assert (shape_of(m1) == shape_of(m2)) is (set(m1) == set(m2))


# ---------------------------------------------------------------------------------------------
# Edges, by example


@pytest.mark.parametrize(
    ("match", "payload", "expected"),
    [
        ({"n": 1}, {"n": 1.0}, True),
        ({"n": 1.0}, {"n": 1}, True),
        ({"n": 0}, {"n": -0.0}, True),
        ({"n": 1}, {"n": True}, False),
        ({"n": True}, {"n": 1}, False),
        ({"n": 0}, {"n": False}, False),
        ({"n": None}, {"n": False}, False),
        ({"n": None}, {"n": None}, True),
        ({"n": None}, {}, False),
        ({"n": "1"}, {"n": 1}, False),
        ({"n": 2**53 + 1}, {"n": float(2**53)}, False),
        ({"n": 2**60}, {"n": float(2**60)}, True),
        ({"o": {"x": [1, 2]}}, {"o": {"x": [1.0, 2.0]}}, True),
        ({"o": {"x": [1, 2]}}, {"o": {"x": [2, 1]}}, False),
        ({"o": {"x": 1}}, {"o": {"x": 1, "y": 2}}, False),
        ({"l": []}, {"l": {}}, False),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1, "c": 3}, True),
        ({"a": 1}, None, False),
        ({"a": 1}, ["a"], False),
        ({"a": 1}, "a", False),
    ],
)
def test_match_edges(match, payload, expected) -> None:
    assert reference_matches(match, payload) is expected
    assert matches(match, payload) is expected
    assert index_finds(match, payload) is expected


@pytest.mark.parametrize("bad", [[("a", 1)], "a=1", 5, {1: "x"}, {"": 1}])
def test_check_match_rejects_what_is_not_a_dict_of_names(bad) -> None:
    with pytest.raises(ParkwayError, match="match"):
        check_match(bad)


@pytest.mark.parametrize("big", [1e20, -1e20, 2.0**64, 1e300, -1e300])
def test_index_handles_large_integral_floats(big) -> None:
    assert math.isfinite(big) and big.is_integer()
    assert matches({"n": big}, {"n": big})
    assert index_finds({"n": big}, {"n": big})
    assert not index_finds({"n": big}, {"n": big / 2})


@pytest.mark.parametrize("edge", [2**63, -(2**63), 2**64 - 2048])
def test_index_finds_edge_integers_written_as_floats(edge) -> None:
    assert float(edge) == edge
    assert reference_matches({"n": edge}, {"n": float(edge)})
    assert matches({"n": edge}, {"n": float(edge)})
    assert index_finds({"n": edge}, {"n": float(edge)})
