"""Correlation racing parking: every message is delivered exactly once.

Fifty runs park on keys ``K0..K49`` while fifty ``correlate`` calls, one per
key, race them. Whichever comes first, each message must reach its own run
exactly once: delivered to the parked run, or buffered and consumed by the wait
when it registers. None lost, none duplicated, nothing left over.

The in-process variant runs on every backend; the cross-process variant
(tests/system/test_messages_race.py) has a client engine (``worker=False``) in
the test process and ``parkway worker`` subprocesses on the same SQLite file.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import pytest

from parkway import CorrelationResult, Engine, RunStatus

N = 50
NAME = "race"
KEYS = [f"K{i}" for i in range(N)]


def payload(key: str) -> dict[str, str]:
    return {"for": key, "value": f"payload-of-{key}"}


def run_id(key: str) -> str:
    return f"run-{key}"


def register(engine: Engine) -> None:
    @engine.workflow(name="racer")
    async def racer(ctx, key):
        return await ctx.wait_for_message(NAME, key)


async def race(
    engine: Engine, order: str, seed: int, spread: float = 0.02
) -> list[tuple[str, CorrelationResult]]:
    """Start the runs and correlate their keys concurrently.

    ``order``: ``"runs-first"`` or ``"messages-first"`` (one side's calls are all issued
    before the other's), or ``"jitter"``: every call waits a random delay in
    ``[0, spread]`` seconds first, so messages land before, during and after parking.
    """
    rng = random.Random(seed)
    delays = {
        (side, key): rng.uniform(0, spread) if order == "jitter" else 0.0
        for side in ("start", "send")
        for key in KEYS
    }

    async def start(key: str) -> None:
        await asyncio.sleep(delays["start", key])
        await engine.start("racer", key, id=run_id(key))

    async def send(key: str) -> tuple[str, CorrelationResult]:
        await asyncio.sleep(delays["send", key])
        return key, await engine.correlate(NAME, key, payload(key), ttl="1h")

    starts = [start(k) for k in KEYS]
    sends = [send(k) for k in KEYS]
    calls: list[Any] = [*sends, *starts] if order == "messages-first" else [*starts, *sends]
    results = await asyncio.gather(*calls)
    return [r for r in results if r is not None]


async def check(engine: Engine, results: list[tuple[str, CorrelationResult]]) -> Counter[str]:
    assert sorted(k for k, _ in results) == sorted(KEYS)
    outcomes: Counter[str] = Counter()
    for key, result in results:
        outcomes[result.outcome] += 1
        assert result.outcome in ("delivered", "buffered"), (key, result)
        if result.outcome == "delivered":
            assert result.run_id == run_id(key), (key, result)
        else:
            assert result.run_id is None
    for key in KEYS:
        # Exactly once: the run got its own key's payload (a run takes one message only).
        assert await engine.handle(run_id(key)).result(timeout=30) == payload(key), key
    runs = await engine.list_runs(workflow="racer", limit=N + 1)
    assert len(runs) == N
    assert all(r.status is RunStatus.COMPLETED for r in runs)
    assert await engine.messages() == []
    assert await engine.subscriptions() == []
    print(f"outcomes: {dict(outcomes)}")
    return outcomes


@pytest.mark.parametrize(
    ("order", "seed"),
    [("runs-first", 0), ("messages-first", 0), ("jitter", 1), ("jitter", 2), ("jitter", 3)],
)
async def test_concurrent_correlate_and_parking_deliver_each_message_once(
    make_engine, order: str, seed: int
) -> None:
    engine = await make_engine(concurrency=8)
    register(engine)
    results = await race(engine, order, seed)
    outcomes = await check(engine, results)
    assert outcomes["delivered"] + outcomes["buffered"] == N
    await engine.idle()
    # The refused second round proves nobody is still waiting on these keys.
    assert await engine.subscriptions() == []


async def test_runs_parked_before_correlation_each_get_their_own(engine: Engine) -> None:
    register(engine)
    await asyncio.gather(*(engine.start("racer", k, id=run_id(k)) for k in KEYS))
    await engine.idle()
    assert len(await engine.subscriptions()) == N
    results = await asyncio.gather(
        *(_pair(k, engine.correlate(NAME, k, payload(k), ttl="1h")) for k in reversed(KEYS))
    )
    outcomes = await check(engine, list(results))
    assert outcomes == Counter({"delivered": N})


async def test_messages_buffered_before_the_runs_each_reach_their_own(engine: Engine) -> None:
    register(engine)
    results = await asyncio.gather(
        *(_pair(k, engine.correlate(NAME, k, payload(k), ttl="1h")) for k in KEYS)
    )
    assert len(await engine.messages()) == N
    await asyncio.gather(*(engine.start("racer", k, id=run_id(k)) for k in reversed(KEYS)))
    outcomes = await check(engine, list(results))
    assert outcomes == Counter({"buffered": N})


async def _pair(key: str, call: Any) -> tuple[str, CorrelationResult]:
    return key, await call


# -- across processes on SQLite ----------------------------------------------------------------
