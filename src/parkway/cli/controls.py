"""``parkway cancel``, ``pause``, ``resume`` and ``retry``: an operator's controls on
one run, and (``cancel``, ``retry``) on every run a filter selects. Each is recorded
in the run's history as by the OS user who ran the command."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import click

from parkway.cli.common import APP, STATUSES, _ParamType, as_client, os_user
from parkway.cli.group import cli
from parkway.engine import Engine
from parkway.models import RunInfo


class InstantType(_ParamType):
    """An ISO 8601 time (``2026-01-31``, ``2026-01-31T12:00:00Z``; no zone: UTC)."""

    name = "ISO"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, datetime):
            return value
        try:
            parsed = datetime.fromisoformat(str(value))
        except ValueError:
            self.fail(
                f"{value!r} is not an ISO 8601 time such as 2026-01-31 or 2026-01-31T12:00:00Z",
                param,
                ctx,
            )
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


INSTANT = InstantType()
_APP_HELP = "module:attribute of the Engine (else --url/PARKWAY_URL)."


def _filters(statuses: list[str]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The bulk filters of ``cancel`` and ``retry``."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        options = [
            click.option("--workflow", help="Only runs of this workflow."),
            click.option("--status", type=click.Choice(statuses), help="Only runs in this status."),
            click.option("--subject", help="Only runs about this subject."),
            click.option("--before", type=INSTANT, help="Only runs created before this time."),
            click.option(
                "--all", "everything", is_flag=True, help="With no filter: every run it applies to."
            ),
        ]
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate


def _bulk(
    verb: str,
    run_id: str | None,
    filters: dict[str, Any],
    everything: bool,
) -> None:
    """Refuse what would be ambiguous or too broad before touching the store."""
    given = {k: v for k, v in filters.items() if v is not None}
    if run_id is not None and (given or everything):
        raise click.UsageError(f"give RUN, or filters to {verb} many runs, not both")
    if run_id is None and not given and not everything:
        raise click.UsageError(
            f"give RUN, or filters (--workflow, --status, --subject, --before) to {verb} "
            f"many runs; --all to {verb} every one"
        )


def _info(info: RunInfo) -> dict[str, Any]:
    return info.to_dict()


@cli.command()
@click.argument("run_id", metavar="[RUN]", required=False)
@_filters(["pending", "running", "parked", "held"])
@click.option("--app", type=APP, help=_APP_HELP)
@click.pass_context
def cancel(
    ctx: click.Context,
    run_id: str | None,
    workflow: str | None,
    status: str | None,
    subject: str | None,
    before: datetime | None,
    everything: bool,
    app: Engine | None,
) -> None:
    """Cancel run RUN (and its active children), or every active run the filters
    select (in batches); print the run, or how many were cancelled."""
    filters: dict[str, Any] = dict(
        workflow=workflow, status=status, subject=subject, created_before=before
    )
    _bulk("cancel", run_id, filters, everything)

    async def action(engine: Engine) -> dict[str, Any]:
        if run_id is not None:
            await engine.cancel(run_id, by=os_user())
            return _info(await engine.get_run(run_id))
        return {"cancelled": await engine.cancel_runs(**filters, by=os_user())}

    as_client(ctx, app, action, existing_db=True)


@cli.command()
@click.argument("run_id", metavar="[RUN]", required=False)
@_filters(["failed", "held"])
@click.option("--app", type=APP, help=_APP_HELP)
@click.pass_context
def retry(
    ctx: click.Context,
    run_id: str | None,
    workflow: str | None,
    status: str | None,
    subject: str | None,
    before: datetime | None,
    everything: bool,
    app: Engine | None,
) -> None:
    """Retry failed run RUN from its last committed step (the failed step runs again),
    or held run RUN where it was, or every failed or held run the filters select;
    print the run, or how many were retried. A worker with the (fixed) workflow
    runs them."""
    filters: dict[str, Any] = dict(
        workflow=workflow, status=status, subject=subject, created_before=before
    )
    _bulk("retry", run_id, filters, everything)

    async def action(engine: Engine) -> dict[str, Any]:
        if run_id is not None:
            return _info(await engine.retry(run_id, by=os_user()))
        return {"retried": await engine.retry_runs(**filters, by=os_user())}

    as_client(ctx, app, action, existing_db=True)


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option("--app", type=APP, help=_APP_HELP)
@click.pass_context
def pause(ctx: click.Context, run_id: str, app: Engine | None) -> None:
    """Pause run RUN: no worker advances it until `parkway resume RUN`; what reaches it
    meanwhile (signals, events, messages, timers, updates) is kept."""

    async def action(engine: Engine) -> dict[str, Any]:
        return _info(await engine.pause(run_id, by=os_user()))

    as_client(ctx, app, action, existing_db=True)


@cli.command()
@click.argument("run_id", metavar="RUN")
@click.option("--app", type=APP, help=_APP_HELP)
@click.pass_context
def resume(ctx: click.Context, run_id: str, app: Engine | None) -> None:
    """Resume paused run RUN: what reached it while paused is acted on now."""

    async def action(engine: Engine) -> dict[str, Any]:
        return _info(await engine.resume(run_id, by=os_user()))

    as_client(ctx, app, action, existing_db=True)


__all__ = ["INSTANT", "STATUSES", "cancel", "pause", "resume", "retry"]
