"""``parkway schedules`` (list), ``parkway schedules pause ID`` and ``resume ID``."""

from __future__ import annotations

from typing import Any

import click

from parkway.cli.common import APP, as_client
from parkway.cli.group import cli
from parkway.engine import Engine


@cli.group(invoke_without_command=True)
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def schedules(ctx: click.Context, app: Engine | None) -> None:
    """List schedules as JSON, by id; `pause` or `resume` one by id."""
    ctx.obj["schedules_app"] = app
    if ctx.invoked_subcommand is not None:
        return

    async def action(engine: Engine) -> list[dict[str, Any]]:
        return [s.to_dict() for s in await engine.schedules()]

    as_client(ctx, app, action, existing_db=True)


@schedules.command("pause")
@click.argument("schedule_id", metavar="ID")
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def schedules_pause(ctx: click.Context, schedule_id: str, app: Engine | None) -> None:
    """Pause schedule ID: the ticks that pass while it is paused are skipped."""

    async def action(engine: Engine) -> dict[str, Any]:
        return (await engine.pause_schedule(schedule_id)).to_dict()

    as_client(ctx, app or ctx.obj.get("schedules_app"), action, existing_db=True)


@schedules.command("resume")
@click.argument("schedule_id", metavar="ID")
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def schedules_resume(ctx: click.Context, schedule_id: str, app: Engine | None) -> None:
    """Resume paused schedule ID, from its first tick after now."""

    async def action(engine: Engine) -> dict[str, Any]:
        return (await engine.resume_schedule(schedule_id)).to_dict()

    as_client(ctx, app or ctx.obj.get("schedules_app"), action, existing_db=True)
