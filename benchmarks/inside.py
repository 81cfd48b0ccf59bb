"""Shapes of the operations inside a run: ``gather`` and ``update``.

``gather`` (N=50 runs)
    Each run gathers 10 async steps of ``--step-ms`` (20 ms) each, one run at a
    time; per run, the wall time from start to result, against one step's time:
    ``wall_p50_ms`` and ``ratio_p50`` (wall / one step: 1 would be perfect
    overlap, 10 no overlap). ``journal_ok``: every run's journal holds its gather
    and its 10 steps, each in its own branch.

``update`` (N=1000, ``--via inproc|xproc``)
    One run parked on a signal with an update handler (a counter); N updates sent
    one at a time, each timed from the call to its answer: ``p50_ms``/``p99_ms``.
    ``inproc``: the engine's own worker runs the run. ``xproc``: a ``parkway
    worker`` process runs it; this process is a client only. The answers must be
    1..N in order (each update applied once).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from benchmarks.harness import Bench, Workers, latency, percentile

STEPS = 10


async def shape_gather(bench: Bench, n: int) -> dict[str, Any]:
    engine = bench.engine()
    step_s = bench.options.step_ms / 1000

    async def sleepy(i: int) -> int:
        await asyncio.sleep(step_s)
        return i

    @engine.workflow()
    async def fan_out(ctx: Any, _input: Any) -> list[int]:
        return list(await ctx.gather(*(ctx.step(sleepy, i, name=f"s{i}") for i in range(STEPS))))

    walls, ok = [], True
    async with engine:
        for i in range(n):
            t0 = time.perf_counter()
            handle = await engine.start("fan_out", id=f"g{i}")
            assert await handle.result(timeout=60) == list(range(STEPS))
            walls.append(time.perf_counter() - t0)
            history = await engine.history(handle.id)
            kinds = sorted(e.kind for e in history)
            ok = ok and kinds == ["gather"] + ["step"] * STEPS
    ratios = sorted(w / step_s for w in walls)
    return {
        "wall_p50_ms": round(percentile(walls, 0.5) * 1000, 2),
        "step_ms": bench.options.step_ms,
        "ratio_p50": round(percentile(ratios, 0.5), 2),
        "journal_ok": ok,
    }


UPDATE_APP = """
from parkway import Engine

engine = Engine({url!r})


@engine.workflow()
async def tally(ctx, _input):
    state = {{"n": 0}}

    def add(_payload):
        state["n"] += 1
        return state["n"]

    ctx.on_update("add", add)
    await ctx.wait_for_signal("stop")
    return state["n"]
"""


async def _tally(ctx: Any, _input: Any) -> int:
    state = {"n": 0}

    def add(_payload: Any) -> int:
        state["n"] += 1
        return state["n"]

    ctx.on_update("add", add)
    await ctx.wait_for_signal("stop")
    return state["n"]


async def shape_update(bench: Bench, n: int) -> dict[str, Any]:
    via = bench.options.update_via
    workers = None
    if via == "xproc":
        if bench.url.startswith("memory"):
            return {"available": False, "reason": "xproc needs a shared store (sqlite, postgres)"}
        workers = Workers(bench, "update_app", UPDATE_APP, "tally")
        engine = workers.client
    else:
        engine = bench.engine()
        engine.workflow(name="tally")(_tally)
    samples = []
    async with engine:
        if workers is not None:
            workers.start(1)
        try:
            handle = await engine.start("tally", id="t")
            answers = []
            for _ in range(n):
                t0 = time.perf_counter()
                answers.append(await handle.update("add", timeout=30))
                samples.append(time.perf_counter() - t0)
            assert answers == list(range(1, n + 1)), answers[:10]
            await handle.signal("stop")
            assert await handle.result(timeout=30) == n
        finally:
            if workers is not None:
                workers.stop()
    return {"via": via, **latency(samples)}
