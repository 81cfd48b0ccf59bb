"""JSON flows (docs/guides/flows.md): graphs of nodes run by the durable core.

The running example is back-in-stock: an ``order.create`` for ``client:5``
starts the flow, which parks on a ``product.update`` of the ordered product
(``product:456``, another subject) for at most a minute, then emails.
"""

from __future__ import annotations

import copy
import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from parkway import (
    Engine,
    NodeModel,
    RunStatus,
    SubscriptionRequest,
    default_node_models,
)

EXAMPLE = Path(__file__).parents[2] / "examples" / "flows" / "back_in_stock.json"
ORDER = {"email": "ann@example.com", "total": 120, "products": [{"product_id": 456}]}
RUN = "flow:back-in-stock:default:client:5"


def node(node_id: str, node_type: str, **params: Any) -> dict[str, Any]:
    return {"id": node_id, "type": node_type, "data": {"params": params}}


def edge(source: str, target: str, handle: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"source": source, "target": target}
    if handle is not None:
        out["sourceHandle"] = handle
    return out


def flow(
    flow_id: str,
    nodes: list[dict[str, Any]],
    edges: list[dict[str, Any]],
    **options: Any,
) -> dict[str, Any]:
    return {"id": flow_id, "options": options, "flow": {"nodes": nodes, "edges": edges}}


def back_in_stock(**options: Any) -> dict[str, Any]:
    """The flow of the README, with an email that uses the trigger and the resuming event."""
    return flow(
        "back-in-stock",
        [
            node("start", "Trigger", event="order.create"),
            node(
                "wait-product",
                "TriggerOrTimeout",
                event="product.update",
                duration=60_000,
                match={"subjectId": "product:{{trigger.payload.products[0].product_id}}"},
            ),
            node(
                "notify",
                "Action",
                action="send_email",
                to="{{trigger.email}}",
                product="{{ trigger.payload.products[0].product_id }}",
                stock="{{event.stock}}",
                text="Product {{event.name}} is back: {{event.stock}} left",
            ),
            node("end", "Exit"),
        ],
        [
            edge("start", "wait-product"),
            edge("wait-product", "notify", "trigger"),
            edge("wait-product", "end", "timeout"),
            edge("notify", "end"),
        ],
        **options,
    )


