"""The dashboard: one self-contained HTML page (inline CSS and vanilla JS, no CDN, no build).

The page holds no data: its script calls the JSON API with the token the
operator pasted (kept in ``sessionStorage``), so it is safe to serve to anyone.
"""

from __future__ import annotations

import functools
from importlib import resources

from starlette.responses import Response

# Inline script and style only, calls to this origin only, never framed.
_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@functools.cache
def page() -> bytes:
    """The dashboard's HTML."""
    return resources.files("parkway.http").joinpath("static/dashboard.html").read_bytes()


def dashboard_response(status: int = 200) -> Response:
    """The page as a response (also sent with 401 when a token is required but missing)."""
    return Response(page(), status, _SECURITY_HEADERS, media_type="text/html; charset=utf-8")
