"""A busy event loop takes its runs in batches (``busy_claim_interval``).

While the loop's thread is busy and runs come several at a time, a worker on
SQLite does not take each run the moment its input is committed (the hand-over):
it claims them at most every ``busy_claim_interval``, in batches. One run at a
time, a loop that is not busy, ``busy_claim_interval=0`` and PostgreSQL's worker
keep taking every run at once. Whatever the way, every input resumes its run
exactly once.

The loop's load is what these tests set (a gauge that always or never reads
busy): how busy a test's loop is depends on the machine; the gauge itself is
tested on its own clocks below.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from parkway import Engine
from parkway.errors import InvalidArgumentError, InvalidDurationError
from parkway.worker import load
from parkway.worker.load import LoopLoad


class _Gauge:
    def __init__(self, busy: bool, saturated: bool = False) -> None:
        self._busy, self._saturated = busy, saturated
        self.switches = 0

    def busy(self) -> bool:
        return self._busy

    def saturated(self) -> bool:
        return self._saturated


def _count_claims(engine: Engine) -> list[tuple[float, list[str]]]:
    """(when it began, the runs it took) of every claim of the engine's worker."""
    assert engine.worker is not None
    store = engine.worker.rt.store
    claim, claims = store.claim, []

    async def counted(*args: Any, **kwargs: Any) -> list[str]:
        began = time.monotonic()
        claimed = await claim(*args, **kwargs)
        if claimed:
            claims.append((began, claimed))
        return claimed

    store.claim = counted  # type: ignore[method-assign]
    return claims


def _messaged(engine: Engine, resumed: list[str]) -> None:
    @engine.workflow()
    async def waiter(ctx: Any, key: str) -> str:
        value = await ctx.wait_for_message("go", key)

        async def note() -> None:
            resumed.append(key)

        await ctx.step(note)
        return f"{key}:{value}"


async def _resume(engine: Engine, key: str, value: int) -> None:
    """Send ``key``'s run its message and wait for the run's end."""
    await engine.correlate("go", key, value)
    assert await engine.handle(key).result(timeout=30) == f"{key}:{value}"


@contextlib.asynccontextmanager
async def _parked(
    engine: Engine, keys: list[str], resumed: list[str], *, busy: bool, saturated: bool = False
) -> AsyncIterator[list[tuple[float, list[str]]]]:
    """The engine open, a run parked on a message for each key, the loop read as
    ``busy`` (and ``saturated``); yields the claims made from then on."""
    _messaged(engine, resumed)
    async with engine:
        for key in keys:
            await engine.start("waiter", key, id=key)
        await engine.idle(timeout=30)
        assert engine.worker is not None
        engine.worker.load = _Gauge(busy, saturated)  # type: ignore[assignment]
        yield _count_claims(engine)


@pytest.mark.parametrize("saturated", [False, True], ids=["busy", "saturated"])
async def test_runs_that_come_together_while_the_loop_is_busy_are_claimed_in_batches(
    tmp_path: Path, saturated: bool
) -> None:
    engine = Engine(f"sqlite:///{tmp_path / 'busy.db'}", busy_claim_interval="20ms")
    resumed: list[str] = []
    keys = [f"k{i}" for i in range(40)]
    async with _parked(engine, keys, resumed, busy=True, saturated=saturated) as claims:
        results = await asyncio.gather(*(engine.correlate("go", key, 1) for key in keys))
        assert all(result.outcome == "delivered" for result in results)
        for key in keys:
            assert await engine.handle(key).result(timeout=30) == f"{key}:1"
    # Each input resumed its run once, whichever way the run was taken.
    assert sorted(resumed) == sorted(keys)
    taken = [run for _, runs in claims for run in runs]
    assert len(taken) == len(set(taken))
    # The first run was handed over (nothing under way yet); the others waited
    # for claims, and the claims took them several at a time.
    assert len(taken) >= len(keys) - 2
    assert max(len(runs) for _, runs in claims) > 1
    assert len(claims) < len(taken)
    # A claim after one that took several runs waited for the interval, longer
    # while the loop is saturated.
    interval = 0.020 * (load.SATURATED_FACTOR if saturated else 1)
    for (before, runs), (after, _) in itertools.pairwise(claims):
        if len(runs) > 1:
            assert after - before >= interval - 0.001


async def test_after_a_batch_a_run_that_comes_with_nothing_under_way_waits_for_the_next_claim(
    tmp_path: Path,
) -> None:
    # A paced load leaves the worker between two batches with nothing under way:
    # the run that comes then still joins the next batch, until a claim takes
    # only one run (one at a time again), after which runs are handed over.
    engine = Engine(f"sqlite:///{tmp_path / 'gap.db'}", busy_claim_interval="20ms")
    resumed: list[str] = []
    keys = [f"k{i}" for i in range(12)]
    async with _parked(engine, keys, resumed, busy=True) as claims:
        await asyncio.gather(*(engine.correlate("go", key, 4) for key in keys[:10]))
        for key in keys[:10]:
            assert await engine.handle(key).result(timeout=30) == f"{key}:4"
        await engine.idle(timeout=30)
        assert engine.worker is not None and not engine.worker.inflight
        assert max(len(runs) for _, runs in claims) > 1
        batches = len(claims)
        # Nothing under way, the last claim took several: claimed, not handed over.
        await _resume(engine, keys[10], 4)
        assert [runs for _, runs in claims[batches:]] == [[keys[10]]]
        # That claim took one: the next run is handed over with its delivery.
        await engine.idle(timeout=30)
        await _resume(engine, keys[11], 4)
        assert len(claims) == batches + 1
    assert sorted(resumed) == sorted(keys)


