"""Deadlines: callbacks due at deadlines on one loop timer, cancellable."""

from __future__ import annotations

import asyncio

from parkway.worker.deadlines import Deadlines


async def test_deadlines_fire_in_order_unless_cancelled() -> None:
    deadlines = Deadlines()
    fired: list[str] = []
    deadlines.add(0.06, lambda: fired.append("late"))
    early = deadlines.add(0.02, lambda: fired.append("early"))
    gone = deadlines.add(0.01, lambda: fired.append("cancelled"))
    deadlines.cancel(gone)
    deadlines.cancel(gone)  # (twice: nothing more)
    await asyncio.sleep(0.04)
    assert fired == ["early"]
    deadlines.cancel(early)  # (fired already: nothing)
    await asyncio.sleep(0.05)
    assert fired == ["early", "late"]
    deadlines.add(0.01, lambda: fired.append("again"))  # the timer is armed anew
    await asyncio.sleep(0.05)
    assert fired == ["early", "late", "again"]


async def test_cancelled_deadlines_do_not_pile_up() -> None:
    deadlines = Deadlines()
    for _ in range(10_000):
        deadlines.cancel(deadlines.add(30, lambda: None))
    assert len(deadlines._heap) < 2_100
    assert deadlines._live == 0
