"""Admission: one key with ``Concurrency(1)``, 10,000 runs queued in it, then drained.

    python -m benchmarks.admission [--n 10000] [--db sqlite|postgres] [--window 200]

A client (no worker) starts ``n`` runs into the one key: the first takes the
slot, the others queue ``pending``. Then a worker drains them, one at a time
(each run's end hands the slot to the next queued run, in its end's
transaction). Printed: starts/s, drained runs/s, and the cost of a dequeue (the
time of ``parkway.core.admission.release`` inside the ending run's commit: the key's
lock, the run leaving, the next run taken off the queue's index, its start
task) over the first and the last ``window`` dequeues of the drain, and their
ratio: flat (near 1) when the dequeue is an index lookup, whatever the queue's
length.
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
from parkway import Concurrency, Engine
from parkway.core import admission


def register(engine: Engine) -> None:
    @engine.workflow(name="one_key", concurrency=Concurrency(1))
    async def one_key(ctx: Any, input: Any) -> int:
        return int(input)


async def measure(bench: Bench, n: int, window: int) -> dict[str, Any]:
    client = bench.engine(worker=False)
    register(client)
    async with client:
        began = time.perf_counter()
        for i in range(n):
            await client.start("one_key", i, id=f"q{i:06d}")
        start_s = time.perf_counter() - began
        pending = len(await client.list_runs(workflow="one_key", status="pending", limit=n + 1))

    costs: list[float] = []
    release = admission.release

    async def timed(*args: Any, **kwargs: Any) -> None:
        t = time.perf_counter()
        await release(*args, **kwargs)
        costs.append(time.perf_counter() - t)

    admission.release = timed  # type: ignore[assignment]  # (parkway.core.transitions calls it)
    try:
        worker = bench.engine()
        register(worker)
        async with worker:
            began = time.perf_counter()
            last = worker.handle(f"q{n - 1:06d}")
            await last.result(timeout=3600)
            drain_s = time.perf_counter() - began
    finally:
        admission.release = release  # type: ignore[assignment]
    first = statistics.median(costs[:window]) * 1e6
    end = statistics.median(costs[-window:]) * 1e6
    return {
        "n": n,
        "queued": pending,
        "starts_per_s": n / start_s,
        "drain_runs_per_s": n / drain_s,
        "dequeues": len(costs),
        "dequeue_us_first": first,
        "dequeue_us_last": end,
        "ratio": end / first,
    }


def table(figures: dict[str, Any], db: str) -> str:
    rows = [
        ("runs started into one key (limit 1)", f"{figures['n']:,}"),
        ("pending after the starts (1 admitted, the rest queued)", f"{figures['queued']:,}"),
        ("starts/s (client, queueing)", f"{figures['starts_per_s']:,.0f}"),
        ("drain: runs/s (one at a time)", f"{figures['drain_runs_per_s']:,.0f}"),
        ("dequeue µs, first window (queue full)", f"{figures['dequeue_us_first']:,.1f}"),
        ("dequeue µs, last window (queue nearly empty)", f"{figures['dequeue_us_last']:,.1f}"),
        ("last / first (target ≤ 1.5)", f"{figures['ratio']:.2f}"),
    ]
    width = max(len(label) for label, _ in rows)
    lines = [f"admission on {db}", f"| {'figure'.ljust(width)} | value |"]
    lines.append(f"|{'-' * (width + 2)}|-------|")
    lines += [f"| {label.ljust(width)} | {value} |" for label, value in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--window", type=int, default=200, help="dequeues per measured window")
    parser.add_argument(
        "--pg-url", default=os.environ.get("PARKWAY_BENCH_POSTGRES_URL", DEFAULT_PG_ADMIN)
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="parkway-bench-") as folder:
        bench = Bench(args.db, Path(folder), args.pg_url, args)
        try:
            figures = asyncio.run(measure(bench, args.n, args.window))
        finally:
            bench.close()
    sys.stdout.write(table(figures, args.db) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
