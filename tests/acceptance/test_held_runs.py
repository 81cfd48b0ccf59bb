"""Held runs on every backend: a run whose code no longer replays its journal is
``held``, shows so in listings, counts and metrics, keeps the inputs sent to it, and
goes on once code that replays it is back: after ``retry`` or when a worker with
that code opens."""

from __future__ import annotations

from typing import Any

import pytest

from parkway import (
    Engine,
    InvalidArgumentError,
    NonDeterminismError,
    RunStateError,
    RunStatus,
)

pytestmark = pytest.mark.replays  # (every resume replays its journal: no kept machines)


def _shifty(order: list[str], calls: list[str]) -> Any:
    """Runs its steps in ``order`` (a test "deploys" another order by changing it), then
    waits for two signals and an event."""

    async def shifty(ctx: Any, input: Any) -> Any:
        for name in list(order):
            await ctx.step(lambda n=name: calls.append(n) or n, name=name)
        first = await ctx.wait_for_signal("go")
        event = await ctx.wait_for_event("order.paid", match={"order": input})
        second = await ctx.wait_for_signal("go")
        return [first, event["order"], second]

    return shifty


async def _held(engine: Engine, order: list[str], run_id: str = "r1") -> Any:
    """A run of ``shifty`` that parked on its first signal, then held by a reversed order."""
    handle = await engine.start("shifty", "o1", id=run_id)
    await engine.idle()
    order.reverse()  # the "deploy" that breaks it
    await handle.signal("go", 1)
    await engine.idle()
    return handle


async def test_a_diverging_run_is_held_listed_counted_and_raises_from_result(
    engine: Engine,
) -> None:
    order, calls = ["a", "b"], []
    engine.workflow(name="shifty")(_shifty(order, calls))
    handle = await _held(engine, order)
    info = await handle.info()
    assert info.status is RunStatus.HELD and info.status == "held"
    assert not info.status.is_terminal
    assert info.error is not None and info.error.type == "NonDeterminismError"
    assert "position 0" in info.error.message and "'a'" in info.error.message
    assert [r.id for r in await engine.list_runs(status="held")] == [handle.id]
    assert await engine.list_runs(status="parked") == []
    assert (await engine.run_counts())["shifty"] == {"held": 1}
    with pytest.raises(NonDeterminismError) as caught:
        await handle.result(timeout=5)
    assert caught.value.position == 0
    assert calls == ["a", "b"]  # nothing ran while it was held


async def test_a_held_run_keeps_its_inputs_and_goes_on_after_retry(engine: Engine) -> None:
    order, calls = ["a", "b"], []
    engine.workflow(name="shifty")(_shifty(order, calls))
    handle = await _held(engine, order)
    # Inputs sent while it is held are kept (not acted on: nothing claims a held run).
    await handle.signal("go", 2)
    await engine.idle()
    assert (await handle.info()).status is RunStatus.HELD
    order.reverse()  # the fix
    retried = await handle.retry()
    assert retried.status is RunStatus.RUNNING and retried.error is None
    await engine.idle()
    published = await engine.publish("order.paid", {"order": "o1"})
    assert published.resumed == [handle.id]
    assert await handle.result(timeout=10) == [1, "o1", 2]
    assert calls == ["a", "b"]  # replayed, not run again
    info = await handle.info()
    assert (info.status, info.error) == (RunStatus.COMPLETED, None)


async def test_an_event_delivered_while_held_is_kept(engine: Engine) -> None:
    order, calls = ["a", "b"], []
    engine.workflow(name="shifty")(_shifty(order, calls))
    handle = await engine.start("shifty", "o1")
    await engine.idle()
    await handle.signal("go", 1)
    await engine.idle()  # parked on the event now
    order.reverse()
    await handle.signal("go", 2)  # its advance holds it (the event is not there yet)
    await engine.idle()
    assert (await handle.info()).status is RunStatus.HELD
    published = await engine.publish("order.paid", {"order": "o1"})
    assert published.resumed == [handle.id]  # delivered: kept as a task for it
    await engine.idle()
    assert (await handle.info()).status is RunStatus.HELD
    order.reverse()
    assert await engine.retry_runs(status="held") == 1
    assert await handle.result(timeout=10) == [1, "o1", 2]


async def test_a_retry_of_a_run_whose_code_still_diverges_holds_it_again(
    engine: Engine,
) -> None:
    order, calls = ["a", "b"], []
    engine.workflow(name="shifty")(_shifty(order, calls))
    handle = await _held(engine, order)
    await handle.retry()
    await engine.idle()
    info = await handle.info()
    assert info.status is RunStatus.HELD and info.error is not None
    assert calls == ["a", "b"]


async def test_held_runs_show_in_the_metrics(make_engine: Any) -> None:
    pytest.importorskip("prometheus_client")
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    engine = await make_engine(metrics=registry)
    order, calls = ["a", "b"], []
    engine.workflow(name="shifty")(_shifty(order, calls))
    await _held(engine, order)
    text = (await engine.render_metrics())[0].decode()
    assert 'parkway_runs{status="held"} 1.0' in text
    assert 'parkway_runs{status="parked"} 0.0' in text


async def test_cancel_and_bulk_controls_take_held_runs(engine: Engine) -> None:
    order, calls = ["a", "b"], []
    engine.workflow(name="shifty")(_shifty(order, calls))
    first = await _held(engine, order, "h1")
    order.reverse()
    second = await _held(engine, order, "h2")  # (held by the order reversed again)
    assert {r.id for r in await engine.list_runs(status="held")} == {"h1", "h2"}
    await first.cancel()
    assert (await first.info()).status is RunStatus.CANCELLED
    assert await engine.cancel_runs(status="held") == 1
    assert (await second.info()).status is RunStatus.CANCELLED
    with pytest.raises(RunStateError, match="only a failed run"):
        await second.retry()
    with pytest.raises(InvalidArgumentError):
        await engine.retry_runs(status="parked")


@pytest.mark.requires("persistent")
async def test_a_worker_that_opens_with_fixed_code_frees_the_held_runs(
    make_engine: Any,
) -> None:
    old = await make_engine()
    calls: list[str] = []

    @old.workflow(name="order")
    async def order_v1(ctx: Any, input: Any) -> Any:
        await ctx.step(lambda: calls.append("reserve") or "reserved", name="reserve")
        paid = await ctx.wait_for_signal("paid")
        return ["v1", paid]

    ids = [f"o{i}" for i in range(3)]
    for run_id in ids:
        await old.start("order", id=run_id)
    await old.idle()
    await old.close()

    broken = await make_engine()

    @broken.workflow(name="order")  # same name and version, the step renamed
    async def order_broken(ctx: Any, input: Any) -> Any:
        await ctx.step(lambda: calls.append("charge") or "charged", name="charge")
        return ["broken", await ctx.wait_for_signal("paid")]

    for run_id in ids:
        await broken.signal(run_id, "paid", run_id)
    await broken.idle()
    assert sorted(r.id for r in await broken.list_runs(status="held")) == ids
    await broken.close()

    fixed = await make_engine(open=False)  # (as an app does: registered, then opened)

    @fixed.workflow(name="order")  # the rename taken back
    async def order_fixed(ctx: Any, input: Any) -> Any:
        await ctx.step(lambda: calls.append("reserve") or "reserved", name="reserve")
        paid = await ctx.wait_for_signal("paid")
        return ["fixed", paid]

    await fixed.open()

    for run_id in ids:  # the signals sent while held were kept
        assert await fixed.result(run_id, timeout=10) == ["fixed", run_id]
    assert calls == ["reserve"] * 3
    assert await fixed.list_runs(status="held") == []
