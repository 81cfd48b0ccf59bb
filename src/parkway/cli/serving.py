"""``parkway worker`` and ``parkway serve``: an APP's worker (and HTTP API) until stopped."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
import sys
import threading

import click

from parkway.cli.common import APP, DURATION, engine_for, redact, run
from parkway.cli.group import cli
from parkway.cli.observing import (
    LOG_FORMATS,
    LOG_LEVELS,
    configure_logging,
    say,
    serve_metrics,
)
from parkway.engine import Engine
from parkway.errors import ParkwayError

LOG_LEVEL = click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS),
    default="info",
    show_default=True,
    help="Log lines at this level and up (runs' lifecycle is at info).",
)
LOG_FORMAT = click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default="text",
    show_default=True,
    help="text, or json: one JSON object a line, with each line's structured fields.",
)


@cli.command()
@click.argument("app", type=APP)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=None,
    help="Runs advanced at once (default: the engine's, 100).",
)
@click.option(
    "--lease",
    type=DURATION,
    default=None,
    help="Seconds a worker owns a run before another may take it over "
    "(renewed while alive; default: the engine's, 30).",
)
@click.option(
    "--grace",
    type=DURATION,
    default=30.0,
    show_default=True,
    help="Seconds in-flight runs get to finish on shutdown.",
)
@LOG_LEVEL
@LOG_FORMAT
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus metrics at http://HOST:PORT/metrics (0: any free "
    "port, printed at start). Needs the metrics extra.",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address the metrics listen on (0.0.0.0: every interface).",
)
@click.pass_context
def worker(
    ctx: click.Context,
    app: Engine,
    concurrency: int | None,
    lease: float | None,
    grace: float,
    log_level: str,
    log_format: str,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run APP's worker until SIGTERM or SIGINT, then stop gracefully.

    In-flight runs finish (up to --grace) or are released for another worker.
    A second signal stops at once; the runs then move on once their lease expires.
    Each run's start, parks, wakes, steps and end are logged at INFO; a failed
    step attempt at WARNING; a failed run at ERROR, with its traceback.
    """
    engine = _working_engine(ctx, app, log_level, log_format, concurrency)
    if lease is not None:
        engine.configure(lease=lease)
    if metrics_port is not None and not engine.metrics_enabled:
        try:
            engine.configure(metrics=True)
        except ParkwayError as exc:
            raise click.ClickException(f"--metrics-port: {exc}") from exc
    metrics = None if metrics_port is None else (metrics_host, metrics_port)
    code = 0
    try:
        message = f"stopped ({run(_work(engine, grace, metrics), wait_for_threads=False)})"
    except _Forced as exc:
        code, message = 1, f"stopped at once ({exc}); leases expire on their own"
    _exit("worker", message, code)


def _working_engine(
    ctx: click.Context, app: Engine, log_level: str, log_format: str, concurrency: int | None
) -> Engine:
    """APP's engine set to run its worker here (``worker`` and ``serve``), with logging on."""
    configure_logging(log_level, log_format)
    engine = engine_for(ctx, app)
    engine.configure(worker=True, concurrency=concurrency)
    return engine


def _exit(command: str, message: str, code: int) -> None:
    """Report how ``command`` stopped and leave, without waiting for stuck step threads."""
    stuck = _busy_threads()
    if stuck:
        message += f"; abandoned {len(stuck)} step(s) still running, their runs will be retried"
    say(f"parkway {command}: {message}, pid {os.getpid()}")
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


async def _work(engine: Engine, grace: float, metrics: tuple[str, int] | None) -> str:
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
    server = None
    try:
        if metrics is not None:
            server = await serve_metrics(engine, *metrics)
            host, port = server.sockets[0].getsockname()[:2]
            where = f"http://{host if ':' not in host else f'[{host}]'}:{port}/metrics"
            say(f"parkway worker: metrics at {where}")
    except ParkwayError:
        await engine.close(grace=0)
        raise
    say(
        f"parkway worker: started on {redact(engine.url)} (pid {os.getpid()}, "
        f"concurrency {engine.concurrency}, lease {engine.lease:g}s)"
    )
    try:
        await stop.wait()
        if server is not None:
            server.close()
        await engine.close(grace=grace)
    except asyncio.CancelledError:
        raise _Forced(" then ".join(received)) from None
    return received[0]


# -- serve -----------------------------------------------------------------------------------


@cli.command()
@click.argument("app", type=APP)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="Port to listen on (0: any free port, printed at start).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=None,
    help="Runs advanced at once (default: the engine's, 100).",
)
@click.option(
    "--grace",
    type=DURATION,
    default=30.0,
    show_default=True,
    help="Seconds in-flight requests and runs get to finish on shutdown.",
)
@LOG_LEVEL
@LOG_FORMAT
@click.option(
    "--log-polls",
    is_flag=True,
    help="Also log the dashboard's own polling requests (left out by default).",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also answer requests for this Host name (a DNS name the server is "
    "reached by, behind a proxy say); '*' answers any. Repeatable.",
)
@click.pass_context
def serve(
    ctx: click.Context,
    app: Engine,
    host: str,
    port: int,
    concurrency: int | None,
    grace: float,
    log_level: str,
    log_format: str,
    log_polls: bool,
    allow_hosts: tuple[str, ...],
) -> None:
    """Serve APP's JSON API and dashboard over HTTP, with its worker, until SIGTERM or SIGINT.

    Routes are described at /openapi.json; the dashboard is at /. With
    PARKWAY_API_TOKEN set, every route but /healthz needs
    `Authorization: Bearer <token>`; PARKWAY_API_TOKENS="alice:tok1,bob:tok2" names
    several, and each operator action is recorded as by its token's name. Requests
    must name this server in their Host header (its address, an IP address,
    localhost, or an --allow-host name), a guard against DNS rebinding. Prometheus
    metrics are at /metrics (with the metrics extra). Needs the http extra: pip
    install 'parkway[http]'.
    """
    missing = [m for m in ("starlette", "uvicorn", "pydantic") if not _importable(m)]
    if missing:
        raise click.ClickException(
            f"parkway serve needs the http extra ({', '.join(missing)} not installed): "
            "pip install 'parkway[http]'"
        )
    from parkway.http.server import ForcedStopError, bind, exposure_warning, served_hosts
    from parkway.http.server import serve as serve_http

    engine = _working_engine(ctx, app, log_level, log_format, concurrency)
    if not engine.metrics_enabled and _importable("prometheus_client"):
        engine.configure(metrics=True)
    try:
        sock = bind(host, port)
    except ParkwayError as exc:
        raise click.ClickException(str(exc)) from exc
    token = os.environ.get("PARKWAY_API_TOKEN") or os.environ.get("PARKWAY_API_TOKENS")
    auth = "token required" if token else "no token required"
    warning = exposure_warning(host, token)
    if warning is not None:
        say(f"parkway serve: {warning}", logging.WARNING)

    def listening(url: str) -> None:
        say(
            f"parkway serve: listening on {url} ({auth}), store {redact(engine.url)}, "
            f"pid {os.getpid()}"
        )

    code = 0
    try:
        coro = serve_http(
            engine,
            sock,
            grace=grace,
            log_level=log_level,
            on_listening=listening,
            allowed_hosts=served_hosts(host, allow_hosts),
            log_polls=log_polls,
        )
        message = f"stopped ({run(coro, wait_for_threads=False)})"
    except ForcedStopError as exc:
        code, message = 1, f"stopped at once ({exc}); leases expire on their own"
    _exit("serve", message, code)


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
