"""Human tasks' forms (parkway.forms): the JSON Schema check, and pydantic models."""

from __future__ import annotations

import enum
import sys
from typing import Any

import pytest
from pydantic import BaseModel, Field

from parkway import forms
from parkway.errors import InvalidArgumentError, InvalidInputError


class Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    city: str = Field(min_length=1)
    zip: str = Field(pattern=r"^[0-9]{5}$")


class Order(BaseModel):
    colour: Colour
    quantity: int = Field(ge=1, le=10)
    price: float = Field(gt=0)
    address: Address
    tags: list[str] = Field(default_factory=list, max_length=3)
    note: str | None = None


GOOD = {
    "colour": "red",
    "quantity": 2,
    "price": 9.5,
    "address": {"city": "Lyon", "zip": "69001"},
    "tags": ["gift"],
}


def refused(value: Any, schema: dict[str, Any], model: str | None = None) -> InvalidInputError:
    with pytest.raises(InvalidInputError) as caught:
        forms.check(value, schema, model)
    return caught.value


def test_a_pydantic_models_schema_checks_nested_models_enums_and_optionals() -> None:
    schema, path = forms.schema_of(Order)
    assert schema is not None and path == f"{__name__}:Order"
    assert forms.check(GOOD, schema) == GOOD
    assert forms.check({**GOOD, "note": None}, schema)["note"] is None
    for change, field in (
        ({"colour": "green"}, "colour"),
        ({"quantity": 0}, "quantity"),
        ({"quantity": 11}, "quantity"),
        ({"quantity": 1.5}, "quantity"),
        ({"price": 0}, "price"),
        ({"address": {"city": "", "zip": "69001"}}, "address.city"),
        ({"address": {"city": "Lyon", "zip": "6900"}}, "address.zip"),
        ({"address": {"city": "Lyon"}}, "address.zip"),
        ({"tags": ["a", "b", "c", "d"]}, "tags"),
        ({"tags": [1]}, "tags[0]"),
        ({"note": 5}, "note"),
    ):
        assert refused({**GOOD, **change}, schema).field == field, change
    missing = dict(GOOD)
    del missing["price"]
    error = refused(missing, schema)
    assert error.field == "price" and "required" in str(error)


def test_the_model_itself_checks_where_it_is_imported() -> None:
    schema, path = forms.schema_of(Order)
    assert schema is not None and path is not None
    # Coerced to its JSON form by the model: the enum as its value.
    assert forms.check(GOOD, schema, path)["colour"] == "red"
    assert forms.check(GOOD, schema, "nowhere.to.be.found:Order") == GOOD
    assert forms.check(GOOD, schema, f"{__name__}:NotAModel") == GOOD
    assert "nowhere.to.be.found" not in sys.modules  # (never imported for the check)


def test_a_json_schema_is_checked_as_written() -> None:
    schema = {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "n": {"type": ["integer", "null"], "multipleOf": 5},
            "kind": {"enum": ["a", 1, None]},
            "code": {"const": "X"},
            "extra": {"type": "object", "additionalProperties": {"type": "number"}},
        },
        "required": ["ok"],
        "additionalProperties": False,
    }
    assert forms.check({"ok": True, "n": None, "kind": 1, "code": "X"}, schema)
    assert forms.check({"ok": False, "n": 10, "extra": {"a": 1.5}}, schema)
    for value, field in (
        ({}, "ok"),
        ({"ok": 1}, "ok"),
        ({"ok": True, "n": 7}, "n"),
        ({"ok": True, "kind": "b"}, "kind"),
        ({"ok": True, "kind": True}, "kind"),
        ({"ok": True, "code": "Y"}, "code"),
        ({"ok": True, "other": 1}, "other"),
        ({"ok": True, "extra": {"a": "x"}}, "extra.a"),
        ("not an object", None),
    ):
        assert refused(value, schema).field == field, value


def test_no_form_takes_any_json() -> None:
    assert forms.schema_of(None) == (None, None)
    assert forms.check([1, {"a": None}], None) == [1, {"a": None}]


@pytest.mark.parametrize(
    "form",
    [
        "a string",
        {"type": "string"},
        {"type": "object", "properties": {"x": {"type": "text"}}},
        {"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}},
        {"type": "object", "properties": {"x": {"type": "string", "pattern": "("}}},
        int,
    ],
)
def test_a_form_that_is_no_object_schema_is_refused(form: Any) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        forms.schema_of(form)
    assert caught.value.field == "form"
