"""parkway over HTTP: a JSON API and a dashboard, as a Starlette app.

Needs the ``http`` extra (``pip install 'parkway[http]'``). Serve it with
``parkway serve module:engine``, or mount :func:`create_app` in your own ASGI
app, with :func:`lifespan` to open and close the engine with it::

    from fastapi import FastAPI
    from parkway.http import create_app, lifespan

    app = FastAPI(lifespan=lifespan(engine))
    app.mount("/parkway", create_app(engine))  # uvicorn myapp:app
"""

from parkway.errors import MissingExtraError

try:  # (one message naming the extra, not a bare ModuleNotFoundError from deep inside)
    import pydantic  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:
    raise MissingExtraError("http", "parkway.http", exc.name or str(exc)) from exc

from parkway.http.app import create_app, lifespan
from parkway.limits import MAX_BODY_BYTES

__all__ = ["MAX_BODY_BYTES", "create_app", "lifespan"]
