"""What the commands share: parameter types, loading APP, running a client."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import importlib
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import click
import orjson

from parkway import _json, limits
from parkway.durations import to_seconds
from parkway.engine import Engine
from parkway.errors import (
    InvalidDurationError,
    MessageNotFoundError,
    ParkwayError,
    ResultTimeoutError,
    RunNotFoundError,
    shown,
)
from parkway.models import RunStatus

T = TypeVar("T")

STATUSES = [s.value for s in RunStatus]

if TYPE_CHECKING:  # click.ParamType is generic only since click 8.4
    _ParamType = click.ParamType[Any]
else:
    _ParamType = click.ParamType


# -- parameter types -------------------------------------------------------------------------


class AppType(_ParamType):
    """``module:attribute`` naming a :class:`parkway.Engine`; converts to the engine."""

    name = "APP"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Engine):
            return value
        return load_app(str(value), lambda message: self.fail(message, param, ctx))


class JSONType(_ParamType):
    """A JSON document given on the command line."""

    name = "JSON"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            document = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            self.fail(
                f"{shown(value)} is not valid JSON ({exc}); a string needs quotes: '\"text\"'",
                param,
                ctx,
            )
        wide = _json.wide_integer(value)
        if wide is not None:  # (orjson would have made it a float: a silent change)
            path, text = wide
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
            self.fail(
                f"the integer {text} at ${where} is outside the 64-bit range parkway stores "
                "(-2**63 to 2**64 - 1); give it as a string",
                param,
                ctx,
            )
        return document


class DurationType(_ParamType):
    """Seconds, or a duration such as ``500ms``, ``10s``, ``2m``."""

    name = "DURATION"

    def __init__(self, *, allow_zero: bool = False) -> None:
        self.allow_zero = allow_zero

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float):
            return value
        text = str(value).strip()
        try:  # (ASCII digits: \d would read "٣" as 3)
            seconds = to_seconds(float(text) if re.fullmatch(r"[0-9]+(\.[0-9]+)?", text) else text)
        except InvalidDurationError:
            self.fail(
                f"{value!r} is not a duration of at most 100 years; use seconds or 500ms, 10s, 2m",
                param,
                ctx,
            )
        if seconds < 0 or (seconds == 0 and not self.allow_zero):
            self.fail(f"{value!r} must be longer than zero", param, ctx)
        return seconds


class MessageIdType(_ParamType):
    """The id of a buffered message: a whole number in ASCII digits."""

    name = "ID"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int):
            return value
        if not limits.ascii_digits(str(value)):  # (int() takes "٣" as 3)
            self.fail(f"{value!r} is not a message id (a number)", param, ctx)
        return int(value)


APP = AppType()
MESSAGE_ID = MessageIdType()
JSON = JSONType()
DURATION = DurationType()
TTL = DurationType(allow_zero=True)


def load_app(spec: str, fail: Callable[[str], Any]) -> Engine:
    """Import ``module:attribute`` (dots allowed in both) and return the Engine it names."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        fail(f"{spec!r} is not of the form module:attribute (for example myapp:engine)")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
            fail(f"cannot import module {module_name!r} of {spec!r}: no such module in {cwd}")
        fail(f"importing module {module_name!r} of {spec!r} failed: {type(exc).__name__}: {exc}")
    except Exception as exc:
        fail(f"importing module {module_name!r} of {spec!r} failed: {type(exc).__name__}: {exc}")
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            fail(f"module {module_name!r} has no attribute {attr!r} (from {spec!r})")
        obj = getattr(obj, part)
    if not isinstance(obj, Engine):
        fail(f"{spec!r} is not a parkway Engine (it is of type {type(obj).__name__})")
    engine: Engine = obj
    return engine


# -- plumbing --------------------------------------------------------------------------------


def cli_message(exc: ParkwayError) -> str:
    """The error's message for someone at the command line: where the engine's hint
    names a Python call, the command that does the same."""
    if isinstance(exc, RunNotFoundError):
        return f"no run with id {exc.run_id!r}; list runs with `parkway runs`"
    if isinstance(exc, MessageNotFoundError):
        return (
            f"no buffered message or dead letter with id {exc.message_id!r}; "
            "list them with `parkway messages`"
        )
    if isinstance(exc, ResultTimeoutError):
        return (
            f"run {exc.run_id!r} did not finish within {exc.timeout:g}s; it goes on in the "
            f"background (check it with `parkway show {exc.run_id}`)"
        )
    return str(exc)


