"""A ``postgresql://`` URL read into what the store needs, without connecting.

Apart from the store because it is pure parsing, with errors of its own: libpq's
syntax plus parkway's query parameters (``pool_size``, ``pool_timeout``,
``statement_timeout``), which are taken out before the URL reaches libpq.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from parkway.durations import to_seconds
from parkway.errors import InvalidDurationError, ParkwayError

# Parkway's own URL query parameters (removed before the URL reaches libpq).
DEFAULT_POOL_SIZE = 10
DEFAULT_POOL_TIMEOUT = 30.0
DEFAULT_STATEMENT_TIMEOUT = 30.0
# A session idle inside a transaction this long is ended by the server, so a
# frozen process cannot hold run locks forever (parkway never waits on user
# code inside a transaction).
IDLE_IN_TRANSACTION_TIMEOUT = 60.0


def parse(url: str) -> tuple[str, str, int, float]:
    """Parse ``url`` (libpq syntax plus parkway's parameters) into libpq's connection
    string, a display name without the password, and parkway's pool size and pool
    timeout.

    (A plain tuple: a dataclass would cost ~0.3 ms at every import of the store.)
    """
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in ("pool_size", "pool_timeout", "statement_timeout"):
            ours[key] = value
        else:
            rest.append((key, value))
    # Rebuilt by hand: urlunsplit would turn postgresql:///db into postgresql:/db.
    libpq_url = url.split("?", 1)[0] + (f"?{urlencode(rest, quote_via=quote)}" if rest else "")
    try:
        params = conninfo_to_dict(libpq_url)
    except psycopg.Error as exc:
        raise ParkwayError(
            f"bad PostgreSQL url {_redact(url)!r}: {exc}; write "
            "postgresql://user:password@host:5432/database"
        ) from exc
    try:
        pool_size = int(ours.get("pool_size", DEFAULT_POOL_SIZE))
        if pool_size < 1:
            raise ValueError
    except ValueError:
        raise ParkwayError(
            f"pool_size in {_redact(url)!r} must be a whole number >= 1, got {ours['pool_size']!r}"
        ) from None
    pool_timeout = _duration(ours.get("pool_timeout"), DEFAULT_POOL_TIMEOUT, "pool_timeout")
    statement_timeout = _duration(
        ours.get("statement_timeout"), DEFAULT_STATEMENT_TIMEOUT, "statement_timeout"
    )
    settings = (
        f"-c statement_timeout={round(statement_timeout * 1000)} "
        f"-c idle_in_transaction_session_timeout={round(IDLE_IN_TRANSACTION_TIMEOUT * 1000)}"
    )
    params["options"] = f"{params.get('options') or ''} {settings}".strip()
    params.setdefault("application_name", "parkway")
    params.setdefault("connect_timeout", "10")
    user = params.get("user") or "(default user)"
    where = f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}"
    display = f"{user}@{where}/{params.get('dbname') or '(default database)'}"
    return make_conninfo("", **params), display, pool_size, pool_timeout


def _duration(value: str | None, default: float, name: str) -> float:
    if value is None:
        return default
    try:
        return to_seconds(float(value) if _is_number(value) else value, name)
    except InvalidDurationError as exc:
        raise ParkwayError(f"{name} in the PostgreSQL url: {exc}") from exc


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
