"""Every route of the HTTP API, declared once: the router serves them (see
:func:`parkway.http.app.create_app`) and ``/openapi.json`` describes them
(:mod:`parkway.http.openapi`)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from parkway.http import schemas


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


_RUN = Doc("The run.", schemas.RunInfoOut)
ROUTES: list[RouteSpec] = [
    RouteSpec("POST", "/events", "publish", "Publish an event",
              {200: Doc("What the publish did.", schemas.PublishResultOut)},
              body=schemas.PublishRequest, tags=("events",)),
    RouteSpec("GET", "/events", "events",
              "List the events published lately, with the runs each started and resumed",
              {200: Doc("Newest first.", schemas.EventInfoOut, many=True)},
              query=schemas.EventsQuery, tags=("events",)),
    RouteSpec("GET", "/workers", "workers", "List the workers seen within three lease periods",
              {200: Doc("The longest running first.", schemas.WorkerInfoOut, many=True)},
              query=schemas.NoQuery, tags=("workers",)),
    RouteSpec("POST", "/messages", "correlate", "Correlate a message to exactly one receiver",
              {200: Doc("What became of the message.", schemas.CorrelationResultOut)},
              body=schemas.CorrelateRequest, errors=(409,), tags=("messages",)),
    RouteSpec("GET", "/messages", "messages", "List buffered messages and dead letters",
              {200: Doc("Oldest first.", schemas.MessageInfoOut, many=True)},
              query=schemas.MessagesQuery, tags=("messages",)),
    RouteSpec("POST", "/messages/{message_id}/retry", "retry_message",
              "Correlate a buffered message or a dead letter again (an operator's action)",
              {200: Doc("What became of the message.", schemas.CorrelationResultOut)},
              body=schemas.RetryMessageRequest, errors=(404, 409), tags=("messages",)),
    RouteSpec("DELETE", "/messages/{message_id}", "discard_message",
              "Discard a buffered message or a dead letter for good",
              {200: Doc("Discarded.", schemas.MessageIdOut)}, errors=(404,), tags=("messages",)),
    RouteSpec("POST", "/runs", "start", "Start a run (an existing id returns that run)",
              {201: Doc("The run's id.", schemas.RunIdOut)},
              body=schemas.StartRequest, tags=("runs",)),
    RouteSpec("GET", "/runs", "list_runs", "List runs, newest first",
              {200: Doc(f"The runs. When more follow, the {schemas.NEXT_PAGE_HEADER} header "
                        "holds the `before` of the next page (percent-encoded).",
                        schemas.RunInfoOut, many=True)},
              query=schemas.RunsQuery, tags=("runs",)),
    RouteSpec("GET", "/runs/counts", "run_counts",
              "How many runs each workflow has in each status",
              {200: Doc("{workflow: {status: runs}}.", schemas.RunCountsOut)},
              query=schemas.NoQuery, tags=("runs",)),
    RouteSpec("GET", "/runs/{id}", "get_run", "Get a run", {200: _RUN},
              errors=(404,), tags=("runs",)),
    RouteSpec("GET", "/runs/{id}/history", "history", "A run's journal, in order",
              {200: Doc("Journal entries.", schemas.HistoryEntryOut, many=True)},
              errors=(404,), tags=("runs",)),
    RouteSpec("POST", "/runs/{id}/signals/{name}", "signal", "Send a signal to a run",
              {202: Doc("The signal is in the run's mailbox.", schemas.SignalOut)},
              raw_body="The signal's payload: any JSON value (an empty body is null).",
              errors=(404, 409), tags=("runs",)),
    RouteSpec("GET", "/runs/{id}/values", "values", "A run's values (ctx.set_value), by key",
              {200: Doc("The values.")}, errors=(404,), tags=("runs",)),
    RouteSpec("GET", "/runs/{id}/values/{name}", "value",
              "A run's value, waiting up to ?timeout= seconds for it to be set",
              {200: Doc("The value, or null.", schemas.ValueOut)},
              query=schemas.ValueQuery, errors=(404,), tags=("runs",)),
    RouteSpec("GET", "/runs/{id}/streams/{key}", "stream",
              "A run's stream: Server-Sent Events that follow it live until it is closed "
              "or the run ends, or with Accept: application/json the items committed now",
              {200: Doc("Server-Sent Events, each with the item's offset as its id and the "
                        "item as its data, keep-alive comments while quiet, and a last event "
                        "`end` whose data holds the offset that would come next; or the JSON "
                        "list of items.", schemas.StreamItemOut, many=True, events=True),
               204: Doc("Server-Sent Events asked past the end of a run that has ended: "
                        "an EventSource does not reconnect.", media="")},
              query=schemas.StreamQuery, errors=(404,), tags=("runs",)),
    RouteSpec("POST", "/runs/{id}/updates/{name}", "update",
              "Send the run a synchronous update; its handler's answer",
              {200: Doc("The handler's answer.", schemas.UpdateOut)},
              body=schemas.UpdateRequest, errors=(404, 409, 504), tags=("runs",)),
    RouteSpec("POST", "/runs/{id}/cancel", "cancel",
              "Cancel a run and its active children (a finished run is left as it is)",
              {202: Doc("Cancelled.", schemas.RunIdOut)}, errors=(404,), tags=("runs",)),
    RouteSpec("POST", "/runs/{id}/pause", "pause",
              "Pause a run: no worker advances it until resumed (its inputs are kept)",
              {200: _RUN}, errors=(404, 409), tags=("runs",)),
    RouteSpec("POST", "/runs/{id}/resume", "resume",
              "Resume a paused run: what reached it meanwhile is acted on now",
              {200: _RUN}, errors=(404, 409), tags=("runs",)),
    RouteSpec("POST", "/runs/{id}/retry", "retry",
              "Retry a failed run from its last committed step (the failed step runs again), "
              "or a held run where it was", {200: _RUN}, errors=(404, 409), tags=("runs",)),
    RouteSpec("POST", "/runs/{id}/fork", "fork",
              "Fork a run: a new run that replays the first entries of its journal, then "
              "goes on with the code registered now",
              {201: Doc("The fork.", schemas.RunInfoOut)}, body=schemas.ForkRequest,
              errors=(404,), tags=("runs",)),
    RouteSpec("POST", "/runs/cancel", "cancel_runs",
              "Cancel every active run the filters select (in batches)",
              {200: Doc("How many runs were cancelled.", schemas.CountOut)},
              body=schemas.BulkRequest, tags=("runs",)),
    RouteSpec("POST", "/runs/retry", "retry_runs",
              "Retry every failed run the filters select (in batches)",
              {200: Doc("How many runs were retried.", schemas.CountOut)},
              body=schemas.BulkRequest, tags=("runs",)),
    RouteSpec("GET", "/subscriptions", "subscriptions", "List live subscriptions",
              {200: Doc("One per waiting run, oldest first.", schemas.SubscriptionInfoOut,
                        many=True)},
              query=schemas.SubscriptionsQuery, tags=("runs",)),
    RouteSpec("GET", "/schedules", "schedules", "List schedules, by id",
              {200: Doc("Every schedule on the store.", schemas.ScheduleOut, many=True)},
              tags=("schedules",)),
    RouteSpec("POST", "/schedules/{id}/pause", "pause_schedule",
              "Pause a schedule (the ticks that pass while it is paused are skipped)",
              {200: Doc("The schedule.", schemas.ScheduleOut)}, errors=(404,),
              tags=("schedules",)),
    RouteSpec("POST", "/schedules/{id}/resume", "resume_schedule",
              "Resume a paused schedule, from its first tick after now",
              {200: Doc("The schedule.", schemas.ScheduleOut)}, errors=(404,),
              tags=("schedules",)),
    RouteSpec("POST", "/callbacks/{token}", "complete_callback",
              "Complete a callback (no API token: the callback's token is the capability)",
              {200: Doc("The callback's outcome (the first, if it had one: duplicate).",
                        schemas.CallbackOut)},
              raw_body="The value cb.wait() returns: any JSON value (an empty body is null).",
              errors=(404, 409, 429), public=True, tags=("callbacks",)),
    RouteSpec("POST", "/callbacks/{token}/fail", "fail_callback",
              "Fail a callback: cb.wait() raises CallbackFailedError (no API token needed)",
              {200: Doc("The callback's outcome (the first, if it had one: duplicate).",
                        schemas.CallbackOut)},
              body=schemas.CallbackFailRequest, errors=(404, 409, 429), public=True,
              tags=("callbacks",)),
    RouteSpec("GET", "/tasks", "tasks", "List human tasks, oldest first",
              {200: Doc("The tasks.", schemas.HumanTaskOut, many=True)},
              query=schemas.TasksQuery, tags=("tasks",)),
    RouteSpec("GET", "/tasks/{id}", "get_task", "Get a human task",
              {200: Doc("The task.", schemas.HumanTaskOut)}, errors=(404,), tags=("tasks",)),
    RouteSpec("POST", "/tasks/{id}/complete", "complete_task",
              "Complete an open human task; its run resumes with the result",
              {200: Doc("The task, completed.", schemas.HumanTaskOut)},
              body=schemas.CompleteTaskRequest, errors=(403, 404, 409), tags=("tasks",)),
    RouteSpec("GET", "/healthz", "healthz", "Liveness: the server and its store answer",
              {200: Doc("Healthy.", schemas.HealthOut)}, errors=(503,), public=True,
              tags=("operations",)),
    RouteSpec("GET", "/openapi.json", "openapi", "This document",
              {200: Doc("OpenAPI 3.1.")}, tags=("operations",)),
    RouteSpec("GET", "/", "dashboard",
              "The dashboard (an HTML page; it asks for the token and sends it on each call)",
              {200: Doc("The page.", media="text/html")}, tags=("operations",)),
]  # fmt: skip
