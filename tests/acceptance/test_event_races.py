"""Races between events, subscriptions and runs (issue 4), and crash safety on SQLite.

Each race is its own test: an event that comes before the subscription, two
deliveries for one wait, a duplicated delivery, a delivery that finds its run
gone elsewhere, a bulk import that must touch only the subscribed runs, the sweep
of expired subscriptions, and a worker process killed while runs park and while
deliveries are in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import timedelta

import pytest

from parkway import Engine, RunCancelledError, RunStatus, WaitTimeoutError, WorkflowFailedError
from parkway.testing import ManualClock

# ---------------------------------------------------------------------------------------------
# Early events


async def test_an_event_before_the_subscription_is_not_delivered(engine: Engine, clock) -> None:
    @engine.workflow()
    async def late(ctx, input):
        await ctx.sleep("1m")
        return await ctx.wait_for_event("ready", since_start=input)

    plain = await engine.start("late", False, id="plain")
    eager = await engine.start("late", True, id="eager")
    await engine.idle()
    assert await engine.subscriptions() == []  # both still asleep
    early = await engine.publish("ready", "early")
    assert (early.resumed, early.touched) == ([], 0)
    await clock.advance("1m")
    # The look-back closes the race for the run that asked for it...
    assert await eager.result(timeout=5) == "early"
    # ...the plain wait subscribed after the event and did not get it.
    assert (await plain.info()).status is RunStatus.PARKED
    assert [s.run_id for s in await engine.subscriptions()] == ["plain"]
    assert (await engine.publish("ready", "next")).resumed == ["plain"]
    assert await plain.result(timeout=5) == "next"


async def test_an_event_before_the_run_was_created_is_not_looked_back_at(
    engine: Engine, clock
) -> None:
    @engine.workflow()
    async def eager(ctx, input):
        return await ctx.wait_for_event("ready", since_start=True)

    await engine.publish("ready", "too early")
    await clock.advance("1s")
    h = await engine.start("eager")
    await engine.idle()
    assert (await h.info()).status is RunStatus.PARKED


# ---------------------------------------------------------------------------------------------
# Two deliveries for one wait


async def test_two_matching_events_back_to_back_resume_the_run_once(engine: Engine) -> None:
    steps: Counter[str] = Counter()

    @engine.workflow()
    async def order(ctx, input):
        payment = await ctx.wait_for_event("payment", match={"order": 1})
        await ctx.step(lambda: steps.update([ctx.run_id]), name="ship")
        return payment

    h = await engine.start("order", id="order-1")
    await engine.idle()
    first = await engine.publish("payment", {"order": 1, "n": 1})
    second = await engine.publish("payment", {"order": 1, "n": 2})
    assert first.resumed == ["order-1"] and first.touched == 1
    assert (second.resumed, second.deliveries, second.touched) == ([], [], 0)
    assert await h.result(timeout=5) == {"order": 1, "n": 1}
    await engine.idle()
    assert steps == {"order-1": 1}
    assert [e.kind for e in await engine.history("order-1")] == ["event", "step"]
    assert await engine.subscriptions() == []


@pytest.mark.requires("persistent", "shared")
async def test_deliveries_queued_while_no_worker_runs_resume_the_run_once(
    make_engine,
) -> None:
    steps: Counter[str] = Counter()

    def register(engine: Engine) -> None:
        @engine.workflow()
        async def order(ctx, input):
            payment = await ctx.wait_for_event("payment", match={"order": 1})
            await ctx.step(lambda: steps.update(["ship"]), name="ship")
            nxt = await ctx.wait_for_event("payment", match={"order": 1})
            return [payment, nxt]

    worker = await make_engine(open=False)
    register(worker)
    await worker.open()
    await worker.start("order", id="order-1")
    await worker.idle()
    await worker.close()

    # Nobody works: both events are published before any delivery is processed.
    client = await make_engine(open=False, worker=False)
    register(client)
    await client.open()
    first = await client.publish("payment", {"order": 1, "n": 1})
    second = await client.publish("payment", {"order": 1, "n": 2})
    assert first.resumed == ["order-1"]
    assert second.resumed == []

    again = await make_engine(open=False)
    register(again)
    await again.open()
    await again.idle()
    # The first was consumed; the second found no subscription and is not replayed
    # into the run's next wait.
    assert (await again.get_run("order-1")).status is RunStatus.PARKED
    assert steps == {"ship": 1}
    third = await client.publish("payment", {"order": 1, "n": 3})
    assert third.resumed == ["order-1"]
    assert await again.handle("order-1").result(timeout=5) == [
        {"order": 1, "n": 1},
        {"order": 1, "n": 3},
    ]
    assert steps == {"ship": 1}


async def test_a_duplicated_event_resumes_the_run_once(engine: Engine) -> None:
    resumed: Counter[str] = Counter()

    @engine.workflow()
    async def waiter(ctx, input):
        first = await ctx.wait_for_event("ping")
        await ctx.step(lambda: resumed.update(["first"]), name="count")
        second = await ctx.wait_for_event("ping")
        return [first, second]

    h = await engine.start("waiter", id="w")
    await engine.idle()
    one = await engine.publish("ping", 1, id="p-1")
    two = await engine.publish("ping", 1, id="p-1")  # the same event, delivered twice
    assert one.resumed == ["w"]
    assert two.duplicate and two.touched == 0
    await engine.idle()
    assert resumed == {"first": 1}
    assert (await h.info()).status is RunStatus.PARKED
    three = await engine.publish("ping", 1, id="p-1")  # still the same event
    assert three.duplicate
    assert (await engine.publish("ping", 2, id="p-2")).resumed == ["w"]
    assert await h.result(timeout=5) == [1, 2]
    assert resumed == {"first": 1}


@pytest.mark.requires("shared")
async def test_the_same_event_from_two_engines_at_once_is_taken_once(make_engine) -> None:
    def register(engine: Engine) -> None:
        @engine.workflow(on_event="ping")
        async def started(ctx, input):
            return input

        @engine.workflow()
        async def waiter(ctx, input):
            return await ctx.wait_for_event("ping")

    a = await make_engine(open=False)
    b = await make_engine(open=False, worker=False)
    for e in (a, b):
        register(e)
        await e.open()
    await a.start("waiter", id="w")
    await a.idle()
    results = await asyncio.gather(
        *(e.publish("ping", n, id="same") for n, e in enumerate([a, b, a, b]))
    )
    fresh = [r for r in results if not r.duplicate]
    assert len(fresh) == 1
    assert fresh[0].resumed == ["w"] and fresh[0].started == ["evt:same:started"]
    await a.idle()
    assert len(await a.list_runs(workflow="started")) == 1
    assert (await a.get_run("w")).status is RunStatus.COMPLETED


@pytest.mark.requires("persistent", "shared")
async def test_a_delivery_to_a_run_cancelled_meanwhile_is_dropped(make_engine) -> None:
    steps: Counter[str] = Counter()

    def register(engine: Engine) -> None:
        @engine.workflow()
        async def order(ctx, input):
            payment = await ctx.wait_for_event("payment")
            await ctx.step(lambda: steps.update(["ship"]), name="ship")
            return payment

    worker = await make_engine(open=False)
    register(worker)
    await worker.open()
    h = await worker.start("order", id="order-1")
    await worker.idle()
    await worker.close()

    client = await make_engine(open=False, worker=False)
    register(client)
    await client.open()
    assert (await client.publish("payment", 1)).resumed == ["order-1"]
    await client.cancel("order-1")

    again = await make_engine(open=False)
    register(again)
    await again.open()
    await again.idle()
    with pytest.raises(RunCancelledError):
        await again.handle(h.id).result(timeout=5)
    assert steps == {}
    assert await again.subscriptions() == []


@pytest.mark.requires("persistent", "shared")
async def test_an_event_after_the_deadline_does_not_beat_the_timeout(
    make_engine, clock, t0
) -> None:
    def register(engine: Engine) -> None:
        @engine.workflow()
        async def order(ctx, input):
            try:
                return await ctx.wait_for_event("payment", timeout="1m")
            except WaitTimeoutError:
                return "timed out"

    worker = await make_engine(open=False)
    register(worker)
    await worker.open()
    h = await worker.start("order", id="order-1")
    await worker.idle()
    await worker.close()

    # No worker for two minutes: the deadline (t0 + 1m) passes, then the event comes.
    later = ManualClock(start=t0 + timedelta(minutes=2))
    client = await make_engine(open=False, worker=False, clock=later)
    register(client)
    await client.open()
    late = await client.publish("payment", "too late")

    again = await make_engine(open=False, clock=later)
    register(again)
    await again.open()
    await again.idle()
    assert await again.handle(h.id).result(timeout=5) == "timed out"
    assert late.resumed == []


# ---------------------------------------------------------------------------------------------
# Bulk import


@pytest.mark.parametrize("backend", ["memory", "sqlite"], indirect=True)  # keep it fast
async def test_a_bulk_import_touches_only_the_subscribed_runs(engine: Engine) -> None:
    @engine.workflow()
    async def restock(ctx, input):
        update = await ctx.wait_for_event("product.update", subject=f"product:{input}")
        return {"client": ctx.subject, "stock": update["stock"]}

    watched = list(range(3, 10_000, 500))
    assert len(watched) == 20
    for product in watched:
        await engine.start("restock", product, id=f"watch-{product}", subject=f"client:{product}")
    await engine.idle()
    assert len(await engine.subscriptions()) == 20

    started = time.monotonic()
    touched: dict[int, list[str]] = {}
    for product in range(10_000):
        result = await engine.publish(
            "product.update",
            {"product_id": product, "stock": product % 7},
            subject=f"product:{product}",
        )
        assert not result.started
        if result.touched:
            touched[product] = result.resumed
            assert [d.source_subject for d in result.deliveries] == [f"product:{product}"]
    elapsed = time.monotonic() - started
    assert touched == {p: [f"watch-{p}"] for p in watched}
    await engine.idle()
    for product in watched:
        assert await engine.handle(f"watch-{product}").result(timeout=5) == {
            "client": f"client:{product}",
            "stock": product % 7,
        }
    assert await engine.subscriptions() == []
    assert elapsed < 30, f"10,000 publishes took {elapsed:.1f}s"


# ---------------------------------------------------------------------------------------------
# The sweep of expired subscriptions


async def test_the_sweep_removes_subscriptions_past_their_ttl(engine: Engine, clock) -> None:
    @engine.workflow()
    async def forever(ctx, input):
        return await ctx.wait_for_event("never", subject=input)

    await engine.start("forever", "a", id="forever")
    await engine.idle()
    [sub] = await engine.subscriptions()
    assert sub.expires_at == clock.datetime() + timedelta(days=90)

    await clock.advance("89d")
    await asyncio.sleep(0.05)  # give the worker's sweep every chance to run
    assert [s.run_id for s in await engine.subscriptions()] == ["forever"]

    await clock.advance(timedelta(days=1, seconds=61))
    # The sweep (every 60 s of engine time) has run by the time advance() returns.
    assert await engine.subscriptions() == []
    # The run itself stays parked (the TTL is a safety net), and nobody is touched.
    assert (await engine.get_run("forever")).status is RunStatus.PARKED
    assert (await engine.publish("never", 1, subject="a")).touched == 0


async def test_a_wait_can_set_its_own_ttl(engine: Engine, clock) -> None:
    @engine.workflow()
    async def short(ctx, input):
        return await ctx.wait_for_event("soon", subject="x", ttl=input, timeout="30d")

    await engine.start("short", "10m", id="short")
    await engine.idle()
    [sub] = await engine.subscriptions()
    assert sub.expires_at == clock.datetime() + timedelta(minutes=10)
    await clock.advance(timedelta(minutes=11))
    assert await engine.subscriptions() == []
    assert (await engine.publish("soon", 1, subject="x")).touched == 0
    # Its timeout still ends the wait.
    await clock.advance("30d")
    with pytest.raises(WorkflowFailedError, match="WaitTimeoutError"):
        await engine.handle("short").result(timeout=10)


@pytest.mark.parametrize("ttl", [0, -5, "soon", True])
async def test_a_bad_ttl_fails_the_wait_clearly(engine: Engine, ttl: object) -> None:
    @engine.workflow()
    async def bad(ctx, input):
        return await ctx.wait_for_event("soon", ttl=ttl)

    with pytest.raises(WorkflowFailedError, match="ttl"):
        await (await engine.start("bad")).result(timeout=10)


async def test_an_expired_subscription_is_not_delivered_even_before_the_sweep(
    engine: Engine, clock
) -> None:
    @engine.workflow()
    async def forever(ctx, input):
        return await ctx.wait_for_event("never")

    await engine.start("forever", id="forever")
    await engine.idle()
    await clock.advance(timedelta(days=90, seconds=1))
    assert (await engine.publish("never", 1)).touched == 0


# ---------------------------------------------------------------------------------------------
# Crash safety: a worker that dies right after taking a wait's input


LOST_RUN = (
    "BUG: a run whose wait was ended by a timer or a delivery, and which then runs a step, "
    "is lost if its worker dies during that step: the flush before the step "
    "(replay.Execution._step -> flush at replay.py:397 -> Writes.apply, replay.py:128-133) "
    "deletes the wait's timer/delivery task (tx.delete_wait_tasks) while the run is still "
    "leased and 'running'; that task was the run's only due task, and claim only takes runs "
    "with a due task (sqlite.sql claim_candidates), so no worker ever picks it up again"
)


# ---------------------------------------------------------------------------------------------
# Crash safety: a worker process killed while runs park and while deliveries are in flight
