"""What every request passes before a route sees it: the body drained after an
early answer, the ``Host`` header, the bearer token, the media type.

Each is a small ASGI middleware (or, for the media type, a check the body
routes call), so that it holds for every route, the refusals of the router
(404, 405) included.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hmac
import ipaddress
import math
import time
from collections.abc import Callable, Collection
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_ENV = "PARKWAY_API_TOKEN"
# Named tokens, "alice:tok1,bob:tok2": each request's operator actions are recorded
# as by the name of the token it carried (the single PARKWAY_API_TOKEN's is "api").
TOKENS_ENV = "PARKWAY_API_TOKENS"
SINGLE_TOKEN_NAME = "api"
# Where TokenGuard leaves the name of the token a request carried (scope["state"]).
BY_STATE = "parkway_by"
# The only route open without the token or a known Host: load balancers and
# orchestrators probe it, by whatever name they know the server.
PUBLIC_PATHS = frozenset({"/healthz"})
# Routes whose capability is in their path: a callback's token (256 random bits)
# completes that one callback, so a third party (a payment provider) needs no API
# token, and calls by the public name it was given (cb.url), whatever the Host.
CALLBACKS = "/callbacks/"
# How long the server goes on reading (and dropping) a body it answered early
# (401, 404, 413...), whatever its size: a client that sends its whole body
# before it reads the answer (urllib, requests) then sees the answer, not a
# connection reset. Past this the connection is closed.
DRAIN_SECONDS = 60.0


def problem(status: int, detail: str, headers: dict[str, str] | None = None) -> Any:
    """A JSON ``{"detail", "error"}`` response, as the routes answer errors."""
    from starlette.responses import Response

    body = orjson.dumps({"detail": detail, "error": None})
    return Response(body, status, headers, media_type="application/json")


def is_public(path: str) -> bool:
    """Whether ``path`` is answered without the API token or a known Host."""
    return path in PUBLIC_PATHS or path.startswith(CALLBACKS)


def shown_path(path: str) -> str:
    """``path`` as a log line may show it: a callback's token left out."""
    if path.startswith(CALLBACKS):
        _, _, rest = path[len(CALLBACKS) :].partition("/")
        return f"{CALLBACKS}<token>" + (f"/{rest}" if rest else "")
    return path


