"""The ``schedules`` shape: many schedules firing within one minute, all on time.

``schedules`` (N=1000)
    N schedules, each ticking once a minute at its own second (schedule ``i`` at
    second ``i % 60``: about N/60 ticks a second), added to one engine with its
    in-process worker; then one minute of real time, in which every schedule must
    fire once. Each schedule's first run records, when its code first runs, how
    late it is: now minus ``ctx.scheduled_at`` (the tick). ``fired``: schedules
    that started their run within the minute (and 2 s of grace); ``on_time``: runs
    no more than 1 s late; ``p50_ms``/``p99_ms``/``max_ms`` of the lateness.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from benchmarks.harness import Bench, latency


async def shape_schedules(bench: Bench, n: int) -> dict[str, Any]:
    engine = bench.engine()
    lateness: dict[str, float] = {}
    all_fired = asyncio.Event()

    @engine.workflow()
    async def ticked(ctx: Any, _input: Any) -> None:
        # Each schedule's first run (a schedule added early may tick twice within the
        # minute), the first time its code runs (a replay is not the start).
        schedule_id = ctx.run_id.split(":")[1]
        lateness.setdefault(schedule_id, time.time() - ctx.scheduled_at.timestamp())
        if len(lateness) >= n:
            all_fired.set()

    # --soon: the ticks start a second or two from now, so a smoke run waits seconds,
    # not up to a minute, for its first.
    first = (int(time.time()) + 2) % 60 if getattr(bench.options, "soon", False) else 0
    async with engine:
        for i in range(n):
            second = (first + i) % 60
            await engine.add_schedule(f"s{i:05d}", "ticked", f"{second} * * * * *")
        # Every schedule's first tick is within the minute after it was added.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_fired.wait(), 62)
        await engine.idle(timeout=60)
    late = list(lateness.values())
    figures = latency(late) if late else {}
    figures.update(
        fired=len(lateness),
        on_time=sum(1 for v in late if v <= 1.0),
        max_ms=round(max(late) * 1000, 3) if late else None,
    )
    return figures
