"""ctx.step (sync and async, retries, failures) and replay-safe values."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

from parkway import Engine, Retry, RunStatus, StepFailedError, WorkflowFailedError
from tests.conftest import Backend


async def test_sync_and_async_steps_with_args_and_kwargs(engine: Engine) -> None:
    def add(a: int, b: int, *, times: int = 1) -> int:
        return (a + b) * times

    async def greet(name: str, punct: str = "!") -> str:
        return f"hi {name}{punct}"

    @engine.workflow()
    async def steps(ctx, input):
        total = await ctx.step(add, 2, 3, times=4)
        text = await ctx.step(greet, "ann", punct="?")
        data = await ctx.step(lambda: {"k": [1, 2.5, None, True]}, name="data")
        return [total, text, data]

    h = await engine.start("steps")
    assert await h.result(timeout=5) == [20, "hi ann?", {"k": [1, 2.5, None, True]}]
    history = await engine.history(h.id)
    assert [(e.kind, e.status, e.result) for e in history] == [
        ("step", "done", 20),
        ("step", "done", "hi ann?"),
        ("step", "done", {"k": [1, 2.5, None, True]}),
    ]
    # Default step name: the function's name; name= overrides it.
    assert history[0].name.endswith("add")
    assert history[1].name.endswith("greet")
    assert history[2].name == "data"


async def test_retry_succeeds_on_the_third_attempt(engine: Engine) -> None:
    attempts = Counter()

    def flaky() -> str:
        attempts["flaky"] += 1
        if attempts["flaky"] < 3:
            raise ConnectionError(f"attempt {attempts['flaky']} failed")
        return "ok"

    @engine.workflow()
    async def retrying(ctx, input):
        return await ctx.step(flaky, retry=Retry(max_attempts=3, backoff=0))

    h = await engine.start("retrying")
    assert await h.result(timeout=5) == "ok"
    assert attempts["flaky"] == 3
    # The failed attempts stay in the history, before the step's result.
    assert [(e.kind, e.status, e.result, e.attempt) for e in await engine.history(h.id)] == [
        ("attempt", "error", None, 1),
        ("attempt", "error", None, 2),
        ("step", "done", "ok", None),
    ]


def down_until(attempts: Counter, call: int) -> Callable[[], Awaitable[int]]:
    """An async step that fails (``ConnectionError``) until its ``call``-th call,
    which returns how many calls there were; ``attempts["n"]`` counts them."""

    async def flaky() -> int:
        attempts["n"] += 1
        if attempts["n"] < call:
            raise ConnectionError("down")
        return attempts["n"]

    return flaky


async def test_retry_backoff_waits_for_engine_time(engine: Engine, clock) -> None:
    attempts = Counter()
    flaky = down_until(attempts, 3)

    @engine.workflow()
    async def backing_off(ctx, input):
        return await ctx.step(
            flaky, name="flaky", retry=Retry(max_attempts=3, backoff="1s", factor=2)
        )

    h = await engine.start("backing_off")
    await engine.idle()
    assert attempts["n"] == 1
    assert not (await h.info()).status.is_terminal

    await clock.advance("999ms")
    assert attempts["n"] == 1
    await clock.advance("1ms")  # first backoff: 1s
    assert attempts["n"] == 2
    await clock.advance("1999ms")
    assert attempts["n"] == 2
    await clock.advance("1ms")  # second backoff: 2s
    assert await h.result(timeout=5) == 3
    assert attempts["n"] == 3


async def test_retry_backoff_stops_growing_at_max_backoff(engine: Engine, clock) -> None:
    attempts = Counter()
    flaky = down_until(attempts, 4)

    @engine.workflow()
    async def capped(ctx, input):
        retry = Retry(max_attempts=4, backoff="1s", factor=10, max_backoff="3s")
        return await ctx.step(flaky, name="flaky", retry=retry)

    h = await engine.start("capped")
    await engine.idle()
    await clock.advance("1s")  # first backoff: 1s
    assert attempts["n"] == 2
    await clock.advance("2999ms")  # second: 10s, capped at 3s
    assert attempts["n"] == 2
    await clock.advance("1ms")
    assert attempts["n"] == 3
    await clock.advance("3s")  # third: 100s, capped at 3s
    assert await h.result(timeout=5) == 4


async def test_exhausted_retries_raise_step_failed_into_the_workflow(engine: Engine) -> None:
    attempts = Counter()

    def always_fails() -> None:
        attempts["n"] += 1
        raise ValueError(f"no luck #{attempts['n']}")

    @engine.workflow()
    async def catcher(ctx, input):
        try:
            await ctx.step(always_fails, name="doomed", retry=Retry(max_attempts=2, backoff=0))
        except StepFailedError as exc:
            return {
                "step": exc.step,
                "attempts": exc.attempts,
                "type": exc.error_type,
                "message": exc.error_message,
            }
        return "not reached"

    h = await engine.start("catcher")
    assert await h.result(timeout=5) == {
        "step": "doomed",
        "attempts": 2,
        "type": "ValueError",
        "message": "no luck #2",
    }
    assert attempts["n"] == 2
    *tries, entry = await engine.history(h.id)
    assert [(t.kind, t.attempt, t.error.message) for t in tries] == [  # type: ignore[union-attr]
        ("attempt", 1, "no luck #1"),
        ("attempt", 2, "no luck #2"),
    ]
    assert (entry.kind, entry.name, entry.status, entry.result) == ("step", "doomed", "error", None)
    assert entry.error is not None
    assert entry.error.type == "StepFailedError"
    assert "no luck #2" in entry.error.message


async def test_caught_step_failure_is_replayed_not_retried_after_park(engine: Engine) -> None:
    attempts = Counter()

    def always_fails() -> None:
        attempts["n"] += 1
        raise RuntimeError("boom")

    @engine.workflow()
    async def catch_then_park(ctx, input):
        try:
            await ctx.step(always_fails, name="doomed")
            caught = None
        except StepFailedError as exc:
            caught = exc.error_message
        return [caught, await ctx.wait_for_signal("go")]

    h = await engine.start("catch_then_park")
    await engine.idle()
    assert attempts["n"] == 1
    await h.signal("go", "resumed")
    assert await h.result(timeout=5) == ["boom", "resumed"]
    assert attempts["n"] == 1


async def test_uncaught_step_failure_fails_the_run(engine: Engine) -> None:
    def charge(amount: int) -> None:
        raise ValueError(f"card declined for {amount}")

    @engine.workflow()
    async def payment(ctx, input):
        await ctx.step(charge, 30, name="charge", retry=Retry(max_attempts=2, backoff=0))
        return "paid"

    h = await engine.start("payment", id="pay-1")
    with pytest.raises(WorkflowFailedError) as exc_info:
        await h.result(timeout=5)
    exc = exc_info.value
    assert exc.type == "StepFailedError"
    assert "charge" in exc.error_message
    assert "card declined for 30" in exc.error_message
    assert "pay-1" in str(exc)

    info = await h.info()
    assert info.status is RunStatus.FAILED
    assert info.output is None
    assert info.error is not None
    assert info.error.type == "StepFailedError"
    assert "card declined for 30" in info.error.message
    assert "StepFailedError" in info.error  # reads as "Type: message"


async def test_workflow_exception_fails_the_run_with_its_type(engine: Engine) -> None:
    @engine.workflow()
    async def broken(ctx, input):
        await ctx.step(lambda: 1, name="fine")
        raise KeyError("missing-thing")

    h = await engine.start("broken")
    with pytest.raises(WorkflowFailedError) as exc_info:
        await h.result(timeout=5)
    assert exc_info.value.type == "KeyError"
    assert "missing-thing" in exc_info.value.error_message
    info = await h.info()
    assert info.status is RunStatus.FAILED
    assert info.error.type == "KeyError"
    assert "missing-thing" in info.error.message


@pytest.mark.replays
async def test_now_uuid_random_are_stable_across_replay(engine: Engine, clock, t0) -> None:
    seen: list[dict] = []

    @engine.workflow()
    async def observer(ctx, input):
        # Every replay re-evaluates these; the workflow reports what it saw each time.
        snapshot = {"now": ctx.now().isoformat(), "uuid": str(ctx.uuid()), "r": ctx.random()}
        seen.append(snapshot)
        await ctx.sleep("1h")
        seen.append({"now": ctx.now().isoformat(), "uuid": str(ctx.uuid()), "r": ctx.random()})
        return snapshot

    h = await engine.start("observer")
    await engine.idle()
    assert len(seen) == 1
    first = seen[0]
    assert first["now"] == t0.isoformat()
    assert uuid.UUID(first["uuid"]).version == 4
    assert 0.0 <= first["r"] < 1.0

    await clock.advance("1h")
    result = await h.result(timeout=5)
    # The replay after the park saw exactly the values recorded before it.
    assert len(seen) == 3
    assert seen[1] == first
    assert result == first
    # Values taken after the park are new ones, at the new engine time.
    assert seen[2]["now"] == (t0 + timedelta(hours=1)).isoformat()
    assert seen[2]["uuid"] != first["uuid"]


async def test_now_is_aware_utc_engine_time(engine: Engine, clock, t0) -> None:
    @engine.workflow()
    async def when(ctx, input):
        now = ctx.now()
        return [now.isoformat(), now.utcoffset().total_seconds()]

    await clock.advance("90s")
    h = await engine.start("when")
    assert await h.result(timeout=5) == [(t0 + timedelta(seconds=90)).isoformat(), 0.0]


async def test_a_result_commits_while_the_workflow_awaits_a_plain_awaitable(
    engine: Engine, backend: Backend
) -> None:
    """A workflow awaiting something outside parkway (an agent framework's loop deciding
    its next request) has the results that must be durable before its next step
    committed at once on a store whose commit is a round trip off the loop, so the
    commit's wait overlaps that work; the next step still runs after it, and the run
    ends as it would have."""
    reached = asyncio.Event()
    release: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def one() -> int:
        return 1

    async def two() -> int:
        return 2

    @engine.workflow()
    async def thinking(ctx, _input: object) -> int:
        first = await ctx.step(one, name="first")
        reached.set()
        await release  # (a plain asyncio future: nothing journaled)
        return first + await ctx.step(two, name="second")

    handle = await engine.start("thinking")
    await asyncio.wait_for(reached.wait(), 10)
    if backend.supports("persistent") and not backend.supports("loop_bound"):
        deadline = time.monotonic() + 10
        while not [e for e in await engine.history(handle.id) if e.name == "first"]:
            assert time.monotonic() < deadline, "the first step's result was never committed"
            await asyncio.sleep(0.01)
    release.set_result(None)
    assert await handle.result(timeout=10) == 3
    history = await engine.history(handle.id)
    assert [(e.kind, e.name, e.result) for e in history] == [
        ("step", "first", 1),
        ("step", "second", 2),
    ]
