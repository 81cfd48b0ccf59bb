"""The HTTP API's shapes: request bodies and query strings (validated), responses (documented).

Requests are validated here, at the edge, so that a bad field is answered with
422 naming it (``loc: ["body", "ttl"]``) before the engine is touched. Response
models mirror the ``to_dict()`` of the engine's records; they feed
``/openapi.json`` and the tests check every response against them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    RootModel,
    StrictBool,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    model_validator,
)

from parkway import limits
from parkway.durations import DURATION_PATTERN, to_seconds
from parkway.errors import InvalidDurationError, InvalidInputError
from parkway.limits import MAX_BODY_BYTES, MAX_DURATION_SECONDS
from parkway.models import RunStatus

__all__ = ["MAX_BODY_BYTES", "MAX_LIMIT"]

# GET /runs never returns more rows than this in one response.
MAX_LIMIT = 1000
# GET /runs answers with this header when more runs follow: the `before` of the next page.
NEXT_PAGE_HEADER = "Parkway-Next-Before"
# The longest a request may wait on the server (an update's answer, a value to be set).
MAX_WAIT = 300.0


def _duration(value: Any) -> float | None:
    if value is None:
        return None
    try:
        if not isinstance(value, int | float | str):  # a bool is an int: refused by to_seconds
            raise InvalidDurationError(value, "ttl")
        return to_seconds(value, "ttl")
    except InvalidDurationError as exc:
        if "100 years" in str(exc):
            raise ValueError("longer than the longest duration allowed, 100 years") from None
        raise ValueError(
            'not a duration; give seconds (30) or a string such as "250ms", "10s", "1m", '
            '"2h", "1d" or "1w"'
        ) from None


def _not_wildcard(value: str | None) -> str | None:
    if value == "*":
        raise ValueError("'*' is reserved for wildcard waits; name the subject")
    return value


def _limited(check: Callable[..., Any]) -> AfterValidator:
    """The engine's own check of a field (parkway.limits), as a pydantic validator:
    the HTTP API refuses exactly what the Python API refuses, with the same words."""

    def validate(value: str) -> str:
        try:
            check(value, "value")
        except InvalidInputError as exc:
            raise ValueError(str(exc).removeprefix("invalid input: value ")) from None
        return value

    return AfterValidator(validate)


def _schema(max_length: int | None, pattern: str) -> WithJsonSchema:
    constraints: dict[str, Any] = {"type": "string", "minLength": 1, "pattern": pattern}
    if max_length is not None:
        constraints["maxLength"] = max_length
    return WithJsonSchema(constraints)


# Fields as the engine's limits have them (lengths, no control characters, not blank).
Name = Annotated[
    StrictStr, _limited(limits.name), _schema(limits.MAX_NAME_LENGTH, limits.NAME_PATTERN)
]
Key = Annotated[
    StrictStr, _limited(limits.key), _schema(limits.MAX_KEY_LENGTH, limits.NAME_PATTERN)
]
Id = Annotated[
    StrictStr, _limited(limits.identifier), _schema(limits.MAX_ID_LENGTH, limits.TEXT_PATTERN)
]
Subject = Annotated[
    StrictStr, _limited(limits.subject), _schema(limits.MAX_SUBJECT_LENGTH, limits.TEXT_PATTERN)
]
Domain = Annotated[
    StrictStr, _limited(limits.domain), _schema(limits.MAX_DOMAIN_LENGTH, limits.TEXT_PATTERN)
]
# A filter: any length (ids the engine composes may be longer than those given).
Filter = Annotated[StrictStr, _limited(limits.reference), _schema(None, limits.TEXT_PATTERN)]


def _iso_text(value: Any) -> Any:
    # A time in a body is ISO 8601 text, as the schema says: pydantic alone would
    # also take a number (seconds since 1970) and a JSON client's typo with it.
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 time, as text")
    return value


IsoTime = Annotated[datetime, BeforeValidator(_iso_text)]

# What the document promises: an RFC 3339 date-time (pydantic alone also reads
# "0.5" as seconds since 1970), an integer, a number, each as JSON writes it
# (pydantic alone also reads "5_0" as 50).
_DATE_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}.*", re.DOTALL)
_INTEGER = re.compile(r"-?[0-9]+")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")


def _written(pattern: re.Pattern[str], what: str) -> BeforeValidator:
    def check(value: Any) -> Any:
        if not isinstance(value, str) or pattern.fullmatch(value) is None:
            raise ValueError(f"must be {what}")
        return value

    return BeforeValidator(check)


QueryTime = Annotated[
    AwareDatetime,
    _written(_DATE_TIME, "an ISO 8601 date-time with its zone, e.g. 2026-01-31T12:00:00Z"),
]
QueryInt = Annotated[int, _written(_INTEGER, "a whole number in ASCII digits")]
QueryNumber = Annotated[float, _written(_NUMBER, "a number such as 1 or 0.5")]


def _json_number(value: Any) -> Any:
    # A number in a body is a JSON number, as the schema says: pydantic alone also
    # takes true (as 1) and "5".
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number")
    return value


BodyNumber = Annotated[float, BeforeValidator(_json_number)]
# One validator for the whole union, so that a bad ttl is one error at ["body", "ttl"].
Seconds = Annotated[
    float | None,
    PlainValidator(_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0, "maximum": MAX_DURATION_SECONDS},
                {"type": "string", "pattern": DURATION_PATTERN},
                {"type": "null"},
            ],
            "description": 'Seconds (30), or a duration such as "250ms", "10s", "5m", "1h"; '
            "at most 100 years.",
        }
    ),
]


PAYLOAD = f"any JSON value, nested at most {limits.MAX_DEPTH} levels."


class _Request(BaseModel):
    # A misspelt field ("paylaod") would otherwise be ignored and its value lost.
    model_config = ConfigDict(extra="forbid")


class PublishRequest(_Request):
    """``POST /events``: publish an event."""

    name: Name = Field(description="The event's name, e.g. order.created.")
    payload: Any = Field(default=None, description=PAYLOAD)
    id: Id | None = Field(default=None, description="Event id; a repeat is a duplicate.")
    domain: Domain | None = Field(default=None, description="The event's domain.")
    subject: Annotated[Subject | None, AfterValidator(_not_wildcard)] = Field(
        default=None, description="What the event is about, e.g. product:456."
    )


class CorrelateRequest(_Request):
    """``POST /messages``: hand a message to exactly one receiver."""

    name: Name = Field(description="The message name.")
    key: Key = Field(description="The business key that picks the receiver.")
    payload: Any = Field(default=None, description=PAYLOAD)
    message_id: Id | None = Field(
        default=None, description="De-duplication id: a repeat while buffered is a duplicate."
    )
    ttl: Seconds = Field(
        default=None,
        description="How long to buffer it if no run waits (default: the engine's message_ttl; "
        "0 refuses to buffer).",
    )


class RetryMessageRequest(_Request):
    """``POST /messages/{message_id}/retry``: correlate a buffered message or dead letter again."""

    ttl: Seconds = Field(
        default=None,
        description="How long to buffer it again if no run waits (default: the engine's "
        "message_ttl; 0 keeps it as it is and answers 409).",
    )


class StartRequest(_Request):
    """``POST /runs``: start a run (an existing ``id`` returns that run)."""

    workflow: Name = Field(description="A registered workflow's name.")
    input: Any = Field(default=None, description="The run's input: " + PAYLOAD)
    id: Id | None = Field(default=None, description="Run id (default: random).")
    subject: Subject | None = Field(default=None, description="The business entity it is about.")
    domain: Domain | None = Field(default=None, description="The run's domain (default: default).")
    priority: StrictInt = Field(
        default=0, ge=-(2**63), le=2**63 - 1,
        description="Among runs of the workflow queued by its concurrency limit, higher "
        "starts first.",
    )  # fmt: skip
    timeout: Seconds = Field(
        default=None,
        description="The run's deadline after its start: still active then, it fails with "
        "RunTimeoutError, its compensations run first (default: the workflow's timeout).",
    )


class UpdateRequest(_Request):
    """``POST /runs/{id}/updates/{name}``: a synchronous update to the run."""

    payload: Any = Field(default=None, description="The handler's argument: " + PAYLOAD)
    id: Id | None = Field(
        default=None, description="The update's id (default: random); a repeat gives its answer."
    )
    timeout: BodyNumber = Field(
        default=30, ge=0, le=MAX_WAIT, description="Seconds to wait for the answer (504 after)."
    )


class ForkRequest(_Request):
    """``POST /runs/{id}/fork``: a new run from the first entries of the run's journal."""

    at: StrictInt | None = Field(
        default=None, ge=0,
        description="How many of the run's journal entries the fork starts with (default: "
        "those before its first failed one, or all).",
    )  # fmt: skip
    input: Any = Field(default=None, description="The fork's input (absent: the run's): " + PAYLOAD)
    id: Id | None = Field(default=None, description="The fork's id (default: random).")