def run(coro: Coroutine[Any, Any, T], *, wait_for_threads: bool = True) -> T:
    """Run ``coro``; a ParkwayError becomes a one-line error and exit code 1.

    ``wait_for_threads=False`` does not wait, at the end, for threads still
    running sync steps (``asyncio.run`` would, for as long as they take).
    """
    if wait_for_threads:
        try:
            return asyncio.run(coro)
        except ParkwayError as exc:
            raise click.ClickException(cli_message(exc)) from exc
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    except ParkwayError as exc:
        raise click.ClickException(cli_message(exc)) from exc
    finally:
        try:
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()  # shuts the default executor down without waiting


def os_user() -> str | None:
    """Who runs this command: the OS user (the ``by`` of the operator actions it
    records), ``None`` when the system cannot say (no such user, a bare container)."""
    try:
        return getpass.getuser() or None
    except (KeyError, OSError):
        return None


def print_json(value: Any) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())


def engine_for(ctx: click.Context, app: Engine | None, *, existing_db: bool = False) -> Engine:
    """The app's engine (retargeted by ``--url``), or a bare client engine on ``--url``."""
    url: str | None = ctx.obj.get("url")
    try:
        engine = app if app is not None else Engine(url, worker=False)
        if app is not None and url is not None:
            _retarget(engine, url)
    except ParkwayError as exc:  # a malformed or unsupported url
        raise click.ClickException(str(exc)) from exc
    if existing_db:
        _require_database(engine.url)
    return engine


def _retarget(engine: Engine, url: str) -> None:
    if engine.is_open:
        raise click.UsageError("--url cannot change an engine that is already open")
    engine.configure(url=url)


def _require_database(url: str) -> None:
    """Reading commands must not create an empty database by mistake (wrong folder, typo)."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and url != prefix + ":memory:":
        path = url[len(prefix) :]
        if path and not os.path.exists(path):
            raise click.ClickException(
                f"no parkway database at {path!r} (url {url}); "
                "pass --url, set PARKWAY_URL, or run from the folder that holds it"
            )


def as_client(
    ctx: click.Context,
    app: Engine | None,
    action: Callable[[Engine], Coroutine[Any, Any, Any]],
    *,
    existing_db: bool = False,
    show: Callable[[Any], None] = print_json,
) -> None:
    """Run ``action`` on the engine opened as a client only; ``show`` its result
    (default: as JSON)."""
    engine = engine_for(ctx, app, existing_db=existing_db)

    async def go() -> Any:
        async with _client(engine):
            return await action(engine)

    show(run(go()))


def print_table(rows: list[list[str]], headers: list[str], *, empty: str) -> None:
    """Rows as aligned columns under ``headers`` (``empty`` when there is none)."""
    if not rows:
        click.echo(empty)
        return
    cells = [headers, *([_cell(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _cell(value: str) -> str:
    # One line a row, whatever a name or key holds (control characters shown escaped).
    text = value if value.isprintable() else value.encode("unicode_escape").decode("ascii")
    return text if len(text) <= 60 else text[:59] + "…"


def when(value: Any) -> str:
    """A timestamp of a record (ISO 8601) as a table shows it: to the second, in UTC."""
    if not value:
        return "-"
    return str(value)[:19].replace("T", " ")


def store_url(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """``--url`` given after the command name: the same as before it (it wins)."""
    if value is not None:
        ctx.ensure_object(dict)
        ctx.obj["url"] = value


def url_option() -> click.Option:
    """The ``--url`` every command takes after its name too (see :func:`store_url`)."""
    return click.Option(
        ["--url"],
        metavar="URL",
        expose_value=False,
        callback=store_url,
        is_eager=True,
        help="Store URL: sqlite:///path.db, postgresql://user@host/db or memory:// "
        "(as `parkway --url URL COMMAND`).",
    )


@contextlib.asynccontextmanager
async def _client(engine: Engine) -> AsyncIterator[Engine]:
    """Open ``engine`` as a client only (no worker) for the duration of one command."""
    engine.run_worker = False
    await engine.open()
    try:
        yield engine
    finally:
        await engine.close()


def redact(url: str) -> str:
    return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", url)
