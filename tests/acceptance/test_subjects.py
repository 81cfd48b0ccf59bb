"""Domains and subjects (issue 4): where an event belongs, and which parked runs it reaches.

Routing: the event's own ``domain``/``subject`` win, else ``Engine(event_extractor=...)``,
else domain ``"default"`` and no subject. Runs live in one subject; a wait listens to
the run's own subject by default, to another subject (cross-subject), or to any
(``"*"``), always inside the run's domain. The running example is back-in-stock:
an ``order.create`` for ``client:5`` waits for a ``product.update`` of ``product:456``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from parkway import (
    Delivery,
    Engine,
    Event,
    ParkwayError,
    RoutingError,
    RunStatus,
    WaitTimeoutError,
)

DAY = timedelta(days=1)
SLACK = timedelta(seconds=5)


def shop_extractor(event: Event) -> tuple[str | None, str | None]:
    """Products are about ``product:<id>``, the rest about ``client:<id>``; all in ``shop``."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    if event.name.startswith("product."):
        return "shop", f"product:{payload['product_id']}"
    if "client_id" in payload:
        return "shop", f"client:{payload['client_id']}"
    return None, None


@pytest.fixture
async def shop(make_engine) -> Engine:
    """An engine routing with :func:`shop_extractor`."""
    return await make_engine(event_extractor=shop_extractor)


async def snapshot(engine: Engine) -> tuple[list[tuple[str, str]], list[Any]]:
    runs = [(r.id, r.status.value) for r in await engine.list_runs(limit=1000)]
    return runs, await engine.subscriptions()


def register_back_in_stock(engine: Engine) -> None:
    """``order.create`` starts a run in the client's subject; it waits for its product."""

    @engine.workflow(on_event="order.create")
    async def back_in_stock(ctx, input):
        product = input["product_id"]
        try:
            update = await ctx.wait_for_event(
                "product.update",
                subject=f"product:{product}",
                match={"in_stock": True},
                timeout="7d",
            )
        except WaitTimeoutError:
            return {"client": ctx.subject, "product": product, "email": None}
        return {"client": ctx.subject, "product": product, "email": update}


async def order(engine: Engine, client: int, product: int) -> str:
    result = await engine.publish(
        "order.create", {"client_id": client, "product_id": product}, id=f"order-{client}"
    )
    [run_id] = result.started
    return run_id


# ---------------------------------------------------------------------------------------------
# Routing


@pytest.mark.parametrize(
    ("envelope", "expected"),
    [
        ({"domain": "crm", "subject": "user:1"}, ("crm", "user:1")),  # the envelope wins
        ({}, ("shop", "client:5")),  # else the extractor
        ({"subject": "user:1"}, ("shop", "user:1")),  # field by field
        ({"domain": "crm"}, ("crm", "client:5")),
    ],
)
async def test_routing_with_an_extractor(shop: Engine, envelope, expected) -> None:
    @shop.workflow(on_event="signup")
    async def welcome(ctx, input):
        return [ctx.domain, ctx.subject, ctx.trigger.domain, ctx.trigger.subject]

    result = await shop.publish("signup", {"client_id": 5}, id="e1", **envelope)
    [run_id] = result.started
    info = await shop.get_run(run_id)
    assert (info.domain, info.subject) == expected
    assert await shop.handle(run_id).result(timeout=5) == [*expected, *expected]


async def test_an_extractor_returning_nothing_means_the_default_domain(shop: Engine) -> None:
    @shop.workflow(on_event="ping")
    async def pong(ctx, input):
        return [ctx.domain, ctx.subject]

    [run_id] = (await shop.publish("ping", {"no": "client"})).started
    assert await shop.handle(run_id).result(timeout=5) == ["default", None]


async def test_routing_without_an_extractor(engine: Engine) -> None:
    @engine.workflow(on_event="ping")
    async def pong(ctx, input):
        return [ctx.domain, ctx.subject]

    [plain] = (await engine.publish("ping", {"client_id": 5})).started
    [routed] = (await engine.publish(Event("ping", 1, domain="crm", subject="user:2"))).started
    assert await engine.handle(plain).result(timeout=5) == ["default", None]
    assert await engine.handle(routed).result(timeout=5) == ["crm", "user:2"]


