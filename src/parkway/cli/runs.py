"""``parkway start``, ``signal``, ``runs`` and ``show``."""

from __future__ import annotations

from typing import Any

import click

from parkway.cli.common import (
    APP,
    DURATION,
    JSON,
    STATUSES,
    as_client,
    os_user,
    print_json,
    print_table,
    when,
)
from parkway.cli.group import cli
from parkway.engine import Engine
from parkway.errors import ParkwayError, UnknownWorkflowError
from parkway.models import RunInfo, RunStatus


@cli.command()
@click.argument("workflow")
@click.argument("input", metavar="JSON", type=JSON, default="null")
@click.option("--id", "run_id", help="Run id (default: random); an existing id returns that run.")
@click.option("--subject", help="The business entity the run is about, e.g. client:5.")
@click.option("--domain", help="The run's domain (default: 'default').")
@click.option(
    "--priority",
    type=click.IntRange(-(2**63), 2**63 - 1),
    default=0,
    show_default=True,
    help="Among runs of WORKFLOW queued by its concurrency limit, higher starts first.",
)
@click.option(
    "--app",
    type=APP,
    help="module:attribute of the Engine that defines WORKFLOW (without it: --url/PARKWAY_URL, "
    "and a worker that has WORKFLOW validates the input).",
)
@click.option("--wait", is_flag=True, help="Wait for the run to finish (a worker must be running).")
@click.option("--timeout", type=DURATION, default=None, help="With --wait: give up after it.")
@click.option(
    "--force",
    is_flag=True,
    help="Without --app: start WORKFLOW even if the store has never seen a run of it.",
)
@click.pass_context
def start(
    ctx: click.Context,
    workflow: str,
    input: Any,
    run_id: str | None,
    subject: str | None,
    domain: str | None,
    priority: int,
    app: Engine | None,
    wait: bool,
    timeout: float | None,
    force: bool,
) -> None:
    """Start a run of WORKFLOW with input JSON and print it.

    With --app, the engine's registration decides the version and validates the
    input here; without it, the run goes to the store of --url/PARKWAY_URL and
    the worker that first runs it takes its latest version and validates it. A
    name the store has no run of is refused then (a typo would start a run no
    worker advances) unless --force is given: a new workflow's first run.
    """

    async def action(engine: Engine) -> dict[str, Any]:
        if app is not None and workflow not in engine.workflows():
            # With the app, its registration decides: a typo is refused here, not
            # left as a run no worker of the app can advance.
            raise UnknownWorkflowError(workflow, engine.workflows())
        if app is None and not force and not await engine.list_runs(workflow=workflow, limit=1):
            raise click.ClickException(
                f"this store has no run of workflow {workflow!r}, so it may be a typo "
                "(`parkway runs` lists the runs and their workflows); pass --app "
                "module:engine to check it against the app's workflows, or --force to "
                "start it anyway"
            )
        # (Without the app, a client engine: it starts the workflow by name.)
        handle = await engine.start(
            workflow, input, id=run_id, subject=subject, domain=domain, priority=priority
        )
        if wait:
            try:
                await handle.result(timeout=timeout)
            except ParkwayError as exc:
                print_json((await handle.info()).to_dict())
                raise exc
        return (await handle.info()).to_dict()

    # Without the app, the run goes to a store that must exist already: a typo in the
    # folder or the url must not start a run in a fresh database nobody works on.
    as_client(ctx, app, action, existing_db=app is None)


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

    as_client(ctx, app, action, existing_db=True)


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.argument("name")
@click.argument("payload", metavar="JSON", type=JSON, default="null")
@click.option(
    "--id", "update_id", help="The update's id (default: random); a repeat gives the first answer."
)
@click.option(
    "--timeout",
    type=DURATION,
    default=30.0,
    show_default=True,
    help="Stop waiting for the answer after it (the update applies).",
)
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def update(
    ctx: click.Context,
    run_id: str,
    name: str,
    payload: Any,
    update_id: str | None,
    timeout: float,
    app: Engine | None,
) -> None:
    """Send update NAME with payload JSON to run RUN; print its handler's answer.

    A worker must be running the run's workflow: the update is handled when the
    run is parked at a wait (or reaches its next one).
    """

    async def action(engine: Engine) -> dict[str, Any]:
        result = await engine.update(
            run_id, name, payload, id=update_id, timeout=timeout, by=os_user()
        )
        return {"run": run_id, "update": name, "result": result}

    as_client(ctx, app, action, existing_db=True)


@cli.command()
@click.option("--workflow", help="Only runs of this workflow.")
@click.option("--status", type=click.Choice(STATUSES), help="Only runs in this status.")
@click.option("--subject", help="Only runs about this subject.")
@click.option("--domain", help="Only runs in this domain.")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the RunInfo of each run).")
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def runs(
    ctx: click.Context,
    workflow: str | None,
    status: str | None,
    subject: str | None,
    domain: str | None,
    limit: int,
    as_json: bool,
    app: Engine | None,
) -> None:
    """List runs, newest first: a table (WAITING FOR: what a parked run waits for; a
    held run, whose code no longer replays its journal, waits for a fix), or JSON
    with --json. A run marked "unserved" is due, but no live worker serves its
    workflow and version (see `parkway workers`)."""

    async def action(engine: Engine) -> Any:
        found = await engine.list_runs(
            workflow=workflow, status=status, subject=subject, domain=domain, limit=limit
        )
        unserved = set(await engine.unserved_runs()) if found else set()
        if as_json:
            return [{**r.to_dict(), "unserved": r.id in unserved} for r in found]
        return [_row(info, _waits(info), info.id in unserved) for info in found]

    def show(rows: Any) -> None:
        if as_json:
            print_json(rows)
        else:
            headers = ["ID", "WORKFLOW", "STATUS", "SUBJECT", "WAITING FOR", "UPDATED"]
            print_table(rows, headers, empty="no runs")

    as_client(ctx, app, action, existing_db=True, show=show)


def waiting_for(waits: list[dict[str, Any]]) -> str:
    """What a run waits for (``RunInfo.waiting``), for a table: ``signal 'approve',
    timer 'sleep'``; a retry with its attempt, maximum and time, ``retry of step
    'charge' (attempt 2/3 at 12:00:30)``."""
    parts = []
    for wait in waits:
        if wait["kind"] == "retry":
            at = wait["at"].strftime("%H:%M:%S") if wait.get("at") else "now"
            tries = f"{wait['attempt']}/{wait['max_attempts'] or '?'}"
            parts.append(f"retry of step {wait['name']!r} (attempt {tries} at {at})")
        else:
            parts.append(f"{wait['kind']} {wait['name']!r}")
    return ", ".join(parts)


def _waits(info: RunInfo) -> str:
    """The WAITING FOR column: what the run waits for; a held run waits for a fix (where
    its code left its journal)."""
    if info.status is RunStatus.HELD and info.error is not None:
        return f"a fix: {info.error.message}"
    return waiting_for(info.waiting)


def _row(info: RunInfo, waits: str, unserved: bool = False) -> list[str]:
    status = info.status.value + (" (paused)" if info.paused else "")
    if unserved:  # due, but no live worker serves its workflow and version
        version = info.version or "any version"
        waits = f"(unserved) a worker serving {info.workflow} {version}"
    return [
        info.id,
        info.workflow,
        status,
        info.subject or "-",
        waits or "-",
        when(info.updated_at.isoformat()),
    ]


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

    as_client(ctx, app, action, existing_db=True)
