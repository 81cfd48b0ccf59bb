"""parkway over HTTP: a JSON API and a dashboard, as a Starlette app.

Needs the ``http`` extra (``pip install 'parkway[http]'``). Serve it with
``parkway serve module:engine``, or mount :func:`create_app` in your own ASGI
server::

    from parkway.http import create_app
    app = create_app(engine)  # uvicorn myapp:app
"""

from parkway.http.app import create_app
from parkway.http.schemas import MAX_BODY_BYTES

__all__ = ["MAX_BODY_BYTES", "create_app"]