class BulkRequest(_Request):
    """``POST /runs/cancel``, ``POST /runs/retry``: which runs (every filter given
    must hold). An empty filter is refused unless ``all`` is true."""

    workflow: Filter | None = Field(default=None, description="Only runs of this workflow.")
    status: RunStatus | None = Field(default=None, description="Only runs in this status.")
    subject: Filter | None = Field(default=None, description="Only runs about this subject.")
    created_before: IsoTime | None = Field(
        default=None, description="Only runs created before this time (ISO 8601; no zone: UTC)."
    )
    all: StrictBool = Field(
        default=False, description="With no filter: every run (cancel) or failed run (retry)."
    )

    @model_validator(mode="after")
    def _some_filter(self) -> BulkRequest:
        given = (self.workflow, self.status, self.subject, self.created_before)
        if not self.all and all(value is None for value in given):
            raise ValueError(
                "give a filter (workflow, status, subject, created_before), "
                'or "all": true to act on every run'
            )
        return self


class ValueQuery(_Request):
    """``GET /runs/{id}/values/{key}``: how long to wait for the value to be set."""

    timeout: QueryNumber = Field(
        default=0, ge=0, le=MAX_WAIT, description="Seconds to wait for it (0: do not wait)."
    )


class StreamQuery(_Request):
    """``GET /runs/{id}/streams/{key}``: where to start, and how many items at most
    (the JSON form; the event stream sends them all)."""

    offset: int = Field(
        default=0, ge=0, le=2**63 - 1,
        description="The first item's offset (0: from the start). A Last-Event-ID "
        "header, sent by a reconnecting EventSource, resumes after that offset instead.",
    )  # fmt: skip
    limit: int = Field(
        default=100, ge=1, le=1000, description="The most items the JSON form returns."
    )


