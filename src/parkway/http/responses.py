"""The HTTP API's responses: their schemas, for ``/openapi.json`` and the tests.

A response that is one of the engine's records (a run, a journal entry, a
message...) is that record's ``to_dict()``, and its schema is generated here
from the same dataclass fields (:func:`record_model`): the record is the one
definition of its shape, so the two cannot drift. What a route leaves out of a
record (``drop``), adds to it (``extra``), or what a field holds where its type
does not say enough (``overrides``), is said where its model is made. The shapes
that are the HTTP API's alone (an id, a count, an error) are written here as
models.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import types
import typing
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, create_model

from parkway.events import CorrelationResult, MessageInfo, PublishResult, SubscriptionInfo
from parkway.models import (
    CallbackResult,
    ErrorInfo,
    EventInfo,
    HistoryEntry,
    HumanTask,
    RunInfo,
    RunStatus,
    StreamItem,
    WorkerInfo,
)
from parkway.models.wire import spec_of
from parkway.schedules import ScheduleInfo


class _Response(BaseModel):
    # (The tests hold every response to its model: a field it does not document fails.)
    model_config = ConfigDict(extra="forbid")


# -- parts of records that are not records themselves --------------------------------------


class ErrorInfoOut(_Response):
    """An error stored with a run or a journal entry."""

    type: str
    message: str
    traceback: str | None


class WaitOut(_Response):
    """One thing a run waits for now."""

    kind: str = Field(description="signal, event, message, timer, update, callback, task or retry")
    name: str
    subject: str | None = Field(default=None, description="An event's subject.")
    match: Any = Field(default=None, description="An event's match.")
    key: str | None = Field(default=None, description="A message's key.")
    at: datetime | None = Field(
        default=None, description="Its timeout or due time (a retry's next attempt)."
    )
    attempt: int | None = Field(default=None, description="A retry: the attempt it will make.")
    max_attempts: int | None = Field(default=None, description="A retry: attempts allowed.")
    error: ErrorInfoOut | None = Field(default=None, description="A retry: the last failure.")


class ForkedFromOut(_Response):
    """Where a forked run came from: the source run and how many of its journal
    entries the fork started with."""

    run_id: str
    at: int


# -- models generated from the records -----------------------------------------------------

# The models of records nested in others (a publish's deliveries), by record class.
_NESTED: dict[type, type[BaseModel]] = {}


def record_model(
    record: type,
    name: str,
    *,
    doc: str | None = None,
    drop: tuple[str, ...] = (),
    overrides: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> type[BaseModel]:
    """The response model of ``record``'s ``to_dict()``, from its dataclass fields.

    Args:
        record: The record class (a dataclass whose JSON form is derived from its fields).
        name: The model's name (its schema's in ``/openapi.json``).
        doc: Its description (default: the first paragraph of the record's docstring).
        drop: Fields the route leaves out of the record.
        overrides: A field's type where the record's own does not say enough (a dict
            with a known shape).
        extra: Fields the route adds, ``{name: (type, Field(...))}``.
    """
    assert dataclasses.is_dataclass(record), record
    hints = typing.get_type_hints(record, vars(sys.modules[record.__module__]))
    described = _attributes(record.__doc__ or "")
    definitions: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        spec = spec_of(f.metadata)
        if spec.get("hidden") or f.name in drop:
            continue
        kind = (overrides or {}).get(f.name) or _out(hints[f.name], spec.get("choices"))
        # (No defaults: to_dict() writes every field, so the document requires each.)
        info: dict[str, Any] = {}
        description = spec.get("description") or described.get(f.name)
        if description:
            info["description"] = description
        definitions[f.name] = (kind, Field(**info))
    definitions.update(extra or {})
    model: type[BaseModel] = create_model(
        name,
        __base__=_Response,
        __doc__=doc or (record.__doc__ or name).strip().split("\n\n")[0],
        __module__=__name__,
        **definitions,
    )
    return model


def _out(hint: Any, choices: tuple[str, ...] | None) -> Any:
    """The type a record's field has in its JSON form."""
    if choices:
        return Literal[choices]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(_out(a, None) for a in args)]  # noqa: UP007
    if origin is tuple:  # (a tuple is written as a list)
        return list[_out(args[0], None)]  # type: ignore[misc]
    if origin is list:
        return list[_out(args[0], None)]  # type: ignore[misc]
    if isinstance(hint, type) and issubclass(hint, ErrorInfo):
        return ErrorInfoOut
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if hint not in _NESTED:
            _NESTED[hint] = record_model(hint, f"{hint.__name__}Out")
        return _NESTED[hint]
    return hint