async def test_an_extractor_that_raises_gives_a_routing_error(make_engine) -> None:
    def fragile(event: Event) -> tuple[str, str]:
        return "shop", f"client:{event.payload['client_id']}"

    engine = await make_engine(event_extractor=fragile)

    @engine.workflow(on_event="order.create")
    async def fulfil(ctx, input):
        return input

    before = await snapshot(engine)
    with pytest.raises(RoutingError) as exc_info:
        await engine.publish("order.create", {"no_client": 1}, id="o-1")
    assert isinstance(exc_info.value, ParkwayError)
    assert "order.create" in str(exc_info.value)
    assert "KeyError" in str(exc_info.value)
    assert await snapshot(engine) == before
    # Nothing was recorded: the id is free, and an event with routing of its own is fine.
    result = await engine.publish("order.create", {"client_id": 1}, id="o-1")
    assert not result.duplicate
    assert result.started == ["evt:o-1:fulfil"]
    ok = await engine.publish("order.create", {}, domain="shop", subject="client:9")
    assert len(ok.started) == 1


@pytest.mark.parametrize(
    "returned",
    [
        None,
        "client:5",
        ("shop",),
        ("shop", "client:5", "x"),
        ("shop", 5),
        ("", "client:5"),
        ("shop", "*"),
        {"domain": "shop"},
    ],
)
async def test_an_extractor_that_returns_no_pair_gives_a_routing_error(
    make_engine, returned
) -> None:
    engine = await make_engine(event_extractor=lambda event: returned)

    @engine.workflow(on_event="order.create")
    async def fulfil(ctx, input):
        return input

    with pytest.raises(RoutingError, match=r"order\.create"):
        await engine.publish("order.create", {"client_id": 5}, id="o-1")
    assert await snapshot(engine) == ([], [])


async def test_a_run_started_by_an_event_inherits_domain_and_subject(shop: Engine) -> None:
    @shop.workflow(on_event="order.create")
    async def fulfil(ctx, input):
        return [ctx.domain, ctx.subject]

    [run_id] = (await shop.publish("order.create", {"client_id": 5})).started
    info = await shop.get_run(run_id)
    assert (info.domain, info.subject) == ("shop", "client:5")
    assert await shop.handle(run_id).result(timeout=5) == ["shop", "client:5"]
    assert [r.id for r in await shop.list_runs(subject="client:5", domain="shop")] == [run_id]


async def test_start_with_domain_and_subject(engine: Engine) -> None:
    @engine.workflow()
    async def where(ctx, input):
        return [ctx.domain, ctx.subject]

    h = await engine.start("where", domain="shop", subject="client:5")
    assert await h.result(timeout=5) == ["shop", "client:5"]
    info = await h.info()
    assert (info.domain, info.subject) == ("shop", "client:5")
    plain = await engine.start("where")
    assert await plain.result(timeout=5) == ["default", None]
    for bad in ({"subject": ""}, {"domain": ""}, {"domain": 5}):
        with pytest.raises(ParkwayError):
            await engine.start("where", **bad)


# ---------------------------------------------------------------------------------------------
# Subscriptions registered on park


async def test_subscriptions_carry_the_resolved_subject_and_a_ttl(engine: Engine, clock) -> None:
    @engine.workflow()
    async def waits(ctx, input):
        await ctx.sleep(input.get("after", 0))
        kwargs = {k: v for k, v in input.items() if k in ("subject", "timeout", "match")}
        return await ctx.wait_for_event("product.update", **kwargs)

    starts = {
        "own": ({"timeout": "2h"}, "client:5"),
        "cross": ({"subject": "product:456", "match": {"in_stock": True}}, "client:5"),
        "any": ({"subject": "*", "timeout": 3 * 3600}, "client:5"),
        "later": ({"subject": "product:1", "after": "1h", "timeout": "1d"}, "client:5"),
        "none": ({}, None),
    }
    for run_id, (input, subject) in starts.items():
        await engine.start("waits", input, id=run_id, domain="shop", subject=subject)
    await engine.idle()
    parked_at = clock.datetime()
    await clock.advance("1h")
    subs = {s.run_id: s for s in await engine.subscriptions()}
    assert set(subs) == set(starts)

    expected = {
        "own": ("client:5", None, parked_at + timedelta(hours=2) + DAY),
        "cross": ("product:456", {"in_stock": True}, parked_at + timedelta(days=90)),
        "any": ("*", None, parked_at + timedelta(hours=3) + DAY),
        "later": ("product:1", None, parked_at + timedelta(hours=1) + 2 * DAY),
        "none": ("*", None, parked_at + timedelta(days=90)),
    }
    for run_id, (subject, match, expires) in expected.items():
        sub = subs[run_id]
        assert (sub.kind, sub.domain, sub.name) == ("event", "shop", "product.update"), sub
        assert (sub.subject, sub.match, sub.key) == (subject, match, None), sub
        assert abs(sub.expires_at - expires) <= SLACK, (run_id, sub.expires_at, expires)
        assert sub.expires_at.tzinfo is not None
    assert [s.run_id for s in await engine.subscriptions(run_id="cross")] == ["cross"]
    assert len(await engine.subscriptions(name="product.update")) == 5
    assert await engine.subscriptions(name="other") == []


