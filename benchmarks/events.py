"""The ``publish``, ``subjects`` and ``correlate`` shapes: waking parked runs by what
they wait for, in one process (see ``benchmarks.parkway_bench`` for each one's figures).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from benchmarks.harness import Bench, db_bytes, latency, percentile, process_figures

# correlate: messages one sender keeps in flight in the second half.
INFLIGHT = 16


async def shape_publish(bench: Bench, n: int) -> dict[str, Any]:
    engine = bench.engine()

    @engine.workflow()
    async def payer(ctx: Any, order_id: int) -> Any:
        return await ctx.wait_for_event("order.paid", match={"order_id": order_id})

    async def publish_cost(count: int, blocks: int = 11) -> float:
        # Both measurements start from a checkpointed WAL (parking 100,000 runs leaves
        # a long one, whose checkpoint the next commits would pay), and the figure is
        # the median of block means: a stall moves one block, not the figure.
        db_bytes(bench.path)
        means = []
        for block in range(blocks):
            t0 = time.perf_counter()
            for i in range(count // blocks):
                result = await engine.publish("order.paid", {"order_id": -1 - block * count - i})
                assert result.touched == 0
            means.append((time.perf_counter() - t0) / (count // blocks))
        return percentile(means[1:], 0.5)  # the first block warms caches up

    async with engine:
        samples = 2000
        empty = await publish_cost(samples)
        t0 = time.perf_counter()
        for i in range(n):
            await engine.start("payer", i, id=f"o{i}")
        await engine.idle(timeout=900)
        park_seconds = time.perf_counter() - t0
        loaded = await publish_cost(samples)
        wakes = []
        for i in range(min(1000, n)):
            t0 = time.perf_counter()
            result = await engine.publish("order.paid", {"order_id": i, "amount": 5})
            assert result.resumed == [f"o{i}"], result
            await engine.handle(f"o{i}").result(timeout=30)
            wakes.append(time.perf_counter() - t0)
        figures = process_figures()
    out = {
        "waiters": n,
        "publish_empty_us": round(empty * 1e6, 1),
        "publish_loaded_us": round(loaded * 1e6, 1),
        "ratio": round(loaded / empty, 3),
        "park_runs_per_s": round(n / park_seconds, 1),
    }
    out.update({f"wake_{k}": v for k, v in latency(wakes).items()})
    out.update(figures)
    return out


async def shape_subjects(bench: Bench, n: int) -> dict[str, Any]:
    events: int = getattr(bench.options, "events", 100_000)
    engine = bench.engine()

    @engine.workflow()
    async def back_in_stock(ctx: Any, product: int) -> Any:
        return await ctx.wait_for_event("product.update", subject=f"product:{product}")

    async def updates(hits_every: int | None) -> tuple[float, int]:
        touched = 0
        t0 = time.perf_counter()
        for i in range(events):
            # 1% of the updates are for a subscribed product (0..n-1), the rest are not.
            hit = hits_every is not None and i % hits_every == 0
            product = (i // hits_every) % n if hit and hits_every else n + i
            result = await engine.publish(
                "product.update", {"stock": 1}, subject=f"product:{product}"
            )
            touched += result.touched
        return time.perf_counter() - t0, touched

    async with engine:
        base_seconds, _ = await updates(None)
        t0 = time.perf_counter()
        for i in range(n):
            await engine.start("back_in_stock", i, subject=f"client:{i}", id=f"c{i}")
        await engine.idle(timeout=900)
        park_seconds = time.perf_counter() - t0
        seconds, touched = await updates(100)
        await engine.idle(timeout=900)
        figures = process_figures()
    out = {
        "subscribers": n,
        "events": events,
        "touched": touched,
        "events_per_s": round(events / seconds, 1),
        "publish_us": round(seconds / events * 1e6, 1),
        "publish_no_subscribers_us": round(base_seconds / events * 1e6, 1),
        "ratio": round(seconds / base_seconds, 3),
        "park_runs_per_s": round(n / park_seconds, 1),
    }
    out.update(figures)
    return out


async def shape_correlate(bench: Bench, n: int) -> dict[str, Any]:
    engine = bench.engine()

    @engine.workflow()
    async def loan(ctx: Any, key: str) -> Any:
        return await ctx.wait_for_message("score", key)

    async with engine:
        for i in range(n):
            await engine.start("loan", f"APP-{i}", id=f"loan-{i}")
        await engine.idle(timeout=900)
        # One sender: half the runs one message at a time, the other half with
        # INFLIGHT messages in flight (tasks of this one process).
        half = n // 2

        async def send(keys: Any) -> None:
            for i in keys:
                result = await engine.correlate("score", f"APP-{i}", {"value": i})
                assert result.outcome == "delivered", result

        t0 = time.perf_counter()
        await send(range(half))
        await engine.idle(timeout=900)
        throughput = half / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        keys = iter(range(half, n))
        await asyncio.gather(*(send(keys) for _ in range(INFLIGHT)))
        await engine.idle(timeout=900)
        concurrent = (n - half) / (time.perf_counter() - t0)
        # Latency on a fresh set, one at a time.
        samples = []
        for i in range(min(1000, n)):
            handle = await engine.start("loan", f"L-{i}", id=f"lat-{i}")
            await engine.idle(timeout=60)
            t1 = time.perf_counter()
            await engine.correlate("score", f"L-{i}", {"value": i})
            await handle.result(timeout=30)
            samples.append(time.perf_counter() - t1)
        figures = process_figures()
    out = {"msgs_per_s": round(throughput, 1), "msgs_per_s_inflight": round(concurrent, 1)}
    out.update(latency(samples))
    out.update(figures)
    return out