class Calls:
    """Action handlers that record what they were called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], Any]] = []

    def register(self, engine: Engine, name: str, result: Any = None) -> None:
        def handler(params: dict[str, Any], context: Any) -> Any:
            self.calls.append((name, params, context))
            return result

        engine.action(name)(handler)

    def names(self) -> list[str]:
        return [name for name, _, _ in self.calls]


@pytest.fixture
def calls() -> Calls:
    return Calls()


async def status(engine: Engine, run_id: str) -> RunStatus:
    return (await engine.get_run(run_id)).status


# -- back in stock, end to end ---------------------------------------------------------------


async def test_back_in_stock_resumes_exactly_the_waiting_run(engine: Engine, calls: Calls) -> None:
    calls.register(engine, "send_email", {"sent": True})
    engine.add_flow(back_in_stock())

    started = await engine.publish("order.create", ORDER, subject="client:5")
    assert started.started == [RUN]
    await engine.idle()
    assert await status(engine, RUN) == RunStatus.PARKED
    [sub] = await engine.subscriptions(run_id=RUN)
    assert (sub.name, sub.subject, sub.domain) == ("product.update", "product:456", "default")

    other = await engine.publish("product.update", {"stock": 1}, subject="product:999")
    assert (other.started, other.resumed, other.touched) == ([], [], 0)
    await engine.idle()
    assert calls.calls == []

    update = await engine.publish(
        "product.update", {"name": "Lamp", "stock": 3}, subject="product:456"
    )
    assert update.resumed == [RUN] and update.started == []
    assert [d.source_subject for d in update.deliveries] == ["product:456"]
    await engine.idle()

    info = await engine.get_run(RUN)
    assert info.status == RunStatus.COMPLETED
    assert info.output == {"last_node": "end", "state": {"notify": {"sent": True}}}
    [(_, params, context)] = calls.calls
    assert params == {
        "action": "send_email",
        "to": "ann@example.com",
        "product": 456,
        "stock": 3,
        "text": "Product Lamp is back: 3 left",
    }
    assert (context.run_id, context.domain, context.subject) == (RUN, "default", "client:5")
    assert context.trigger == ORDER
    assert context.event == {"name": "Lamp", "stock": 3}
    assert await engine.subscriptions() == []


async def test_back_in_stock_times_out(engine: Engine, calls: Calls, clock: Any) -> None:
    calls.register(engine, "send_email")
    engine.add_flow(back_in_stock())
    await engine.publish("order.create", ORDER, subject="client:5")
    await engine.idle()

    await clock.advance("59s")
    assert await status(engine, RUN) == RunStatus.PARKED
    await clock.advance("1s")
    info = await engine.get_run(RUN)
    assert info.status == RunStatus.COMPLETED
    assert info.output == {"last_node": "end", "state": {}}
    assert calls.calls == []
    assert await engine.subscriptions() == []

    late = await engine.publish("product.update", {"stock": 3}, subject="product:456")
    assert late.touched == 0


async def test_the_example_file_runs(engine: Engine, calls: Calls) -> None:
    calls.register(engine, "send_email")
    definition = engine.add_flow(EXAMPLE)
    assert definition.id == "back-in-stock"
    await engine.publish("order.create", ORDER, subject="client:5")
    await engine.idle()
    await engine.publish("product.update", {}, subject="product:456")
    await engine.idle()
    [(_, params, _)] = calls.calls
    assert params["to"] == "ann@example.com"
    assert params["text"] == "Product 456 is back in stock"


async def test_an_event_extractor_routes_the_flow(make_engine: Any, calls: Calls) -> None:
    def extractor(event: Any) -> tuple[str | None, str | None]:
        if event.name.startswith("product."):
            return "default", f"product:{event.payload['product_id']}"
        return "default", f"client:{event.payload['client_id']}"

    engine = await make_engine(event_extractor=extractor)
    calls.register(engine, "send_email")
    engine.add_flow(back_in_stock())
    await engine.publish("order.create", {**ORDER, "client_id": 5})
    await engine.idle()
    result = await engine.publish("product.update", {"product_id": 456, "stock": 2})
    assert result.resumed == [RUN]
    await engine.idle()
    assert calls.names() == ["send_email"]


@pytest.mark.requires("persistent")
async def test_a_parked_flow_survives_a_restart(make_engine: Any, calls: Calls) -> None:
    first = await make_engine()
    calls.register(first, "send_email")
    first.add_flow(back_in_stock())
    await first.publish("order.create", ORDER, subject="client:5")
    await first.idle()
    await first.close()

    second = await make_engine()
    calls.register(second, "send_email")
    second.add_flow(json.dumps(back_in_stock()))
    result = await second.publish("product.update", {"stock": 1}, subject="product:456")
    assert result.resumed == [RUN]
    await second.idle()
    assert await status(second, RUN) == RunStatus.COMPLETED
    assert calls.names() == ["send_email"]


# -- subscriptions: unresolvable, wildcard, own subject ----------------------------------------


async def test_an_unresolvable_subject_waits_in_the_runs_own_subject(
    engine: Engine, calls: Calls, caplog: pytest.LogCaptureFixture
) -> None:
    calls.register(engine, "send_email")
    engine.add_flow(back_in_stock())
    with caplog.at_level(logging.WARNING, logger="parkway.flows"):
        await engine.publish("order.create", {"email": "x@example.com"}, subject="client:5")
        await engine.idle()
    assert "{{trigger.payload.products[0].product_id}}" in caplog.text
    assert "own subject" in caplog.text
    assert await status(engine, RUN) == RunStatus.PARKED
    [sub] = await engine.subscriptions()
    assert (sub.run_id, sub.name, sub.subject) == (RUN, "product.update", "client:5")

    # Not the subject the template meant to name (it could not), nor another one...
    assert (await engine.publish("product.update", {}, subject="product:456")).touched == 0
    assert (await engine.publish("product.update", {}, subject="client:6")).touched == 0
    # ...but an event of that type in the run's own subject resumes it.
    result = await engine.publish("product.update", {"stock": 3}, subject="client:5")
    assert result.resumed == [RUN]
    await engine.idle()
    info = await engine.get_run(RUN)
    assert (info.status, info.output["last_node"]) == (RunStatus.COMPLETED, "end")
    [(name, params, _)] = calls.calls
    assert (name, params["stock"], params["to"]) == ("send_email", 3, "x@example.com")


async def test_an_unresolvable_subject_still_times_out(
    engine: Engine, calls: Calls, clock: Any
) -> None:
    calls.register(engine, "send_email")
    engine.add_flow(back_in_stock())
    await engine.publish("order.create", {"email": "x@example.com"}, subject="client:5")
    await engine.idle()
    assert await status(engine, RUN) == RunStatus.PARKED
    await clock.advance("60s")
    info = await engine.get_run(RUN)
    assert (info.status, info.output["last_node"]) == (RunStatus.COMPLETED, "end")
    assert calls.calls == []
    assert await engine.subscriptions() == []
    # Its own subject's event, after the timeout, finds nothing to resume.
    assert (await engine.publish("product.update", {}, subject="client:5")).touched == 0


async def test_match_without_subject_id_is_a_wildcard(engine: Engine, calls: Calls) -> None:
    calls.register(engine, "send_email")
    definition = back_in_stock()
    definition["flow"]["nodes"][1]["data"]["params"]["match"] = {}
    engine.add_flow(definition)
    await engine.publish("order.create", ORDER, subject="client:5")
    await engine.idle()
    [sub] = await engine.subscriptions()
    assert sub.subject == "*"
    result = await engine.publish("product.update", {"stock": 9}, subject="product:1")
    assert result.resumed == [RUN]
    await engine.idle()
    assert calls.calls[0][1]["stock"] == 9


async def test_other_match_keys_filter_the_payload(engine: Engine, calls: Calls) -> None:
    calls.register(engine, "send_email")
    definition = back_in_stock()
    match = definition["flow"]["nodes"][1]["data"]["params"]["match"]
    match["warehouse"] = "{{trigger.warehouse}}"
    engine.add_flow(definition)
    await engine.publish("order.create", {**ORDER, "warehouse": "north"}, subject="client:5")
    await engine.idle()
    south = await engine.publish("product.update", {"warehouse": "south"}, subject="product:456")
    assert south.touched == 0
    north = await engine.publish("product.update", {"warehouse": "north"}, subject="product:456")
    assert north.resumed == [RUN]


async def test_a_later_trigger_waits_in_the_runs_own_subject(engine: Engine, calls: Calls) -> None:
    calls.register(engine, "thank")
    engine.add_flow(
        flow(
            "pay",
            [
                node("start", "Trigger", event="order.create"),
                node("paid", "Trigger", event="payment.received"),
                node("thank", "Action", action="thank", amount="{{event.amount}}"),
            ],
            [edge("start", "paid"), edge("paid", "thank")],
        )
    )
    await engine.publish("order.create", ORDER, subject="client:5")
    await engine.idle()
    run_id = "flow:pay:default:client:5"
    assert await status(engine, run_id) == RunStatus.PARKED
    [sub] = await engine.subscriptions()
    assert (sub.name, sub.subject) == ("payment.received", "client:5")

    assert (
        await engine.publish("payment.received", {"amount": 1}, subject="client:6")
    ).touched == 0
    result = await engine.publish("payment.received", {"amount": 120}, subject="client:5")
    assert result.resumed == [run_id]
    await engine.idle()
    assert await status(engine, run_id) == RunStatus.COMPLETED
    assert calls.calls[0][1] == {"action": "thank", "amount": 120}


# -- conditions --------------------------------------------------------------------------------

CASES = [
    ("equal", "gold", "gold", "silver"),
    ("notEqual", "gold", "silver", "gold"),
    ("greaterThan", 100, 101, 100),
    ("greaterThanInclusive", 100, 100, 99),
    ("lessThan", 100, 99, 100),
    ("lessThanInclusive", 100, 100, 101),
    ("in", ["a", "b"], "a", "c"),
    ("notIn", ["a", "b"], "c", "a"),
    ("contains", "vip", ["vip", "new"], ["new"]),
    ("doesNotContain", "vip", ["new"], ["vip"]),
]


def branching(operator: str, value: Any) -> dict[str, Any]:
    rule = {"fact": "trigger.fact", "operator": operator, "value": value}
    check = {
        "id": "check",
        "type": "Condition",
        "position": {"x": 1, "y": 2},
        "data": {"conditions": {"groups": [{"operator": "all", "conditions": [rule]}]}},
    }
    return flow(
        "branch",
        [
            node("start", "Trigger", event="order.create"),
            check,
            node("yes", "Action", action="yes"),
            node("no", "Action", action="no"),
        ],
        [
            edge("start", "check"),
            edge("check", "yes", "true"),
            edge("check", "no", "false"),
        ],
    )


@pytest.mark.parametrize(("operator", "value", "holds", "fails"), CASES, ids=[c[0] for c in CASES])
async def test_condition_branches(
    engine: Engine, calls: Calls, operator: str, value: Any, holds: Any, fails: Any
) -> None:
    calls.register(engine, "yes")
    calls.register(engine, "no")
    engine.add_flow(branching(operator, value))
    await engine.publish("order.create", {"fact": holds}, subject="a")
    await engine.publish("order.create", {"fact": fails}, subject="b")
    await engine.idle()
    by_subject = {context.subject: name for name, _, context in calls.calls}
    assert by_subject == {"a": "yes", "b": "no"}
    info = await engine.get_run("flow:branch:default:a")
    assert info.output == {"last_node": "yes", "state": {"yes": None}}


async def test_a_missing_fact_takes_the_false_branch(engine: Engine, calls: Calls) -> None:
    calls.register(engine, "yes")
    calls.register(engine, "no")
    engine.add_flow(branching("lessThan", 100))
    await engine.publish("order.create", {"other": 1}, subject="a")
    await engine.idle()
    assert calls.names() == ["no"]


async def test_groups_are_ored_and_values_are_templates(engine: Engine, calls: Calls) -> None:
    calls.register(engine, "yes")
    calls.register(engine, "no")
    definition = branching("equal", 0)
    definition["flow"]["nodes"][1]["data"]["conditions"] = {
        "groups": [
            {
                "operator": "all",
                "conditions": [
                    {"fact": "trigger.total", "operator": "greaterThan", "value": 100},
                    {"fact": "trigger.country", "operator": "equal", "value": "DE"},
                ],
            },
            {
                "operator": "any",
                "conditions": [
                    {
                        "fact": "trigger.total",
                        "operator": "greaterThanInclusive",
                        "value": "{{trigger.limit}}",
                    },
                    {"fact": "{{trigger.tags}}", "operator": "contains", "value": "vip"},
                ],
            },
        ]
    }
    engine.add_flow(definition)
    orders = {
        "big-de": {"total": 150, "country": "DE", "limit": 1000},
        "big-fr": {"total": 150, "country": "FR", "limit": 1000},
        "limit": {"total": 50, "country": "FR", "limit": 50},
        "vip": {"total": 1, "tags": ["vip"], "limit": 1000},
    }
    for subject, payload in orders.items():
        await engine.publish("order.create", payload, subject=subject)
    await engine.idle()
    by_subject = {context.subject: name for name, _, context in calls.calls}
    assert by_subject == {"big-de": "yes", "big-fr": "no", "limit": "yes", "vip": "yes"}


# -- wait, state, templates --------------------------------------------------------------------


async def test_wait_parks_for_its_duration(engine: Engine, calls: Calls, clock: Any) -> None:
    calls.register(engine, "remind")
    engine.add_flow(
        flow(
            "reminder",
            [
                node("start", "Trigger", event="cart.abandoned"),
                node("pause", "Wait", duration=5000),
                node("remind", "Action", action="remind"),
            ],
            [edge("start", "pause"), edge("pause", "remind")],
        )
    )
    await engine.publish("cart.abandoned", {}, subject="client:5")
    await engine.idle()
    run_id = "flow:reminder:default:client:5"
    assert await status(engine, run_id) == RunStatus.PARKED
    await clock.advance("4s")
    assert calls.calls == []
    await clock.advance("1s")
    assert calls.names() == ["remind"]
    assert await status(engine, run_id) == RunStatus.COMPLETED


async def test_action_state_feeds_later_templates(engine: Engine, calls: Calls) -> None:
    async def coupon(params: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"code": f"C-{params['percent']}", "valid": [2030, 2031]}

    engine.action("make_coupon")(coupon)
    calls.register(engine, "send_email")
    engine.add_flow(
        flow(
            "coupons",
            [
                node("start", "Trigger", event="order.create"),
                node("coupon", "Action", action="make_coupon", percent="{{trigger.percent}}"),
                node(
                    "mail",
                    "Action",
                    action="send_email",
                    code="{{state.coupon.code}}",
                    years="{{state.coupon.valid}}",
                    until="until {{state.coupon.valid[1]}}",
                    broken="{{state.coupon.valid}} years",
                    nested={"list": ["{{trigger.percent}}"]},
                ),
            ],
            [edge("start", "coupon"), edge("coupon", "mail")],
        )
    )
    await engine.publish("order.create", {"percent": 10}, subject="client:5")
    await engine.idle()
    [(_, params, context)] = calls.calls
    assert params == {
        "action": "send_email",
        "code": "C-10",
        "years": [2030, 2031],
        "until": "until 2031",
        "broken": None,
        "nested": {"list": [10]},
    }
    assert context.state == {"coupon": {"code": "C-10", "valid": [2030, 2031]}}
    info = await engine.get_run("flow:coupons:default:client:5")
    assert info.output["state"] == {"coupon": {"code": "C-10", "valid": [2030, 2031]}, "mail": None}
    history = await engine.history(info.id)
    assert [(e.kind, e.name) for e in history] == [
        ("step", "make_coupon@coupon"),
        ("step", "send_email@mail"),
    ]


async def test_a_failing_action_fails_the_run(engine: Engine) -> None:
    @engine.action("explode")
    def explode(params: dict[str, Any], context: Any) -> None:
        raise RuntimeError("smtp down")

    engine.add_flow(
        flow(
            "boom",
            [node("start", "Trigger", event="go"), node("act", "Action", action="explode")],
            [edge("start", "act")],
        )
    )
    await engine.publish("go", {}, subject="s")
    await engine.idle()
    info = await engine.get_run("flow:boom:default:s")
    assert info.status == RunStatus.FAILED
    assert info.error is not None and "smtp down" in info.error.message


# -- how often a flow starts -------------------------------------------------------------------


def pause_flow(**options: Any) -> dict[str, Any]:
    return flow(
        "visits",
        [
            node("start", "Trigger", event="page.view"),
            node("pause", "Wait", duration=10_000),
            node("end", "Exit"),
        ],
        [edge("start", "pause"), edge("pause", "end")],
        **options,
    )


async def test_one_time_starts_once_per_subject_ever(engine: Engine, clock: Any) -> None:
    engine.add_flow(pause_flow())  # one_time is the default
    first = await engine.publish("page.view", {}, subject="client:5")
    assert first.started == ["flow:visits:default:client:5"]
    assert (await engine.publish("page.view", {}, subject="client:5")).started == []
    await clock.advance("1d")
    assert await status(engine, "flow:visits:default:client:5") == RunStatus.COMPLETED
    again = await engine.publish("page.view", {}, subject="client:5")
    assert again.started == [] and again.touched == 0
    other = await engine.publish("page.view", {}, subject="client:6")
    assert other.started == ["flow:visits:default:client:6"]
    runs = await engine.list_runs(workflow="visits")
    assert sorted(r.subject for r in runs) == ["client:5", "client:6"]


async def test_every_rematch_restarts_after_completion_and_interval(
    engine: Engine, clock: Any
) -> None:
    engine.add_flow(pause_flow(frequency={"type": "every_rematch", "interval": 60}))
    base = "flow:visits:default:client:5"
    assert (await engine.publish("page.view", {}, subject="client:5")).started == [base]
    await engine.idle()
    assert (await engine.publish("page.view", {}, subject="client:5")).started == []  # active
    await clock.advance("10s")
    assert await status(engine, base) == RunStatus.COMPLETED
    assert (await engine.publish("page.view", {}, subject="client:5")).started == []  # < 60s
    await clock.advance("50s")
    assert (await engine.publish("page.view", {}, subject="client:5")).started == [f"{base}:2"]
    await clock.advance("60s")
    assert (await engine.publish("page.view", {}, subject="client:5")).started == [f"{base}:3"]
    await engine.idle()
    runs = await engine.list_runs(workflow="visits", subject="client:5")
    assert len(runs) == 3


async def test_every_rematch_without_interval(engine: Engine, clock: Any) -> None:
    definition = flow(
        "hello",
        [node("start", "Trigger", event="hi"), node("end", "Exit")],
        [edge("start", "end")],
        frequency={"type": "every_rematch"},
    )
    engine.add_flow(definition)
    ids = []
    for _ in range(4):
        result = await engine.publish("hi", {}, subject="s")
        ids += result.started
        await engine.idle()
    base = "flow:hello:default:s"
    assert ids == [base, f"{base}:2", f"{base}:3", f"{base}:4"]


async def test_a_disabled_flow_starts_nothing(engine: Engine, calls: Calls) -> None:
    calls.register(engine, "send_email")
    engine.add_flow(back_in_stock(enabled=False))
    result = await engine.publish("order.create", ORDER, subject="client:5")
    assert result.started == [] and result.touched == 0
    await engine.idle()
    assert await engine.list_runs() == []


@pytest.mark.requires("persistent")
async def test_a_disabled_flow_resumes_nothing(make_engine: Any, calls: Calls) -> None:
    first = await make_engine()
    calls.register(first, "send_email")
    first.add_flow(back_in_stock())
    await first.publish("order.create", ORDER, subject="client:5")
    await first.idle()
    await first.close()

    second = await make_engine()
    calls.register(second, "send_email")
    second.add_flow(back_in_stock(enabled=False))
    result = await second.publish("product.update", {"stock": 1}, subject="product:456")
    assert (result.resumed, result.touched) == ([], 0)
    await second.idle()
    assert await status(second, RUN) == RunStatus.PARKED
    assert [s.run_id for s in await second.subscriptions()] == [RUN]  # still waiting
    assert calls.calls == []
    await second.close()

    # Enabled again: the event published meanwhile is not replayed; the next one resumes it.
    third = await make_engine()
    calls.register(third, "send_email")
    third.add_flow(back_in_stock())
    again = await third.publish("product.update", {"stock": 2}, subject="product:456")
    assert again.resumed == [RUN]
    await third.idle()
    assert len(calls.calls) == 1  # the e-mail went out once


async def test_a_flow_listens_to_its_own_domain(engine: Engine, calls: Calls) -> None:
    calls.register(engine, "send_email")
    engine.add_flow(back_in_stock(), domain="shop")
    elsewhere = await engine.publish("order.create", ORDER, subject="client:5")
    assert elsewhere.started == []
    here = await engine.publish("order.create", ORDER, subject="client:5", domain="shop")
    assert here.started == ["flow:back-in-stock:shop:client:5"]
    await engine.idle()
    [sub] = await engine.subscriptions()
    assert (sub.domain, sub.subject) == ("shop", "product:456")


# -- custom nodes and definitions in other shapes ----------------------------------------------


class WaitForPayment(NodeModel):
    """Parks until the order's payment settles (the order is another subject)."""

    required_params = ("hours",)

    def get_subscription(self, context: Any) -> SubscriptionRequest | None:
        order = context.trigger.get("order_id")
        if order is None:
            return None
        return SubscriptionRequest("payment.settled", f"order:{order}", self.params["hours"] * 3600)