# ---------------------------------------------------------------------------------------------
# Which runs an event reaches


async def test_a_product_update_resumes_exactly_the_run_waiting_on_it(shop: Engine) -> None:
    register_back_in_stock(shop)
    run5 = await order(shop, client=5, product=456)
    run7 = await order(shop, client=7, product=789)
    await shop.idle()
    assert {(s.run_id, s.subject) for s in await shop.subscriptions()} == {
        (run5, "product:456"),
        (run7, "product:789"),
    }
    assert (await shop.get_run(run5)).subject == "client:5"

    result = await shop.publish("product.update", {"product_id": 456, "in_stock": True})
    assert result.resumed == [run5]
    assert result.started == []
    assert result.touched == 1
    [delivery] = result.deliveries
    assert delivery == Delivery(run5, delivery.wait, "product:456")
    assert delivery.source_subject == "product:456"
    assert await shop.handle(run5).result(timeout=5) == {
        "client": "client:5",
        "product": 456,
        "email": {"product_id": 456, "in_stock": True},
    }

    nobody = await shop.publish("product.update", {"product_id": 999, "in_stock": True})
    assert (nobody.resumed, nobody.deliveries, nobody.touched) == ([], [], 0)
    # Out of stock: the subject is right but the match is not.
    assert (await shop.publish("product.update", {"product_id": 789})).touched == 0
    await shop.idle()
    assert (await shop.get_run(run7)).status is RunStatus.PARKED


async def test_a_wildcard_subscriber_is_resumed_by_any_product(shop: Engine) -> None:
    @shop.workflow()
    async def watch_all(ctx, input):
        return await ctx.wait_for_event("product.update", subject="*")

    @shop.workflow()
    async def watch_one(ctx, input):
        return await ctx.wait_for_event("product.update", subject="product:1")

    await shop.start("watch_all", id="all-a", domain="shop", subject="client:1")
    await shop.start("watch_all", id="all-b", domain="shop")
    await shop.start("watch_one", id="one", domain="shop", subject="client:2")
    await shop.idle()

    result = await shop.publish("product.update", {"product_id": 77})
    assert sorted(result.resumed) == ["all-a", "all-b"]
    assert {d.source_subject for d in result.deliveries} == {"product:77"}
    assert await shop.handle("all-a").result(timeout=5) == {"product_id": 77}
    await shop.start("watch_all", id="all-c", domain="shop")
    await shop.idle()
    result = await shop.publish("product.update", {"product_id": 1})
    assert sorted(result.resumed) == ["all-c", "one"]


async def test_a_run_scoped_to_a_subject_hears_only_that_subject(shop: Engine) -> None:
    @shop.workflow()
    async def account(ctx, input):
        return await ctx.wait_for_event("note")  # no subject: the run's own

    await shop.start("account", id="acct-1", domain="shop", subject="client:1")
    await shop.idle()
    assert (await shop.publish("note", {"client_id": 2})).touched == 0
    assert (await shop.publish("note", {"text": "no subject"}, domain="shop")).touched == 0
    assert (await shop.publish("note", {"client_id": 1}, domain="crm")).touched == 0
    result = await shop.publish("note", {"client_id": 1, "text": "hi"})
    assert result.resumed == ["acct-1"]
    assert result.deliveries[0].source_subject == "client:1"
    assert await shop.handle("acct-1").result(timeout=5) == {"client_id": 1, "text": "hi"}


async def test_the_envelope_beats_the_extractor(shop: Engine) -> None:
    register_back_in_stock(shop)
    run5 = await order(shop, client=5, product=456)
    await shop.idle()
    # The payload says 456, the envelope says product:1: the envelope decides.
    wrong = await shop.publish(
        "product.update", {"product_id": 456, "in_stock": True}, subject="product:1"
    )
    assert wrong.touched == 0
    right = await shop.publish(
        "product.update", {"product_id": 1, "in_stock": True}, subject="product:456"
    )
    assert right.resumed == [run5]
    assert right.deliveries[0].source_subject == "product:456"
    assert (await shop.handle(run5).result(timeout=5))["email"]["product_id"] == 1


