"""StepThreads: a call given up on (its step timed out) frees its place."""

from __future__ import annotations

import asyncio
import threading

import pytest

from parkway.worker.threads import StepThreads


async def test_an_abandoned_call_frees_its_place_and_its_late_result_is_dropped() -> None:
    pool = StepThreads(1)
    release = threading.Event()
    try:
        stuck = pool.run(release.wait, 10)
        await asyncio.sleep(0.05)
        pool.abandon(stuck, TimeoutError("given up"))
        with pytest.raises(TimeoutError, match="given up"):
            await stuck
        # The only place is free again: a call runs (in a thread started for it).
        assert await asyncio.wait_for(pool.run(lambda: "next"), 5) == "next"
        assert len(pool._threads) == 2
        release.set()
        for _ in range(200):  # the late call returns; the pool shrinks back to its size
            if len(pool._threads) == 1:
                break
            await asyncio.sleep(0.01)
        assert len(pool._threads) == 1
        assert not pool._abandoned
        assert await asyncio.wait_for(pool.run(lambda: "again"), 5) == "again"
    finally:
        release.set()
        pool.shutdown()


async def test_abandoning_a_finished_call_changes_nothing() -> None:
    pool = StepThreads(2)
    try:
        done = pool.run(lambda: 7)
        assert await done == 7
        pool.abandon(done, TimeoutError("late"))
        assert done.result() == 7
        assert not pool._abandoned
    finally:
        pool.shutdown()
