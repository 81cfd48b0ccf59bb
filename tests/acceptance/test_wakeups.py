"""The worker claims exactly when there is work, on real time.

A worker whose store reports every commit that adds tasks (PostgreSQL's
LISTEN/NOTIFY, this process's commits included) claims only when told, and
keeps the earliest future due time it was told of instead of asking the
store each time it goes idle. These tests make the worker's fallback poll an
hour long, so that a wake-up it should have had but missed shows as a test
that times out, not as a slower pass.
"""

from __future__ import annotations

import asyncio

import pytest

import parkway.worker.loop
from parkway import Engine, RunStatus
from parkway.store.base import REPORTS_OWN

from .steps import blocking_step

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def no_fallback_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parkway.worker.loop, "FULL_POLL", 3600.0)


@pytest.mark.requires("push")
async def test_a_window_that_another_process_opened_closes_on_time(engine_url: str) -> None:
    # The worker has looked at the store (nothing due), then a client's publish
    # adds a debounce task due in half a second: the notification carries its due
    # time, and the idle worker wakes for it.
    worker, client = Engine(engine_url), Engine(engine_url, worker=False)
    for engine in (worker, client):

        @engine.workflow("reindex", on_event="stock.changed", debounce="0.5s")
        async def reindex(ctx, input):
            return input

    async with worker, client:
        await worker.idle(timeout=5)
        await asyncio.sleep(0.2)  # idle, with its next due time known (none)
        await client.publish("stock.changed", {"n": 1})
        for _ in range(100):
            runs = await client.list_runs(workflow="reindex")
            if runs and runs[0].status is RunStatus.COMPLETED:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the debounce window did not close")
        assert runs[0].output == {"n": 1}


async def test_a_signal_sent_while_its_run_is_advanced_is_taken_after(engine_url: str) -> None:
    # While the run is leased, the claim the signal prompts finds nothing; the run's
    # worker must look again once it lets go of the run. (The advance read the
    # mailbox before the signal came: the wait after the step parks.)
    engine = Engine(engine_url)
    in_step, release, slow = blocking_step("stepped")

    @engine.workflow()
    async def waiter(ctx, input):
        first = await ctx.wait_for_signal("first")
        await ctx.step(slow)
        return [first, await ctx.wait_for_signal("second")]

    async with engine:
        handle = await engine.start("waiter")
        await engine.idle(timeout=10)
        await handle.signal("first", 1)
        await asyncio.wait_for(in_step.wait(), 10)
        await handle.signal("second", 2)
        await asyncio.sleep(0.1)
        release.set()
        assert await handle.result(timeout=10) == [1, 2]


async def test_a_run_woken_here_goes_to_this_worker_or_waits_for_a_place(
    engine_url: str,
) -> None:
    # A signal, publish or correlate hands the run it wakes straight to this
    # process's worker (leased in the same transaction), if the worker has a free
    # place; else the run is claimed once a place frees up.
    engine = Engine(engine_url, concurrency=1)
    release = asyncio.Event()

    async def hold() -> str:
        await release.wait()
        return "held"

    @engine.workflow()
    async def blocker(ctx, input):
        return await ctx.step(hold)

    @engine.workflow()
    async def waiter(ctx, input):
        return [
            await ctx.wait_for_signal("go"),
            await ctx.wait_for_event("order.paid", match={"order_id": input}),
            await ctx.wait_for_message("score", f"K-{input}"),
        ]

    @engine.workflow()
    async def signalled(ctx, input):
        return await ctx.wait_for_signal("go")

    async with engine:
        first = await engine.start("waiter", 1)
        await engine.idle(timeout=10)
        await first.signal("go", "signalled")
        await engine.idle(timeout=10)
        assert (await engine.publish("order.paid", {"order_id": 1})).resumed == [first.id]
        await engine.idle(timeout=10)
        assert (await engine.correlate("score", "K-1", 7)).outcome == "delivered"
        assert await first.result(timeout=10) == ["signalled", {"order_id": 1}, 7]

        second = await engine.start("signalled")
        await engine.idle(timeout=10)
        busy = await engine.start("blocker")  # takes the only place
        for _ in range(100):
            if (await busy.info()).status is RunStatus.RUNNING:
                break
            await asyncio.sleep(0.05)
        await second.signal("go", "queued")
        await asyncio.sleep(0.1)
        assert (await second.info()).status is RunStatus.PARKED  # no place for it yet
        release.set()
        assert await busy.result(timeout=10) == "held"
        assert await second.result(timeout=10) == "queued"


