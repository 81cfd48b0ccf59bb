"""The HTTP API's request bodies and query strings, validated at the edge.

Each is validated once, where it enters: a bad field is answered with 422 naming
it (``loc: ["body", "ttl"]``) before the engine is touched.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)

from parkway import limits
from parkway.http.fields import (
    BodyNumber,
    Domain,
    Filter,
    Id,
    IsoTime,
    Key,
    Name,
    QueryInt,
    QueryNumber,
    QueryTime,
    Seconds,
    Subject,
    not_wildcard,
)
from parkway.models import RunStatus

# GET /runs never returns more rows than this in one response.
MAX_LIMIT = 1000
# GET /runs answers with this header when more runs follow: the `before` of the next page.
NEXT_PAGE_HEADER = "Parkway-Next-Before"
# The longest a request may wait on the server (an update's answer, a value to be set).
MAX_WAIT = 300.0

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
    subject: Annotated[Subject | None, AfterValidator(not_wildcard)] = Field(
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
        default=0,
        ge=-(2**63),
        le=2**63 - 1,
        description="Among runs of the workflow queued by its concurrency limit, higher "
        "starts first.",
    )
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
        default=None,
        ge=0,
        description="How many of the run's journal entries the fork starts with (default: "
        "those before its first failed one, or all).",
    )
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
        default=0,
        ge=0,
        le=2**63 - 1,
        description="The first item's offset (0: from the start). A Last-Event-ID "
        "header, sent by a reconnecting EventSource, resumes after that offset instead.",
    )
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
