"""``parkway publish``, ``correlate`` and ``messages``."""

from __future__ import annotations

from typing import Any

import click

from parkway.cli.common import (
    APP,
    JSON,
    MESSAGE_ID,
    TTL,
    as_client,
    print_json,
    print_table,
    when,
)
from parkway.cli.group import cli
from parkway.engine import Engine
from parkway.events import CorrelationResult


@cli.command()
@click.argument("name")
@click.argument("payload", metavar="JSON", type=JSON, default="null")
@click.option("--id", "event_id", help="Event id (default: random); a repeat is a duplicate.")
@click.option("--domain", help="The event's domain (else the engine's extractor, else default).")
@click.option("--subject", help="What the event is about, e.g. product:456.")
@click.option(
    "--app",
    type=APP,
    help="module:attribute of the Engine: its workflows decide what starts (without it, "
    "only parked runs are resumed, from --url/PARKWAY_URL).",
)
@click.pass_context
def publish(
    ctx: click.Context,
    name: str,
    payload: Any,
    event_id: str | None,
    domain: str | None,
    subject: str | None,
    app: Engine | None,
) -> None:
    """Publish event NAME with payload JSON; print the PublishResult."""
    if app is None:
        click.echo(
            "note: no --app, so no workflow is started by this event (waiting runs are "
            "resumed); pass --app module:engine to start its subscribers",
            err=True,
        )

    async def action(engine: Engine) -> dict[str, Any]:
        result = await engine.publish(name, payload, id=event_id, domain=domain, subject=subject)
        return result.to_dict()

    # Without the app, like `start`: an event sent to a store that does not exist (a
    # typo in the folder or the url) would reach nobody. (With it, its subscribers
    # may start in a new one.)
    as_client(ctx, app, action, existing_db=app is None)


@cli.command()
@click.argument("name")
@click.argument("key")
@click.argument("payload", metavar="JSON", type=JSON, default="null")
@click.option("--message-id", help="De-duplication id of this message.")
@click.option(
    "--ttl",
    type=TTL,
    default=None,
    help="How long to buffer it if no run waits (default: the engine's message_ttl).",
)
@click.option(
    "--app",
    type=APP,
    help="module:attribute of the Engine: its workflows decide what starts (without it, "
    "only parked runs are resumed, from --url/PARKWAY_URL).",
)
@click.pass_context
def correlate(
    ctx: click.Context,
    name: str,
    key: str,
    payload: Any,
    message_id: str | None,
    ttl: float | None,
    app: Engine | None,
) -> None:
    """Correlate message NAME with business KEY and payload JSON to exactly one run."""
    if app is None:
        click.echo(
            "note: no --app, so no workflow is started by this message (a waiting run gets "
            "it, else it is buffered); pass --app module:engine for message starts",
            err=True,
        )

    async def action(engine: Engine) -> dict[str, Any]:
        result = await engine.correlate(name, key, payload, message_id=message_id, ttl=ttl)
        return result.to_dict()

    as_client(ctx, app, action, existing_db=app is None)  # (as publish)


def _correlation(result: CorrelationResult) -> dict[str, Any]:
    """What a correlation did, and the id of the message it buffered, if it did."""
    out = result.to_dict()
    if result.id is not None:
        out["id"] = result.id
    return out


@cli.group(invoke_without_command=True)
@click.option(
    "--status",
    type=click.Choice(["buffered", "expired"]),
    help="Only buffered messages, or only dead letters.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the MessageInfo of each).")
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def messages(ctx: click.Context, status: str | None, as_json: bool, app: Engine | None) -> None:
    """List buffered messages and dead letters (a table, or JSON with --json);
    `retry` or `discard` one by id."""
    ctx.obj["messages_app"] = app
    if ctx.invoked_subcommand is not None:
        return

    async def action(engine: Engine) -> list[dict[str, Any]]:
        return [m.to_dict() for m in await engine.messages(status=status)]

    def show(found: list[dict[str, Any]]) -> None:
        if as_json:
            print_json(found)
            return
        rows = [
            [
                str(m["id"]),
                m["name"],
                m["key"],
                m["status"],
                when(m["received_at"]),
                when(m["expires_at"]),
                m["reason"] or "-",
            ]
            for m in found
        ]
        headers = ["ID", "NAME", "KEY", "STATUS", "RECEIVED", "EXPIRES", "REASON"]
        print_table(rows, headers, empty="no buffered messages or dead letters")

    as_client(ctx, app, action, existing_db=True, show=show)


@messages.command("retry")
@click.argument("message_id", metavar="ID", type=MESSAGE_ID)
@click.option("--ttl", type=TTL, default=None, help="Buffer it again this long if unmatched.")
@click.option("--app", type=APP, help="module:attribute of the Engine (needed to start runs).")
@click.pass_context
def messages_retry(
    ctx: click.Context, message_id: int, ttl: float | None, app: Engine | None
) -> None:
    """Correlate buffered message or dead letter ID again; buffered again, it has a
    new id (printed as "id")."""

    async def action(engine: Engine) -> dict[str, Any]:
        return _correlation(await engine.retry_message(message_id, ttl=ttl))

    as_client(ctx, app or ctx.obj.get("messages_app"), action, existing_db=True)


@messages.command("discard")
@click.argument("message_id", metavar="ID", type=MESSAGE_ID)
@click.option("--app", type=APP, help="module:attribute of the Engine (else --url/PARKWAY_URL).")
@click.pass_context
def messages_discard(ctx: click.Context, message_id: int, app: Engine | None) -> None:
    """Delete buffered message or dead letter ID for good."""

    async def action(engine: Engine) -> dict[str, Any]:
        await engine.discard_message(message_id)
        return {"discarded": message_id}

    as_client(ctx, app or ctx.obj.get("messages_app"), action, existing_db=True)