class NoQuery(_Request):
    """A route that takes no query parameters (a misspelt filter is refused, not ignored)."""


class RunsQuery(_Request):
    """``GET /runs`` filters."""

    workflow: Filter | None = Field(default=None, description="Only runs of this workflow.")
    status: RunStatus | None = Field(default=None, description="Only runs in this status.")
    subject: Filter | None = Field(default=None, description="Only runs about this subject.")
    domain: Filter | None = Field(default=None, description="Only runs in this domain.")
    limit: QueryInt = Field(default=100, ge=1, le=MAX_LIMIT, description="At most this many runs.")
    search: Filter | None = Field(
        default=None, description="Only runs whose id or subject starts with this text."
    )
    parent_id: Filter | None = Field(default=None, description="Only this run's children.")
    created_after: QueryTime | None = Field(
        default=None, description="Only runs created at or after this time (ISO 8601, with zone)."
    )
    created_before: QueryTime | None = Field(
        default=None, description="Only runs created before this time (ISO 8601, with zone)."
    )
    before: Filter | None = Field(
        default=None,
        description=f"The next page: the runs after this run id, as the previous answer's "
        f"{NEXT_PAGE_HEADER} header gives it (percent-encoded there).",
    )


class RunCountsOut(RootModel[dict[str, dict[RunStatus, int]]]):
    """``GET /runs/counts``: ``{workflow: {status: runs}}`` (statuses with runs only)."""


