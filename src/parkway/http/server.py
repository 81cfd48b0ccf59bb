"""``parkway serve``: the engine with its worker, and uvicorn serving the API, in one process.

SIGTERM or SIGINT stops it gracefully: the server stops accepting, answers the
requests in flight, then the worker lets in-flight runs finish (up to
``grace``) and the store is closed. A second signal stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import math
import signal
import socket
from collections.abc import Callable, Collection, Iterator

import uvicorn
from sse_starlette.sse import AppStatus

from parkway.engine import Engine
from parkway.errors import ParkwayError
from parkway.http.access import AccessLog
from parkway.http.app import create_app
from parkway.http.guards import host_name

# Addresses that listen on every interface.
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


class ForcedStopError(Exception):
    """A second stop signal arrived during the graceful shutdown.

    Not a ParkwayError: the CLI reports it as a forced stop, not as a failure.
    """


class _Server(uvicorn.Server):
    # uvicorn re-raises the signal it caught once it has stopped, which would
    # kill the process before the engine is closed and exit with -15, not 0.
    # The signals are ours to handle (see serve()).
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind(host: str, port: int) -> socket.socket:
    """Listen on ``host:port`` now, so that a taken port is reported before anything starts.

    Raises:
        ParkwayError: The address cannot be bound (taken, not local, no permission).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise ParkwayError(f"cannot listen on {host}:{port}: {exc}") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ParkwayError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
            "pick another --port or stop the process that holds it"
        ) from exc
    return sock


def served_hosts(host: str, allowed: Collection[str] = ()) -> frozenset[str] | None:
    """The ``Host`` names a server listening on ``host`` answers (besides IP
    addresses and ``localhost``, always answered): ``host`` itself, the machine's
    names when it listens on every interface, and ``allowed``. ``None`` (any
    name) when ``allowed`` holds ``"*"``."""
    extra = {host_name(name) for name in allowed}
    if "*" in extra:
        return None
    names = {host_name(host), *extra}
    if host in _WILDCARDS:
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(names - {""})


def exposure_warning(host: str, token: str | None) -> str | None:
    """A warning for a server anyone on the network may steer: it listens beyond
    the loopback interface and requires no token."""
    if token:
        return None
    if host == "localhost" or _is_loopback(host):
        return None
    where = "every interface" if host in _WILDCARDS else host
    return (
        f"warning: listening on {where} with no PARKWAY_API_TOKEN set: anyone who can "
        "reach it can start, signal and cancel runs and read their data; set "
        "PARKWAY_API_TOKEN, or serve on 127.0.0.1"
    )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def serve(
    engine: Engine,
    sock: socket.socket,
    *,
    grace: float,
    log_level: str,
    on_listening: Callable[[str], None],
    allowed_hosts: Collection[str] | None = None,
    log_polls: bool = False,
) -> str:
    """Run ``engine`` (with its worker) and the HTTP API on ``sock`` until a stop signal.

    uvicorn's log lines go to the handlers this process configured (one format
    for all); each request is logged on ``parkway.access`` (see :class:`AccessLog`).

    Args:
        allowed_hosts: The ``Host`` names answered (see :func:`served_hosts`);
            ``None``: any.
        log_polls: Log the dashboard's own polling requests too.

    Returns:
        The name of the signal that stopped it.

    Raises:
        ForcedStopError: A second signal came before the graceful stop ended.
    """
    app = AccessLog(create_app(engine, allowed_hosts=allowed_hosts), polls=log_polls)
    config = uvicorn.Config(
        app,
        log_level=log_level,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=max(1, math.ceil(grace)),
        server_header=False,
    )
    server = _Server(config)
    loop = asyncio.get_running_loop()
    received: list[str] = []
    main = asyncio.current_task()

    def on_signal(signum: signal.Signals) -> None:
        received.append(signum.name)
        if server.should_exit and main is not None:
            server.force_exit = True
            main.cancel()
        server.should_exit = True
        # Open event streams (GET /runs/{id}/streams/{key}) end now, so the graceful
        # stop does not wait for them: their clients reconnect with Last-Event-ID to
        # another server. (sse-starlette cannot see these signals, which are ours.)
        AppStatus.should_exit = True

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await engine.open()
        try:
            serving = asyncio.create_task(server.serve(sockets=[sock]))
            # uvicorn offers no event for "listening"; it sets .started once it is.
            while not server.started and not serving.done():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            if server.started:
                host, port = sock.getsockname()[:2]
                on_listening(f"http://{host if ':' not in host else f'[{host}]'}:{port}")
            await serving
        finally:
            await engine.close(grace=0 if server.force_exit else grace)
    except asyncio.CancelledError:
        raise ForcedStopError(" then ".join(received)) from None
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        sock.close()
        AppStatus.should_exit = False  # (process-wide: a later server in it streams again)
    return received[0] if received else "server exit"
