"""Sagas and run deadlines: ctx.step(compensate=), ctx.compensate(), compensation on
failure, cancel and timeout, and @engine.workflow(timeout=) / engine.start(timeout=)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from parkway import (
    CompensationFailedError,
    Engine,
    Retry,
    RunCancelledError,
    RunStatus,
    StepFailedError,
    WorkflowFailedError,
)


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


async def wait_parked(engine: Engine, run_id: str) -> None:
    for _ in range(500):
        if (await engine.get_run(run_id)).status == RunStatus.PARKED:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never parked")
