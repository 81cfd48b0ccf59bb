"""``parkway workers`` and ``parkway events``: the worker processes serving the
store (and what each serves), and the events published lately with the runs each
started and resumed."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from parkway.cli.common import APP, as_client, print_json, print_table, when
from parkway.cli.controls import INSTANT
from parkway.cli.group import cli
from parkway.engine import Engine

_APP_HELP = "module:attribute of the Engine (else --url/PARKWAY_URL)."


def _served(workflows: dict[str, list[str]]) -> str:
    return ", ".join(f"{name} {'/'.join(versions)}" for name, versions in sorted(workflows.items()))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the WorkerInfo of each).")
@click.option("--app", type=APP, help=_APP_HELP)
@click.pass_context
def workers(ctx: click.Context, as_json: bool, app: Engine | None) -> None:
    """List the worker processes seen within three lease periods, the longest running
    first, with the workflows and versions each serves (a worker claims only runs of
    those). Runs due that none serves show as "unserved" in `parkway runs`."""

    async def action(engine: Engine) -> list[dict[str, Any]]:
        return [w.to_dict() for w in await engine.workers()]

    def show(found: list[dict[str, Any]]) -> None:
        if as_json:
            print_json(found)
            return
        rows = [
            [
                w["id"],
                w["host"],
                str(w["pid"]),
                when(w["started_at"]),
                when(w["last_seen"]),
                _served(w["workflows"]) or "-",
            ]
            for w in found
        ]
        headers = ["ID", "HOST", "PID", "STARTED", "LAST SEEN", "SERVES"]
        print_table(rows, headers, empty="no live workers")

    as_client(ctx, app, action, existing_db=True, show=show)


@cli.command()
@click.option("--name", help="Only events of this name.")
@click.option("--subject", help="Only events about this subject.")
@click.option("--since", type=INSTANT, help="Only events published at or after this time.")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the EventInfo of each).")
@click.option("--app", type=APP, help=_APP_HELP)
@click.pass_context
def events(
    ctx: click.Context,
    name: str | None,
    subject: str | None,
    since: datetime | None,
    limit: int,
    as_json: bool,
    app: Engine | None,
) -> None:
    """List the events published lately (kept for de-duplication, within
    event_retention), newest first, with the runs each started and resumed."""

    async def action(engine: Engine) -> list[dict[str, Any]]:
        found = await engine.events(name=name, subject=subject, since=since, limit=limit)
        return [e.to_dict() for e in found]

    def show(found: list[dict[str, Any]]) -> None:
        if as_json:
            print_json(found)
            return
        rows = [
            [
                e["id"],
                e["name"],
                e["subject"] or "-",
                when(e["published_at"]),
                ", ".join(e["started"]) or "-",
                ", ".join(e["resumed"]) or "-",
            ]
            for e in found
        ]
        headers = ["ID", "NAME", "SUBJECT", "PUBLISHED", "STARTED", "RESUMED"]
        print_table(rows, headers, empty="no events kept")

    as_client(ctx, app, action, existing_db=True, show=show)


__all__ = ["events", "workers"]
