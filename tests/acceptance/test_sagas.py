"""Sagas and run deadlines: ctx.step(compensate=), ctx.compensate(), compensation on
failure, cancel and timeout, and @engine.workflow(timeout=) / engine.start(timeout=)."""

from __future__ import annotations

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