class SubscriptionsQuery(_Request):
    """``GET /subscriptions`` filters."""

    run_id: Filter | None = Field(default=None, description="Only this run's subscriptions.")
    name: Filter | None = Field(default=None, description="Only subscriptions to this name.")


class MessagesQuery(_Request):
    """``GET /messages`` filter."""

    status: Literal["buffered", "expired"] | None = Field(
        default=None, description="buffered messages, or expired ones (dead letters)."
    )


class EventsQuery(_Request):
    """``GET /events`` filters."""

    name: Name | None = Field(default=None, description="Only events of this name.")
    subject: Subject | None = Field(default=None, description="Only events about this subject.")
    since: AwareDatetime | None = Field(
        default=None,
        description="Only events published at or after this time (ISO 8601, with zone).",
    )
    limit: int = Field(default=100, ge=1, le=MAX_LIMIT, description="At most this many events.")


class CallbackFailRequest(_Request):
    """``POST /callbacks/{token}/fail``: fail the callback."""

    message: Annotated[StrictStr, Field(max_length=10_000)] = Field(
        description="Why: the run's cb.wait() raises CallbackFailedError with it."
    )


class TasksQuery(_Request):
    """``GET /tasks`` filters."""

    status: Literal["open", "completed", "cancelled", "expired", "all"] = Field(
        default="open", description="Only tasks in this status (all: every status)."
    )
    assignee: Name | None = Field(
        default=None,
        description="Only the tasks this person may complete (assigned to them, or to "
        "nobody in particular).",
    )
    workflow: Filter | None = Field(default=None, description="Only tasks of this workflow.")
    limit: QueryInt = Field(default=100, ge=1, le=MAX_LIMIT, description="At most this many tasks.")


class CompleteTaskRequest(_Request):
    """``POST /tasks/{id}/complete``: what the person submitted."""

    result: Any = Field(
        default=None, description="The task's result, checked against its form: " + PAYLOAD
    )
    by: Name | None = Field(
        default=None, description="Who completes it; must be an assignee if it has any."
    )


# -- responses (documentation; the tests hold every response to them) -----------------------


class _Response(BaseModel):
    model_config = ConfigDict(extra="forbid")


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


class RunInfoOut(_Response):
    """A snapshot of one run."""

    id: str
    workflow: str
    version: str
    status: RunStatus
    input: Any
    output: Any
    error: ErrorInfoOut | None
    domain: str
    subject: str | None
    parent_id: str | None
    created_at: datetime
    updated_at: datetime
    values: dict[str, Any] = Field(default_factory=dict)
    paused: bool = Field(
        default=False, description="Paused by an operator: no worker advances it until resumed."
    )
    waiting: list[WaitOut] = Field(
        default_factory=list,
        description="What the run waits for now, one item per wait (empty: nothing).",
    )
    forked_from: ForkedFromOut | None = Field(
        default=None, description="The run it was forked from (engine.fork), else null."
    )
    unserved: bool = Field(
        default=False,
        description="In a listing: due, but no live worker serves its workflow and version "
        "(nothing advances it until one starts).",
    )