async def test_another_domain_is_isolated(shop: Engine) -> None:
    @shop.workflow()
    async def waits(ctx, input):
        return [ctx.domain, await ctx.wait_for_event("product.update", subject=input)]

    await shop.start("waits", "product:456", id="in-shop", domain="shop", subject="client:5")
    await shop.start("waits", "*", id="any-in-shop", domain="shop")
    await shop.start("waits", "product:456", id="in-depot", domain="depot")
    await shop.idle()

    depot = await shop.publish("product.update", {"product_id": 456}, domain="depot")
    assert depot.resumed == ["in-depot"]
    assert await shop.handle("in-depot").result(timeout=5) == ["depot", {"product_id": 456}]
    other = await shop.publish("product.update", {"product_id": 456}, domain="elsewhere")
    assert other.touched == 0
    home = await shop.publish("product.update", {"product_id": 456})
    assert sorted(home.resumed) == ["any-in-shop", "in-shop"]


async def test_the_timeout_removes_the_subscription(shop: Engine, clock) -> None:
    register_back_in_stock(shop)
    run5 = await order(shop, client=5, product=456)
    await shop.idle()
    assert len(await shop.subscriptions()) == 1
    await clock.advance("7d")
    assert await shop.handle(run5).result(timeout=5) == {
        "client": "client:5",
        "product": 456,
        "email": None,
    }
    assert await shop.subscriptions() == []
    late = await shop.publish("product.update", {"product_id": 456, "in_stock": True})
    assert (late.resumed, late.deliveries, late.touched) == ([], [], 0)


async def test_unique_per_subject_starts_one_active_run_per_subject(shop: Engine) -> None:
    @shop.workflow(on_event="order.create", unique_per_subject=True)
    async def onboarding(ctx, input):
        await ctx.wait_for_signal("done")
        return input

    @shop.workflow(on_event="order.create")
    async def receipt(ctx, input):
        return input

    first = await shop.publish("order.create", {"client_id": 5, "n": 1}, id="a")
    assert sorted(first.started) == ["evt:a:onboarding", "evt:a:receipt"]
    second = await shop.publish("order.create", {"client_id": 5, "n": 2}, id="b")
    assert second.started == ["evt:b:receipt"]
    assert second.touched == 1
    other = await shop.publish("order.create", {"client_id": 6, "n": 3}, id="c")
    assert sorted(other.started) == ["evt:c:onboarding", "evt:c:receipt"]
    await shop.idle()
    assert sorted(r.id for r in await shop.list_runs(workflow="onboarding")) == [
        "evt:a:onboarding",
        "evt:c:onboarding",
    ]

    # Once the client's run has ended, the next start event starts a new one.
    await shop.handle("evt:a:onboarding").signal("done")
    assert await shop.handle("evt:a:onboarding").result(timeout=5) == {"client_id": 5, "n": 1}
    again = await shop.publish("order.create", {"client_id": 5, "n": 4}, id="d")
    assert "evt:d:onboarding" in again.started


async def test_ctx_publish_routes_in_the_runs_domain_and_subject(shop: Engine) -> None:
    @shop.workflow()
    async def listener(ctx, input):
        event = await ctx.wait_for_event("note", subject=input)
        return event

    @shop.workflow()
    async def author(ctx, input):
        own = await ctx.publish("note", {"text": "own"})  # the run's subject
        routed = await ctx.publish("note", {"text": "routed", "client_id": 2})  # extractor's
        chosen = await ctx.publish("note", {"text": "chosen"}, subject="client:3")
        return [r.deliveries[0].source_subject for r in (own, routed, chosen)]

    for client in (1, 2, 3):
        await shop.start("listener", f"client:{client}", id=f"l{client}", domain="shop")
    await shop.start("listener", "client:1", id="elsewhere", domain="crm")
    await shop.idle()
    h = await shop.start("author", id="author", domain="shop", subject="client:1")
    assert await h.result(timeout=5) == ["client:1", "client:2", "client:3"]
    assert await shop.handle("l1").result(timeout=5) == {"text": "own"}
    assert await shop.handle("l2").result(timeout=5) == {"text": "routed", "client_id": 2}
    assert await shop.handle("l3").result(timeout=5) == {"text": "chosen"}
    assert (await shop.get_run("elsewhere")).status is RunStatus.PARKED