async def test_a_run_handed_to_this_worker_costs_it_no_claim(engine_url: str) -> None:
    # A start, a signal and a correlate that lease their run to this process's
    # worker leave its claim loop alone: it would find the run's task taken and
    # claim nothing. Counted while the run each woke is held in a step, before
    # the run's own commit (which may add tasks, and so does look).
    engine = Engine(engine_url)
    entered, release, held = blocking_step("held")

    @engine.workflow()
    async def signalled(ctx, input):
        await ctx.wait_for_signal("go")
        return await ctx.step(held)

    @engine.workflow()
    async def messaged(ctx, input):
        await ctx.wait_for_message("score", "K-1")
        return await ctx.step(held)

    @engine.workflow()
    async def started(ctx, input):
        return await ctx.step(held)

    async with engine:
        assert engine.worker is not None
        store = engine.worker.rt.store
        claim, claims = store.claim, []

        async def counted(*args: object, **kwargs: object) -> list[str]:
            claimed = await claim(*args, **kwargs)  # type: ignore[arg-type]
            claims.append(claimed)
            return claimed

        store.claim = counted  # type: ignore[method-assign]
        one, two = await engine.start("signalled"), await engine.start("messaged")
        await engine.idle(timeout=10)

        async def signal() -> object:
            return await one.signal("go", 1)

        async def message() -> object:
            return await engine.correlate("score", "K-1", 7)

        async def start() -> object:
            return await engine.start("started", id="three")

        for send in (signal, message, start):
            await asyncio.sleep(0.05)  # (the worker idle, whatever it looked at before)
            claims.clear()
            entered.clear()
            await send()
            await asyncio.wait_for(entered.wait(), 10)
            await asyncio.sleep(0.05)
            assert claims == [], send.__name__
            release.set()
            await engine.idle(timeout=10)
            release.clear()
        for handle in (one, two, engine.handle("three")):
            assert await handle.result(timeout=10) == "held"


async def test_a_woken_run_that_ends_costs_its_worker_no_look(engine_url: str) -> None:
    # A message delivered to a parked run this worker advances (handed over with
    # the delivery), whose advance commits nothing that adds a task: neither the
    # delivery nor the run's commit nor its end makes the claim loop look for
    # work, where a store that tells this process's commits that add tasks
    # (PostgreSQL, SQLite) says so. Counted over the whole advance this time.
    engine = Engine(engine_url)

    @engine.workflow()
    async def messaged(ctx, input):
        await ctx.wait_for_message("score", f"K-{input}")
        return await ctx.step(_stamp, input)

    async with engine:
        assert engine.worker is not None
        store = engine.worker.rt.store
        claim, has_due, looks = store.claim, store.has_due, []

        async def counted(*args: object, **kwargs: object) -> list[str]:
            looks.append("claim")
            return await claim(*args, **kwargs)  # type: ignore[arg-type]

        async def asked(now: float) -> bool:
            looks.append("has_due")
            return await has_due(now)

        handles = [await engine.start("messaged", i) for i in range(3)]
        await engine.idle(timeout=10)
        await asyncio.sleep(0.05)  # (the worker idle, whatever it looked at before)
        store.claim, store.has_due = counted, asked  # type: ignore[method-assign]
        for i, handle in enumerate(handles):
            assert (await engine.correlate("score", f"K-{i}", i)).outcome == "delivered"
            assert await handle.result(timeout=10) == i
        await asyncio.sleep(0.05)
        reports = REPORTS_OWN & store.capabilities
        assert looks == [] if reports else len(looks) >= 3, looks


async def _stamp(value: int) -> int:
    return value


