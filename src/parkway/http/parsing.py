"""Reading requests and answering errors: bodies held to size and media type, JSON
parsed, fields validated (422 naming each one at fault), engine errors translated
into the status they deserve.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import unquote

import orjson
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from parkway import _json, limits
from parkway.errors import (
    CallbackNotFoundError,
    ConcurrencyLimitError,
    CorrelationError,
    DuplicateSubscriptionError,
    InvalidDurationError,
    InvalidInputError,
    MessageNotFoundError,
    ParkwayError,
    ResultTimeoutError,
    RunClosedError,
    RunNotFoundError,
    RunStateError,
    ScheduleNotFoundError,
    SerializationError,
    StoreError,
    TaskAssignmentError,
    TaskNotFoundError,
    UnknownWorkflowError,
    UpdateFailedError,
    UpdateRejectedError,
)
from parkway.http.guards import json_media_error
from parkway.limits import MAX_BODY_BYTES

M = TypeVar("M", bound=BaseModel)


# -- errors ----------------------------------------------------------------------------------


class Problem(Exception):
    """An error answered as ``{"detail": ..., "error": ...}`` with ``status``."""

    def __init__(
        self,
        status: int,
        detail: str,
        error: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status, self.detail, self.error, self.headers = status, detail, error, headers


class Invalid(Exception):
    """422: the fields at fault, each ``{"loc": [...], "msg": ..., "type": ...}``."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors))
        self.errors = errors


def field_error(loc: list[str | int], msg: str, type_: str) -> dict[str, Any]:
    return {"loc": loc, "msg": msg, "type": type_}


def from_validation(where: str, exc: ValidationError) -> Invalid:
    return Invalid(
        [
            # pydantic prefixes our validators' messages with "Value error, ": noise here.
            field_error([where, *e["loc"]], e["msg"].removeprefix("Value error, "), e["type"])
            for e in exc.errors(include_url=False)
        ]
    )


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """``data`` as JSON (orjson: datetimes as ISO 8601, non-str keys refused)."""
    return Response(orjson.dumps(data), status, headers, media_type="application/json")


def problem_response(
    status: int, detail: str, error: str | None = None, headers: dict[str, str] | None = None
) -> Response:
    return json_response({"detail": detail, "error": error}, status, headers)


def parkway_error(exc: ParkwayError) -> Exception:
    """Translate an engine error into the HTTP answer it deserves."""
    kind = type(exc).__name__
    if isinstance(exc, RunNotFoundError):  # the engine's hint names the Python API
        return Problem(404, f"no run with id {exc.run_id!r}; list runs with GET /runs", kind)
    if isinstance(exc, MessageNotFoundError | CallbackNotFoundError):
        return Problem(404, str(exc), kind)
    if isinstance(exc, TaskNotFoundError):
        return Problem(
            404, f"no human task with id {exc.task_id!r}; list them with GET /tasks", kind
        )
    if isinstance(exc, TaskAssignmentError):
        return Problem(403, str(exc), kind)
    if isinstance(exc, ScheduleNotFoundError):
        return Problem(
            404, f"no schedule with id {exc.schedule_id!r}; list them with GET /schedules", kind
        )
    if isinstance(exc, CorrelationError | RunClosedError | DuplicateSubscriptionError):
        return Problem(409, str(exc), kind)
    if isinstance(exc, ConcurrencyLimitError):  # (a "skip" limit is full: try again later)
        return Problem(409, str(exc), kind)
    if isinstance(exc, UpdateRejectedError | UpdateFailedError | RunStateError):
        return Problem(409, str(exc), kind)
    if isinstance(exc, ResultTimeoutError):  # the caller may ask again with the update's id
        return Problem(504, str(exc), kind)
    # The request named something the engine does not know: the field is at fault,
    # the route exists (so 422, not 404).
    if isinstance(exc, UnknownWorkflowError):
        return Invalid([field_error(["body", "workflow"], str(exc), kind)])
    if isinstance(exc, InvalidInputError):
        if exc.workflow is None and exc.field and not exc.field.startswith("$"):
            return Invalid([field_error(["body", exc.field], str(exc), kind)])  # (a limit)
        return Invalid([field_error(["body", "input", *json_path(exc.field)], str(exc), kind)])
    if isinstance(exc, InvalidDurationError):
        return Invalid([field_error(["body", exc.field], str(exc), kind)])
    if isinstance(exc, StoreError):  # not the client's fault: try again later
        return Problem(503, str(exc), kind, {"Retry-After": f"{math.ceil(exc.retry_after):d}"})
    if type(exc) is ParkwayError and exc.__cause__ is not None:
        # The engine validates with plain ParkwayErrors (raised `from None`); one that
        # wraps another error is the store's (no connection, pool exhausted): not the
        # client's fault.
        return Problem(
            503, str(exc), kind, {"Retry-After": f"{math.ceil(StoreError.retry_after):d}"}
        )
    # A malformed field the edge let through, an event the extractor cannot route,
    # a payload that cannot be stored: the request is at fault.
    return Invalid([field_error(["body"], str(exc), kind)])


