"""Durable timers (sleep, sleep_until) and signals (mailbox, order, timeouts)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from parkway import (
    Engine,
    ParkwayError,
    RunClosedError,
    RunStatus,
    WaitTimeoutError,
    WorkflowFailedError,
)

from .steps import blocking_step


@pytest.mark.parametrize("duration", ["90s", 90, 90.0, timedelta(seconds=90), "90000ms"])
async def test_sleep_parks_until_engine_time_passes(engine: Engine, clock, t0, duration) -> None:
    @engine.workflow()
    async def sleeper(ctx, input):
        await ctx.sleep(duration)
        return ctx.now().isoformat()

    h = await engine.start("sleeper")
    await engine.idle()
    assert (await h.info()).status is RunStatus.PARKED
    await clock.advance("89s")
    assert (await h.info()).status is RunStatus.PARKED
    await clock.advance("1s")
    assert await h.result(timeout=5) == (t0 + timedelta(seconds=90)).isoformat()


async def test_consecutive_sleeps_count_from_when_each_is_set(engine: Engine, clock, t0) -> None:
    @engine.workflow()
    async def twice(ctx, input):
        await ctx.sleep("1h")
        first = ctx.now()
        await ctx.sleep("1h")
        return [first.isoformat(), ctx.now().isoformat()]

    h = await engine.start("twice")
    await engine.idle()
    await clock.advance("90m")
    assert (await h.info()).status is RunStatus.PARKED
    await clock.advance("30m")
    assert await h.result(timeout=5) == [
        (t0 + timedelta(hours=1)).isoformat(),
        (t0 + timedelta(hours=2)).isoformat(),
    ]


async def test_one_advance_runs_through_a_chain_of_timers(engine: Engine, clock, t0) -> None:
    @engine.workflow()
    async def chain(ctx, input):
        stamps = []
        for _ in range(3):
            await ctx.sleep("1d")
            stamps.append(ctx.now().isoformat())
        return stamps

    h = await engine.start("chain")
    await clock.advance("1w")
    # Every wake-up has settled by the time advance() returns.
    assert (await h.info()).status is RunStatus.COMPLETED
    assert await h.result(timeout=5) == [(t0 + timedelta(days=d)).isoformat() for d in (1, 2, 3)]


async def test_sleep_until_a_datetime(engine: Engine, clock, t0) -> None:
    wake = t0 + timedelta(days=2, hours=3)

    @engine.workflow()
    async def until(ctx, input):
        await ctx.sleep_until(wake)
        # A naive datetime is UTC.
        await ctx.sleep_until((wake + timedelta(minutes=5)).replace(tzinfo=None))
        return ctx.now().isoformat()

    h = await engine.start("until")
    await clock.advance(timedelta(days=2, hours=3) - timedelta(seconds=1))
    assert (await h.info()).status is RunStatus.PARKED
    await clock.advance("1s")
    assert (await h.info()).status is RunStatus.PARKED
    await clock.advance("5m")
    assert await h.result(timeout=5) == (wake + timedelta(minutes=5)).isoformat()


async def test_sleep_zero_and_sleep_until_the_past_do_not_park(engine: Engine, t0) -> None:
    @engine.workflow()
    async def no_wait(ctx, input):
        await ctx.sleep(0)
        await ctx.sleep_until(t0 - timedelta(days=1))
        return "done"

    h = await engine.start("no_wait")
    assert await h.result(timeout=5) == "done"


async def test_signal_resumes_a_parked_run_with_its_payload(engine: Engine) -> None:
    @engine.workflow()
    async def approval(ctx, input):
        decision = await ctx.wait_for_signal("decide")
        return {"order": input, "decision": decision}

    h = await engine.start("approval", "o-1")
    await engine.idle()
    assert (await h.info()).status is RunStatus.PARKED
    await engine.signal(h.id, "decide", {"approved": True, "by": "ann"})
    assert await h.result(timeout=5) == {
        "order": "o-1",
        "decision": {"approved": True, "by": "ann"},
    }


async def test_signal_payload_defaults_to_none(engine: Engine) -> None:
    @engine.workflow()
    async def ping(ctx, input):
        return {"payload": await ctx.wait_for_signal("ping")}

    h = await engine.start("ping")
    await engine.idle()
    await h.signal("ping")
    assert await h.result(timeout=5) == {"payload": None}


async def test_signals_sent_before_the_wait_are_buffered_in_order_per_name(
    engine: Engine, clock
) -> None:
    @engine.workflow()
    async def mailbox(ctx, input):
        await ctx.sleep("1m")
        b = await ctx.wait_for_signal("b")
        a1 = await ctx.wait_for_signal("a")
        a2 = await ctx.wait_for_signal("a")
        a3 = await ctx.wait_for_signal("a")
        return [b, a1, a2, a3]

    h = await engine.start("mailbox")
    await engine.idle()
    await h.signal("a", 1)
    await h.signal("a", 2)
    await h.signal("b", "bee")
    await engine.idle()
    assert (await h.info()).status is RunStatus.PARKED
    await clock.advance("1m")
    # Three "a" signals are awaited but only two were sent: it waits for the third.
    assert (await h.info()).status is RunStatus.PARKED
    await h.signal("a", 3)
    assert await h.result(timeout=5) == ["bee", 1, 2, 3]


async def test_many_signals_are_consumed_in_the_order_sent(engine: Engine) -> None:
    @engine.workflow()
    async def many(ctx, input):
        return [await ctx.wait_for_signal("n") for _ in range(input)]

    h = await engine.start("many", 10)
    for i in range(10):
        await h.signal("n", i)
    assert await h.result(timeout=5) == list(range(10))


async def test_wait_for_signal_timeout_can_be_caught(engine: Engine, clock) -> None:
    @engine.workflow()
    async def patient(ctx, input):
        try:
            return await ctx.wait_for_signal("reply", timeout="1h")
        except WaitTimeoutError as exc:
            return {"timed_out": str(exc), "is_timeout": isinstance(exc, TimeoutError)}

    h = await engine.start("patient")
    await engine.idle()
    await clock.advance("59m")
    assert (await h.info()).status is RunStatus.PARKED
    await clock.advance("1m")
    result = await h.result(timeout=5)
    assert result["is_timeout"] is True
    assert "reply" in result["timed_out"]
    [entry] = await engine.history(h.id)
    assert (entry.kind, entry.name, entry.status) == ("signal", "reply", "error")
    assert entry.error.type == "WaitTimeoutError"


async def test_repeated_wait_timeouts_each_fire(engine: Engine, clock, t0) -> None:
    @engine.workflow()
    async def poller(ctx, input):
        timeouts = []
        for _ in range(4):
            try:
                await ctx.wait_for_signal("tick", timeout="1m")
            except WaitTimeoutError:
                timeouts.append(ctx.now().isoformat())
        return timeouts

    h = await engine.start("poller")
    await engine.idle()
    for _ in range(4):
        await clock.advance("1m")
    assert (await h.info()).status is RunStatus.COMPLETED
    assert await h.result(timeout=5) == [
        (t0 + timedelta(minutes=m)).isoformat() for m in (1, 2, 3, 4)
    ]


async def test_uncaught_wait_timeout_fails_the_run(engine: Engine, clock) -> None:
    @engine.workflow()
    async def impatient(ctx, input):
        return await ctx.wait_for_signal("reply", timeout=30)

    h = await engine.start("impatient")
    await engine.idle()
    await clock.advance("30s")
    with pytest.raises(WorkflowFailedError) as exc_info:
        await h.result(timeout=5)
    assert exc_info.value.type == "WaitTimeoutError"
    assert "reply" in exc_info.value.error_message
    assert (await h.info()).error.type == "WaitTimeoutError"


async def test_signal_before_timeout_wins_and_the_timer_is_forgotten(engine: Engine, clock) -> None:
    @engine.workflow()
    async def racer(ctx, input):
        first = await ctx.wait_for_signal("go", timeout="1h")
        second = await ctx.wait_for_signal("again")  # no timeout
        return [first, second]

    h = await engine.start("racer")
    await engine.idle()
    await clock.advance("30m")
    await h.signal("go", "in time")
    await engine.idle()
    # Past the first wait's deadline: nothing may time out now.
    await clock.advance("2h")
    info = await h.info()
    assert info.status is RunStatus.PARKED
    assert info.error is None
    await h.signal("again", "late but fine")
    assert await h.result(timeout=5) == ["in time", "late but fine"]


async def test_buffered_signal_satisfies_a_wait_with_timeout(engine: Engine, clock) -> None:
    @engine.workflow()
    async def early(ctx, input):
        await ctx.sleep("1m")
        return await ctx.wait_for_signal("go", timeout="1s")

    h = await engine.start("early")
    await engine.idle()
    await h.signal("go", "was waiting")
    await clock.advance("10m")
    assert await h.result(timeout=5) == "was waiting"


async def test_signal_sent_while_a_step_runs_is_not_lost(engine: Engine, clock) -> None:
    entered, release, slow = blocking_step("slow")

    @engine.workflow()
    async def busy(ctx, input):
        await ctx.sleep("1h")
        await ctx.sleep("1h")
        x = await ctx.wait_for_signal("x")
        s = await ctx.step(slow, name="slow")
        y = await ctx.wait_for_signal("y")  # sent while "slow" runs
        return [x, s, y]

    h = await engine.start("busy")
    await engine.idle()
    await h.signal("x", 1)
    await engine.idle()
    await clock.advance("1h")
    advancing = asyncio.create_task(clock.advance("1h"))
    await asyncio.wait_for(entered.wait(), 5)
    await h.signal("y", 2)
    release.set()
    await advancing
    await engine.idle()
    assert (await h.info()).status is RunStatus.COMPLETED
    assert await h.result(timeout=5) == [1, "slow", 2]


async def test_signal_to_a_finished_run_is_refused(engine: Engine) -> None:
    @engine.workflow()
    async def done(ctx, input):
        return "ok"

    h = await engine.start("done")
    assert await h.result(timeout=5) == "ok"
    before = await h.info()
    with pytest.raises(RunClosedError) as exc_info:
        await h.signal("late", 1)
    assert isinstance(exc_info.value, ParkwayError)
    assert h.id in str(exc_info.value)
    assert await h.info() == before
