"""parkway._json.dumps: a NaN or an infinity anywhere is refused with its path, and
values whose nulls are all ``None`` encode as they are."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from parkway._json import dumps
from parkway.errors import SerializationError

finite = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False)
)
values = st.recursive(
    finite,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(values)
def test_a_value_without_a_non_finite_float_encodes_as_orjson_does(value: Any) -> None:
    assert dumps(value, "the value") == orjson.dumps(value)


def _paths(value: Any, path: str = "$") -> list[tuple[str, Any]]:
    """Every place in ``value`` a leaf could be put: (its path, its container and key)."""
    found: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((f"{path}.{key}", (value, key)))
            found += _paths(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.append((f"{path}[{index}]", (value, index)))
            found += _paths(item, f"{path}[{index}]")
    return found


@given(
    st.recursive(
        finite,
        lambda inner: (
            st.lists(inner, min_size=1, max_size=4)
            | st.dictionaries(st.text(alphabet="abc", min_size=1, max_size=3), inner, min_size=1)
        ),
        max_leaves=20,
    ),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.data(),
)
def test_a_non_finite_float_anywhere_is_refused_with_its_path(
    value: Any, bad: float, data: st.DataObject
) -> None:
    places = _paths(value)
    if places:
        # (one place replaced, so it is the only non-finite number in the value)
        path, (container, key) = data.draw(st.sampled_from(places))
        container[key] = bad
    else:
        value, path = bad, "$"
    with pytest.raises(SerializationError) as caught:
        dumps(value, "the value")
    assert "not a finite number" in str(caught.value)
    assert caught.value.path == path