# -- request parsing -------------------------------------------------------------------------


def json_path(path: str | None) -> list[str]:
    """``$.guests[1].name`` as ``["guests[1]", "name"]`` (an error's ``loc``)."""
    return [p for p in (path or "").removeprefix("$").split(".") if p]


@contextlib.contextmanager
def json_at(*loc: str) -> Iterator[None]:
    """A value of the request the engine cannot store is a 422 at ``loc`` (and its path)."""
    try:
        yield
    except SerializationError as exc:
        error = field_error(["body", *loc, *json_path(exc.path)], str(exc), type(exc).__name__)
        raise Invalid([error]) from None


async def read_body(request: Request) -> bytes:
    """The request body, refused with 415 unless it is JSON, and with 413 once it
    passes :data:`MAX_BODY_BYTES`.

    Both the announced ``Content-Length`` and the bytes actually streamed are
    checked: a chunked upload has no length to trust.
    """
    refused = json_media_error(request.headers)
    if refused is not None:
        raise Problem(415, refused)
    length = request.headers.get("content-length")
    if length is not None:
        if not limits.ascii_digits(length):
            raise Problem(400, f"Content-Length {length!r} is not a number of bytes")
        if int(length) > MAX_BODY_BYTES:
            raise too_large()
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def too_large() -> Problem:
    return Problem(413, f"the request body is larger than {MAX_BODY_BYTES} bytes (1 MiB)")


def json_value(raw: bytes, *, required: bool, exact: bool = True) -> Any:
    """The JSON document ``raw`` (422 if it is none); ``exact``: and 422 at an integer
    in it that the parser could not keep (see :func:`refuse_wide_integers`)."""
    if not raw.strip():
        if required:
            raise Invalid([field_error(["body"], "a JSON object body is required", "missing")])
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        refuse_wide_integers(raw)  # (one past a double's range fails the parse: name it)
        raise Invalid([field_error(["body"], f"not valid JSON: {exc}", "json_invalid")]) from None
    if exact:
        refuse_wide_integers(raw)
    return value


def refuse_wide_integers(raw: bytes) -> None:
    """422 at an integer of the JSON document ``raw`` outside 64 bits: orjson reads
    one as a float, which would change a payload silently."""
    wide = _json.wide_integer(raw)
    if wide is not None:
        path, text = wide
        message = (
            f"the integer {text} is outside the 64-bit range parkway stores "
            "(-2**63 to 2**64 - 1); send it as a string"
        )
        raise Invalid([field_error(["body", *path], message, "int_range")])


async def parse_body(request: Request, model: type[M]) -> M:
    """Read and validate a JSON body as ``model`` (422 naming the fields at fault)."""
    raw = await read_body(request)
    data = json_value(raw, required=True, exact=False)
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        # (A field's own check says more than "outside 64 bits": a ttl of 10**30
        # is longer than 100 years.)
        raise from_validation("body", exc) from None
    refuse_wide_integers(raw)
    return parsed


def parse_query(request: Request, model: type[M]) -> M:
    """Validate the query string as ``model``; unknown and repeated parameters are refused."""
    values: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if key in values:
            raise Invalid([field_error(["query", key], "give this parameter once", "repeated")])
        values[key] = value
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise from_validation("query", exc) from None


def message_id_param(request: Request) -> int:
    raw = request.path_params["message_id"]
    if not limits.ascii_digits(raw):  # (str.isdigit takes "٣" and "²")
        raise Invalid(
            [
                field_error(
                    ["path", "message_id"],
                    f"must be a message id (a number), got {raw!r}",
                    "int_parsing",
                )
            ]
        )
    return int(raw)


def path_param(request: Request, name: str, check: Callable[..., str], what: str) -> str:
    """A path parameter, held to the engine's limits (422 naming it)."""
    try:
        return check(request.path_params[name], what)
    except InvalidInputError as exc:
        raise Invalid([field_error(["path", name], str(exc), type(exc).__name__)]) from None


def run_id_param(request: Request) -> str:
    return path_param(request, "id", limits.reference, "run id")


def decoded(param: str, raw: str) -> str:
    try:
        return unquote(raw, errors="strict")
    except UnicodeDecodeError:
        message = f"{raw!r} is not UTF-8 once percent-decoded"
        raise Invalid([field_error(["path", param], message, "unicode")]) from None
