"""The ``parkway`` command line (also ``python -m parkway``).

``APP`` names an engine the way uvicorn names an app: ``module:attribute``,
imported with the current directory on ``sys.path``. Commands that inspect or
steer runs print JSON on stdout; errors go to stderr with a non-zero exit code.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import click
import orjson

from parkway import limits
from parkway.durations import to_seconds
from parkway.engine import Engine
from parkway.errors import InvalidDurationError, ParkwayError
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
            return orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            self.fail(
                f"{value!r} is not valid JSON ({exc}); a string needs quotes: '\"text\"'",
                param,
                ctx,
            )


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


def _run(coro: Coroutine[Any, Any, T], *, wait_for_threads: bool = True) -> T:
    """Run ``coro``; a ParkwayError becomes a one-line error and exit code 1.

    ``wait_for_threads=False`` does not wait, at the end, for threads still
    running sync steps (``asyncio.run`` would, for as long as they take).
    """
    if wait_for_threads:
        try:
            return asyncio.run(coro)
        except ParkwayError as exc:
            raise click.ClickException(str(exc)) from exc
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    except ParkwayError as exc:
        raise click.ClickException(str(exc)) from exc
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


def _print_json(value: Any) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())


def _engine_for(ctx: click.Context, app: Engine | None, *, existing_db: bool = False) -> Engine:
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
    # The store is built in Engine.__init__; swap it while the engine is still closed.
    if engine._open:
        raise click.UsageError("--url cannot change an engine that is already open")
    engine.url = url  # read again by Engine.open()


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


def _as_client(
    ctx: click.Context,
    app: Engine | None,
    action: Callable[[Engine], Coroutine[Any, Any, Any]],
    *,
    existing_db: bool = False,
) -> None:
    """Run ``action`` on the engine opened as a client only; print its result as JSON."""
    engine = _engine_for(ctx, app, existing_db=existing_db)

    async def go() -> Any:
        async with _client(engine):
            return await action(engine)

    _print_json(_run(go()))


@contextlib.asynccontextmanager
async def _client(engine: Engine) -> AsyncIterator[Engine]:
    """Open ``engine`` as a client only (no worker) for the duration of one command."""
    engine.run_worker = False
    await engine.open()
    try:
        yield engine
    finally:
        await engine.close()


def _redact(url: str) -> str:
    return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", url)


# -- commands --------------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    metavar="URL",
    help="Store URL (sqlite:///path.db, memory://); overrides PARKWAY_URL and the APP's url.",
)
@click.version_option(package_name="parkway", prog_name="parkway")
@click.pass_context
def cli(ctx: click.Context, url: str | None) -> None:
    """parkway: durable workflows that park on timers, signals and events.

    APP is module:attribute naming your Engine, e.g. `myapp:engine`
    (imported with the current directory on the path).
    """
    ctx.ensure_object(dict)
    ctx.obj["url"] = url


@cli.command(short_help="Play a short scenario: runs park, survive a restart, resume.")
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Play a short scenario on SQLite: orders park, survive a restart, resume.

    Writes parkway-demo.db in the current directory (recreated every time;
    --url does not apply).
    """
    from parkway.demo import run_demo

    if ctx.obj.get("url") is not None:
        click.echo("note: --url is ignored; the demo always uses ./parkway-demo.db", err=True)

    _run(run_demo(".", say=click.echo))


@cli.command()
@click.argument("app", type=APP)
@click.option("--concurrency", type=click.IntRange(min=1), default=None,
              help="Runs advanced at once (default: the engine's, 16).")  # fmt: skip
@click.option("--lease", type=DURATION, default=None,
              help="Seconds a worker owns a run before another may take it over "
                   "(renewed while alive; default: the engine's, 30).")  # fmt: skip
@click.option("--grace", type=DURATION, default=30.0, show_default=True,
              help="Seconds in-flight runs get to finish on shutdown.")  # fmt: skip
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info", show_default=True)  # fmt: skip
@click.pass_context
def worker(
    ctx: click.Context,
    app: Engine,
    concurrency: int | None,
    lease: float | None,
    grace: float,
    log_level: str,
) -> None:
    """Run APP's worker until SIGTERM or SIGINT, then stop gracefully.

    In-flight runs finish (up to --grace) or are released for another worker.
    A second signal stops at once; the runs then move on once their lease expires.
    """
    engine = _working_engine(ctx, app, log_level, concurrency)
    if lease is not None:
        engine.lease = lease
    code = 0
    try:
        message = f"stopped ({_run(_work(engine, grace), wait_for_threads=False)})"
    except _Forced as exc:
        code, message = 1, f"stopped at once ({exc}); leases expire on their own"
    _exit("worker", message, code)


