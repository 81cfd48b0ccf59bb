"""Every route of the HTTP API, declared once: the router serves them (see
:func:`parkway.http.app.create_app`) and ``/openapi.json`` describes them
(:mod:`parkway.http.openapi`)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from parkway.http import requests, responses


@dataclass(frozen=True)
class Doc:
    """One response of a route, for ``/openapi.json``."""

    description: str
    model: type[BaseModel] | None = None
    many: bool = False
    media: str = "application/json"  # ("": no body)
    # Also answered as Server-Sent Events (text/event-stream), by the Accept header.
    events: bool = False


@dataclass(frozen=True)
class RouteSpec:
    """A route: served by :class:`Api` ``.handler``, described in ``/openapi.json``."""

    method: str
    path: str
    handler: str  # the name of its method of parkway.http.app.Api
    summary: str
    responses: dict[int, Doc]
    body: type[BaseModel] | None = None
    # The body is any JSON value (a signal's payload), not an object model.
    raw_body: str | None = None
    query: type[BaseModel] | None = None
    errors: tuple[int, ...] = ()
    public: bool = False
    tags: tuple[str, ...] = ()


_RUN = Doc("The run.", responses.RunInfoOut)
ROUTES: list[RouteSpec] = [
    RouteSpec(
        "POST",
        "/events",
        "publish",
        "Publish an event",
        {200: Doc("What the publish did.", responses.PublishResultOut)},
        body=requests.PublishRequest,
        tags=("events",),
    ),
    RouteSpec(
        "GET",
        "/events",
        "events",
        "List the events published lately, with the runs each started and resumed",
        {200: Doc("Newest first.", responses.EventInfoOut, many=True)},
        query=requests.EventsQuery,
        tags=("events",),
    ),
    RouteSpec(
        "GET",
        "/workers",
        "workers",
        "List the workers seen within three lease periods",
        {200: Doc("The longest running first.", responses.WorkerInfoOut, many=True)},
        query=requests.NoQuery,
        tags=("workers",),
    ),
    RouteSpec(
        "POST",
        "/messages",
        "correlate",
        "Correlate a message to exactly one receiver",
        {200: Doc("What became of the message.", responses.CorrelationResultOut)},
        body=requests.CorrelateRequest,
        errors=(409,),
        tags=("messages",),
    ),
    RouteSpec(
        "GET",
        "/messages",
        "messages",
        "List buffered messages and dead letters",
        {200: Doc("Oldest first.", responses.MessageInfoOut, many=True)},
        query=requests.MessagesQuery,
        tags=("messages",),
    ),
    RouteSpec(
        "POST",
        "/messages/{message_id}/retry",
        "retry_message",
        "Correlate a buffered message or a dead letter again (an operator's action)",
        {200: Doc("What became of the message.", responses.CorrelationResultOut)},
        body=requests.RetryMessageRequest,
        errors=(404, 409),
        tags=("messages",),
    ),
    RouteSpec(
        "DELETE",
        "/messages/{message_id}",
        "discard_message",
        "Discard a buffered message or a dead letter for good",
        {200: Doc("Discarded.", responses.MessageIdOut)},
        errors=(404,),
        tags=("messages",),
    ),
    RouteSpec(
        "POST",
        "/runs",
        "start",
        "Start a run (an existing id returns that run)",
        {201: Doc("The run's id.", responses.RunIdOut)},
        body=requests.StartRequest,
        tags=("runs",),
    ),
    RouteSpec(
        "GET",
        "/runs",
        "list_runs",
        "List runs, newest first",
        {
            200: Doc(
                f"The runs. When more follow, the {requests.NEXT_PAGE_HEADER} header "
                "holds the `before` of the next page (percent-encoded).",
                responses.RunInfoOut,
                many=True,
            )
        },
        query=requests.RunsQuery,
        tags=("runs",),
    ),
    RouteSpec(
        "GET",
        "/runs/counts",
        "run_counts",
        "How many runs each workflow has in each status",
        {200: Doc("{workflow: {status: runs}}.", responses.RunCountsOut)},
        query=requests.NoQuery,
        tags=("runs",),
    ),
    RouteSpec(
        "GET", "/runs/{id}", "get_run", "Get a run", {200: _RUN}, errors=(404,), tags=("runs",)
    ),
    RouteSpec(
        "GET",
        "/runs/{id}/history",
        "history",
        "A run's journal, in order",
        {200: Doc("Journal entries.", responses.HistoryEntryOut, many=True)},
        errors=(404,),
        tags=("runs",),
    ),
    RouteSpec(
        "POST",
        "/runs/{id}/signals/{name}",
        "signal",
        "Send a signal to a run",
        {202: Doc("The signal is in the run's mailbox.", responses.SignalOut)},
        raw_body="The signal's payload: any JSON value (an empty body is null).",
        errors=(404, 409),
        tags=("runs",),
    ),
    RouteSpec(
        "GET",
        "/runs/{id}/values",
        "values",
        "A run's values (ctx.set_value), by key",
        {200: Doc("The values.")},
        errors=(404,),
        tags=("runs",),
    ),
    RouteSpec(
        "GET",
        "/runs/{id}/values/{name}",
        "value",
        "A run's value, waiting up to ?timeout= seconds for it to be set",
        {200: Doc("The value, or null.", responses.ValueOut)},
        query=requests.ValueQuery,
        errors=(404,),
        tags=("runs",),
    ),
    RouteSpec(
        "GET",
        "/runs/{id}/streams/{key}",
        "stream",
        "A run's stream: Server-Sent Events that follow it live until it is closed "
        "or the run ends, or with Accept: application/json the items committed now",
        {
            200: Doc(
                "Server-Sent Events, each with the item's offset as its id and the "
                "item as its data, keep-alive comments while quiet, and a last event "
                "`end` whose data holds the offset that would come next; or the JSON "
                "list of items.",
                responses.StreamItemOut,
                many=True,
                events=True,
            ),
            204: Doc(
                "Server-Sent Events asked past the end of a run that has ended: "
                "an EventSource does not reconnect.",
                media="",
            ),
        },
        query=requests.StreamQuery,
        errors=(404,),
        tags=("runs",),
    ),
    RouteSpec(
        "POST",
        "/runs/{id}/updates/{name}",
        "update",
        "Send the run a synchronous update; its handler's answer",
        {200: Doc("The handler's answer.", responses.UpdateOut)},
        body=requests.UpdateRequest,
        errors=(404, 409, 504),
        tags=("runs",),
    ),
    RouteSpec(
        "POST",
        "/runs/{id}/cancel",
        "cancel",
        "Cancel a run and its active children (a finished run is left as it is)",
        {202: Doc("Cancelled.", responses.RunIdOut)},
        errors=(404,),
        tags=("runs",),
    ),
    RouteSpec(
        "POST",
        "/runs/{id}/pause",
        "pause",
        "Pause a run: no worker advances it until resumed (its inputs are kept)",
        {200: _RUN},
        errors=(404, 409),
        tags=("runs",),
    ),
    RouteSpec(
        "POST",
        "/runs/{id}/resume",
        "resume",
        "Resume a paused run: what reached it meanwhile is acted on now",
        {200: _RUN},
        errors=(404, 409),
        tags=("runs",),
    ),
    RouteSpec(
        "POST",
        "/runs/{id}/retry",
        "retry",
        "Retry a failed run from its last committed step (the failed step runs again), "
        "or a held run where it was",
        {200: _RUN},
        errors=(404, 409),
        tags=("runs",),
    ),
    RouteSpec(
        "POST",
        "/runs/{id}/fork",
        "fork",
        "Fork a run: a new run that replays the first entries of its journal, then "
        "goes on with the code registered now",
        {201: Doc("The fork.", responses.RunInfoOut)},
        body=requests.ForkRequest,
        errors=(404,),
        tags=("runs",),
    ),
    RouteSpec(
        "POST",
        "/runs/cancel",
        "cancel_runs",
        "Cancel every active run the filters select (in batches)",
        {200: Doc("How many runs were cancelled.", responses.CountOut)},
        body=requests.BulkRequest,
        tags=("runs",),
    ),
    RouteSpec(
        "POST",
        "/runs/retry",
        "retry_runs",
        "Retry every failed run the filters select (in batches)",
        {200: Doc("How many runs were retried.", responses.CountOut)},
        body=requests.BulkRequest,
        tags=("runs",),
    ),
    RouteSpec(
        "GET",
        "/subscriptions",
        "subscriptions",
        "List live subscriptions",
        {200: Doc("One per waiting run, oldest first.", responses.SubscriptionInfoOut, many=True)},
        query=requests.SubscriptionsQuery,
        tags=("runs",),
    ),
    RouteSpec(
        "GET",
        "/schedules",
        "schedules",
        "List schedules, by id",
        {200: Doc("Every schedule on the store.", responses.ScheduleOut, many=True)},
        tags=("schedules",),
    ),
    RouteSpec(
        "POST",
        "/schedules/{id}/pause",
        "pause_schedule",
        "Pause a schedule (the ticks that pass while it is paused are skipped)",
        {200: Doc("The schedule.", responses.ScheduleOut)},
        errors=(404,),
        tags=("schedules",),
    ),
    RouteSpec(
        "POST",
        "/schedules/{id}/resume",
        "resume_schedule",
        "Resume a paused schedule, from its first tick after now",
        {200: Doc("The schedule.", responses.ScheduleOut)},
        errors=(404,),
        tags=("schedules",),
    ),
    RouteSpec(
        "POST",
        "/callbacks/{token}",
        "complete_callback",
        "Complete a callback (no API token: the callback's token is the capability)",
        {
            200: Doc(
                "The callback's outcome (the first, if it had one: duplicate).",
                responses.CallbackOut,
            )
        },
        raw_body="The value cb.wait() returns: any JSON value (an empty body is null).",
        errors=(404, 409, 429),
        public=True,
        tags=("callbacks",),
    ),
    RouteSpec(
        "POST",
        "/callbacks/{token}/fail",
        "fail_callback",
        "Fail a callback: cb.wait() raises CallbackFailedError (no API token needed)",
        {
            200: Doc(
                "The callback's outcome (the first, if it had one: duplicate).",
                responses.CallbackOut,
            )
        },
        body=requests.CallbackFailRequest,
        errors=(404, 409, 429),
        public=True,
        tags=("callbacks",),
    ),
    RouteSpec(
        "GET",
        "/tasks",
        "tasks",
        "List human tasks, oldest first",
        {200: Doc("The tasks.", responses.HumanTaskOut, many=True)},
        query=requests.TasksQuery,
        tags=("tasks",),
    ),
    RouteSpec(
        "GET",
        "/tasks/{id}",
        "get_task",
        "Get a human task",
        {200: Doc("The task.", responses.HumanTaskOut)},
        errors=(404,),
        tags=("tasks",),
    ),
    RouteSpec(
        "POST",
        "/tasks/{id}/complete",
        "complete_task",
        "Complete an open human task; its run resumes with the result",
        {200: Doc("The task, completed.", responses.HumanTaskOut)},
        body=requests.CompleteTaskRequest,
        errors=(403, 404, 409),
        tags=("tasks",),
    ),
    RouteSpec(
        "GET",
        "/healthz",
        "healthz",
        "Liveness: the server and its store answer",
        {200: Doc("Healthy.", responses.HealthOut)},
        errors=(503,),
        public=True,
        tags=("operations",),
    ),
    RouteSpec(
        "GET",
        "/openapi.json",
        "openapi",
        "This document",
        {200: Doc("OpenAPI 3.1.")},
        tags=("operations",),
    ),
    RouteSpec(
        "GET",
        "/",
        "dashboard",
        "The dashboard (an HTML page; it asks for the token and sends it on each call)",
        {200: Doc("The page.", media="text/html")},
        tags=("operations",),
    ),
]
