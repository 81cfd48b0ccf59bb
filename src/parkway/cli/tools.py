"""``parkway demo`` and ``parkway flows validate``."""

from __future__ import annotations

import logging
import sys

import click

from parkway.cli.common import APP, run
from parkway.cli.group import cli
from parkway.engine import Engine
from parkway.errors import ParkwayError


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

    # The payment step fails on purpose, and the demo tells it: not its warning too.
    logging.getLogger("parkway.runs").setLevel(logging.ERROR)
    run(run_demo(".", say=click.echo))


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
    """Check flow definition FILE; print OK with its size, or every fault, one a line (exit 1).

    Each fault names the node (or edge) and the field at fault.
    """
    from parkway.flows import check

    try:
        if app is None:
            checked = check(file)
        else:
            checked = check(file, node_models=app.node_models, actions=app.actions)
    except ParkwayError as exc:  # FILE cannot be read as a flow at all
        raise click.ClickException(str(exc)) from exc
    flow = checked.flow
    if flow is None:
        count = len(checked.faults)
        click.echo(f"{file}: {count} fault{'s' if count != 1 else ''}", err=True)
        for fault in checked.faults:
            click.echo(f"  {fault}", err=True)
        sys.exit(1)
    click.echo(f"OK: flow {flow.id!r}: {len(flow.nodes)} nodes, {len(flow.edges)} edges")
