"""The ``parkway`` command group, to which every command module adds its commands."""

from __future__ import annotations

import click

from parkway.models import RunStatus

STATUSES = [s.value for s in RunStatus]

# -- commands --------------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    metavar="URL",
    help=(
        "Store URL (sqlite:///path.db, postgresql://user@host/db, memory://); "
        "overrides PARKWAY_URL and the APP's url."
    ),
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