def _working_engine(
    ctx: click.Context, app: Engine, log_level: str, concurrency: int | None
) -> Engine:
    """APP's engine set to run its worker here (``worker`` and ``serve``), with logging on."""
    logging.basicConfig(
        level=log_level.upper(), stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )  # fmt: skip
    engine = _engine_for(ctx, app)
    engine.run_worker = True
    if concurrency is not None:
        engine.concurrency = concurrency
    return engine


def _exit(command: str, message: str, code: int) -> None:
    """Report how ``command`` stopped and leave, without waiting for stuck step threads."""
    stuck = _busy_threads()
    if stuck:
        message += f"; abandoned {len(stuck)} step(s) still running, their runs will be retried"
    click.echo(f"parkway {command}: {message}, pid {os.getpid()}", err=True)
    if stuck:
        # A sync step past the grace period must not hold the process: Python would
        # join its thread at exit. Its run was released (or its lease will expire).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _busy_threads(settle: float = 0.2) -> list[threading.Thread]:
    """Threads still running a step; idle executor threads exit once the loop is closed."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    for thread in others:
        thread.join(settle / max(1, len(others)))
    return [t for t in others if t.is_alive()]


class _Forced(Exception):
    """A second stop signal arrived during the graceful shutdown."""


async def _work(engine: Engine, grace: float) -> str:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[str] = []
    main = asyncio.current_task()

    def on_signal(signum: signal.Signals) -> None:
        received.append(signum.name)
        if stop.is_set() and main is not None:
            main.cancel()
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    await engine.open()
    click.echo(
        f"parkway worker: started on {_redact(engine.url)} (pid {os.getpid()}, "
        f"concurrency {engine.concurrency}, lease {engine.lease:g}s)",
        err=True,
    )
    try:
        await stop.wait()
        await engine.close(grace=grace)
    except asyncio.CancelledError:
        raise _Forced(" then ".join(received)) from None
    return received[0]


@cli.command()
@click.argument("workflow")
@click.argument("input", metavar="JSON", type=JSON, default="null")
@click.option("--id", "run_id", help="Run id (default: random); an existing id returns that run.")
@click.option("--subject", help="The business entity the run is about, e.g. client:5.")
@click.option("--domain", help="The run's domain (default: 'default').")
@click.option(
    "--app",
    type=APP,
    help="module:attribute of the Engine that defines WORKFLOW (without it: --url/PARKWAY_URL, "
    "and a worker that has WORKFLOW validates the input).",
)
@click.option("--wait", is_flag=True, help="Wait for the run to finish (a worker must be running).")
@click.option("--timeout", type=DURATION, default=None, help="With --wait: give up after it.")
@click.pass_context
def start(
    ctx: click.Context,
    workflow: str,
    input: Any,
    run_id: str | None,
    subject: str | None,
    domain: str | None,
    app: Engine | None,
    wait: bool,
    timeout: float | None,
) -> None:
    """Start a run of WORKFLOW with input JSON and print it.

    With --app, the engine's registration decides the version and validates the
    input here; without it, the run goes to the store of --url/PARKWAY_URL and
    the worker that first runs it takes its latest version and validates it.
    """

    async def action(engine: Engine) -> dict[str, Any]:
        if app is None:
            handle = await engine._start_unregistered(
                workflow, input, id=run_id, subject=subject, domain=domain
            )
        else:
            handle = await engine.start(workflow, input, id=run_id, subject=subject, domain=domain)
        if wait:
            try:
                await handle.result(timeout=timeout)
            except ParkwayError as exc:
                _print_json((await handle.info()).to_dict())
                raise exc
        return (await handle.info()).to_dict()

    # Without the app, the run goes to a store that must exist already: a typo in the
    # folder or the url must not start a run in a fresh database nobody works on.
    _as_client(ctx, app, action, existing_db=app is None)


@cli.command("signal")
@click.argument("run_id", metavar="RUN")
@click.argument("name")
@click.argument("payload", metavar="JSON", type=JSON, default="null")
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def signal_(ctx: click.Context, run_id: str, name: str, payload: Any, app: Engine | None) -> None:
    """Send signal NAME with payload JSON to run RUN."""

    async def action(engine: Engine) -> dict[str, Any]:
        await engine.signal(run_id, name, payload)
        info = await engine.get_run(run_id)
        return {"run": run_id, "signal": name, "payload": payload, "status": info.status.value}

    _as_client(ctx, app, action, existing_db=True)


@cli.command()
@click.option("--workflow", help="Only runs of this workflow.")
@click.option("--status", type=click.Choice(STATUSES), help="Only runs in this status.")
@click.option("--subject", help="Only runs about this subject.")
@click.option("--domain", help="Only runs in this domain.")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def runs(
    ctx: click.Context,
    workflow: str | None,
    status: str | None,
    subject: str | None,
    domain: str | None,
    limit: int,
    app: Engine | None,
) -> None:
    """List runs, newest first, as JSON."""

    async def action(engine: Engine) -> list[dict[str, Any]]:
        found = await engine.list_runs(
            workflow=workflow, status=status, subject=subject, domain=domain, limit=limit
        )
        return [r.to_dict() for r in found]

    _as_client(ctx, app, action, existing_db=True)


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def show(ctx: click.Context, run_id: str, app: Engine | None) -> None:
    """Show run RUN and its history as JSON."""

    async def action(engine: Engine) -> dict[str, Any]:
        info = await engine.get_run(run_id)
        history = await engine.history(run_id)
        return {**info.to_dict(), "history": [e.to_dict() for e in history]}

    _as_client(ctx, app, action, existing_db=True)


@cli.command()
@click.argument("name")
@click.argument("payload", metavar="JSON", type=JSON, default="null")
@click.option("--id", "event_id", help="Event id (default: random); a repeat is a duplicate.")
@click.option("--domain", help="The event's domain (else the engine's extractor, else default).")
@click.option("--subject", help="What the event is about, e.g. product:456.")
@click.option(
    "--app",
    type=APP,
    help="module:attribute of the Engine: its workflows decide what starts (without it, "
    "only parked runs are resumed, from --url/PARKWAY_URL).",
)
@click.pass_context
def publish(
    ctx: click.Context,
    name: str,
    payload: Any,
    event_id: str | None,
    domain: str | None,
    subject: str | None,
    app: Engine | None,
) -> None:
    """Publish event NAME with payload JSON; print the PublishResult."""
    if app is None:
        click.echo(
            "note: no --app, so no workflow is started by this event (waiting runs are "
            "resumed); pass --app module:engine to start its subscribers",
            err=True,
        )

    async def action(engine: Engine) -> dict[str, Any]:
        result = await engine.publish(name, payload, id=event_id, domain=domain, subject=subject)
        return result.to_dict()

    _as_client(ctx, app, action)


@cli.command()
@click.argument("name")
@click.argument("key")
@click.argument("payload", metavar="JSON", type=JSON, default="null")
@click.option("--message-id", help="De-duplication id of this message.")
@click.option(
    "--ttl",
    type=TTL,
    default=None,
    help="How long to buffer it if no run waits (default: the engine's message_ttl).",
)
@click.option(
    "--app",
    type=APP,
    help="module:attribute of the Engine: its workflows decide what starts (without it, "
    "only parked runs are resumed, from --url/PARKWAY_URL).",
)
@click.pass_context
def correlate(
    ctx: click.Context,
    name: str,
    key: str,
    payload: Any,
    message_id: str | None,
    ttl: float | None,
    app: Engine | None,
) -> None:
    """Correlate message NAME with business KEY and payload JSON to exactly one run."""
    if app is None:
        click.echo(
            "note: no --app, so no workflow is started by this message (a waiting run gets "
            "it, else it is buffered); pass --app module:engine for message starts",
            err=True,
        )

    async def action(engine: Engine) -> dict[str, Any]:
        result = await engine.correlate(name, key, payload, message_id=message_id, ttl=ttl)
        return result.to_dict()

    _as_client(ctx, app, action)


@cli.group(invoke_without_command=True)
@click.option(
    "--status",
    type=click.Choice(["buffered", "expired"]),
    help="Only buffered messages, or only dead letters.",
)
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def messages(ctx: click.Context, status: str | None, app: Engine | None) -> None:
    """List buffered messages and dead letters; `retry` or `discard` one by id."""
    ctx.obj["messages_app"] = app
    if ctx.invoked_subcommand is not None:
        return

    async def action(engine: Engine) -> list[dict[str, Any]]:
        return [m.to_dict() for m in await engine.messages(status=status)]

    _as_client(ctx, app, action, existing_db=True)


@messages.command("retry")
@click.argument("message_id", metavar="ID", type=MESSAGE_ID)
@click.option("--ttl", type=TTL, default=None, help="Buffer it again this long if unmatched.")
@click.option("--app", type=APP, help="module:attribute of the Engine (needed to start runs).")
@click.pass_context
def messages_retry(
    ctx: click.Context, message_id: int, ttl: float | None, app: Engine | None
) -> None:
    """Correlate buffered message or dead letter ID again."""

    async def action(engine: Engine) -> dict[str, Any]:
        return (await engine.retry_message(message_id, ttl=ttl)).to_dict()

    _as_client(ctx, app or ctx.obj.get("messages_app"), action, existing_db=True)


@messages.command("discard")
@click.argument("message_id", metavar="ID", type=MESSAGE_ID)
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def messages_discard(ctx: click.Context, message_id: int, app: Engine | None) -> None:
    """Delete buffered message or dead letter ID for good."""

    async def action(engine: Engine) -> dict[str, Any]:
        await engine.discard_message(message_id)
        return {"discarded": message_id}

    _as_client(ctx, app or ctx.obj.get("messages_app"), action, existing_db=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``parkway`` script and ``python -m parkway``."""
    cli.main(args=argv, prog_name="parkway")