async def ship_flow(make_engine: Any, calls: Calls) -> Engine:
    """An engine with the "ship" flow: an order, then a WaitForPayment node, then ship."""
    engine: Engine = await make_engine(
        node_models={**default_node_models, "WaitForPayment": WaitForPayment}
    )
    calls.register(engine, "ship")
    engine.add_flow(
        flow(
            "ship",
            [
                node("start", "Trigger", event="order.create"),
                node("paid", "WaitForPayment", hours=2),
                node("ship", "Action", action="ship", amount="{{event.amount}}"),
            ],
            [edge("start", "paid"), edge("paid", "ship")],
        )
    )
    return engine


async def test_a_custom_node_model_subscribes(make_engine: Any, calls: Calls) -> None:
    engine = await ship_flow(make_engine, calls)
    await engine.publish("order.create", {"order_id": 7}, subject="client:5")
    await engine.publish("order.create", {}, subject="client:6")  # no subscription: goes on
    await engine.idle()
    [sub] = await engine.subscriptions()
    assert (sub.run_id, sub.name, sub.subject) == (
        "flow:ship:default:client:5",
        "payment.settled",
        "order:7",
    )
    assert calls.calls[0][2].subject == "client:6"
    result = await engine.publish("payment.settled", {"amount": 30}, subject="order:7")
    assert result.resumed == ["flow:ship:default:client:5"]
    await engine.idle()
    assert [(c.subject, p["amount"]) for _, p, c in calls.calls] == [
        ("client:6", None),
        ("client:5", 30),
    ]