@pytest.mark.requires("shared")
async def test_another_processs_task_for_a_run_in_its_advance_is_found_without_its_wake_up(
    engine_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client's signal comes while the worker advances the run, and its wake-up
    # is lost (none is sent here): the worker finds it by its poll of the store,
    # and takes the run again once its advance has let go of it, not at the next
    # poll an hour later.
    worker, client = Engine(engine_url), Engine(engine_url, worker=False)
    in_step, release, slow = blocking_step("stepped")
    for engine in (worker, client):

        @engine.workflow("waiter")
        async def waiter(ctx, input):
            first = await ctx.wait_for_signal("first")
            await ctx.step(slow)
            return [first, await ctx.wait_for_signal("second")]

    async with worker, client:
        store = client._rt.store
        if getattr(store, "wakeups", None) is not None:
            monkeypatch.setattr(store.wakeups, "announce", lambda: None)
        handle = await client.start("waiter", None)
        await worker.idle(timeout=10)
        await client.signal(handle.id, "first", 1)
        await asyncio.wait_for(in_step.wait(), 10)
        await client.signal(handle.id, "second", 2)
        await asyncio.sleep(0.1)  # (the worker's poll has seen the client's commit)
        release.set()
        assert await handle.result(timeout=10) == [1, 2]


@pytest.mark.requires("shared")
async def test_another_processs_signal_wakes_the_idle_worker_without_a_poll(
    engine_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No poll at all (SQLite's data_version poll is an hour long too): the worker
    # hears of the client's commit (a wake-up datagram on SQLite, NOTIFY on
    # PostgreSQL), each time, or the run never resumes.
    monkeypatch.setattr(parkway.worker.loop, "CROSS_PROCESS_POLL", 3600.0)
    monkeypatch.setattr(parkway.worker.loop, "QUIET_POLL", 3600.0)
    worker, client = Engine(engine_url), Engine(engine_url, worker=False)
    for engine in (worker, client):

        @engine.workflow("waiter")
        async def waiter(ctx, input):
            return [await ctx.wait_for_signal("go"), await ctx.wait_for_signal("go")]

    async with worker, client:
        handle = await client.start("waiter", None)
        await worker.idle(timeout=10)
        for value in (1, 2):
            await asyncio.sleep(0.1)  # the worker is idle, waiting
            await client.signal(handle.id, "go", value)
        assert await handle.result(timeout=10) == [1, 2]


@pytest.mark.requires("shared")
async def test_a_run_handed_to_this_worker_wakes_no_other_process(
    engine_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A start, a signal and a correlate whose run goes to the sender's own worker
    # tell no other process's worker (no wake-up datagram on SQLite, no NOTIFY on
    # PostgreSQL): it could only claim nothing. A start from a process without a
    # worker does tell it. No poll: a look for work (a claim, or the due check
    # before one) is a wake-up heard.
    monkeypatch.setattr(parkway.worker.loop, "CROSS_PROCESS_POLL", 3600.0)
    monkeypatch.setattr(parkway.worker.loop, "QUIET_POLL", 3600.0)
    here, other = Engine(engine_url), Engine(engine_url)
    client = Engine(engine_url, worker=False)
    for engine in (here, other, client):

        @engine.workflow("waiter")
        async def waiter(ctx, input):
            await ctx.wait_for_signal("go")
            await ctx.wait_for_message("score", f"K-{input}")
            return input

    async with here, other, client:
        assert other.worker is not None
        store = other.worker.rt.store
        claim, has_due, claims = store.claim, store.has_due, []

        async def counted(*args: object, **kwargs: object) -> list[str]:
            claimed = await claim(*args, **kwargs)  # type: ignore[arg-type]
            claims.append(claimed)
            return claimed

        async def asked(now: float) -> bool:
            claims.append(now)
            return await has_due(now)

        await asyncio.sleep(0.1)  # (the other worker's first look done)
        store.claim = counted  # type: ignore[method-assign]
        store.has_due = asked  # type: ignore[method-assign]
        handle = await here.start("waiter", 1)
        await here.idle(timeout=10)
        await here.signal(handle.id, "go")
        await here.idle(timeout=10)
        await here.correlate("score", "K-1", None)
        assert await handle.result(timeout=10) == 1
        await asyncio.sleep(0.1)
        assert claims == []
        await client.start("waiter", 2)
        for _ in range(100):
            if claims:
                break
            await asyncio.sleep(0.05)
        assert claims, "a start from a process without a worker tells the other worker"