__all__ = ["cli", "load_app", "main"]


# -- flows -----------------------------------------------------------------------------------


@cli.group()
def flows() -> None:
    """JSON flows: check definitions before they are deployed."""


@flows.command("validate")
@click.argument("file", metavar="FILE", type=click.Path(dir_okay=False))
@click.option(
    "--app",
    type=APP,
    help="module:attribute of the Engine: also check its custom node types and action handlers.",
)
def flows_validate(file: str, app: Engine | None) -> None:
    """Check flow definition FILE; print OK with its size, or what is wrong (exit 1)."""
    from parkway.flows import load

    try:
        if app is None:
            flow = load(file)
        else:
            flow = load(file, node_models=app.node_models, actions=app._flow_actions)
    except ParkwayError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"OK: flow {flow.id!r}: {len(flow.nodes)} nodes, {len(flow.edges)} edges")


# -- serve -----------------------------------------------------------------------------------


@cli.command()
@click.argument("app", type=APP)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port to listen on (0: any free port, printed at start).")  # fmt: skip
@click.option("--concurrency", type=click.IntRange(min=1), default=None,
              help="Runs advanced at once (default: the engine's, 16).")  # fmt: skip
@click.option("--grace", type=DURATION, default=30.0, show_default=True,
              help="Seconds in-flight requests and runs get to finish on shutdown.")  # fmt: skip
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info", show_default=True)  # fmt: skip
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Also answer requests for this Host name (a DNS name the server is "
              "reached by, behind a proxy say); '*' answers any. Repeatable.")  # fmt: skip
