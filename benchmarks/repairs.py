"""Repairs: checking code against stored runs, and forking a run with a long journal.

    python -m benchmarks.repairs [--runs 10000] [--entries 1000] [--forks 30] [--db sqlite|postgres]

``check_replay``: ``runs`` runs of a 3-step workflow parked on a signal are
replayed against the registered code by a client engine (no worker); printed in
runs/s, with the baseline measured in the same run: reading the same runs and
their journals from the store alone (what the check reads, without the replay).
Target: ≥ 5,000 runs/s on SQLite.

``fork``: a run parked after ``entries`` - 1 steps (its journal: ``entries``
entries) is forked ``forks`` times (all of it copied); printed: the median and
the 90th percentile of one fork, with the baseline measured in the same run:
``engine.start`` of a run (a row and its start task). Target: ≤ 20 ms on SQLite.
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
from parkway.core import repairs
from parkway.store.runs import RunSelection


def register(engine: Engine, entries: int) -> None:
    @engine.workflow()
    async def three_steps(ctx: Any, n: int) -> Any:
        a = await ctx.step(lambda: n, name="one")
        b = await ctx.step(lambda: a + 1, name="two")
        c = await ctx.step(lambda: b + 1, name="three")
        return [c, await ctx.wait_for_signal("go")]

    @engine.workflow()
    async def long_journal(ctx: Any, _input: Any) -> Any:
        total = 0
        for i in range(entries - 1):
            total += await ctx.step(lambda i=i: i, name="add")
        return [total, await ctx.wait_for_signal("go")]


async def _parked(engine: Engine, workflow: str, n: int) -> None:
    """Wait until ``n`` runs of ``workflow`` are parked."""
    while True:
        counts = (await engine.run_counts()).get(workflow, {})
        if counts.get("parked", 0) >= n:
            return
        await asyncio.sleep(0.2)


async def measure(bench: Bench, runs: int, entries: int, forks: int) -> dict[str, Any]:
    worker = bench.engine()
    register(worker, entries)
    async with worker:
        for i in range(runs):
            await worker.start("three_steps", i, id=f"r{i:06d}")
        await worker.start("long_journal", id="long")
        await _parked(worker, "three_steps", runs)
        await _parked(worker, "long_journal", 1)

    client = bench.engine(worker=False)
    register(client, entries)
    async with client:
        # The baseline: what the check reads, read alone.
        rt = client._rt
        began = time.perf_counter()
        read, after = 0, None
        while True:
            async with rt.store.transaction(readonly=True) as tx:
                batch = await tx.runs.find(
                    RunSelection(
                        statuses=repairs.CHECKED,
                        workflow="three_steps",
                        after=after,
                        limit=repairs.BATCH,
                    )
                )
                for run in batch:
                    await tx.journal.read(run.id)
                    read += 1
            if len(batch) < repairs.BATCH:
                break
            after = batch[-1].id
        read_s = time.perf_counter() - began

        began = time.perf_counter()
        report = await client.check_replay(workflow="three_steps")
        check_s = time.perf_counter() - began
        assert report.checked == runs and not report.diverged, report

        fork_ms: list[float] = []
        for i in range(forks):
            began = time.perf_counter()
            await client.fork("long", id=f"fork{i}")
            fork_ms.append((time.perf_counter() - began) * 1000)
        assert len(await client.history("fork0")) == entries - 1  # (the pending wait: live)

        start_ms: list[float] = []
        for i in range(forks):
            began = time.perf_counter()
            await client.start("three_steps", i, id=f"s{i}")
            start_ms.append((time.perf_counter() - began) * 1000)

    fork_ms.sort()
    return {
        "runs": runs,
        "read_per_s": read / read_s,
        "check_per_s": runs / check_s,
        "entries": entries,
        "forks": forks,
        "fork_ms": statistics.median(fork_ms),
        "fork_p90_ms": fork_ms[int(len(fork_ms) * 0.9) - 1],
        "start_ms": statistics.median(start_ms),
    }


def table(f: dict[str, Any], db: str) -> str:
    rows = [
        (
            f"check_replay of {f['runs']:,} parked 3-step runs: runs/s (target ≥ 5,000)",
            f"{f['check_per_s']:,.0f}",
        ),
        ("baseline: reading those runs and journals alone, runs/s", f"{f['read_per_s']:,.0f}"),
        ("check / read (the replay's share)", f"{f['read_per_s'] / f['check_per_s']:.2f}×"),
        (
            f"fork of a {f['entries']:,}-entry journal: median ms (target ≤ 20)",
            f"{f['fork_ms']:.2f}",
        ),
        (f"fork: 90th percentile ms ({f['forks']} forks)", f"{f['fork_p90_ms']:.2f}"),
        ("baseline: engine.start of a run, median ms", f"{f['start_ms']:.2f}"),
        ("fork / start", f"{f['fork_ms'] / f['start_ms']:.1f}×"),
    ]
    width = max(len(label) for label, _ in rows)
    lines = [f"repairs on {db}", f"| {'figure'.ljust(width)} | value |"]
    lines.append(f"|{'-' * (width + 2)}|-------|")
    lines += [f"| {label.ljust(width)} | {value} |" for label, value in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--runs", type=int, default=10000)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--forks", type=int, default=30)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument(
        "--pg-url", default=os.environ.get("PARKWAY_BENCH_POSTGRES_URL", DEFAULT_PG_ADMIN)
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="parkway-bench-") as folder:
        bench = Bench(args.db, Path(folder), args.pg_url, args)
        try:
            figures = asyncio.run(measure(bench, args.runs, args.entries, args.forks))
        finally:
            bench.close()
    sys.stdout.write(table(figures, args.db) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
