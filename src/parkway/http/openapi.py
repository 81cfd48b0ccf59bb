"""``/openapi.json``: built from :data:`parkway.http.routes.ROUTES`, the request models
(:mod:`parkway.http.requests`) and the response models (:mod:`parkway.http.responses`)."""

from __future__ import annotations

import functools
import re
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

import parkway
from parkway import limits
from parkway.http import responses
from parkway.http.routes import ROUTES, Doc, RouteSpec

_REF = "#/components/schemas/{model}"
_STRING = {"type": "string"}
# Path parameters, as the routes take them (a run id may hold "/", sent as %2F).
PATH_TYPES: dict[str, dict[str, Any]] = {
    "message_id": {"type": "integer", "minimum": 0},
    "id": {"type": "string", "minLength": 1, "pattern": limits.TEXT_PATTERN},
    "name": {
        "type": "string",
        "minLength": 1,
        "maxLength": limits.MAX_NAME_LENGTH,
        "pattern": limits.NAME_PATTERN,
    },
    "token": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[A-Za-z0-9_-]+$"},
    "key": {
        "type": "string",
        "minLength": 1,
        "maxLength": limits.MAX_NAME_LENGTH,
        "pattern": limits.NAME_PATTERN,
    },
}
_ERRORS: dict[int, tuple[str, type[BaseModel]]] = {
    400: (
        "The Host header names another server (parkway serve answers its own address, "
        "IP addresses and localhost; see --allow-host), or Content-Length is not a number.",
        responses.ErrorOut,
    ),
    401: ("Missing or wrong bearer token (when PARKWAY_API_TOKEN is set).", responses.ErrorOut),
    403: ("The human task is assigned to others than `by`.", responses.ErrorOut),
    404: (
        "No run (or message, schedule, task, callback) with this id or token.",
        responses.ErrorOut,
    ),
    409: (
        "The run has finished, the message found no receiver and may not be buffered, "
        "the run rejected the update (or its handler raised), or the human task is not "
        "open.",
        responses.ErrorOut,
    ),
    413: ("The body is larger than 1 MiB.", responses.ErrorOut),
    429: (
        "Too many callback requests from this address; Retry-After says when to try again.",
        responses.ErrorOut,
    ),
    415: (
        "The body is not sent as Content-Type: application/json (a request without a "
        "Content-Type is taken as JSON, unless a browser sent it).",
        responses.ErrorOut,
    ),
    422: ("A field is invalid; `loc` names it.", responses.ValidationErrorOut),
    503: ("The engine or its store is not available.", responses.ErrorOut),
    504: (
        "The run did not answer within the timeout (an accepted update still applies: "
        "send it again with its id for the answer).",
        responses.ErrorOut,
    ),
}
# Routes that answer without the engine.
_NO_ENGINE = frozenset({"/openapi.json", "/"})


@functools.cache
def openapi_document(*, token_required: bool = True) -> dict[str, Any]:
    """The OpenAPI 3.1 description of every route, request body and response.

    Args:
        token_required: The server requires the bearer token (``PARKWAY_API_TOKEN``
            is set): the routes name it as their security. Without it they need
            none, and 401 stays documented (the token may be set later).
    """
    models: set[type[BaseModel]] = {responses.ErrorOut, responses.ValidationErrorOut}
    for route in ROUTES:
        models.update(m for m in (route.body, route.query) if m is not None)
        models.update(d.model for d in route.responses.values() if d.model is not None)
    ordered = sorted(models, key=lambda m: m.__name__)
    _, top = models_json_schema([(m, "validation") for m in ordered], ref_template=_REF)
    components: dict[str, Any] = top.get("$defs", {})
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        operation = _operation(route, components, token_required)
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    for route in ROUTES:  # query models are described as parameters, not as schemas
        if route.query is not None:
            components.pop(route.query.__name__, None)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "parkway",
            "version": parkway.__version__,
            "description": "Durable, event-driven workflows: publish events, correlate "
            "messages, start, inspect, signal and cancel runs, complete callbacks and "
            "human tasks.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _operation(
    route: RouteSpec, components: dict[str, Any], token_required: bool
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": route.summary,
        "operationId": route.handler,
        "tags": list(route.tags),
        "responses": {str(code): _response(doc) for code, doc in route.responses.items()},
    }
    path_params = re.findall(r"{(\w+)}", route.path)
    params = [
        {"name": name, "in": "path", "required": True, "schema": PATH_TYPES.get(name, _STRING)}
        for name in path_params
    ]
    if route.query is not None:
        model = components[route.query.__name__]
        for name, prop in model.get("properties", {}).items():
            schema = _query_schema(prop)
            params.append(
                {
                    "name": name,
                    "in": "query",
                    "required": False,
                    "description": prop.get("description", ""),
                    "schema": schema,
                }
            )
    if any(doc.events for doc in route.responses.values()):
        params.append(
            {
                "name": "Last-Event-ID",
                "in": "header",
                "required": False,
                "description": "Resume after this offset (an EventSource sends it when it "
                "reconnects); it wins over ?offset=.",
                "schema": {"type": "string"},
            }
        )
    if params:
        op["parameters"] = params
    errors = set(route.errors)
    if path_params:
        errors.add(422)
    if route.method in ("POST", "DELETE"):  # a body, if any, is held to size and media type
        errors |= {400, 413, 415}
    if route.path not in _NO_ENGINE:
        errors.add(503)
    if route.body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(route.body)}},
        }
        errors |= {413, 422}
    elif route.raw_body is not None:
        op["requestBody"] = {
            "required": False,
            "description": route.raw_body,
            "content": {"application/json": {"schema": {}}},
        }
        errors |= {413, 422}
    if route.query is not None:
        errors.add(422)
    if route.public:
        op["security"] = []
    else:
        op["security"] = [{"bearer": []}] if token_required else []
        errors |= {400, 401}
    page = route.responses.get(200)
    for code in sorted(errors):
        description, model = _ERRORS[code]
        doc = Doc(description, model)
        if code == 401 and page is not None and page.media != "application/json":
            doc = Doc(description, media=page.media)  # the page comes with its 401 too
        op["responses"][str(code)] = _response(doc)
    return op


def _query_schema(prop: dict[str, Any]) -> dict[str, Any]:
    """A query parameter's schema: a missing parameter is the null of its model."""
    schema = {k: v for k, v in prop.items() if k not in ("description", "title", "default")}
    choices = schema.pop("anyOf", None)
    if choices is not None:
        kept = [c for c in choices if c != {"type": "null"}]
        schema.update(kept[0] if len(kept) == 1 else {"anyOf": kept})
    if "default" in prop and prop["default"] is not None:
        schema["default"] = prop["default"]
    return schema


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _REF.format(model=model.__name__)}


def _response(doc: Doc) -> dict[str, Any]:
    out: dict[str, Any] = {"description": doc.description}
    if not doc.media:  # (no body: a 204)
        return out
    if doc.media != "application/json":
        out["content"] = {doc.media: {"schema": {"type": "string"}}}
    elif doc.model is not None:
        schema = _ref(doc.model)
        out["content"] = {
            doc.media: {"schema": {"type": "array", "items": schema} if doc.many else schema}
        }
        if doc.events:
            out["content"]["text/event-stream"] = {"schema": {"type": "string"}}
    else:
        out["content"] = {doc.media: {"schema": {"type": "object"}}}
    return out