async def test_a_custom_node_models_ttl_bounds_its_subscription(
    make_engine: Any, calls: Calls, clock: Any
) -> None:
    engine = await ship_flow(make_engine, calls)
    await engine.publish("order.create", {"order_id": 7}, subject="client:5")
    await engine.idle()
    [sub] = await engine.subscriptions()
    assert sub.expires_at == clock.datetime() + timedelta(hours=2)  # its ttl_seconds
    await clock.advance(timedelta(hours=2, minutes=1))
    assert await engine.subscriptions() == []
    assert (await engine.publish("payment.settled", {}, subject="order:7")).touched == 0
    assert calls.calls == []


async def test_react_flow_extras_are_ignored(engine: Engine, calls: Calls) -> None:
    calls.register(engine, "send_email")
    definition = copy.deepcopy(back_in_stock())
    definition.update(description="made in the editor", createdAt="2030-01-01")
    graph = definition["flow"]
    graph["viewport"] = {"x": 10, "y": -4, "zoom": 0.8}
    for i, item in enumerate(graph["nodes"]):
        item.update(
            position={"x": i * 100, "y": 0},
            measured={"width": 150, "height": 40},
            selected=False,
            dragging=False,
            width=150,
            height=40,
            style={"color": "red"},
        )
        item["data"]["label"] = f"node {i}"
    for i, item in enumerate(graph["edges"]):
        item.update(
            id=f"e{i}",
            type="smoothstep",
            animated=True,
            markerEnd={"type": "arrow"},
            targetHandle=None,
            label="next",
            style={},
        )
    graph["edges"][0]["sourceHandle"] = None
    engine.add_flow(json.dumps(definition))
    await engine.publish("order.create", ORDER, subject="client:5")
    await engine.idle()
    await engine.publish("product.update", {"stock": 1}, subject="product:456")
    await engine.idle()
    assert calls.names() == ["send_email"]


async def test_add_flow_takes_a_path(engine: Engine, calls: Calls, tmp_path: Path) -> None:
    calls.register(engine, "send_email")
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(back_in_stock()))
    assert engine.add_flow(path).id == "back-in-stock"
    other = back_in_stock()
    other["id"] = "second"
    path.write_text(json.dumps(other))
    assert engine.add_flow(str(path)).id == "second"


async def test_a_flow_can_be_started_by_hand(engine: Engine, calls: Calls) -> None:
    calls.register(engine, "yes")
    calls.register(engine, "no")
    engine.add_flow(branching("equal", 1))
    handle = await engine.start("branch", {"fact": 1}, subject="client:9")
    assert await handle.result(timeout=10) == {"last_node": "yes", "state": {"yes": None}}
    assert calls.calls[0][2].trigger == {"fact": 1}
