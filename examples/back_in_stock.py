"""Back in stock: email a client as soon as the product they ordered is available again.

An ``order.create`` event starts one run per order, in the client's subject
(``client:5``). The run parks on a *cross-subject* wait: it listens to
``product.update`` events of the ordered product (``product:456``), and only to
those that say the product is in stock. When one comes, it sends an email (a
durable step); if none comes within a week, it gives up.

The engine routes events with an ``event_extractor``: orders are about a client,
product updates about a product. Everything is stored in SQLite (a temporary file
here), so the parked runs would survive a restart. A ``ManualClock`` lets the
example fast-forward the week instead of waiting for it.

Run it::

    python examples/back_in_stock.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from parkway import Engine, Event, WaitTimeoutError
from parkway.testing import ManualClock


def route(event: Event) -> tuple[str | None, str | None]:
    """Which domain and subject an event is about."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    if event.name == "order.create":
        return "shop", f"client:{payload['client_id']}"
    if event.name == "product.update":
        return "shop", f"product:{payload['product_id']}"
    return None, None


def send_email(client: str, product: int, name: str) -> str:
    """Stands in for a real email; a step, so it is sent once even across restarts."""
    text = f"{name} (product {product}) is back in stock"
    print(f"    [email] to {client}: {text}", flush=True)
    return text


def build(url: str, clock: ManualClock | None = None) -> Engine:
    engine = Engine(url, event_extractor=route, clock=clock)

    @engine.workflow(on_event="order.create")
    async def back_in_stock(ctx: Any, order: dict[str, Any]) -> dict[str, Any]:
        product = order["product_id"]
        try:
            update = await ctx.wait_for_event(
                "product.update",
                subject=f"product:{product}",  # another subject than the run's own
                match={"in_stock": True},
                timeout="7d",
            )
        except WaitTimeoutError:
            return {"client": ctx.subject, "product": product, "emailed": None}
        email = await ctx.step(send_email, ctx.subject, product, update["name"], name="email")
        return {"client": ctx.subject, "product": product, "emailed": email}

    return engine


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'shop.db'}"
        clock = ManualClock()
        async with build(url, clock) as engine:
            print("1. Two clients order products that are out of stock")
            for client, product in ((5, 456), (7, 999)):
                order = {"client_id": client, "product_id": product}
                result = await engine.publish("order.create", order, id=f"order-{client}")
                print(
                    f"    order.create client:{client} product {product}: "
                    f"started {', '.join(result.started)}"
                )
            await engine.idle()
            for sub in await engine.subscriptions():
                run = await engine.get_run(sub.run_id)
                print(
                    f"    {run.subject} is {run.status}, waiting for {sub.name} "
                    f"on {sub.subject} matching {sub.match}"
                )

            print("2. Product updates come in")
            updates = [
                ({"product_id": 456, "name": "Blue mug", "in_stock": False}, "still out"),
                ({"product_id": 123, "name": "Teapot", "in_stock": True}, "nobody waits"),
                ({"product_id": 456, "name": "Blue mug", "in_stock": True}, "back in stock"),
            ]
            for payload, what in updates:
                result = await engine.publish("product.update", payload)
                await engine.idle()
                sources = ", ".join(
                    f"{d.run_id} (from {d.source_subject})" for d in result.deliveries
                )
                print(
                    f"    product.update {payload['product_id']} ({what}): "
                    f"touched {result.touched}{': ' + sources if sources else ''}"
                )

            print("3. A week passes")
            await clock.advance("7d")
            for run in sorted(await engine.list_runs(workflow="back_in_stock"), key=lambda r: r.id):
                outcome = run.output["emailed"] or "no email: timed out after 7 days"
                print(f"    {run.subject} ({run.id}): {run.status}, {outcome}")
            left = len(await engine.subscriptions())
            print(f"    subscriptions left: {left}")


if __name__ == "__main__":
    asyncio.run(main())
