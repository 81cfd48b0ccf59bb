"""Events (issue 3): publish fans out to subscribed workflows and to matching parked waits.

Covers waits with and without ``match``, event-started runs (ids, de-duplication,
input validation), ``ctx.publish`` (exactly once, across a restart), wait timeouts,
``since_start``, and the clear errors of malformed input that leave nothing behind.
Debounce and batch are in ``test_events_accumulate.py``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from parkway import (
    Batch,
    Delivery,
    Engine,
    Event,
    InvalidInputError,
    ParkwayError,
    PublishResult,
    RunStatus,
    SerializationError,
    UnknownWorkflowError,
    WaitTimeoutError,
    WorkflowFailedError,
)


class Payment(BaseModel):
    """The input model of a typed subscriber (module level, so annotations resolve)."""

    order_id: int
    amount: float


async def snapshot(engine: Engine) -> tuple[list[tuple[str, str]], list[Any]]:
    """Everything a failed call must leave unchanged: runs and subscriptions."""
    runs = [(r.id, r.status.value) for r in await engine.list_runs(limit=1000)]
    return runs, await engine.subscriptions()


async def status(engine: Engine, run_id: str) -> RunStatus:
    return (await engine.get_run(run_id)).status


# ---------------------------------------------------------------------------------------------
# Waiters


async def test_waiters_are_resumed_only_by_their_own_payment(engine: Engine) -> None:
    @engine.workflow()
    async def order(ctx, input):
        payment = await ctx.wait_for_event("payment", match={"order_id": input["order_id"]})
        return {"order": input["order_id"], "paid": payment["amount"]}

    a = await engine.start("order", {"order_id": 1}, id="order-1")
    b = await engine.start("order", {"order_id": 2}, id="order-2")
    await engine.idle()
    assert await status(engine, "order-1") is RunStatus.PARKED
    assert await status(engine, "order-2") is RunStatus.PARKED

    result = await engine.publish("payment", {"order_id": 2, "amount": 20})
    assert isinstance(result, PublishResult)
    assert result.resumed == ["order-2"]
    assert result.started == []
    assert result.touched == 1
    assert not result.duplicate
    assert result.deliveries == [Delivery("order-2", result.deliveries[0].wait, None)]
    assert "payment" in result.deliveries[0].wait
    assert await b.result(timeout=5) == {"order": 2, "paid": 20}
    assert await status(engine, "order-1") is RunStatus.PARKED

    # A payment for an order nobody waits on touches nobody.
    nobody = await engine.publish("payment", {"order_id": 3, "amount": 30})
    assert (nobody.resumed, nobody.started, nobody.touched) == ([], [], 0)
    # A payload without the matched key does not match either.
    missing = await engine.publish("payment", {"amount": 10})
    assert missing.touched == 0

    # 1.0 deep-equals 1.
    result = await engine.publish("payment", {"order_id": 1.0, "amount": 10})
    assert result.resumed == ["order-1"]
    assert await a.result(timeout=5) == {"order": 1, "paid": 10}
    assert await engine.subscriptions() == []


async def test_match_on_several_keys_and_nested_values(engine: Engine) -> None:
    @engine.workflow()
    async def shipped(ctx, input):
        return await ctx.wait_for_event(
            "shipment", match={"order": {"id": 7, "lines": [1, 2]}, "carrier": "ups"}
        )

    h = await engine.start("shipped")
    await engine.idle()
    for near_miss in (
        {"order": {"id": 7, "lines": [2, 1]}, "carrier": "ups"},
        {"order": {"id": 7, "lines": [1, 2], "x": 1}, "carrier": "ups"},
        {"order": {"id": 7, "lines": [1, 2]}, "carrier": "dhl"},
        {"order": {"id": 7, "lines": [1, 2]}},
        {"order": {"id": True, "lines": [1, 2]}, "carrier": "ups"},
    ):
        assert (await engine.publish("shipment", near_miss)).touched == 0, near_miss
    hit = {"carrier": "ups", "order": {"lines": [1.0, 2], "id": 7}, "extra": None}
    assert (await engine.publish("shipment", hit)).resumed == [h.id]
    assert await h.result(timeout=5) == hit


async def test_a_large_number_in_a_payload_does_not_break_publish(engine: Engine) -> None:
    @engine.workflow(on_event="payment")
    async def ledger(ctx, input):
        return input

    @engine.workflow()
    async def order(ctx, input):
        return await ctx.wait_for_event("payment", match={"amount": 5})

    await engine.start("order", id="order")
    await engine.idle()
    # 1e20 is valid JSON and is stored fine; it just matches nobody's wait.
    result = await engine.publish("payment", {"amount": 1e20}, id="big")
    assert result.started == ["evt:big:ledger"]
    assert result.resumed == []


async def test_a_wait_matching_a_large_number_parks(engine: Engine) -> None:
    @engine.workflow()
    async def order(ctx, input):
        return await ctx.wait_for_event("payment", match={"amount": 1e20})

    h = await engine.start("order", id="order")
    await engine.idle()
    assert await status(engine, "order") is RunStatus.PARKED
    assert (await engine.publish("payment", {"amount": 1e20})).resumed == ["order"]
    assert await h.result(timeout=5) == {"amount": 1e20}


async def test_a_waiter_without_match_is_resumed_by_any_payload(engine: Engine) -> None:
    @engine.workflow()
    async def anything(ctx, input):
        return await ctx.wait_for_event("ping")

    payloads = [None, 0, "text", [1, 2], {"a": {"b": None}}]
    handles = []
    for i in range(len(payloads)):
        handles.append(await engine.start("anything", id=f"w{i}"))
        await engine.idle()
        result = await engine.publish("ping", payloads[i])
        assert result.resumed == [f"w{i}"]
    for h, payload in zip(handles, payloads, strict=True):
        assert await h.result(timeout=5) == payload


async def test_one_publish_resumes_every_matching_waiter(engine: Engine) -> None:
    @engine.workflow()
    async def waiter(ctx, input):
        return await ctx.wait_for_event("deploy", match=input)

    await engine.start("waiter", {"env": "prod"}, id="prod-1")
    await engine.start("waiter", {"env": "prod"}, id="prod-2")
    await engine.start("waiter", None, id="any")
    await engine.start("waiter", {"env": "test"}, id="test")
    await engine.idle()
    result = await engine.publish("deploy", {"env": "prod", "v": 3})
    assert sorted(result.resumed) == ["any", "prod-1", "prod-2"]
    assert sorted(d.run_id for d in result.deliveries) == ["any", "prod-1", "prod-2"]
    assert result.touched == 3
    await engine.idle()
    assert await status(engine, "test") is RunStatus.PARKED
    assert [s.run_id for s in await engine.subscriptions()] == ["test"]


async def test_events_published_at_once_each_resume_their_own_waiter(engine: Engine) -> None:
    # Published together, events share commits where the store batches them; each
    # still gets its own outcome: its waiter resumed, a duplicate id, nobody
    # resumed (nobody waits, or its waiter was taken by an event just before it).
    @engine.workflow()
    async def order(ctx, order_id):
        return await ctx.wait_for_event("order.paid", match={"order_id": order_id})

    handles = [await engine.start("order", i, id=f"order-{i}") for i in range(12)]
    await engine.idle()
    await engine.publish("order.paid", {"order_id": -1})  # nobody's: the shape is known now
    publishes = [
        engine.publish("order.paid", {"order_id": i, "n": i}, id=f"e-{i}") for i in range(12)
    ]
    publishes.append(engine.publish("order.paid", {"order_id": 3, "n": 99}, id="e-3"))
    publishes.append(engine.publish("order.paid", {"order_id": 5, "n": 55}, id="second-5"))
    publishes.append(engine.publish("order.paid", {"order_id": 99}))
    results = await asyncio.gather(*publishes)
    assert [r.resumed for r in results[:12]] == [[f"order-{i}"] for i in range(12)]
    assert [(r.duplicate, r.touched) for r in results[12:]] == [(True, 0), (False, 0), (False, 0)]
    assert [r.event_id for r in results[:12]] == [f"e-{i}" for i in range(12)]
    for i, handle in enumerate(handles):
        assert await handle.result(timeout=10) == {"order_id": i, "n": i}
    assert await engine.subscriptions() == []


async def test_one_publish_counts_a_waiter_and_a_trigger(engine: Engine) -> None:
    @engine.workflow(on_event="order.paid")
    async def invoice(ctx, input):
        return {"invoiced": input["order_id"]}

    @engine.workflow()
    async def order(ctx, input):
        return await ctx.wait_for_event("order.paid", match={"order_id": 5})

    waiter = await engine.start("order", id="order-5")
    await engine.idle()
    result = await engine.publish("order.paid", {"order_id": 5}, id="e-5")
    assert result.started == ["evt:e-5:invoice"]
    assert result.resumed == ["order-5"]
    assert result.touched == 2
    assert await waiter.result(timeout=5) == {"order_id": 5}
    assert await engine.handle("evt:e-5:invoice").result(timeout=5) == {"invoiced": 5}


# ---------------------------------------------------------------------------------------------
# Event-started runs


async def test_event_started_run_id_input_and_trigger(engine: Engine) -> None:
    @engine.workflow(on_event="signup")
    async def welcome(ctx, input):
        t = ctx.trigger
        return {
            "input": input,
            "run_id": ctx.run_id,
            "trigger": [t.name, t.payload, t.id, t.domain, t.subject],
        }

    result = await engine.publish("signup", {"email": "a@b.c"}, id="ev-1")
    assert result.started == ["evt:ev-1:welcome"]
    assert result.event_id == "ev-1"
    out = await engine.handle("evt:ev-1:welcome").result(timeout=5)
    assert out == {
        "input": {"email": "a@b.c"},
        "run_id": "evt:ev-1:welcome",
        "trigger": ["signup", {"email": "a@b.c"}, "ev-1", "default", None],
    }
    info = await engine.get_run("evt:ev-1:welcome")
    assert (info.workflow, info.input, info.domain, info.subject) == (
        "welcome",
        {"email": "a@b.c"},
        "default",
        None,
    )

    # Without an id the engine gives the event one, and the run id follows it.
    result = await engine.publish(Event("signup", {"email": "x@y.z"}))
    assert result.event_id
    assert result.started == [f"evt:{result.event_id}:welcome"]


async def test_a_workflow_started_by_several_event_names(engine: Engine) -> None:
    @engine.workflow(on_event=["a.created", "a.updated"])
    async def audit(ctx, input):
        return ctx.trigger.name

    r1 = await engine.publish("a.created", id="1")
    r2 = await engine.publish("a.updated", id="2")
    r3 = await engine.publish("a.deleted", id="3")
    assert (r1.started, r2.started, r3.started) == (["evt:1:audit"], ["evt:2:audit"], [])
    assert await engine.handle("evt:1:audit").result(timeout=5) == "a.created"
    assert await engine.handle("evt:2:audit").result(timeout=5) == "a.updated"


async def test_the_same_event_id_does_not_start_a_second_run(engine: Engine) -> None:
    calls: Counter[str] = Counter()

    @engine.workflow(on_event="order.created")
    async def fulfil(ctx, input):
        await ctx.step(lambda: calls.update([ctx.run_id]), name="count")
        return input

    @engine.workflow()
    async def waiter(ctx, input):
        first = await ctx.wait_for_event("order.created")
        second = await ctx.wait_for_event("order.created")
        return [first, second]

    w = await engine.start("waiter", id="waiter")
    await engine.idle()
    first = await engine.publish("order.created", {"n": 1}, id="dup")
    await engine.idle()
    again = await engine.publish("order.created", {"n": 2}, id="dup")
    assert first.started == ["evt:dup:fulfil"] and first.resumed == ["waiter"]
    assert again.duplicate is True
    assert (again.started, again.resumed, again.deliveries, again.touched) == ([], [], [], 0)
    await engine.idle()
    assert [r.id for r in await engine.list_runs(workflow="fulfil")] == ["evt:dup:fulfil"]
    assert calls == {"evt:dup:fulfil": 1}
    # The duplicate did not feed the waiter's second wait either.
    assert await status(engine, "waiter") is RunStatus.PARKED
    assert (await engine.publish("order.created", {"n": 3}, id="other")).resumed == ["waiter"]
    assert await w.result(timeout=5) == [{"n": 1}, {"n": 3}]


# ---------------------------------------------------------------------------------------------
# Input validation


def positive_amount(value: Any) -> Any:
    if not isinstance(value, dict) or not value.get("amount", 0) > 0:
        raise ValueError("amount must be positive")
    return {**value, "checked": True}


async def test_rejected_subscribers_block_neither_others_nor_waiters(engine: Engine) -> None:
    @engine.workflow(on_event="payment", validate_input=positive_amount)
    async def validated(ctx, input):
        return input

    @engine.workflow(on_event="payment")
    async def typed(ctx, input: Payment):
        assert isinstance(input, Payment)
        return {"order_id": input.order_id, "amount": input.amount}

    @engine.workflow(on_event="payment")
    async def plain(ctx, input):
        return input

    @engine.workflow()
    async def waiter(ctx, input):
        return await ctx.wait_for_event("payment")

    w = await engine.start("waiter", id="waiter")
    await engine.idle()

    # Rejected by both validators (amount not positive, order_id not an int).
    bad = {"order_id": "not-a-number", "amount": -1}
    result = await engine.publish("payment", bad, id="bad")
    assert result.started == ["evt:bad:plain"]
    assert result.resumed == ["waiter"]
    assert result.touched == 2
    assert await w.result(timeout=5) == bad
    assert await engine.handle("evt:bad:plain").result(timeout=5) == bad
    for name in ("validated", "typed"):
        assert await engine.list_runs(workflow=name) == []

    # A good payload starts all three; the validator's return value is the input.
    good = {"order_id": 9, "amount": 12.5}
    result = await engine.publish("payment", good, id="good")
    assert sorted(result.started) == ["evt:good:plain", "evt:good:typed", "evt:good:validated"]
    assert await engine.handle("evt:good:validated").result(timeout=5) == {
        **good,
        "checked": True,
    }
    assert await engine.handle("evt:good:typed").result(timeout=5) == good
    assert (await engine.get_run("evt:good:validated")).input == {**good, "checked": True}


async def test_start_with_input_a_model_rejects_raises_naming_the_field(engine: Engine) -> None:
    @engine.workflow()
    async def typed(ctx, input: Payment):
        return input.order_id

    with pytest.raises(InvalidInputError) as exc_info:
        await engine.start("typed", {"order_id": "abc", "amount": 1})
    error = exc_info.value
    assert isinstance(error, ParkwayError)
    assert error.field == "order_id"
    assert "order_id" in str(error)
    assert "typed" in str(error)

    with pytest.raises(InvalidInputError) as exc_info:
        await engine.start("typed", {"order_id": 1})
    assert exc_info.value.field == "amount"
    assert "amount" in str(exc_info.value)
    assert await engine.list_runs() == []

    h = await engine.start("typed", {"order_id": "4", "amount": 1})  # coerced by the model
    assert await h.result(timeout=5) == 4
    assert (await h.info()).input == {"order_id": 4, "amount": 1.0}


async def test_start_with_input_a_validator_rejects_keeps_its_message(engine: Engine) -> None:
    @engine.workflow(validate_input=positive_amount)
    async def validated(ctx, input):
        return input

    with pytest.raises(InvalidInputError, match="amount must be positive") as exc_info:
        await engine.start("validated", {"amount": 0})
    assert "validated" in str(exc_info.value)
    assert await engine.list_runs() == []
    h = await engine.start("validated", {"amount": 3})
    assert await h.result(timeout=5) == {"amount": 3, "checked": True}


async def test_start_with_input_that_is_not_json_names_the_path(engine: Engine) -> None:
    @engine.workflow()
    async def anything(ctx, input):
        return input

    with pytest.raises(InvalidInputError) as exc_info:
        await engine.start("anything", {"tags": {"a", "b"}})
    assert "tags" in str(exc_info.value)
    assert await engine.list_runs() == []


# ---------------------------------------------------------------------------------------------
# ctx.publish


async def test_ctx_publish_starts_another_workflow_exactly_once(engine: Engine, clock) -> None:
    calls: Counter[str] = Counter()

    @engine.workflow(on_event="order.placed")
    async def notify(ctx, input):
        await ctx.step(lambda: calls.update(["notify"]), name="notify")
        return {"notified": input["order"], "by": ctx.trigger.id}

    @engine.workflow()
    async def checkout(ctx, input):
        result = await ctx.publish("order.placed", {"order": input})
        await ctx.sleep("1m")  # replays the publish from the journal
        await ctx.step(lambda: calls.update(["checkout"]), name="after")
        return {"started": result.started, "touched": result.touched, "event": result.event_id}

    h = await engine.start("checkout", 42, id="checkout-1")
    await engine.idle()
    runs = await engine.list_runs(workflow="notify")
    assert len(runs) == 1
    await clock.advance("1m")
    out = await h.result(timeout=5)
    assert out["started"] == [runs[0].id]
    assert out["touched"] == 1
    assert runs[0].id == f"evt:{out['event']}:notify"
    assert await engine.handle(runs[0].id).result(timeout=5) == {
        "notified": 42,
        "by": out["event"],
    }
    assert len(await engine.list_runs(workflow="notify")) == 1
    assert calls == {"notify": 1, "checkout": 1}


@pytest.mark.requires("persistent")
async def test_ctx_publish_is_not_repeated_after_an_engine_restart(make_engine, clock) -> None:
    def register(engine: Engine) -> None:
        @engine.workflow(on_event="ticket.opened")
        async def triage(ctx, input):
            return input

        @engine.workflow()
        async def support(ctx, input):
            result = await ctx.publish("ticket.opened", {"ticket": input})
            reply = await ctx.wait_for_signal("reply")
            again = await ctx.publish("ticket.closed", {"ticket": input})
            return {"opened": result.started, "reply": reply, "closed_touched": again.touched}

    first = await make_engine(open=False)
    register(first)
    await first.open()
    await first.start("support", "T-1", id="support-1")
    await first.idle()
    assert len(await first.list_runs(workflow="triage")) == 1
    await first.close()

    second = await make_engine(open=False)
    register(second)
    await second.open()
    await second.handle("support-1").signal("reply", "done")
    out = await second.handle("support-1").result(timeout=5)
    triage_runs = await second.list_runs(workflow="triage")
    assert [r.id for r in triage_runs] == out["opened"]
    assert len(triage_runs) == 1
    assert out["reply"] == "done"
    assert out["closed_touched"] == 0


# ---------------------------------------------------------------------------------------------
# Timeouts


async def test_wait_timeout_raises_and_removes_the_subscription(engine: Engine, clock) -> None:
    @engine.workflow()
    async def order(ctx, input):
        try:
            return await ctx.wait_for_event("payment", match={"order_id": 1}, timeout="30m")
        except WaitTimeoutError as exc:
            return {"timed_out": str(exc)}

    h = await engine.start("order", id="order-1")
    await engine.idle()
    [sub] = await engine.subscriptions()
    assert (sub.run_id, sub.kind, sub.name, sub.match) == (
        "order-1",
        "event",
        "payment",
        {"order_id": 1},
    )
    await clock.advance("29m")
    assert await status(engine, "order-1") is RunStatus.PARKED
    await clock.advance("1m")
    out = await h.result(timeout=5)
    assert "payment" in out["timed_out"]
    assert await engine.subscriptions() == []
    late = await engine.publish("payment", {"order_id": 1})
    assert (late.resumed, late.touched) == ([], 0)


async def test_an_uncaught_wait_timeout_fails_the_run(engine: Engine, clock) -> None:
    @engine.workflow()
    async def strict(ctx, input):
        return await ctx.wait_for_event("payment", timeout=60)

    h = await engine.start("strict")
    await engine.idle()
    await clock.advance("1m")
    with pytest.raises(WorkflowFailedError) as exc_info:
        await h.result(timeout=5)
    assert exc_info.value.type == "WaitTimeoutError"
    assert await engine.subscriptions() == []


# ---------------------------------------------------------------------------------------------
# since_start


async def test_since_start_catches_an_event_published_before_the_wait(
    engine: Engine, clock
) -> None:
    @engine.workflow()
    async def eager(ctx, input):
        await ctx.sleep("1m")
        return await ctx.wait_for_event("ready", match={"job": input}, since_start=True)

    @engine.workflow()
    async def plain(ctx, input):
        await ctx.sleep("1m")
        return await ctx.wait_for_event("ready", match={"job": input})

    e = await engine.start("eager", "j1", id="eager")
    p = await engine.start("plain", "j1", id="plain")
    await engine.idle()
    await clock.advance("30s")
    early = await engine.publish("ready", {"job": "j1", "n": 1})
    assert early.touched == 0  # nobody is subscribed yet: both are asleep
    await clock.advance("30s")
    assert await e.result(timeout=5) == {"job": "j1", "n": 1}
    # The plain wait missed it and waits for the next one.
    assert await status(engine, "plain") is RunStatus.PARKED
    assert [s.run_id for s in await engine.subscriptions()] == ["plain"]
    assert (await engine.publish("ready", {"job": "j1", "n": 2})).resumed == ["plain"]
    assert await p.result(timeout=5) == {"job": "j1", "n": 2}


async def test_since_start_is_a_look_back_every_run_sees(engine: Engine, clock) -> None:
    @engine.workflow()
    async def eager(ctx, input):
        await ctx.sleep("1m")
        first = await ctx.wait_for_event("tick", since_start=True)
        # The look-back never hands the same event to this run twice.
        second = await ctx.wait_for_event("tick", since_start=True)
        return [first, second]

    a = await engine.start("eager", id="a")
    b = await engine.start("eager", id="b")
    await engine.idle()
    await clock.advance("10s")
    await engine.publish("tick", 1)
    await clock.advance("10s")
    await engine.publish("tick", 2)
    await clock.advance("40s")
    assert await a.result(timeout=5) == [1, 2]
    assert await b.result(timeout=5) == [1, 2]


async def test_since_start_ignores_events_from_before_the_run(engine: Engine, clock) -> None:
    @engine.workflow()
    async def eager(ctx, input):
        return await ctx.wait_for_event("ready", since_start=True)

    await engine.publish("ready", "before")
    await clock.advance("1s")
    h = await engine.start("eager", id="eager")
    await engine.idle()
    assert await status(engine, "eager") is RunStatus.PARKED
    await clock.advance("1s")
    assert (await engine.publish("ready", "after")).resumed == ["eager"]
    assert await h.result(timeout=5) == "after"


async def test_since_start_never_hands_a_run_its_own_trigger(engine: Engine, clock) -> None:
    @engine.workflow(on_event="order.created")
    async def follow_up(ctx, input):
        nxt = await ctx.wait_for_event("order.created", since_start=True)
        return {"mine": input["n"], "next": nxt["n"]}

    first = await engine.publish("order.created", {"n": 1}, id="o1")
    await engine.idle()
    [first_run] = first.started
    assert (await engine.get_run(first_run)).status is RunStatus.PARKED
    await clock.advance("1s")
    second = await engine.publish("order.created", {"n": 2}, id="o2")
    assert second.resumed == [first_run]
    assert await engine.handle(first_run).result(timeout=5) == {"mine": 1, "next": 2}
    [second_run] = second.started
    await engine.idle()
    assert (await engine.get_run(second_run)).status is RunStatus.PARKED


# ---------------------------------------------------------------------------------------------
# Malformed input: a clear ParkwayError, and nothing written


async def _waiter_and_subscriber(engine: Engine) -> None:
    @engine.workflow(on_event="x")
    async def on_x(ctx, input):
        return input

    @engine.workflow()
    async def waits_x(ctx, input):
        return await ctx.wait_for_event("x")

    await engine.start("waits_x", id="waiter")
    await engine.idle()


@pytest.mark.parametrize("name", ["", "   ", 5, None, b"x"])
async def test_publish_with_a_bad_event_name(engine: Engine, name) -> None:
    await _waiter_and_subscriber(engine)
    before = await snapshot(engine)
    with pytest.raises(ParkwayError, match="event name"):
        await engine.publish(name, {"a": 1}, id="bad-1")
    with pytest.raises(ParkwayError, match="event name"):
        await engine.publish(Event(name, {"a": 1}, id="bad-2"))
    assert await snapshot(engine) == before
    # The ids were not recorded: they are free for a good event.
    for event_id in ("bad-1", "bad-2"):
        result = await engine.publish("x", {"ok": event_id}, id=event_id)
        assert not result.duplicate
        assert result.started == [f"evt:{event_id}:on_x"]


async def test_publish_with_a_payload_that_is_not_json(engine: Engine) -> None:
    await _waiter_and_subscriber(engine)
    before = await snapshot(engine)
    with pytest.raises(SerializationError) as exc_info:
        await engine.publish("x", {"tags": {"a", "b"}}, id="bad")
    assert isinstance(exc_info.value, ParkwayError)
    assert "tags" in str(exc_info.value)
    assert "'x'" in str(exc_info.value)
    with pytest.raises(ParkwayError):
        await engine.publish("x", float("nan"), id="bad")
    assert await snapshot(engine) == before
    result = await engine.publish("x", {"tags": ["a", "b"]}, id="bad")
    assert not result.duplicate
    assert result.touched == 2


@pytest.mark.parametrize(
    ("field", "value"), [("id", ""), ("id", 7), ("domain", ""), ("subject", ""), ("subject", "*")]
)
async def test_publish_with_a_bad_envelope_field(engine: Engine, field, value) -> None:
    await _waiter_and_subscriber(engine)
    before = await snapshot(engine)
    with pytest.raises(ParkwayError, match=field):
        await engine.publish("x", {}, **{field: value})
    assert await snapshot(engine) == before


@pytest.mark.parametrize("match", [["order_id", 1], "order_id=1", 1, {1: "x"}, {"": 1}])
async def test_wait_with_a_match_that_is_not_a_dict(engine: Engine, match) -> None:
    @engine.workflow()
    async def bad_wait(ctx, input):
        try:
            await ctx.wait_for_event("payment", match=match)
        except ParkwayError as exc:
            return {"error": type(exc).__name__, "message": str(exc)}
        return "waited"

    @engine.workflow()
    async def uncaught(ctx, input):
        return await ctx.wait_for_event("payment", match=match)

    h = await engine.start("bad_wait")
    out = await h.result(timeout=5)
    assert out["error"] == "ParkwayError"
    assert "match" in out["message"]
    with pytest.raises(WorkflowFailedError, match="match"):
        await (await engine.start("uncaught")).result(timeout=5)
    assert await engine.subscriptions() == []
    assert (await engine.publish("payment", {"order_id": 1})).touched == 0


async def test_conflicting_debounce_and_batch_are_refused_at_registration(engine: Engine) -> None:
    with pytest.raises(ParkwayError, match="debounce") as exc_info:

        @engine.workflow(on_event="x", debounce="1m", batch=Batch(3, "1m"))
        async def both(ctx, input):
            return input

    assert "batch" in str(exc_info.value)
    assert "both" in str(exc_info.value)
    with pytest.raises(UnknownWorkflowError):
        await engine.start("both")
    result = await engine.publish("x", 1, id="after")
    assert (result.started, result.touched, result.duplicate) == ([], 0, False)
    assert await engine.list_runs(limit=1000) == []
    assert await engine.subscriptions() == []


@pytest.mark.parametrize(
    "options",
    [
        {"debounce": "1m"},  # no on_event to feed it
        {"on_event": "x", "batch": Batch(0, "1m")},
        {"on_event": "x", "batch": Batch(3, "soon")},
        {"on_event": "x", "batch": (3, "1m")},
        {"on_event": "x", "debounce": "whenever"},
        {"on_event": ""},
        {"on_event": ["x", 5]},
    ],
)
async def test_other_malformed_event_options_are_refused(engine: Engine, options) -> None:
    with pytest.raises(ParkwayError):

        @engine.workflow(**options)
        async def broken(ctx, input):
            return input

    with pytest.raises(UnknownWorkflowError):
        await engine.start("broken")
    assert (await engine.publish("x", 1)).touched == 0
    assert await engine.list_runs(limit=1000) == []
