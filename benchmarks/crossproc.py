"""The shapes across processes: ``xwake`` (a client wakes runs that a ``parkway worker``
process advances) and ``scale`` (3-step runs drained by 1, 2, 4 worker processes); see
``benchmarks.parkway_bench`` for each one's figures.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from benchmarks.harness import Bench, Workers, latency

XWAKE_APP = """
import time
from parkway import Engine

engine = Engine({url!r})


async def now():
    # An async step, as every other shape's: a sync one runs in a thread, whose
    # dispatch (~0.1 ms here) is the step's cost, not the wake's.
    return time.time()


@engine.workflow()
async def parker(ctx, i):
    await ctx.wait_for_signal("go")
    return await ctx.step(now, name="resumed_at")


@engine.workflow()
async def payer(ctx, i):
    await ctx.wait_for_event("order.paid", match={{"order_id": i}})
    return await ctx.step(now, name="resumed_at")


@engine.workflow()
async def loan(ctx, i):
    await ctx.wait_for_message("score", f"K-{{i}}")
    return await ctx.step(now, name="resumed_at")
"""


XWAKE_VIA = {"signal": "parker", "publish": "payer", "correlate": "loan"}


async def shape_xwake(bench: Bench, n: int) -> dict[str, Any]:
    if bench.url.startswith("memory"):
        return {"available": False, "reason": "xwake needs a shared store (sqlite, postgres)"}
    via = bench.options.via
    workflow = XWAKE_VIA[via]
    workers = Workers(bench, "xwake_app", XWAKE_APP, workflow)
    engine = workers.client

    async def wake(i: int) -> None:
        if via == "signal":
            await engine.signal(f"x{i}", "go")
        elif via == "publish":
            published = await engine.publish("order.paid", {"order_id": i})
            assert published.resumed == [f"x{i}"], published
        else:
            correlated = await engine.correlate("score", f"K-{i}", {"value": i})
            assert correlated.outcome == "delivered", correlated

    async with engine:
        workers.start(1)
        try:
            handles = [await engine.start(workflow, i, id=f"x{i}") for i in range(n)]
            deadline = time.monotonic() + 300
            while len(await engine.list_runs(status="parked", limit=n + 1)) < n:
                if time.monotonic() > deadline:
                    raise TimeoutError("runs did not park")
                await asyncio.sleep(0.05)
            samples = []
            for i, handle in enumerate(handles):
                t0 = time.time()
                await wake(i)
                resumed_at = await handle.result(timeout=30)
                samples.append(resumed_at - t0)
        finally:
            workers.stop()
    return {"via": via, **latency(samples)}


SCALE_APP = """
from parkway import Engine

engine = Engine({url!r})


async def step_a(i):
    return i + 1


async def step_b(x):
    return {{"x": x * 2}}


async def step_c(d):
    return d["x"] + 1


@engine.workflow()
async def steps3(ctx, i):
    a = await ctx.step(step_a, i)
    b = await ctx.step(step_b, a)
    return await ctx.step(step_c, b)
"""


async def shape_scale(bench: Bench, n: int) -> dict[str, Any]:
    """N 3-step workflows started by this client, run by ``--workers`` worker processes."""
    if bench.url.startswith("memory"):
        return {"available": False, "reason": "scale needs a shared store (sqlite, postgres)"}
    workers = Workers(bench, "scale_app", SCALE_APP, "steps3")
    engine = workers.client
    async with engine:
        for i in range(n):
            await engine.start("steps3", i, id=f"s{i}")
        workers.start(bench.options.workers)
        try:
            # Clocked from the first completion (the workers are up) to the last,
            # counted by a query that costs the workers' two cores next to nothing
            # (list_runs would read and convert every completed run 50 times a second).
            t0 = None
            deadline = time.monotonic() + 600
            while True:
                done = bench.count_completed()
                if done and t0 is None:
                    t0, first = time.perf_counter(), done
                if done >= n:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError("runs did not complete")
                await asyncio.sleep(0.02)
            assert t0 is not None
            seconds = time.perf_counter() - t0
            n = n - first
        finally:
            workers.stop()
    return {
        "wf_per_s": round(n / seconds, 1),
        "seconds": round(seconds, 3),
        "workers": bench.options.workers,
    }
