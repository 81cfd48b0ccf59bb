"""Sagas and run deadlines: ctx.step(compensate=), ctx.compensate(), compensation on
failure, cancel and timeout, and @engine.workflow(timeout=) / engine.start(timeout=)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from parkway import (
    CancelOn,
    CompensationFailedError,
    Concurrency,
    Engine,
    ParkwayError,
    Retry,
    RunCancelledError,
    RunStatus,
    WorkflowFailedError,
)
from parkway.testing import ManualClock


def booking(engine: Engine, done: list[str], *, fail_ship: bool = False) -> None:
    """The classic saga: reserve, charge, ship; each undone by its compensation."""

    def reserve(order: str) -> dict[str, Any]:
        done.append("reserve")
        return {"hold": f"H-{order}"}

    async def charge(order: str) -> str:
        done.append("charge")
        return f"P-{order}"

    def ship(order: str) -> str:
        if fail_ship:
            raise RuntimeError("no courier")
        done.append("ship")
        return f"S-{order}"

    def release(hold: dict[str, Any]) -> str:
        done.append(f"release {hold['hold']}")
        return "released"

    async def refund(payment: str) -> str:
        done.append(f"refund {payment}")
        return "refunded"

    @engine.workflow()
    async def book(ctx, order: str) -> str:
        await ctx.step(reserve, order, name="reserve", compensate=release)
        await ctx.step(charge, order, name="charge", compensate=refund)
        await ctx.wait_for_signal("go")
        return await ctx.step(ship, order, name="ship")


async def test_a_failure_undoes_the_saga_in_reverse(engine: Engine) -> None:
    done: list[str] = []
    booking(engine, done, fail_ship=True)
    h = await engine.start("book", "o1")
    await engine.signal(h.id, "go")
    with pytest.raises(WorkflowFailedError) as caught:
        await h.result(timeout=5)
    assert caught.value.type == "StepFailedError"
    assert done == ["reserve", "charge", "refund P-o1", "release H-o1"]
    history = await engine.history(h.id)
    assert [(e.kind, e.name, e.status) for e in history if "compensation" in e.kind] == [
        ("compensation.registered", "reserve", "done"),
        ("compensation.registered", "charge", "done"),
        ("compensation", "charge", "done"),
        ("compensation", "reserve", "done"),
    ]
    assert [e.result for e in history if e.kind == "compensation"] == ["refunded", "released"]


async def test_a_completed_run_leaves_its_compensations_unrun(engine: Engine) -> None:
    done: list[str] = []
    booking(engine, done)
    h = await engine.start("book", "o2")
    await engine.signal(h.id, "go")
    assert await h.result(timeout=5) == "S-o2"
    assert done == ["reserve", "charge", "ship"]
    assert not [e for e in await engine.history(h.id) if e.kind == "compensation"]


async def test_a_cancel_undoes_the_saga_in_reverse_before_the_run_ends(engine: Engine) -> None:
    done: list[str] = []
    booking(engine, done)
    h = await engine.start("book", "o3")
    await wait_parked(engine, h.id)
    await engine.cancel(h.id)
    with pytest.raises(RunCancelledError):
        await h.result(timeout=5)
    assert done == ["reserve", "charge", "refund P-o3", "release H-o3"]
    assert (await engine.get_run(h.id)).status == RunStatus.CANCELLED
    history = await engine.history(h.id)
    assert [(e.kind, e.name) for e in history if e.kind in ("compensation", "stop")] == [
        ("stop", "cancel"),
        ("compensation", "charge"),
        ("compensation", "reserve"),
    ]


async def test_a_cancel_of_a_run_without_compensations_ends_it_at_once(engine: Engine) -> None:
    @engine.workflow()
    async def plain(ctx, _: None) -> None:
        await ctx.step(lambda: 1, name="one")
        await ctx.wait_for_signal("never")

    h = await engine.start("plain")
    await wait_parked(engine, h.id)
    await engine.cancel(h.id)
    # (No worker is needed: the cancel ended it in its own transaction.)
    assert (await engine.get_run(h.id)).status == RunStatus.CANCELLED
    assert [e.kind for e in await engine.history(h.id)] == ["step", "signal"]


async def test_cancel_on_and_cancel_oldest_compensate_too(engine: Engine) -> None:
    undone: list[str] = []

    async def body(ctx, order: dict[str, Any]) -> None:
        await ctx.step(lambda: order["id"], name="reserve", compensate=undone.append)
        await ctx.wait_for_signal("go")

    match = lambda order: {"order": order["id"]}  # noqa: E731
    engine.workflow(name="cancellable", cancel_on=[CancelOn("order.cancelled", match=match)])(body)
    engine.workflow(name="latest", concurrency=Concurrency(1, "k", "cancel_oldest"))(body)

    by_event = await engine.start("cancellable", {"id": "e1"})
    oldest = await engine.start("latest", {"id": "o1", "k": "x"})
    await wait_parked(engine, by_event.id)
    await wait_parked(engine, oldest.id)
    await engine.publish("order.cancelled", {"order": "e1"})
    newest = await engine.start("latest", {"id": "o2", "k": "x"})
    for h in (by_event, oldest):
        with pytest.raises(RunCancelledError):
            await h.result(timeout=5)
    await wait_parked(engine, newest.id)
    assert sorted(undone) == ["e1", "o1"]


async def test_a_cancel_while_parked_in_a_gather_compensates_every_branch(
    engine: Engine,
) -> None:
    undone: list[str] = []

    async def leg(ctx, name: str) -> None:
        await ctx.step(lambda: name, name=f"book-{name}", compensate=undone.append)
        await ctx.wait_for_signal(f"confirm-{name}")

    @engine.workflow()
    async def trip(ctx, _: None) -> None:
        await ctx.step(lambda: "trip", name="open", compensate=undone.append)
        await ctx.gather(leg(ctx, "flight"), leg(ctx, "hotel"))

    h = await engine.start("trip")
    await wait_parked(engine, h.id)
    await engine.cancel(h.id)
    with pytest.raises(RunCancelledError):
        await h.result(timeout=5)
    assert undone[-1] == "trip" and sorted(undone[:2]) == ["flight", "hotel"]


async def test_a_paused_run_with_compensations_can_be_cancelled(engine: Engine) -> None:
    done: list[str] = []
    booking(engine, done)
    h = await engine.start("book", "o4")
    await wait_parked(engine, h.id)
    await engine.pause(h.id)
    await engine.cancel(h.id)
    with pytest.raises(RunCancelledError):
        await h.result(timeout=5)
    assert done == ["reserve", "charge", "refund P-o4", "release H-o4"]


async def test_retrying_a_run_whose_compensation_failed_runs_it_again(engine: Engine) -> None:
    down = [True]
    undone: list[str] = []

    def refund(payment: str) -> None:
        if down[0]:
            raise ConnectionError("refund service down")
        undone.append(payment)

    @engine.workflow()
    async def pay(ctx, _: None) -> None:
        await ctx.step(lambda: "P-1", name="charge", compensate=refund)
        raise RuntimeError("order rejected")

    h = await engine.start("pay")
    with pytest.raises(WorkflowFailedError) as caught:
        await h.result(timeout=5)
    assert caught.value.type == "CompensationFailedError"
    down[0] = False
    await engine.retry(h.id)
    with pytest.raises(WorkflowFailedError) as caught:
        await h.result(timeout=5)
    assert caught.value.type == "RuntimeError"
    assert undone == ["P-1"]


async def wait_parked(engine: Engine, run_id: str) -> None:
    for _ in range(500):
        if (await engine.get_run(run_id)).status == RunStatus.PARKED:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never parked")


async def test_ctx_compensate_runs_the_unrun_ones_newest_first_and_returns_results(
    engine: Engine,
) -> None:
    undone: list[int] = []

    async def undo(n: int) -> int:
        undone.append(n)
        return n * 10

    @engine.workflow()
    async def explicit(ctx, _: None) -> list[Any]:
        for n in (1, 2):
            await ctx.step(lambda n=n: n, name=f"s{n}", compensate=undo)
        first = await ctx.compensate()
        await ctx.step(lambda: 3, name="s3", compensate=undo)
        second = await ctx.compensate()
        third = await ctx.compensate()  # (nothing left to run)
        return [first, second, third]

    h = await engine.start("explicit")
    assert await h.result(timeout=5) == [[20, 10], [30], []]
    assert undone == [2, 1, 3]
    history = await engine.history(h.id)
    assert [e.name for e in history if e.kind == "compensation"] == ["s2", "s1", "s3"]


async def test_a_failure_after_ctx_compensate_runs_only_the_rest(engine: Engine) -> None:
    undone: list[int] = []

    @engine.workflow()
    async def partly(ctx, _: None) -> None:
        await ctx.step(lambda: 1, name="s1", compensate=undone.append)
        await ctx.compensate()
        await ctx.step(lambda: 2, name="s2", compensate=undone.append)
        raise ValueError("bad order")

    h = await engine.start("partly")
    with pytest.raises(WorkflowFailedError) as caught:
        await h.result(timeout=5)
    assert caught.value.type == "ValueError"
    assert undone == [1, 2]


async def test_a_failing_compensation_is_retried_then_fails_the_run(engine: Engine) -> None:
    calls: list[str] = []

    def undo_a(_: Any) -> None:
        calls.append("a")

    def undo_b(_: Any) -> None:
        calls.append("b")
        raise ConnectionError("refund service down")

    @engine.workflow()
    async def stuck(ctx, _: None) -> None:
        await ctx.step(lambda: 1, name="a", compensate=undo_a)
        await ctx.step(lambda: 2, name="b", compensate=undo_b, retry=Retry(3, backoff=0))
        raise RuntimeError("give up")

    h = await engine.start("stuck")
    with pytest.raises(WorkflowFailedError) as caught:
        await h.result(timeout=5)
    assert caught.value.type == "CompensationFailedError"
    info = await engine.get_run(h.id)
    assert info.status == RunStatus.FAILED
    assert info.error is not None and "'b'" in info.error.message
    # Every compensation is tried: a failing one does not keep the others from running.
    assert calls == ["b", "b", "b", "a"]
    entries = [(e.name, e.status) for e in await engine.history(h.id) if e.kind == "compensation"]
    assert entries == [("b", "error"), ("a", "done")]


async def test_ctx_compensate_raises_compensation_failed_error(engine: Engine) -> None:
    def undo(_: Any) -> None:
        raise ConnectionError("down")

    @engine.workflow()
    async def explicit_failure(ctx, _: None) -> dict[str, Any]:
        await ctx.step(lambda: 1, name="pay", compensate=undo)
        try:
            await ctx.compensate()
        except CompensationFailedError as exc:
            return {"run_id": exc.run_id, "failed": exc.failed}
        return {}

    h = await engine.start("explicit_failure")
    assert await h.result(timeout=5) == {"run_id": h.id, "failed": ["pay"]}


async def test_compensate_must_be_callable(engine: Engine) -> None:
    @engine.workflow()
    async def misused(ctx, _: None) -> None:
        await ctx.step(lambda: 1, name="s", compensate="refund")

    h = await engine.start("misused")
    with pytest.raises(WorkflowFailedError) as caught:
        await h.result(timeout=5)
    assert caught.value.type == "InvalidArgumentError"
    assert "compensate" in caught.value.error_message


@pytest.mark.replays
async def test_a_compensation_backing_off_replays_from_the_journal(
    engine: Engine, clock: Any
) -> None:
    undone: list[str] = []
    attempts: list[int] = []

    def flaky_undo(v: str) -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("once")
        undone.append(v)

    @engine.workflow()
    async def slow_undo(ctx, _: None) -> None:
        await ctx.step(lambda: "x", name="x", compensate=undone.append)
        await ctx.step(lambda: "y", name="y", compensate=flaky_undo, retry=Retry(2, backoff=10))
        raise RuntimeError("fail")

    h = await engine.start("slow_undo")
    for _ in range(500):  # (its compensation of y waits 10 s of engine time to retry)
        pending = [e for e in await engine.history(h.id) if e.status == "pending"]
        if pending:
            break
        await asyncio.sleep(0.01)
    assert [(e.kind, e.name, e.attempt) for e in pending] == [("compensation", "y", 1)]
    assert undone == []
    await clock.advance(10)
    with pytest.raises(WorkflowFailedError) as caught:
        await h.result(timeout=5)
    assert caught.value.type == "RuntimeError"
    assert undone == ["y", "x"] and len(attempts) == 2


# -- run deadlines ---------------------------------------------------------------------


async def test_a_run_timeout_fires_while_parked_and_compensates_first(
    engine: Engine, clock: Any
) -> None:
    done: list[str] = []

    def undo(what: str) -> None:
        done.append(f"undo {what}")

    @engine.workflow(timeout="1h")
    async def waits(ctx, _: None) -> None:
        await ctx.step(lambda: "hold", name="hold", compensate=undo)
        await ctx.wait_for_event("approved", timeout="1d")

    h = await engine.start("waits")
    await wait_parked(engine, h.id)
    await clock.advance(3599)
    await asyncio.sleep(0.1)
    assert (await engine.get_run(h.id)).status == RunStatus.PARKED
    await clock.advance(1)
    with pytest.raises(WorkflowFailedError) as caught:
        await h.result(timeout=5)
    assert caught.value.type == "RunTimeoutError"
    assert done == ["undo hold"]
    history = await engine.history(h.id)
    assert [(e.kind, e.name) for e in history if e.kind in ("stop", "compensation")] == [
        ("stop", "timeout"),
        ("compensation", "hold"),
    ]
    # Its wait was withdrawn: the event now starts nothing and reaches no one.
    result = await engine.publish("approved", {})
    assert result.resumed == []


async def test_a_run_timeout_without_compensations_fails_the_run(engine: Engine, clock) -> None:
    @engine.workflow(timeout=60)
    async def sleepy(ctx, _: None) -> None:
        await ctx.sleep("1d")

    h = await engine.start("sleepy")
    await wait_parked(engine, h.id)
    await clock.advance(60)
    with pytest.raises(WorkflowFailedError) as caught:
        await h.result(timeout=5)
    assert caught.value.type == "RunTimeoutError"
    assert "60s" in caught.value.error_message


async def test_a_paused_run_times_out_too(engine: Engine, clock: Any) -> None:
    done: list[str] = []

    @engine.workflow(timeout="10m")
    async def paused(ctx, _: None) -> None:
        await ctx.step(lambda: "a", name="a", compensate=done.append)
        await ctx.wait_for_signal("go")

    @engine.workflow(timeout="10m")
    async def paused_plain(ctx, _: None) -> None:
        await ctx.wait_for_signal("go")

    runs = [await engine.start("paused"), await engine.start("paused_plain")]
    for h in runs:
        await wait_parked(engine, h.id)
        await engine.pause(h.id)
    await clock.advance(600)
    for h in runs:
        with pytest.raises(WorkflowFailedError) as caught:
            await h.result(timeout=5)
        assert caught.value.type == "RunTimeoutError"
        assert not (await engine.get_run(h.id)).paused
    assert done == ["a"]


async def test_a_run_timeout_cancels_its_active_child(engine: Engine, clock: Any) -> None:
    @engine.workflow()
    async def child(ctx, _: None) -> None:
        await ctx.wait_for_signal("never")

    @engine.workflow(timeout="5m")
    async def parent(ctx, _: None) -> None:
        kid = await ctx.start_child("child", None, id="the-child")
        await kid.result()

    h = await engine.start("parent")
    await wait_parked(engine, h.id)
    await wait_parked(engine, "the-child")
    await clock.advance(300)
    with pytest.raises(WorkflowFailedError) as caught:
        await h.result(timeout=5)
    assert caught.value.type == "RunTimeoutError"
    with pytest.raises(RunCancelledError):
        await engine.handle("the-child").result(timeout=5)


async def test_the_starts_timeout_wins_over_the_workflows(engine: Engine, clock: Any) -> None:
    @engine.workflow(timeout="1h")
    async def bounded(ctx, _: None) -> None:
        await ctx.wait_for_signal("go")

    short = await engine.start("bounded", timeout=30)
    default = await engine.start("bounded")
    longer = await engine.start("bounded", timeout="2h")
    for h in (short, default, longer):
        await wait_parked(engine, h.id)
    await clock.advance(30)
    with pytest.raises(WorkflowFailedError):
        await short.result(timeout=5)
    await clock.advance(3600 - 30)
    with pytest.raises(WorkflowFailedError):
        await default.result(timeout=5)
    assert (await engine.get_run(longer.id)).status == RunStatus.PARKED
    await clock.advance(3600)
    with pytest.raises(WorkflowFailedError) as caught:
        await longer.result(timeout=5)
    assert caught.value.type == "RunTimeoutError"


async def test_a_run_timeout_holds_across_continue_as_new(engine: Engine, clock: Any) -> None:
    @engine.workflow(timeout="90s")
    async def looping(ctx, n: int) -> None:
        await ctx.sleep(60)
        ctx.continue_as_new(n + 1)

    h = await engine.start("looping", 0)
    await wait_parked(engine, h.id)
    await clock.advance(60)
    for _ in range(500):
        info = await engine.get_run(h.id)
        if info.input == 1 and info.status == RunStatus.PARKED:
            break
        await asyncio.sleep(0.01)
    await clock.advance(30)
    with pytest.raises(WorkflowFailedError) as caught:
        await h.result(timeout=5)
    assert caught.value.type == "RunTimeoutError"


@pytest.mark.parametrize("bad", [0, -1, "soon", "0s", float("nan"), True, [1]])
async def test_bad_timeouts_are_rejected_at_the_edge(engine: Engine, bad: Any) -> None:
    @engine.workflow()
    async def fine(ctx, _: None) -> None:
        return None

    with pytest.raises(ParkwayError) as caught:
        await engine.start("fine", timeout=bad)
    assert "timeout" in str(caught.value)
    with pytest.raises(ParkwayError) as caught:
        engine.workflow(name="bad_timeout", timeout=bad)(fine)
    assert "timeout" in str(caught.value)
    assert await engine.list_runs() == []


async def test_a_run_timeout_over_http(engine: Engine, clock: Any, monkeypatch: Any) -> None:
    pytest.importorskip("starlette", reason="the http extra is not installed")
    import httpx

    from parkway.http import create_app

    @engine.workflow()
    async def remote(ctx, _: None) -> None:
        await ctx.wait_for_signal("go")

    monkeypatch.delenv("PARKWAY_API_TOKEN", raising=False)
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.test") as http:
        started = await http.post("/runs", json={"workflow": "remote", "timeout": "5m"})
        assert started.status_code == 201, started.text
        for bad in ["soon", -1, 0, True]:
            refused = await http.post("/runs", json={"workflow": "remote", "timeout": bad})
            assert refused.status_code == 422, (bad, refused.text)
            assert "timeout" in refused.text
    run_id = started.json()["id"]
    await wait_parked(engine, run_id)
    await clock.advance(300)
    with pytest.raises(WorkflowFailedError) as caught:
        await engine.handle(run_id).result(timeout=5)
    assert caught.value.type == "RunTimeoutError"
    assert len(await engine.list_runs()) == 1


class JumpingClock(ManualClock):
    """A ManualClock a step can move forward from inside (``advance`` waits for the
    engine to settle, which a step in flight never lets it do)."""

    def jump(self, seconds: float) -> None:
        self._now += seconds


async def test_no_step_starts_past_the_deadline_even_within_one_advance(
    make_engine: Any, t0: Any
) -> None:
    clock = JumpingClock(start=t0)
    engine = await make_engine(clock=clock)
    ran: list[str] = []
    undone: list[str] = []

    async def slow(name: str) -> str:
        ran.append(name)
        clock.jump(30)  # (each step takes 30 s of engine time)
        return name

    @engine.workflow(timeout="1m")
    async def busy(ctx, _: None) -> None:
        for name in ("a", "b", "c", "d"):
            await ctx.step(slow, name, name=name, compensate=undone.append)

    h = await engine.start("busy")
    with pytest.raises(WorkflowFailedError) as caught:
        await h.result(timeout=5)
    assert caught.value.type == "RunTimeoutError"
    assert ran == ["a", "b"] and undone == ["b", "a"]
    history = await engine.history(h.id)
    assert [(e.kind, e.name) for e in history][:1] == [("deadline", "timeout")]
