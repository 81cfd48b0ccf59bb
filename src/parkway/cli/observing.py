"""What ``parkway worker`` and ``parkway serve`` show an operator: their log lines
(text or JSON, parkway's and uvicorn's alike) and, on ``worker --metrics-port``,
Prometheus's ``/metrics``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from datetime import UTC, datetime
from typing import Any

import click
import orjson

from parkway.engine import Engine
from parkway.errors import MetricsDisabledError, ParkwayError

log = logging.getLogger("parkway.cli")

LOG_LEVELS = ["debug", "info", "warning", "error"]
LOG_FORMATS = ["text", "json"]

# What every LogRecord has: the rest of a record's attributes are its structured
# fields (``extra=``), which the JSON format prints as they are.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # (uvicorn's coloured copy of the message)
}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time``, ``level``, ``logger``, ``message``, the
    record's structured fields, and ``traceback`` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                data[key] = value
        if record.exc_info:
            data["traceback"] = self.formatException(record.exc_info)
        elif record.exc_text:
            data["traceback"] = record.exc_text
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(data, default=repr, option=orjson.OPT_NON_STR_KEYS).decode()


_format = "text"  # the format configure_logging set, which say() follows


def configure_logging(level: str, fmt: str) -> None:
    """Every log line of this process (parkway's, uvicorn's, the application's) to
    stderr, at ``level`` and up, in format ``fmt`` (``text`` or ``json``)."""
    global _format
    _format = fmt
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())


def say(message: str, level: int = logging.INFO) -> None:
    """A command's own line on stderr (started, listening, stopped): at any log level,
    as a JSON object when the logs are (so that every line of the stream parses), at
    ``level`` there (a warning, ``logging.WARNING``)."""
    if _format == "json":
        record = logging.makeLogRecord(
            {
                "name": "parkway.cli",
                "levelno": level,
                "levelname": logging.getLevelName(level),
                "msg": message,
            }
        )
        message = JsonFormatter().format(record)
    click.echo(message, err=True)


# -- /metrics for a worker -------------------------------------------------------------------

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_REQUEST_LIMIT = 16 * 1024  # a scrape's request head is a few hundred bytes
_READ_TIMEOUT = 10.0


async def serve_metrics(engine: Engine, host: str, port: int) -> asyncio.Server:
    """Answer ``GET /metrics`` on ``host:port`` with ``engine``'s metrics, on the
    engine's own loop (each scrape reads the store's gauges there).

    Raises:
        ParkwayError: The address cannot be bound.
    """

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = b""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT)
            status, body, content_type = await _answer(engine, head)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            status, body, content_type = 400, b"bad request\n", "text/plain; charset=utf-8"
        except Exception:  # a bug, not the scraper's fault: answered, and logged
            log.exception("metrics: the scrape failed")
            status, body, content_type = 500, b"internal error\n", "text/plain; charset=utf-8"
        try:
            writer.write(
                f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + (b"" if head.startswith(b"HEAD ") else body)
            )
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    try:
        return await asyncio.start_server(handle, host, port, limit=_REQUEST_LIMIT)
    except OSError as exc:
        raise ParkwayError(
            f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}; "
            "pick another --metrics-port"
        ) from exc


async def _answer(engine: Engine, head: bytes) -> tuple[int, bytes, str]:
    text = "text/plain; charset=utf-8"
    parts = head.split(b"\r\n", 1)[0].split()
    if len(parts) != 3:
        return 400, b"bad request\n", text
    method, target = parts[0], parts[1]
    if target.split(b"?", 1)[0] != b"/metrics":
        return 404, b"not found: metrics are at /metrics\n", text
    if method not in (b"GET", b"HEAD"):
        return 405, b"method not allowed: GET /metrics\n", text
    try:
        body, content_type = await engine.render_metrics()
    except MetricsDisabledError as exc:
        return 404, f"{exc}\n".encode(), text
    except ParkwayError as exc:  # the store does not answer: the scrape says so
        return 503, f"{type(exc).__name__}: {exc}\n".encode(), text
    return 200, body, content_type