async def test_one_run_at_a_time_goes_at_once_even_while_the_loop_is_busy(
    tmp_path: Path,
) -> None:
    engine = Engine(f"sqlite:///{tmp_path / 'one.db'}", busy_claim_interval="1s")
    resumed: list[str] = []
    keys = [f"k{i}" for i in range(5)]
    async with _parked(engine, keys, resumed, busy=True) as claims:
        for key in keys:
            began = time.monotonic()
            await _resume(engine, key, 2)
            # Handed over with its delivery: no wait for a claim's interval.
            assert time.monotonic() - began < 0.9
            await engine.idle(timeout=30)
    assert claims == []
    assert resumed == keys


async def _every_run_at_once(engine: Engine, busy: bool) -> None:
    resumed: list[str] = []
    keys = [f"k{i}" for i in range(20)]
    async with _parked(engine, keys, resumed, busy=busy) as claims:
        await asyncio.gather(*(engine.correlate("go", key, 3) for key in keys))
        for key in keys:
            assert await engine.handle(key).result(timeout=30) == f"{key}:3"
    assert sorted(resumed) == sorted(keys)
    # Handed over with their deliveries, or claimed at once (the worker's places
    # are 100, more than the runs): never after an interval's wait.
    for (before, _), (after, _) in itertools.pairwise(claims):
        assert after - before < 0.2


@pytest.mark.parametrize("how", ["interval 0", "not busy"])
async def test_without_a_busy_loop_or_with_the_interval_0_every_run_goes_at_once(
    tmp_path: Path, how: str
) -> None:
    interval = 0 if how == "interval 0" else "200ms"
    engine = Engine(f"sqlite:///{tmp_path / 'calm.db'}", busy_claim_interval=interval)
    await _every_run_at_once(engine, busy=how == "interval 0")


async def test_a_store_not_bound_by_the_loop_never_batches_this_way(engine_url: str) -> None:
    # PostgreSQL's costs are round trips, which a hand-over saves, not the loop's
    # time (and the memory store has no commits to share).
    if engine_url.startswith("sqlite"):
        pytest.skip("SQLite batches while busy (the tests above)")
    await _every_run_at_once(Engine(engine_url, busy_claim_interval="200ms"), busy=True)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("2s", InvalidArgumentError),
        (-0.001, InvalidDurationError),
        ("soon", InvalidDurationError),
        (True, InvalidDurationError),
        ([1], InvalidDurationError),
    ],
)
def test_a_bad_busy_claim_interval_is_refused_by_name(value: object, error: type) -> None:
    with pytest.raises(error, match="busy_claim_interval"):
        Engine("memory://", busy_claim_interval=value)  # type: ignore[arg-type]


def test_the_gauge_reads_the_loop_busy_past_one_threshold_and_calm_below_the_other() -> None:
    wall, cpu = [0.0], [0.0]
    gauge = LoopLoad(wall=lambda: wall[0], cpu=lambda: cpu[0])

    def window(share: float) -> bool:
        wall[0] += 2 * load.WINDOW
        cpu[0] += share * 2 * load.WINDOW
        return gauge.busy()

    assert not window(0.7)  # under BUSY_ABOVE: calm still
    assert window(0.8)
    assert window(0.6)  # busy until under IDLE_BELOW
    assert not window(0.4)
    assert not window(0.6)
    assert gauge.switches == 2
    assert not gauge.saturated()
    # Asked again within a window: the last window's answer.
    cpu[0] += 1.0
    assert not gauge.busy()
    # A window that ends after a long quiet reads as quiet, however busy before.
    assert window(0.9)
    wall[0] += 10.0
    assert not window(0.9)


def test_the_gauge_reads_the_loop_saturated_past_one_threshold_and_not_below_the_other() -> None:
    wall, cpu = [0.0], [0.0]
    gauge = LoopLoad(wall=lambda: wall[0], cpu=lambda: cpu[0])

    def window(share: float) -> tuple[bool, bool]:
        wall[0] += 2 * load.WINDOW
        cpu[0] += share * 2 * load.WINDOW
        return gauge.busy(), gauge.saturated()

    assert window(0.9) == (True, False)  # busy, under SATURATED_ABOVE
    # Saturated after SATURATED_WINDOWS windows over it in a row, not before.
    assert load.SATURATED_WINDOWS == 3
    assert window(0.97) == (True, False)
    assert window(0.97) == (True, False)
    assert window(0.9) == (True, False)  # (a window under it starts the count again)
    assert [window(0.97) for _ in range(3)] == [(True, False), (True, False), (True, True)]
    assert window(0.9) == (True, True)  # saturated until under UNSATURATED_BELOW
    assert window(0.8) == (True, False)
    assert window(0.97) == (True, False)
    assert window(0.3) == (False, False)
    # Asked within a window: the last window's answer.
    cpu[0] += 1.0
    assert gauge.saturated() is False
