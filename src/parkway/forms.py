"""Human tasks' forms: a pydantic model or a JSON Schema, and the check of a result.

A form is kept as JSON Schema (what the inbox renders, and what any process can
check a result against without the workflow's code). A pydantic model's schema
is its ``model_json_schema()``; the model itself checks a result too, where this
process has it imported.

The JSON Schema check covers what forms use: ``type`` (one or a list),
``enum``, ``const``, ``properties``, ``required``, ``additionalProperties``
(``false`` or a schema), ``items``, ``minItems``/``maxItems``,
``minLength``/``maxLength``, ``pattern``, ``minimum``/``maximum`` (and the
exclusive ones), ``multipleOf``, ``format`` left unchecked, ``anyOf``/``oneOf``/
``allOf``, and ``$ref`` into the schema's own ``$defs``/``definitions`` (pydantic's
nested models and enums). Other keywords (``title``, ``description``,
``default``, ``examples``...) describe and do not constrain.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Any

from parkway.errors import InvalidArgumentError, InvalidInputError, shown

_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")


def is_model(form: Any) -> bool:
    """Whether ``form`` is a pydantic model class (duck-typed: pydantic is optional)."""
    return isinstance(form, type) and callable(getattr(form, "model_json_schema", None))


def model_path(model: type) -> str:
    """Where ``model`` is found again: ``module:qualname``."""
    return f"{model.__module__}:{model.__qualname__}"


def schema_of(form: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The form's JSON Schema and, for a pydantic model, its ``module:qualname``.

    Raises:
        InvalidArgumentError: ``form`` is neither ``None``, a pydantic model class nor
            a JSON Schema of an object.
    """
    if form is None:
        return None, None
    if is_model(form):
        return form.model_json_schema(), model_path(form)
    if not isinstance(form, dict):
        raise InvalidArgumentError(
            "form must be a pydantic model class, a JSON Schema (a dict) or None, "
            f"got {type(form).__name__} {shown(form)}",
            field="form",
        )
    if form.get("type") != "object":
        raise InvalidArgumentError(
            'form: a JSON Schema form describes an object ({"type": "object", '
            f'"properties": ...}}), got type {shown(form.get("type"))}',
            field="form",
        )
    _check_schema(form, form, "form")
    return form, None


