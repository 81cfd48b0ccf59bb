"""The HTTP API: a Starlette app over one :class:`parkway.Engine`.

Every route is declared once, in :data:`ROUTES`, which both the router and
``/openapi.json`` read, so the document cannot drift from what is served.
Requests are validated (size, JSON, fields) before the engine is called, so a
rejected request writes nothing.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from parkway import _json, limits
from parkway.engine import Engine
from parkway.errors import (
    InvalidArgumentError,
    InvalidInputError,
    MetricsDisabledError,
    ParkwayError,
    StoreError,
)
from parkway.events import SubscriptionInfo
from parkway.http import schemas
from parkway.http.dashboard import dashboard_response
from parkway.http.guards import (
    BY_STATE,
    PUBLIC_PATHS,
    SINGLE_TOKEN_NAME,
    TOKEN_ENV,
    TOKENS_ENV,
    CallbackRateLimit,
    DrainBody,
    HostGuard,
    TokenGuard,
    TokensError,
    named_tokens,
    shown_path,
)
from parkway.http.openapi import openapi_document
from parkway.http.parsing import (
    Invalid,
    Problem,
    decoded,
    field_error,
    from_validation,
    json_at,
    json_path,
    json_response,
    json_value,
    message_id_param,
    parkway_error,
    parse_body,
    parse_query,
    path_param,
    problem_response,
    read_body,
    refuse_wide_integers,
    run_id_param,
)
from parkway.http.routes import ROUTES
from parkway.models import UNSET, CallbackResult, RunStatus, StreamItem
from parkway.schedules import ScheduleInfo

__all__ = ["PUBLIC_PATHS", "ROUTES", "TOKEN_ENV", "create_app", "lifespan"]

log = logging.getLogger("parkway.http")

Handler = Callable[["Api", Request], Awaitable[Response]]


# -- routes ----------------------------------------------------------------------------------


class Api:
    """The route handlers, bound to one engine (``token``: the tokens required, if any,
    ``{token: name}``)."""

    def __init__(self, engine: Engine, token: Callable[[], dict[str, str]] = dict) -> None:
        self.engine, self.token = engine, token
        # Whether this app's ASGI lifespan ran (None: never, as when it is mounted
        # inside another app, whose server sends lifespan events to that app only).
        self.started: bool | None = None

    def _require_open(self) -> None:
        if self.engine.is_open:
            return
        if self.started is None:
            raise Problem(
                503,
                "the engine is not open, and this app's lifespan never ran (is it mounted "
                "inside another app?): open the engine in that app's lifespan, e.g. "
                "FastAPI(lifespan=parkway.http.lifespan(engine)), or `async with engine:` "
                "around serving",
            )
        raise Problem(503, "the engine is not open (the server is starting or stopping)")

    async def publish(self, request: Request) -> Response:
        body = await parse_body(request, schemas.PublishRequest)
        self._require_open()
        with json_at("payload"):
            result = await self.engine.publish(
                body.name, body.payload, id=body.id, domain=body.domain, subject=body.subject
            )
        return json_response(result.to_dict())

    async def correlate(self, request: Request) -> Response:
        body = await parse_body(request, schemas.CorrelateRequest)
        self._require_open()
        with json_at("payload"):
            result = await self.engine.correlate(
                body.name, body.key, body.payload, message_id=body.message_id, ttl=body.ttl
            )
        return json_response(result.to_dict())

    async def start(self, request: Request) -> Response:
        body = await parse_body(request, schemas.StartRequest)
        self._require_open()
        with json_at("input"):  # (a client engine starts a name it does not know unchecked)
            handle = await self.engine.start(
                body.workflow, body.input, id=body.id, subject=body.subject,
                domain=body.domain, priority=body.priority, timeout=body.timeout,
            )  # fmt: skip
        return json_response({"id": handle.id}, 201)

    async def list_runs(self, request: Request) -> Response:
        query = parse_query(request, schemas.RunsQuery)
        self._require_open()
        try:  # one run more than asked for tells whether another page follows
            runs = await self.engine.list_runs(
                workflow=query.workflow, status=query.status, subject=query.subject,
                domain=query.domain, limit=query.limit + 1, search=query.search,
                parent_id=query.parent_id, created_after=query.created_after,
                created_before=query.created_before, before=query.before,
            )  # fmt: skip
        except InvalidInputError as exc:
            if exc.field not in schemas.RunsQuery.model_fields:
                raise
            error = field_error(["query", exc.field], str(exc), type(exc).__name__)
            raise Invalid([error]) from None
        headers = None
        if len(runs) > query.limit:
            runs = runs[: query.limit]
            # (Percent-encoded: a header holds latin-1 only, a run id any text.)
            headers = {schemas.NEXT_PAGE_HEADER: quote(runs[-1].id, safe="")}
        unserved = set(await self.engine.unserved_runs()) if runs else set()
        listed = [{**r.to_dict(), "unserved": r.id in unserved} for r in runs]
        return json_response(listed, headers=headers)

    async def events(self, request: Request) -> Response:
        query = parse_query(request, schemas.EventsQuery)
        self._require_open()
        found = await self.engine.events(
            name=query.name, subject=query.subject, since=query.since, limit=query.limit
        )
        return json_response([event.to_dict() for event in found])

    async def workers(self, request: Request) -> Response:
        parse_query(request, schemas.NoQuery)
        self._require_open()
        return json_response([worker.to_dict() for worker in await self.engine.workers()])

    async def run_counts(self, request: Request) -> Response:
        parse_query(request, schemas.NoQuery)
        self._require_open()
        return json_response(await self.engine.run_counts())

    async def get_run(self, request: Request) -> Response:
        run_id = run_id_param(request)
        self._require_open()
        info = await self.engine.get_run(run_id)
        return json_response(info.to_dict())

    async def history(self, request: Request) -> Response:
        run_id = run_id_param(request)
        self._require_open()
        entries = await self.engine.history(run_id)
        return json_response([e.to_dict() for e in entries])

    async def signal(self, request: Request) -> Response:
        run_id = run_id_param(request)
        name = path_param(request, "name", limits.name, "signal name")
        payload = json_value(await read_body(request), required=False)
        self._require_open()
        with json_at():
            await self.engine.signal(run_id, name, payload)
        return json_response({"id": run_id, "signal": name}, 202)

    async def values(self, request: Request) -> Response:
        run_id = run_id_param(request)
        self._require_open()
        return json_response(await self.engine.values(run_id))

    async def value(self, request: Request) -> Response:
        run_id = run_id_param(request)
        key = path_param(request, "name", limits.name, "value key")
        query = parse_query(request, schemas.ValueQuery)
        self._require_open()
        with json_at():
            found = await self.engine.value(run_id, key, timeout=query.timeout)
        return json_response({"key": key, "value": found})

    async def stream(self, request: Request) -> Response:
        run_id = run_id_param(request)
        key = path_param(request, "key", limits.name, "stream key")
        query = parse_query(request, schemas.StreamQuery)
        offset = _resume_offset(request, query.offset)
        self._require_open()
        if _wants_json(request):
            items = await self.engine.read_stream(run_id, key, offset=offset, limit=query.limit)
            return json_response([item.to_dict() for item in items])
        # The run must exist before the 200 (a stream cannot turn into a 404), and a
        # resume past the end of a run that has ended gets a 204, which tells an
        # EventSource not to reconnect. (Its status is read first: the items its
        # end committed with are then seen by the read after.)
        ended = (await self.engine.get_run(run_id)).status in _ENDED
        if ended and not await self.engine.read_stream(run_id, key, offset=offset, limit=1):
            return Response(status_code=204)
        follow = self.engine.stream(run_id, key, offset=offset)
        return EventSourceResponse(_events(follow, offset), ping=SSE_KEEPALIVE)

    async def update(self, request: Request) -> Response:
        run_id = run_id_param(request)
        name = path_param(request, "name", limits.name, "update name")
        body = await parse_body(request, schemas.UpdateRequest)
        self._require_open()
        with json_at():
            result = await self.engine.update(
                run_id, name, body.payload, id=body.id, timeout=body.timeout, by=_by(request)
            )
        return json_response({"result": result})

    async def cancel(self, request: Request) -> Response:
        run_id = run_id_param(request)
        await read_body(request)  # ignored, but still held to the size limit
        self._require_open()
        await self.engine.cancel(run_id, by=_by(request))
        return json_response({"id": run_id}, 202)

    async def pause(self, request: Request) -> Response:
        run_id = run_id_param(request)
        await read_body(request)  # ignored, but still held to the size limit
        self._require_open()
        return json_response((await self.engine.pause(run_id, by=_by(request))).to_dict())

    async def resume(self, request: Request) -> Response:
        run_id = run_id_param(request)
        await read_body(request)
        self._require_open()
        return json_response((await self.engine.resume(run_id, by=_by(request))).to_dict())

    async def retry(self, request: Request) -> Response:
        run_id = run_id_param(request)
        await read_body(request)
        self._require_open()
        return json_response((await self.engine.retry(run_id, by=_by(request))).to_dict())

    async def fork(self, request: Request) -> Response:
        run_id = run_id_param(request)
        data = json_value(await read_body(request), required=False)
        try:
            body = schemas.ForkRequest.model_validate({} if data is None else data)
        except ValidationError as exc:
            raise from_validation("body", exc) from None
        self._require_open()
        given = "input" in body.model_fields_set
        with json_at("input"):
            handle = await self.engine.fork(
                run_id,
                at=body.at,
                input=body.input if given else UNSET,
                id=body.id,
                by=_by(request),
            )
        return json_response((await handle.info()).to_dict(), 201)

    async def cancel_runs(self, request: Request) -> Response:
        body = await parse_body(request, schemas.BulkRequest)
        self._require_open()
        count = await self.engine.cancel_runs(
            workflow=body.workflow, status=body.status, subject=body.subject,
            created_before=body.created_before, by=_by(request),
        )  # fmt: skip
        return json_response({"count": count})

    async def retry_runs(self, request: Request) -> Response:
        body = await parse_body(request, schemas.BulkRequest)
        self._require_open()
        count = await self.engine.retry_runs(
            workflow=body.workflow, status=body.status, subject=body.subject,
            created_before=body.created_before, by=_by(request),
        )  # fmt: skip
        return json_response({"count": count})

    async def subscriptions(self, request: Request) -> Response:
        query = parse_query(request, schemas.SubscriptionsQuery)
        self._require_open()
        subs = await self.engine.subscriptions(run_id=query.run_id, name=query.name)
        return json_response([_subscription(s) for s in subs])

    async def messages(self, request: Request) -> Response:
        query = parse_query(request, schemas.MessagesQuery)
        self._require_open()
        found = await self.engine.messages(status=query.status)
        return json_response([m.to_dict() for m in found])

    async def retry_message(self, request: Request) -> Response:
        message_id = message_id_param(request)
        raw = await read_body(request)
        data = json_value(raw, required=False, exact=False)
        try:
            body = schemas.RetryMessageRequest.model_validate({} if data is None else data)
        except ValidationError as exc:
            raise from_validation("body", exc) from None
        refuse_wide_integers(raw)
        self._require_open()
        result = await self.engine.retry_message(message_id, ttl=body.ttl)
        return json_response(result.to_dict())

    async def discard_message(self, request: Request) -> Response:
        message_id = message_id_param(request)
        await read_body(request)  # ignored, but still held to the size limit
        self._require_open()
        await self.engine.discard_message(message_id)
        return json_response({"id": message_id})

    async def schedules(self, request: Request) -> Response:
        self._require_open()
        return json_response([_schedule(i) for i in await self.engine.schedules()])

    async def pause_schedule(self, request: Request) -> Response:
        schedule_id = path_param(request, "id", limits.reference, "schedule id")
        await read_body(request)  # ignored, but still held to the size limit
        self._require_open()
        return json_response(_schedule(await self.engine.pause_schedule(schedule_id)))

    async def resume_schedule(self, request: Request) -> Response:
        schedule_id = path_param(request, "id", limits.reference, "schedule id")
        await read_body(request)  # ignored, but still held to the size limit
        self._require_open()
        return json_response(_schedule(await self.engine.resume_schedule(schedule_id)))

    # -- callbacks and human tasks ----------------------------------------------------------

    async def complete_callback(self, request: Request) -> Response:
        token = request.path_params["token"]
        value = json_value(await read_body(request), required=False)
        self._require_open()
        with json_at():
            done = await self.engine.complete_callback(token, value)
        return json_response(_callback(done))

    async def fail_callback(self, request: Request) -> Response:
        token = request.path_params["token"]
        body = await parse_body(request, schemas.CallbackFailRequest)
        self._require_open()
        try:
            done = await self.engine.fail_callback(token, body.message)
        except InvalidInputError as exc:  # (a control character, say)
            error = field_error(["body", "message"], str(exc), type(exc).__name__)
            raise Invalid([error]) from None
        return json_response(_callback(done))

    async def tasks(self, request: Request) -> Response:
        query = parse_query(request, schemas.TasksQuery)
        self._require_open()
        found = await self.engine.tasks(
            status=None if query.status == "all" else query.status,
            assignee=query.assignee, workflow=query.workflow, limit=query.limit,
        )  # fmt: skip
        return json_response([task.to_dict() for task in found])

    async def get_task(self, request: Request) -> Response:
        task_id = path_param(request, "id", limits.reference, "task id")
        self._require_open()
        return json_response((await self.engine.get_task(task_id)).to_dict())

    async def complete_task(self, request: Request) -> Response:
        task_id = path_param(request, "id", limits.reference, "task id")
        body = await parse_body(request, schemas.CompleteTaskRequest)
        self._require_open()
        try:
            done = await self.engine.complete_task(task_id, body.result, by=body.by)
        except InvalidInputError as exc:  # the form's refusal: loc names the field
            loc: list[str | int] = ["body", "result", *json_path(exc.field)]
            raise Invalid([field_error(loc, str(exc), type(exc).__name__)]) from None
        return json_response(done.to_dict())

    async def healthz(self, request: Request) -> Response:
        self._require_open()
        try:  # a cheap read proves the store answers
            await self.engine.list_runs(limit=1)
        except ParkwayError as exc:
            wait = exc.retry_after if isinstance(exc, StoreError) else 5.0
            raise Problem(
                503, f"the store does not answer: {exc}", type(exc).__name__,
                {"Retry-After": f"{math.ceil(wait):d}"},
            ) from exc  # fmt: skip
        return json_response({"status": "ok"})

    async def metrics(self, request: Request) -> Response:
        self._require_open()
        try:
            body, content_type = await self.engine.render_metrics()
        except MetricsDisabledError as exc:
            raise Problem(404, str(exc), type(exc).__name__) from exc
        return Response(body, 200, media_type=content_type)

    async def openapi(self, request: Request) -> Response:
        # (The token is read on each request, so is whether the document says it is needed.)
        return json_response(openapi_document(token_required=bool(self.token())))

    async def dashboard(self, request: Request) -> Response:
        return dashboard_response()


def _by(request: Request) -> str | None:
    """Who asked: the name of the API token the request carried (``None``: the server
    requires no token)."""
    by = request.scope.get("state", {}).get(BY_STATE)
    return by if isinstance(by, str) else None


def _callback(done: CallbackResult) -> dict[str, Any]:
    # (Not the run's id: the token's holder is a third party, who needs no more.)
    return {
        "status": done.status, "value": done.value, "message": done.message,
        "duplicate": done.duplicate,
    }  # fmt: skip


def _subscription(sub: SubscriptionInfo) -> dict[str, Any]:
    return {
        "run_id": sub.run_id, "kind": sub.kind, "domain": sub.domain, "name": sub.name,
        "subject": sub.subject, "match": sub.match, "key": sub.key,
        "expires_at": sub.expires_at.isoformat(),
    }  # fmt: skip


def _schedule(info: ScheduleInfo) -> dict[str, Any]:
    return {
        "id": info.id, "workflow": info.workflow, "cron": info.cron, "timezone": info.timezone,
        "paused": info.paused,
        "next_at": None if info.next_at is None else info.next_at.isoformat(),
        "last_run_id": info.last_run_id, "catch_up": info.catch_up,
    }  # fmt: skip


# -- the routes under /runs/{id} ------------------------------------------------------------

RUN_PREFIX = "/runs/"
COUNTS = "counts"  # GET /runs/counts
METRICS_PATH = "/metrics"


class _AnyPath(Convertor[str]):
    """A path parameter that may hold anything, newlines included (Starlette's ``path``
    stops at one, and the request would be a misleading 404)."""

    regex = "(?s:.*)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("parkway_run_path", _AnyPath())


# POST /runs/{id}/<action>, and the bulk POST /runs/<action>.
_ACTIONS: dict[str, Handler] = {
    "cancel": Api.cancel, "pause": Api.pause, "resume": Api.resume, "retry": Api.retry,
    "fork": Api.fork,
}  # fmt: skip
_BULK: dict[str, Handler] = {"cancel": Api.cancel_runs, "retry": Api.retry_runs}


def _run_route(method: str, request: Request) -> tuple[Handler, dict[str, str]]:
    """Which ``/runs/{id}...`` route a request is for, and its decoded parameters.

    Told apart on the raw path, before percent-decoding: a "/" in a run id sent
    as ``%2F`` is part of the id, so every id is reachable on every route
    (``/runs/a%2Fhistory`` is run ``a/history``, ``/runs/a/history`` the history
    of run ``a``). A raw "/" is a separator, unless no route ends that way
    (``/runs/orders/2026/7`` is run ``orders/2026/7``).
    """
    scope = request.scope
    raw: bytes = scope.get("raw_path") or quote(scope["path"]).encode()
    root = scope.get("root_path", "").encode()
    if root and raw.startswith(root):
        raw = raw[len(root) :]
    parts = raw.decode("latin-1")[len(RUN_PREFIX) :].split("/")
    name: str | None = None
    if method == "GET":
        handler: Handler = Api.get_run
        if parts == [COUNTS]:  # (run "counts" itself is /runs/%63ounts)
            return Api.run_counts, {}
        if len(parts) >= 2 and parts[-1] == "history":
            handler, parts = Api.history, parts[:-1]
        elif len(parts) >= 2 and parts[-1] == "values":
            handler, parts = Api.values, parts[:-1]
        elif len(parts) >= 3 and parts[-2] == "values":
            handler, name, parts = Api.value, parts[-1], parts[:-2]
        elif len(parts) >= 3 and parts[-2] == "streams":
            handler, name, parts = Api.stream, parts[-1], parts[:-2]
            params = {"id": decoded("id", "/".join(parts)), "key": decoded("key", name)}
            return handler, params
    elif len(parts) >= 3 and parts[-2] == "signals":
        handler, name, parts = Api.signal, parts[-1], parts[:-2]
    elif len(parts) >= 3 and parts[-2] == "updates":
        handler, name, parts = Api.update, parts[-1], parts[:-2]
    elif len(parts) == 1 and parts[0] in _BULK:
        # POST /runs/cancel, /runs/retry: no run (a run named so is /runs/cancel/cancel).
        return _BULK[parts[0]], {}
    elif len(parts) >= 2 and parts[-1] in _ACTIONS:
        handler, parts = _ACTIONS[parts[-1]], parts[:-1]
    else:
        raise Problem(405, "Method Not Allowed", headers={"Allow": "GET, HEAD"})
    params = {"id": decoded("id", "/".join(parts))}
    if name is not None:
        params["name"] = decoded("name", name)
    return handler, params


# -- streams ---------------------------------------------------------------------------------

_ENDED = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
# Seconds between keep-alive comments on a quiet event stream (proxies drop idle ones).
SSE_KEEPALIVE = 15.0


def _wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/event-stream" not in accept


def _resume_offset(request: Request, offset: int) -> int:
    """Where an event stream resumes: after its ``Last-Event-ID`` (an EventSource
    reconnecting sends the last id it saw), else at ``?offset=``."""
    last = request.headers.get("last-event-id")
    if last is None or last == "":
        return offset
    if not limits.ascii_digits(last) or len(last) > 18:
        message = f"Last-Event-ID must be the offset of an item (digits), got {last[:40]!r}"
        raise Invalid([field_error(["header", "Last-Event-ID"], message, "offset")])
    return int(last) + 1


async def _events(items: AsyncIterator[StreamItem], offset: int) -> AsyncIterator[ServerSentEvent]:
    """The event stream: each item with its offset as id, then ``end``."""
    try:
        async for item in items:
            yield ServerSentEvent(_json.dumps(item.to_dict()).decode(), id=str(item.offset))
            offset = item.offset + 1
        yield ServerSentEvent(_json.dumps({"offset": offset}).decode(), event="end")
    finally:
        await items.aclose()  # type: ignore[attr-defined]


# -- the app ---------------------------------------------------------------------------------


def create_app(
    engine: Engine,
    *,
    api_token: str | None = None,
    api_tokens: Mapping[str, str] | None = None,
    allowed_hosts: Collection[str] | None = None,
    callback_rate: float = 10.0,
    callback_burst: int = 20,
) -> Starlette:
    """The HTTP API and dashboard over ``engine``, as an ASGI app.

    Args:
        engine: The engine to expose. If it is not open when the app starts
            (ASGI lifespan), the app opens it and closes it at shutdown.
        api_token: Require ``Authorization: Bearer <api_token>`` on every route
            but ``/healthz``. ``None`` reads ``PARKWAY_API_TOKEN`` on each request;
            an empty value means no token is required. Its name (the ``by`` of
            the operator actions its requests make) is ``api``.
        api_tokens: Named tokens, ``{name: token}``: any of them is taken, and the
            operator actions of a request (pause, cancel, retry...) are recorded
            as by its token's name. ``None`` (and no ``api_token``) reads
            ``PARKWAY_API_TOKENS`` (``"alice:tok1,bob:tok2"``) on each request.
        allowed_hosts: Answer only requests whose ``Host`` is one of these names,
            an IP address or ``localhost`` (400 otherwise; ``"*"``: any), a guard
            against DNS rebinding. ``None`` (the default): no check, for a server
            or proxy in front that checks it. ``parkway serve`` passes its address.
        callback_rate: Requests a second each client address may make to the
            callback routes (which need no API token), in bursts of up to
            ``callback_burst``; past that, 429 with ``Retry-After``.
    """

    def token() -> dict[str, str]:
        if api_token is not None or api_tokens is not None:
            tokens = {t: n for n, t in (api_tokens or {}).items() if t}
            if api_token:
                tokens.setdefault(api_token, SINGLE_TOKEN_NAME)
            return tokens
        return named_tokens(os.environ.get(TOKEN_ENV), os.environ.get(TOKENS_ENV))

    try:
        token()  # (malformed: said now, rather than answered to every request)
    except TokensError as exc:
        raise InvalidArgumentError(str(exc), field=TOKENS_ENV) from None

    api = Api(engine, token)

    def bind(handlers: dict[str, Handler]) -> Callable[[Request], Awaitable[Response]]:
        # One endpoint per path, so that a wrong method gets 405 listing every allowed one.
        async def endpoint(request: Request) -> Response:
            method = "GET" if request.method == "HEAD" else request.method
            return await handlers[method](api, request)

        return endpoint

    @contextlib.asynccontextmanager
    async def own_lifespan(app: Starlette) -> AsyncIterator[None]:
        api.started = True
        try:
            async with lifespan(engine)(app):
                yield
        finally:
            api.started = False

    async def run_endpoint(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        handler, params = _run_route(method, request)
        request.scope["path_params"] = params
        return await handler(api, request)

    by_path: dict[str, dict[str, Handler]] = {}
    for spec in ROUTES:
        if not spec.path.startswith(RUN_PREFIX):
            by_path.setdefault(spec.path, {})[spec.method] = getattr(Api, spec.handler)
    routes = [Route(path, bind(h), methods=list(h)) for path, h in by_path.items()]
    # Prometheus's, not the API's: served, not described in /openapi.json.
    routes.append(Route(METRICS_PATH, bind({"GET": Api.metrics}), methods=["GET"]))
    # Every /runs/{id}... route, told apart by _run_route (a run id may hold "/").
    routes.append(
        Route(RUN_PREFIX + "{rest:parkway_run_path}", run_endpoint, methods=["GET", "POST"])
    )
    return Starlette(
        routes=routes,
        middleware=[
            # Outermost: every early answer, the guards' own too, waits for the body.
            Middleware(DrainBody),
            Middleware(CallbackRateLimit, rate=callback_rate, burst=callback_burst),
            Middleware(HostGuard, allowed=allowed_hosts),
            Middleware(TokenGuard, token=token),
        ],
        exception_handlers={
            Problem: _on_problem,
            Invalid: _on_invalid,
            ParkwayError: _on_parkway_error,
            HTTPException: _on_http_exception,
            ClientDisconnect: _on_client_gone,
            # Starlette answers with this, then re-raises so that the server logs the traceback.
            Exception: _on_unexpected,
        },
        lifespan=own_lifespan,
    )


def lifespan(engine: Engine) -> Callable[[Any], contextlib.AbstractAsyncContextManager[None]]:
    """An ASGI lifespan that opens ``engine`` at startup and closes it at shutdown.

    For the app that mounts :func:`create_app` (a mounted app's own lifespan never
    runs): ``FastAPI(lifespan=lifespan(engine))`` or ``Starlette(lifespan=...)``.
    An engine already open at startup is left open at shutdown (its owner closes it).
    Inside a lifespan of your own, ``async with lifespan(engine)(app):``.
    """

    @contextlib.asynccontextmanager
    async def span(_app: Any) -> AsyncIterator[None]:
        opened = not engine.is_open
        if opened:
            await engine.open()
        try:
            yield
        finally:
            if opened:
                await engine.close()

    return span


async def _on_problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Problem)
    return problem_response(exc.status, exc.detail, exc.error, exc.headers)


async def _on_invalid(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Invalid)
    return json_response({"detail": exc.errors}, 422)


async def _on_parkway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ParkwayError)
    translated = parkway_error(exc)
    if isinstance(translated, Invalid):
        return await _on_invalid(request, translated)
    assert isinstance(translated, Problem)
    if translated.status >= 500:
        log.warning("%s %s: %s", request.method, shown_path(request.url.path), exc)
    return await _on_problem(request, translated)


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return problem_response(exc.status_code, exc.detail, None, dict(exc.headers or {}))


async def _on_client_gone(request: Request, exc: Exception) -> Response:
    # The client went away before its body was all sent (less than its
    # Content-Length): nobody reads this answer, and it is no server error.
    return problem_response(400, "the client disconnected before its request body was sent")


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    return problem_response(
        500, "internal error; the traceback is in the server's log", type(exc).__name__
    )