class CallbackRateLimit:
    """At most ``rate`` requests a second to the callback routes from one client
    address (a token bucket of ``burst``), else 429 with ``Retry-After``.

    The routes need no API token: the limit keeps anyone from trying tokens at
    the speed of the server (not that 256 random bits could be guessed), or from
    making it work for nothing. Addresses are the connection's (behind a proxy,
    its own: run the proxy's limit there too). The buckets of the addresses least
    recently seen go first once ``max_clients`` are kept.
    """

    def __init__(
        self, app: ASGIApp, *, rate: float = 10.0, burst: int = 20, max_clients: int = 10_000
    ) -> None:
        self.app, self.rate, self.burst, self.max_clients = app, rate, burst, max_clients
        self._buckets: collections.OrderedDict[str, tuple[float, float]] = collections.OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(CALLBACKS):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        wait = self._take(client[0] if client else "-", time.monotonic())
        if wait <= 0:
            await self.app(scope, receive, send)
            return
        response = problem(
            429,
            "too many callback requests from this address; try again after "
            f"{math.ceil(wait)}s (Retry-After)",
            headers={"Retry-After": str(math.ceil(wait))},
        )
        await response(scope, receive, send)

    def _take(self, address: str, now: float) -> float:
        """Take a request from ``address``'s bucket: 0, or the seconds until one is there."""
        tokens, then = self._buckets.pop(address, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        if tokens >= 1:
            tokens -= 1
            wait = 0.0
        else:
            wait = (1 - tokens) / self.rate
        self._buckets[address] = (tokens, now)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        return wait


class DrainBody:
    """Answer at once, then read the rest of a request's body before the answer ends.

    An answer given before the body is read (a 413 once the limit is passed, a
    401 without the token, a 404) would otherwise close the connection under a
    client still sending, which then sees a broken pipe instead of the answer.
    So the answer goes out first, all of it but its end (a client that reads
    while it sends, as curl does, stops sending there), with ``Connection:
    close``; then what is left of the body is read and dropped, up to
    :data:`DRAIN_SECONDS`, so that a client that sends all before it reads
    gets to read it; then the answer ends and the connection closes. Nothing
    is drained for a client that asked ``Expect: 100-continue`` (it sends no
    body unless told to).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length", b"0")
        chunked = b"transfer-encoding" in headers
        done = not chunked and length.strip() in (b"", b"0")
        # Told to wait for a 100 Continue it never got: the client sends no body.
        waits = headers.get(b"expect", b"").lower() == b"100-continue"
        received = False
        answered_early = False

        async def receive_tracked() -> Message:
            nonlocal done, received
            received = True
            message = await receive()
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                done = True
            return message

        async def send_drained(message: Message) -> None:
            nonlocal answered_early
            if message["type"] == "http.response.start" and not done:
                answered_early = True
                extra = [(b"connection", b"close")]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            elif (
                answered_early
                and message["type"] == "http.response.body"
                and not message.get("more_body", False)
                and not (waits and not received)
            ):
                await send({**message, "more_body": True})
                await _drain(receive)
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app(scope, receive_tracked, send_drained)


async def _drain(receive: Receive) -> None:
    """Read and drop what is left of the body, for :data:`DRAIN_SECONDS` at most."""

    async def read_all() -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(read_all(), DRAIN_SECONDS)


class HostGuard:
    """Answer only requests whose ``Host`` names this server (DNS rebinding).

    A web page can make a browser resolve its own domain name to 127.0.0.1 and
    then read this server as that page's origin. A ``Host`` that is an IP
    address, ``localhost``, or one of ``allowed`` cannot be such a name.

    Args:
        allowed: Host names (without port) also answered; ``None``: any.
    """

    def __init__(self, app: ASGIApp, allowed: Collection[str] | None) -> None:
        self.app = app
        self.allowed = None if allowed is None else frozenset(h.lower() for h in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.allowed is None or scope["type"] != "http" or is_public(scope["path"]):
            await self.app(scope, receive, send)
            return
        host = dict(scope["headers"]).get(b"host")
        name = None if host is None else host_name(host.decode("latin-1"))
        if name is None or host_allowed(name, self.allowed):
            await self.app(scope, receive, send)
            return
        response = problem(
            400,
            f"this server does not answer to Host {name!r}; serve it with --allow-host "
            f"{name} if that is its name (a guard against DNS rebinding)",
        )
        await response(scope, receive, send)


def host_name(host: str) -> str:
    """The name in a ``Host`` header, without port or trailing dot, lowercased."""
    host = host.strip().lower()
    if host.startswith("["):  # [::1]:8000
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def host_allowed(name: str, allowed: frozenset[str]) -> bool:
    """Whether a request for ``name`` may be answered (see :class:`HostGuard`)."""
    if "*" in allowed or name in allowed or name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class TokensError(ValueError):
    """``PARKWAY_API_TOKENS`` (or ``api_tokens``) is malformed (the message says how)."""


def named_tokens(single: str | None, named: str | None) -> dict[str, str]:
    """The tokens a server takes, ``{token: name}``: each ``name:token`` of ``named``
    (``PARKWAY_API_TOKENS``, comma-separated) and ``single`` (``PARKWAY_API_TOKEN``)
    named :data:`SINGLE_TOKEN_NAME`. Empty: no token is required.

    Raises:
        TokensError: An entry without its name or token, or a token given twice.
    """
    tokens: dict[str, str] = {}
    for entry in (named or "").split(","):
        if not entry.strip():
            continue
        name, colon, token = entry.strip().partition(":")
        if not colon or not name.strip() or not token.strip():
            raise TokensError(
                f"{TOKENS_ENV} must be name:token pairs separated by commas, such as "
                "'alice:tok1,bob:tok2'; an entry has no name or no token"
            )
        if token.strip() in tokens:
            raise TokensError(f"{TOKENS_ENV}: two names have the same token")
        tokens[token.strip()] = name.strip()
    if single:
        tokens.setdefault(single, SINGLE_TOKEN_NAME)
    return tokens


class TokenGuard:
    """Require ``Authorization: Bearer <token>`` on every path but :data:`PUBLIC_PATHS`,
    one of the tokens ``tokens()`` gives (``{token: name}``; none: no token is
    required). The name of the token a request carried is left in its
    ``scope["state"]`` under :data:`BY_STATE`: the ``by`` of its operator actions.

    The dashboard page is answered 401 *with* its HTML: it holds no data, and it
    is where an operator pastes the token that its own calls then send.
    """

    def __init__(self, app: ASGIApp, token: Callable[[], dict[str, str]]) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_public(scope["path"]):
            await self.app(scope, receive, send)
            return
        try:
            expected = self.token()
        except TokensError as exc:  # (set wrong while the server runs: refuse, and say why)
            await problem(500, str(exc))(scope, receive, send)
            return
        if not expected:
            await self.app(scope, receive, send)
            return
        name = _bearer_name(scope, expected)
        if name is not None:
            scope.setdefault("state", {})[BY_STATE] = name
            await self.app(scope, receive, send)
            return
        if scope["path"] == "/" and scope["method"] in ("GET", "HEAD"):
            from parkway.http.dashboard import dashboard_response

            response = dashboard_response(status=401)
        else:
            response = problem(
                401,
                "this server requires Authorization: Bearer <token> "
                f"(the value of {TOKEN_ENV} where it runs)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        await response(scope, receive, send)


def _bearer_name(scope: Scope, expected: dict[str, str]) -> str | None:
    """The name of the token the request carries, if it is one of ``expected``."""
    for header, value in scope["headers"]:
        if header == b"authorization":
            scheme, _, given = value.partition(b" ")
            if scheme.lower() != b"bearer":
                return None
            found = None
            # Constant time for each, and every one compared, so that no token can
            # be guessed byte by byte, nor which one is near.
            for token, name in expected.items():
                if hmac.compare_digest(given.strip(), token.encode()):
                    found = name
            return found
    return None


def json_media_error(headers: Any) -> str | None:
    """Why a request carrying a body may not be taken, by its media type (``None``: it may).

    Only ``application/json`` is read. A page in a browser can send a
    cross-site ``text/plain`` or form POST without asking first (no CORS
    preflight): refusing those keeps such a page from publishing, starting or
    cancelling anything on a server that needs no token. A request without a
    ``Content-Type`` (a script's) is taken as JSON, unless a browser sent it (it
    says where from: ``Origin``, ``Sec-Fetch-Site``), for a page can send a
    body with none.
    """
    given = headers.get("content-type")
    if given is None:
        if "origin" in headers or "sec-fetch-site" in headers:
            return "a request from a browser must say Content-Type: application/json"
        return None
    media = given.partition(";")[0].strip().lower()
    if media != "application/json":
        return f"the body must be JSON, sent as Content-Type: application/json (got {given!r})"
    return None