class HistoryEntryOut(_Response):
    """One journaled operation of a run; ``status`` is ``done``, ``error`` or ``pending``."""

    position: int
    kind: str
    name: str
    status: str
    result: Any
    error: ErrorInfoOut | None
    at: datetime
    deadline: datetime | None = Field(
        default=None,
        description="Pending: when it fires by itself (a timeout, a timer, a step's retry).",
    )
    attempt: int | None = Field(
        default=None,
        description="A step waiting to be retried, or a failed attempt (kind attempt): "
        "the attempt that failed.",
    )
    started_at: datetime | None = Field(
        default=None, description="A failed attempt (kind attempt): when it started."
    )
    ended_at: datetime | None = Field(
        default=None, description="A failed attempt (kind attempt): when it failed."
    )


class DeliveryOut(_Response):
    """An event copy on its way to one parked run."""

    run_id: str
    wait: str
    source_subject: str | None


class PublishResultOut(_Response):
    """What one publish did."""

    started: list[str]
    resumed: list[str]
    deliveries: list[DeliveryOut]
    duplicate: bool
    touched: int
    event_id: str | None


class CorrelationResultOut(_Response):
    """What correlate did with a message."""

    outcome: Literal["delivered", "started", "buffered", "duplicate"]
    run_id: str | None


class MessageInfoOut(_Response):
    """A buffered message, or a dead letter (``status: expired``)."""

    id: int
    name: str
    key: str
    payload: Any
    message_id: str | None
    status: Literal["buffered", "expired"]
    reason: str | None
    received_at: datetime
    expires_at: datetime


class SubscriptionInfoOut(_Response):
    """A live subscription: one parked run waiting for an event or a message."""

    run_id: str
    kind: Literal["event", "message"]
    domain: str
    name: str
    subject: str | None
    match: dict[str, Any] | None
    key: str | None
    expires_at: datetime


class ScheduleOut(_Response):
    """A schedule: the workflow it starts at each tick of its cron expression."""

    id: str
    workflow: str
    cron: str
    timezone: str
    paused: bool
    next_at: datetime | None = Field(description="Its next tick (ISO 8601 UTC); null if paused.")
    last_run_id: str | None = Field(description="The run its last fired tick started.")
    catch_up: Literal["latest", "all", "none"]


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


class StreamItemOut(_Response):
    """An item of a run's stream (each Server-Sent Event's data; its id is the offset)."""

    offset: int
    value: Any
    attempt: int | None = Field(
        description="The attempt of the step that wrote it; null: the workflow's body."
    )
    written_at: datetime


class SignalOut(_Response):
    """A signal was put in the run's mailbox."""

    id: str
    signal: str


class CallbackOut(_Response):
    """What a completion or failure of a callback did: the callback's outcome (the
    first one, if it had one already: ``duplicate``)."""

    status: Literal["completed", "failed"]
    value: Any = Field(description="The value it was completed with (null when failed).")
    message: str | None = Field(description="The failure's message (null when completed).")
    duplicate: bool = Field(description="It had been completed or failed before; nothing changed.")


class WorkerInfoOut(_Response):
    """A worker process seen within three lease periods."""

    id: str
    host: str
    pid: int
    started_at: datetime
    last_seen: datetime
    workflows: dict[str, list[str]] = Field(
        description="What it serves, {name: [versions]}: it claims only runs of those."
    )


class EventInfoOut(_Response):
    """A published event still kept (within event_retention), with what it did."""

    id: str
    name: str
    domain: str
    subject: str | None
    payload: Any
    published_at: datetime
    started: list[str] = Field(description="Ids of the runs it started.")
    resumed: list[str] = Field(description="Ids of the parked runs it resumed.")


class HumanTaskOut(_Response):
    """A task for a person (ctx.human_task)."""

    id: str
    run_id: str
    workflow: str
    name: str
    title: str | None
    form_schema: dict[str, Any] | None = Field(
        description="The JSON Schema the result must fit (null: any JSON)."
    )
    data: Any = Field(description="What the person is shown.")
    assignees: list[str] = Field(description="Who may complete it (empty: anyone).")
    status: Literal["open", "completed", "cancelled", "expired"]
    created_at: datetime
    due_at: datetime | None
    completed_by: str | None
    completed_at: datetime | None
    result: Any


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