def _attributes(doc: str) -> dict[str, str]:
    """The ``Attributes:`` (or ``Args:``) entries of a Google-style docstring, by name,
    each joined into one line."""
    out: dict[str, str] = {}
    current: str | None = None
    within = False
    for line in doc.splitlines():
        text = line.strip()
        if text in ("Attributes:", "Args:"):
            within, current = True, None
            continue
        if not within:
            continue
        if not text:
            within = False
            continue
        head, colon, rest = text.partition(": ")
        if colon and head.isidentifier() and len(line) - len(line.lstrip()) <= 8:
            current = head
            out[current] = rest.strip()
        elif current is not None:
            out[current] += " " + text
    return {k: _as_json(v) for k, v in out.items()}


def _as_json(text: str) -> str:
    """A docstring's words as an HTTP client reads them: ``None`` is null, and no
    Sphinx markup."""
    text = re.sub(r":\w+:`([^`]+)`", r"\1", text).replace("``", "")
    return re.sub(r"\bNone\b", "null", text)


RunInfoOut = record_model(
    RunInfo,
    "RunInfoOut",
    overrides={"waiting": list[WaitOut], "forked_from": ForkedFromOut | None},
    extra={
        "unserved": (
            bool,
            Field(
                default=False,
                description="In a listing: due, but no live worker serves its workflow and "
                "version (nothing advances it until one starts).",
            ),
        )
    },
)
HistoryEntryOut = record_model(
    HistoryEntry,
    "HistoryEntryOut",
    doc="One journaled operation of a run; ``status`` is ``done``, ``error`` or ``pending``.",
)
PublishResultOut = record_model(PublishResult, "PublishResultOut")
CorrelationResultOut = record_model(CorrelationResult, "CorrelationResultOut")
MessageInfoOut = record_model(MessageInfo, "MessageInfoOut")
SubscriptionInfoOut = record_model(SubscriptionInfo, "SubscriptionInfoOut")
ScheduleOut = record_model(
    ScheduleInfo,
    "ScheduleOut",
    doc="A schedule: the workflow it starts at each tick of its cron expression.",
    drop=("input",),
    overrides={"catch_up": Literal["latest", "all", "none"]},
)
StreamItemOut = record_model(
    StreamItem,
    "StreamItemOut",
    doc="An item of a run's stream (each Server-Sent Event's data; its id is the offset).",
)
# (Not the run's id: the callback's token holder is a third party, who needs no more.)
CallbackOut = record_model(
    CallbackResult,
    "CallbackOut",
    doc="What a completion or failure of a callback did: the callback's outcome (the first "
    "one, if it had one already: ``duplicate``).",
    drop=("run_id",),
)
WorkerInfoOut = record_model(
    WorkerInfo, "WorkerInfoOut", doc="A worker process seen within three lease periods."
)
EventInfoOut = record_model(
    EventInfo,
    "EventInfoOut",
    doc="A published event still kept (within event_retention), with what it did.",
)
HumanTaskOut = record_model(HumanTask, "HumanTaskOut")


def shaped(record: Any, model: type[BaseModel]) -> dict[str, Any]:
    """``record.to_dict()`` as ``model`` has it: without the fields the route leaves out."""
    data: dict[str, Any] = record.to_dict()
    return {k: v for k, v in data.items() if k in model.model_fields}


# -- the HTTP API's own shapes -------------------------------------------------------------


class RunCountsOut(RootModel[dict[str, dict[RunStatus, int]]]):
    """``GET /runs/counts``: ``{workflow: {status: runs}}`` (statuses with runs only)."""


class RunIdOut(_Response):
    """The id of the run a request started, signalled or cancelled."""

    id: str


class CountOut(_Response):
    """How many runs a bulk operation changed."""

    count: int


class MessageIdOut(_Response):
    """The id of the message a request discarded."""

    id: int


class UpdateOut(_Response):
    """The update's answer: its handler's return value."""

    result: Any


class ValueOut(_Response):
    """A run's value (``null``: not set within the wait)."""

    key: str
    value: Any


class SignalOut(_Response):
    """A signal was put in the run's mailbox."""

    id: str
    signal: str


class HealthOut(_Response):
    """The server is up and its store answers."""

    status: Literal["ok"]


class ErrorOut(_Response):
    """Any error but 422: what went wrong, and the parkway error type when there is one."""

    detail: str
    error: str | None = None


class FieldErrorOut(_Response):
    """One field at fault: ``loc`` is ``["body" | "query" | "path", field, ...]``."""

    loc: list[str | int]
    msg: str
    type: str


class ValidationErrorOut(_Response):
    """422: every field at fault."""

    detail: list[FieldErrorOut]