@click.pass_context
def serve(
    ctx: click.Context,
    app: Engine,
    host: str,
    port: int,
    concurrency: int | None,
    grace: float,
    log_level: str,
    allow_hosts: tuple[str, ...],
) -> None:
    """Serve APP's JSON API and dashboard over HTTP, with its worker, until SIGTERM or SIGINT.

    Routes are described at /openapi.json; the dashboard is at /. With
    PARKWAY_API_TOKEN set, every route but /healthz needs
    `Authorization: Bearer <token>`. Requests must name this server in their Host
    header (its address, an IP address, localhost, or an --allow-host name), a guard
    against DNS rebinding. Needs the http extra: pip install 'parkway[http]'.
    """
    missing = [m for m in ("starlette", "uvicorn", "pydantic") if not _importable(m)]
    if missing:
        raise click.ClickException(
            f"parkway serve needs the http extra ({', '.join(missing)} not installed): "
            "pip install 'parkway[http]'"
        )
    from parkway.http.server import ForcedStopError, bind, exposure_warning, served_hosts
    from parkway.http.server import serve as serve_http

    engine = _working_engine(ctx, app, log_level, concurrency)
    try:
        sock = bind(host, port)
    except ParkwayError as exc:
        raise click.ClickException(str(exc)) from exc
    token = os.environ.get("PARKWAY_API_TOKEN")
    auth = "token required" if token else "no token required"
    warning = exposure_warning(host, token)
    if warning is not None:
        click.echo(f"parkway serve: {warning}", err=True)

    def listening(url: str) -> None:
        click.echo(
            f"parkway serve: listening on {url} ({auth}), store {_redact(engine.url)}, "
            f"pid {os.getpid()}",
            err=True,
        )

    code = 0
    try:
        coro = serve_http(
            engine, sock, grace=grace, log_level=log_level, on_listening=listening,
            allowed_hosts=served_hosts(host, allow_hosts),
        )  # fmt: skip
        message = f"stopped ({_run(coro, wait_for_threads=False)})"
    except ForcedStopError as exc:
        code, message = 1, f"stopped at once ({exc}); leases expire on their own"
    _exit("serve", message, code)


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
