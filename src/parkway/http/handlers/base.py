"""What every route handler has: the engine, the tokens, whether the app started."""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request

from parkway.engine import Engine
from parkway.http.guards import BY_STATE
from parkway.http.parsing import Problem


class Handlers:
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


def by(request: Request) -> str | None:
    """Who asked: the name of the API token the request carried (``None``: the server
    requires no token)."""
    found = request.scope.get("state", {}).get(BY_STATE)
    return found if isinstance(found, str) else None
