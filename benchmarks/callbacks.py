"""Callbacks: from ``engine.complete_callback`` to the resumed run, against a signal.

    python -m benchmarks.callbacks [--n 500] [--db sqlite|postgres|memory]

One engine with its in-process worker. ``n`` runs park on ``cb.wait()`` (each
made its callback and handed the token to a step first), and ``n`` on
``ctx.wait_for_signal("go")``. Then, interleaved so that the machine's drift
hits both alike, one at a time: complete the next run's callback, and time from
just before ``complete_callback`` to the moment the run's code after
``cb.wait()`` runs; then signal the next signal run and time the same to the
code after its wait (the baseline: a callback's completion is a signal under a
name of its own, plus the callback's row). After each, ``engine.idle()`` (not
timed) lets the run's commit finish before the next. Printed: p50/p99/mean ms of
both and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import DEFAULT_PG_ADMIN, Bench, latency


async def measure(bench: Bench, n: int) -> dict[str, Any]:
    engine = bench.engine()
    tokens: dict[str, str] = {}
    resumed: dict[str, float] = {}
    arrived: dict[str, asyncio.Event] = {}

    def hand_over(run_id: str, token: str) -> None:
        tokens[run_id] = token

    def mark(run_id: str) -> None:
        resumed[run_id] = time.perf_counter()
        arrived[run_id].set()

    @engine.workflow()
    async def paid(ctx: Any, _input: Any) -> Any:
        cb = ctx.callback()
        await ctx.step(hand_over, ctx.run_id, cb.token)
        value = await cb.wait()
        mark(ctx.run_id)
        return value

    @engine.workflow()
    async def signalled(ctx: Any, _input: Any) -> Any:
        value = await ctx.wait_for_signal("go")
        mark(ctx.run_id)
        return value

    callback_s: list[float] = []
    signal_s: list[float] = []
    async with engine:
        for i in range(n + 1):
            for kind in ("paid", "signalled"):
                run_id = f"{kind}-{i}"
                arrived[run_id] = asyncio.Event()
                await engine.start(kind, id=run_id)
        await engine.idle(timeout=600)
        for i in range(n + 1):  # the first of each: a warm-up, not counted
            run_id = f"paid-{i}"
            t0 = time.perf_counter()
            await engine.complete_callback(tokens[run_id], i)
            await arrived[run_id].wait()
            if i:
                callback_s.append(resumed[run_id] - t0)
            await engine.idle(timeout=60)
            run_id = f"signalled-{i}"
            t0 = time.perf_counter()
            await engine.signal(run_id, "go", i)
            await arrived[run_id].wait()
            if i:
                signal_s.append(resumed[run_id] - t0)
            await engine.idle(timeout=60)
    return {"n": n, "callback": latency(callback_s), "signal": latency(signal_s)}


def table(figures: dict[str, Any], db: str) -> str:
    callback, signal = figures["callback"], figures["signal"]
    lines = [
        f"completion -> resumed run on {db}, {figures['n']} runs each (target: callback p50 "
        "≤ 1.5 ms on SQLite)",
        "| path | p50 ms | p99 ms | mean ms | p50 ratio to signal |",
        "|------|--------|--------|---------|---------------------|",
    ]
    for name, row in (("engine.complete_callback", callback), ("engine.signal (baseline)", signal)):
        ratio = row["p50_ms"] / signal["p50_ms"]
        lines.append(
            f"| {name} | {row['p50_ms']:.3f} | {row['p99_ms']:.3f} | {row['mean_ms']:.3f} "
            f"| {ratio:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--db", choices=["sqlite", "postgres", "memory"], default="sqlite")
    parser.add_argument(
        "--pg-url", default=os.environ.get("PARKWAY_BENCH_POSTGRES_URL", DEFAULT_PG_ADMIN)
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="parkway-bench-") as folder:
        bench = Bench(args.db, Path(folder), args.pg_url, args)
        try:
            figures = asyncio.run(measure(bench, args.n))
        finally:
            bench.close()
    sys.stdout.write(table(figures, args.db) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
