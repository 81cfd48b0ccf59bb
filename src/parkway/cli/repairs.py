"""Deploys and repairs: ``parkway check`` (the registered code against stored runs, a CI
gate), ``parkway export`` (one run as JSON, to check in a test) and ``parkway fork``."""

from __future__ import annotations

import getpass
from typing import Any

import click

from parkway.cli.common import APP, JSON, as_client, print_json
from parkway.cli.group import cli
from parkway.engine import Engine
from parkway.models import UNSET, ReplayReport

_APP_HELP = "module:attribute of the Engine (else --url/PARKWAY_URL)."


@cli.command()
@click.argument("app", type=APP)
@click.option("--workflow", help="Only runs of this workflow.")
@click.option("--limit", type=click.IntRange(min=1), help="Replay at most this many runs.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def check(
    ctx: click.Context, app: Engine, workflow: str | None, limit: int | None, as_json: bool
) -> None:
    """Replay the journals of the running, parked and held runs of the store against
    APP's workflows (module:attribute), read-only: no step runs, nothing is written.
    Print each run the code no longer replays (where, and how), and exit with status
    1 if there is any: run it in CI against a copy of production's store before a
    deploy (--url)."""
    found: list[ReplayReport] = []

    async def action(engine: Engine) -> ReplayReport:
        report = await engine.check_replay(workflow=workflow, limit=limit)
        found.append(report)
        return report

    def show(report: ReplayReport) -> None:
        if as_json:
            print_json(report.to_dict())
            return
        for d in report.diverged:
            click.echo(
                f"{d.run_id}  {d.workflow} (version {d.version}) at position {d.position}: "
                f"the journal has {d.expected}, the code now does {d.got}"
            )
        click.echo(f"{report.checked} run(s) checked, {len(report.diverged)} diverged")

    as_client(ctx, app, action, existing_db=True, show=show)
    if found and found[0].diverged:
        ctx.exit(1)


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option("--app", type=APP, help=_APP_HELP)
@click.pass_context
def export(ctx: click.Context, run_id: str, app: Engine | None) -> None:
    """Print run RUN as JSON (its row, its journal, the inputs waiting for it): check
    your code against it in a test with parkway.testing.check_replay."""

    async def action(engine: Engine) -> dict[str, Any]:
        return await engine.export_run(run_id)

    as_client(ctx, app, action, existing_db=True)


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option(
    "--at",
    type=click.IntRange(min=0),
    help="How many of RUN's journal entries the fork starts with (default: those "
    "before its first failed one, or all).",
)
@click.option("--input", "input_", type=JSON, help="The fork's input as JSON (default: RUN's).")
@click.option("--id", "fork_id", help="The fork's id (default: random).")
@click.option("--app", type=APP, help=_APP_HELP + " With it, its latest version runs the fork.")
@click.pass_context
def fork(
    ctx: click.Context,
    run_id: str,
    at: int | None,
    input_: Any,
    fork_id: str | None,
    app: Engine | None,
) -> None:
    """Start a new run from the first entries of run RUN's journal (replayed, not run
    again), going on live with the code registered now; print the fork. RUN is left
    as it is."""
    given = ctx.get_parameter_source("input_") is click.core.ParameterSource.COMMANDLINE

    async def action(engine: Engine) -> dict[str, Any]:
        handle = await engine.fork(
            run_id, at=at, input=input_ if given else UNSET, id=fork_id, by=_operator()
        )
        return (await handle.info()).to_dict()

    as_client(ctx, app, action, existing_db=True)


def _operator() -> str | None:
    """Who runs the command: the OS user."""
    try:
        return getpass.getuser()
    except Exception:  # (no user name in this environment)
        return None