def _check_schema(schema: Any, root: dict[str, Any], where: str) -> None:
    """Refuse a schema this module would misread (a type it does not know, a bad $ref)."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise InvalidArgumentError(f"{where} must be a JSON Schema object", field="form")
    kinds = schema.get("type")
    for kind in kinds if isinstance(kinds, list) else [] if kinds is None else [kinds]:
        if kind not in _TYPES:
            raise InvalidArgumentError(
                f"{where}: unknown type {shown(kind)}; use one of {', '.join(_TYPES)}", field="form"
            )
    if "$ref" in schema:
        _resolve(schema["$ref"], root, where)
    for key, sub in (schema.get("properties") or {}).items():
        _check_schema(sub, root, f"{where}.properties.{key}")
    for key in ("anyOf", "oneOf", "allOf"):
        for index, sub in enumerate(schema.get(key) or []):
            _check_schema(sub, root, f"{where}.{key}[{index}]")
    if isinstance(schema.get("items"), dict):
        _check_schema(schema["items"], root, f"{where}.items")
    if "pattern" in schema:
        try:
            re.compile(schema["pattern"])
        except (re.error, TypeError) as exc:
            raise InvalidArgumentError(f"{where}: bad pattern: {exc}", field="form") from exc


def _resolve(ref: Any, root: dict[str, Any], where: str) -> Any:
    if isinstance(ref, str):
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix):
                found = (root.get(prefix[2:-1]) or {}).get(ref[len(prefix) :])
                if found is not None:
                    return found
    raise InvalidArgumentError(
        f"{where}: $ref {shown(ref)} is not one of the schema's own $defs", field="form"
    )


def check(result: Any, schema: dict[str, Any] | None, model: str | None = None) -> Any:
    """``result`` checked against the form; the value to hand the run.

    A pydantic model this process has imported checks it too (what it may accept
    more leniently, or refuse beyond the schema), and gives the value in its
    JSON form.

    Raises:
        InvalidInputError: ``result`` does not fit; ``field`` names where.
    """
    if schema is None:
        return result
    _validate(result, schema, schema, "")
    cls = _loaded_model(model)
    if cls is not None:
        try:
            instance = cls.model_validate(result)
        except ValueError as exc:  # (pydantic's ValidationError is a ValueError)
            errors = getattr(exc, "errors", None)
            first = errors()[0] if callable(errors) else {}
            path = _dotted(first.get("loc", ()))
            message = first.get("msg", str(exc))
            raise InvalidInputError(f"{path or 'result'}: {message}", field=path) from None
        return instance.model_dump(mode="json")
    return result


def _loaded_model(path: str | None) -> Any:
    """The model class at ``module:qualname`` if its module is imported here (never
    imported for it: a path read from the store does not choose what runs)."""
    if not path or ":" not in path:
        return None
    module_name, _, qualname = path.partition(":")
    found: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found if is_model(found) else None


def _dotted(loc: Any) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _fail(path: str, message: str) -> InvalidInputError:
    return InvalidInputError(f"{path or 'result'}: {message}", field=path or None)


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        if isinstance(value, float) and value.is_integer():
            return True
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    return value is None


def _validate(value: Any, schema: Any, root: dict[str, Any], path: str) -> None:
    if schema is True:
        return
    if schema is False:
        raise _fail(path, "no value is allowed here")
    if "$ref" in schema:
        _validate(value, _resolve(schema["$ref"], root, path or "form"), root, path)
    for sub in schema.get("allOf") or []:
        _validate(value, sub, root, path)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if options:
            errors = []
            for sub in options:
                try:
                    _validate(value, sub, root, path)
                except InvalidInputError as exc:
                    errors.append(exc)
            if len(errors) == len(options):
                raise errors[0] if len(errors) == 1 else _fail(path, "matches none of the choices")
    kinds = schema.get("type")
    if kinds is not None:
        allowed = kinds if isinstance(kinds, list) else [kinds]
        if not any(_type_ok(value, kind) for kind in allowed):
            wanted = " or ".join(_article(kind) for kind in allowed)
            if value is None and path:
                raise _fail(path, f"is required (expected {wanted})")
            raise _fail(path, f"expected {wanted}, got {_json_type(value)}")
    if "enum" in schema and not any(_same(value, c) for c in schema["enum"]):
        choices = ", ".join(repr(c) for c in schema["enum"])
        raise _fail(path, f"must be one of {choices}")
    if "const" in schema and not _same(value, schema["const"]):
        raise _fail(path, f"must be {schema['const']!r}")
    if isinstance(value, str):
        _string(value, schema, path)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _number(value, schema, path)
    elif isinstance(value, list):
        _array(value, schema, root, path)
    elif isinstance(value, dict):
        _object(value, schema, root, path)


def _string(value: str, schema: dict[str, Any], path: str) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        if schema["minLength"] == 1 and not value:
            raise _fail(path, "must not be empty")
        raise _fail(path, f"must be at least {schema['minLength']} characters long")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        raise _fail(path, f"must be at most {schema['maxLength']} characters long")
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        raise _fail(path, f"must match the pattern {schema['pattern']!r}")


def _number(value: float, schema: dict[str, Any], path: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise _fail(path, "must be a finite number")
    if "minimum" in schema and value < schema["minimum"]:
        raise _fail(path, f"must be at least {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        raise _fail(path, f"must be at most {schema['maximum']}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        raise _fail(path, f"must be more than {schema['exclusiveMinimum']}")
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        raise _fail(path, f"must be less than {schema['exclusiveMaximum']}")
    step = schema.get("multipleOf")
    if step and not math.isclose(value / step, round(value / step)):
        raise _fail(path, f"must be a multiple of {step}")


def _array(value: list[Any], schema: dict[str, Any], root: dict[str, Any], path: str) -> None:
    if "minItems" in schema and len(value) < schema["minItems"]:
        raise _fail(path, f"must have at least {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        raise _fail(path, f"must have at most {schema['maxItems']} items")
    items = schema.get("items")
    if isinstance(items, dict | bool):
        for index, item in enumerate(value):
            _validate(item, items, root, f"{path}[{index}]")


def _object(value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], path: str) -> None:
    properties = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            raise _fail(_join(path, name), "is required")
    for name, item in value.items():
        where = _join(path, name)
        if name in properties:
            _validate(item, properties[name], root, where)
        else:
            extra = schema.get("additionalProperties", True)
            if extra is False:
                raise _fail(where, "is not a field of this form")
            if isinstance(extra, dict):
                _validate(item, extra, root, where)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _same(a: Any, b: Any) -> bool:
    return (type(a) is type(b) and a == b) or (_numeric(a) and _numeric(b) and a == b)


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _article(kind: str) -> str:
    return {"integer": "an integer", "object": "an object", "array": "an array"}.get(
        kind, "null" if kind == "null" else f"a {kind}"
    )


__all__ = ["check", "is_model", "model_path", "schema_of"]
