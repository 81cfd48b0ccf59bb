"""The HTTP API: a Starlette app over one :class:`parkway.Engine`.

Every route is declared once, in :data:`ROUTES`, which both the router and
``/openapi.json`` read, so the document cannot drift from what is served.
Requests are validated (size, JSON, fields) before the engine is called, so a
rejected request writes nothing. The handlers are written by area
(:mod:`parkway.http.handlers`); :class:`Api` is all of them.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from parkway.engine import Engine
from parkway.errors import InvalidArgumentError, ParkwayError
from parkway.http.guards import (
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
from parkway.http.handlers.operations import OperationHandlers
from parkway.http.handlers.people import PeopleHandlers
from parkway.http.handlers.publishing import PublishingHandlers
from parkway.http.handlers.runs import RunHandlers
from parkway.http.parsing import (
    Invalid,
    Problem,
    decoded,
    json_response,
    parkway_error,
    problem_response,
)
from parkway.http.routes import ROUTES

__all__ = ["PUBLIC_PATHS", "ROUTES", "TOKEN_ENV", "Api", "create_app", "lifespan"]

log = logging.getLogger("parkway.http")

Handler = Callable[["Api", Request], Awaitable[Response]]


class Api(RunHandlers, PublishingHandlers, PeopleHandlers, OperationHandlers):
    """The route handlers, bound to one engine (``token``: the tokens required, if any,
    ``{token: name}``): :data:`ROUTES` names each by its method here."""


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
    "cancel": Api.cancel,
    "pause": Api.pause,
    "resume": Api.resume,
    "retry": Api.retry,
    "fork": Api.fork,
}
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
