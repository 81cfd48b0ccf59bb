"""Version-aware claims: 3-step throughput with the claim's version filter off (as
before workers said what they serve) and on, in one run.

    python -m benchmarks.fleet [--n 2000] [--rounds 5] [--db sqlite|postgres|both]

A client (no worker) starts ``n`` runs of a 3-step workflow; then a worker opens
and drains them, every run taken by a claim (none is handed over). Rounds
alternate the filter off and on, each on a fresh store, so that the machine's
load falls on both alike; the median of each is printed with their ratio
(filtered / unfiltered time per run: the target is at most 1.05).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import DEFAULT_PG_ADMIN, Bench
from parkway import Engine
from parkway.worker.loop import Worker


def register(engine: Engine) -> None:
    def step(n: int) -> int:
        return n + 1

    @engine.workflow(name="three_steps", version="2")
    async def three_steps(ctx: Any, input: Any) -> int:
        n = await ctx.step(step, input, name="one")
        n = await ctx.step(step, n, name="two")
        return int(await ctx.step(step, n, name="three"))


async def drain(bench: Bench, n: int, filtered: bool) -> float:
    """Runs/s of a worker draining ``n`` started runs, its claim filtered or not."""
    client = bench.engine(worker=False)
    register(client)
    async with client:
        for i in range(n):
            await client.start("three_steps", i, id=f"r{i:06d}")
    serves = Worker.serves
    if not filtered:  # the claim of every due run, whatever its workflow and version
        Worker.serves = lambda self: None  # type: ignore[assignment, method-assign, return-value]
    try:
        worker = bench.engine()
        register(worker)
        async with worker:
            began = time.perf_counter()
            await worker.handle(f"r{n - 1:06d}").result(timeout=3600)
            await worker.idle(timeout=3600)
            took = time.perf_counter() - began
    finally:
        Worker.serves = serves  # type: ignore[method-assign]
    return n / took


async def measure(db: str, args: argparse.Namespace) -> dict[str, Any]:
    rates: dict[bool, list[float]] = {False: [], True: []}
    for i in range(args.rounds * 2):
        filtered = bool(i % 2) if (i // 2) % 2 == 0 else not bool(i % 2)  # (off-on, on-off...)
        with tempfile.TemporaryDirectory(prefix="parkway-bench-") as folder:
            bench = Bench(db, Path(folder), args.pg_url, args)
            try:
                rates[filtered].append(await drain(bench, args.n, filtered))
            finally:
                bench.close()
    off, on = statistics.median(rates[False]), statistics.median(rates[True])
    return {"db": db, "n": args.n, "rounds": args.rounds, "off": off, "on": on, "ratio": off / on}


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "3-step throughput, the claim's version filter off (main's claim) and on",
        "| store | runs | rounds | filter off runs/s | filter on runs/s | time ratio on/off "
        "(target ≤ 1.05) |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['db']} | {r['n']:,} | {r['rounds']} | {r['off']:,.0f} | {r['on']:,.0f} "
        f"| {r['ratio']:.3f} |"
        for r in results
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each, alternated")
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument(
        "--pg-url", default=os.environ.get("PARKWAY_BENCH_POSTGRES_URL", DEFAULT_PG_ADMIN)
    )
    args = parser.parse_args(argv)
    dbs = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    results = [asyncio.run(measure(db, args)) for db in dbs]
    sys.stdout.write(table(results) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
