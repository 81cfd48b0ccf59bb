"""The access log of ``parkway serve``: one line per request, on the ``parkway.access``
logger, except the dashboard's own polling (it sends ``X-Parkway-Poll``), which
would otherwise be most of the lines."""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from parkway.http.guards import shown_path

log = logging.getLogger("parkway.access")

POLL_HEADER = b"x-parkway-poll"


class AccessLog:
    """ASGI middleware logging each request's method, path, status and duration.

    ``polls``: log the dashboard's polling requests too (an error among them
    always is).
    """

    def __init__(self, app: ASGIApp, *, polls: bool = False) -> None:
        self.app, self.polls = app, polls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = 500  # (if the app raises before it answers, the server answers 500)

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            polled = any(name == POLL_HEADER for name, _ in scope.get("headers", ()))
            if (self.polls or not polled or status >= 500) and log.isEnabledFor(logging.INFO):
                _line(scope, status, time.perf_counter() - began)


def _line(scope: Scope, status: int, took: float) -> None:
    client = scope.get("client")
    where = f"{client[0]}:{client[1]}" if client else "-"
    path = scope.get("root_path", "") + shown_path(scope["path"])
    query = scope.get("query_string", b"")
    target = f"{path}?{query.decode('latin-1')}" if query else path
    method, version = scope["method"], scope.get("http_version", "1.1")
    log.info(
        '%s - "%s %s HTTP/%s" %d %.1fms',
        where,
        method,
        target,
        version,
        status,
        took * 1000,
        extra={
            "client": where,
            "method": method,
            "path": target,
            "status": status,
            "duration_ms": round(took * 1000, 3),
        },
    )
