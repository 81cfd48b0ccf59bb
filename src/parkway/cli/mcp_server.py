"""``parkway mcp APP``: a Model Context Protocol server over APP's engine."""

from __future__ import annotations

import os
from typing import Any

import click

from parkway.cli.common import APP, _client, engine_for, run
from parkway.cli.group import cli
from parkway.engine import Engine
from parkway.errors import MissingExtraError


def _host_port(value: str | None) -> tuple[str, int] | None:
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{value!r} is not HOST:PORT (say 127.0.0.1:8765)")
    return host.strip("[]"), int(port)


@cli.command("mcp")
@click.argument("app", type=APP)
@click.option(
    "--http",
    "http",
    metavar="HOST:PORT",
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.",
)
@click.pass_context
def mcp(ctx: click.Context, app: Engine, http: str | None) -> None:
    """Serve APP's runs and human tasks to AI agents over the Model Context Protocol.

    Its tools: list_runs, get_run, history, start, signal, publish, correlate,
    update, cancel, list_tasks, complete_task. Over stdio by default (what a
    desktop client launches); with --http, streamable HTTP at /mcp, which
    requires `Authorization: Bearer <token>` when PARKWAY_API_TOKEN is set. Needs
    the mcp extra: pip install 'parkway[mcp]'.
    """
    address = _host_port(http)
    try:
        from parkway.integrations.mcp import create_server
    except MissingExtraError as exc:
        raise click.ClickException(str(exc)) from exc
    engine = engine_for(ctx, app, existing_db=True)

    async def serve() -> None:
        async with _client(engine):
            server = create_server(engine)
            if address is None:
                await server.run_stdio_async()
            else:
                await _serve_http(server, *address)

    run(serve())


async def _serve_http(server: Any, host: str, port: int) -> None:
    import uvicorn

    from parkway.http.guards import TOKENS_ENV, TokenGuard, named_tokens

    # (The HTTP API's tokens, named or single, read per request as `parkway serve` does.)
    app = TokenGuard(
        server.streamable_http_app(host=host),
        lambda: named_tokens(os.environ.get("PARKWAY_API_TOKEN"), os.environ.get(TOKENS_ENV)),
    )
    click.echo(f"parkway mcp: serving http://{host}:{port}/mcp", err=True)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
