"""``parkway tasks`` (list open human tasks) and ``parkway tasks complete ID JSON``."""

from __future__ import annotations

from typing import Any

import click

from parkway.cli.common import APP, JSON, as_client
from parkway.cli.group import cli
from parkway.engine import Engine

TASK_STATUSES = ["open", "completed", "cancelled", "expired", "all"]


@cli.group(invoke_without_command=True)
@click.option("--assignee", help="Only the tasks this person may complete.")
@click.option(
    "--status",
    type=click.Choice(TASK_STATUSES),
    default="open",
    show_default=True,
    help="Only tasks in this status.",
)
@click.option("--workflow", help="Only tasks of runs of this workflow.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def tasks(
    ctx: click.Context,
    assignee: str | None,
    status: str,
    workflow: str | None,
    limit: int,
    app: Engine | None,
) -> None:
    """List human tasks as JSON, oldest first; `complete` one by id."""
    ctx.obj["tasks_app"] = app
    if ctx.invoked_subcommand is not None:
        return

    async def action(engine: Engine) -> list[dict[str, Any]]:
        found = await engine.tasks(
            status=None if status == "all" else status,
            assignee=assignee,
            workflow=workflow,
            limit=limit,
        )
        return [task.to_dict() for task in found]

    as_client(ctx, app, action, existing_db=True)


@tasks.command("complete")
@click.argument("task_id", metavar="ID")
@click.argument("result", metavar="JSON", type=JSON)
@click.option("--by", help="Who completes it (must be an assignee if the task has any).")
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def tasks_complete(
    ctx: click.Context, task_id: str, result: Any, by: str | None, app: Engine | None
) -> None:
    """Complete human task ID with the JSON result (checked against its form)."""

    async def action(engine: Engine) -> dict[str, Any]:
        return (await engine.complete_task(task_id, result, by=by)).to_dict()

    as_client(ctx, app or ctx.obj.get("tasks_app"), action, existing_db=True)
