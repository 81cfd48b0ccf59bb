"""parkway side of the benchmarks: one shape per invocation, one line of JSON on stdout.

Run from the project root::

    python -m benchmarks.parkway_bench --shape SHAPE [--n N] [--db sqlite|memory|postgres]
        [--telemetry off|metrics|tracing|on]

Each invocation is a fresh process (so peak RSS is the shape's own) on a fresh
database in a new temporary folder. The shapes match ``benchmarks.peers.dbos_bench``
so that ``benchmarks.run`` can print ratios from one invocation.

Shapes
------
``steps3`` (N=1000, ``--steps async|sync``)
    N workflows of 3 trivial steps each, started one by one from this process (the
    in-process worker runs them as they come); clock from the first start to the last
    result: ``wf_per_s``. The steps are ``async def`` functions, or with ``--steps
    sync`` plain ``def`` ones (which the engine runs in a thread each). With
    ``--telemetry metrics|tracing|on`` (any shape that makes its engine with
    ``Bench.engine``), the engine counts metrics, makes spans, or both: the
    overhead of observing it. With ``--step-timeout S`` each step is given
    ``timeout=S`` (what bounding every attempt costs; see ``benchmarks.failures``).
``heartbeat`` (N=300, ``--beats K``)
    N workflows of one ``async def`` step that calls ``step_context().heartbeat()``
    K times in a loop (K=0: a step that does not), run one after another (each
    awaited before the next starts): ``ms_per_run``, the mean time of a run.
``park`` (N=10000, ``--wait signal|event|message``)
    N runs started and parked on ``wait_for_signal`` (or ``wait_for_event("order.paid",
    match={"order_id": i})``, or ``wait_for_message``); clock until the engine is idle
    (every run parked): ``runs_per_s``, ``peak_rss_mb``, ``threads`` and
    ``bytes_per_run`` (database + WAL after a TRUNCATE checkpoint, minus the empty
    schema, over N); on SQLite also ``per_run``: what each table and index grew by
    per run, from the ``dbstat`` virtual table (``pages``: bytes of b-tree pages,
    ``payload``: bytes of the records in them, ``cells``: entries).
``resume`` (N=200, ``--depth 5000 --restarts 10``)
    signal -> resumed -> parked again, at journal depth 0 and at ``--depth``,
    interleaved; then the first resume at depth after each of ``--restarts`` engine
    restarts: see ``benchmarks.resume``.
``openloop`` (N=10000 parked runs, ``--seconds 10 --rates 0.5,0.8 --capacity-n 10000
--sustained 0.8``)
    messages correlated at fixed times, at fractions of the capacity measured first,
    by 4 senders; latency from each scheduled send to its run's committed resume
    (p50/p99/p999); then the rate the loop sustains paced and fractions of it: see
    ``benchmarks.openloop``.
``spanfloor`` (N=20000)
    the OpenTelemetry SDK's cost of one bare span and of parkway's five spans of a
    3-step run, in a loop on their own: see ``benchmarks.telemetry``.
``gather`` (N=50), ``update`` (N=1000, ``--update-via inproc|xproc``)
    a gather of 10 async steps against one step's time; update round trips, in one
    process and across processes: see ``benchmarks.inside``.
``wake`` (N=1000)
    N parked runs; one at a time: signal, then wait for the run's result (it returns
    right after the wait). ``p50_ms``/``p99_ms``.
``publish`` (N=100000 waiters)
    Time per publish of a non-matching event with 0 parked waiters, then with N runs
    parked on ``wait_for_event("order.paid", match={"order_id": i})`` (one match
    shape): ``ratio`` = with / without. Each is the median of 10 block means (after
    one block to warm up), taken after a WAL checkpoint (SQLite). Then publish ->
    resumed latency p50/p99 over 1,000 of the parked runs.
``subjects`` (N=10000 subscribers)
    N runs under ``client:i`` parked on cross-subject waits for ``product.update`` on
    ``product:i``; then 100,000 product updates of which 1% hit a subscriber:
    ``events_per_s``, and the time per publish compared with the same publishes and no
    subscribers.
``xwake`` (N=1000, ``--via signal|publish|correlate``)
    Across processes: a ``parkway worker`` process runs the runs; this process is a
    client only (``worker=False``). N runs park on a signal (or an event with a match,
    or a message key); one at a time this process signals (publishes, correlates) one
    and the run, once resumed, journals ``time.time()`` in an (async) step. Latency
    = that time - the time just before the call (same machine clock): p50/p99.
``scale`` (N=1000, ``--workers K``)
    N 3-step workflows started by this (client-only) process, then run by K
    ``parkway worker`` processes; clock from the workers' start to the last
    completion, from the first completion on (the workers are up), polled every
    20 ms: ``wf_per_s``.
``correlate`` (N=10000)
    N runs parked on ``wait_for_message("score", key_i)``; this process correlates
    half of them one by one (``msgs_per_s``), the other half with 16 in flight
    (``msgs_per_s_inflight``); clock until every run has resumed. Then correlate ->
    resumed latency p50/p99, one at a time.
``schedules`` (N=1000)
    N schedules ticking within one minute of real time, each at its own second; how
    late each run's code starts after its tick: p50/p99/max, and how many were on
    time (≤ 1 s): see ``benchmarks.schedules``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmarks.crossproc import XWAKE_VIA, shape_scale, shape_xwake
from benchmarks.events import shape_correlate, shape_publish, shape_subjects
from benchmarks.harness import (
    DEFAULT_PG_ADMIN,
    Bench,
    db_bytes,
    latency,
    process_figures,
    table_bytes,
)
from benchmarks.inside import shape_gather, shape_update
from benchmarks.openloop import shape_openloop
from benchmarks.resume import shape_resume
from benchmarks.schedules import shape_schedules
from benchmarks.telemetry import shape_spanfloor

DEFAULT_N = {
    "gather": 50,
    "update": 1000,
    "steps3": 1000,
    "resume": 200,
    "openloop": 10000,
    "park": 10000,
    "wake": 1000,
    "xwake": 1000,
    "scale": 1000,
    "publish": 100000,
    "subjects": 10000,
    "correlate": 10000,
    "schedules": 1000,
    "spanfloor": 20000,
    "heartbeat": 300,
}


def _sync_a(i: int) -> int:
    return i + 1


def _sync_b(x: int) -> dict[str, int]:
    return {"x": x * 2}


def _sync_c(d: dict[str, int]) -> int:
    return d["x"] + 1


async def _async_a(i: int) -> int:
    return i + 1


async def _async_b(x: int) -> dict[str, int]:
    return {"x": x * 2}


async def _async_c(d: dict[str, int]) -> int:
    return d["x"] + 1


STEP_FUNCTIONS: dict[str, tuple[Callable[..., Any], ...]] = {
    "sync": (_sync_a, _sync_b, _sync_c),  # `def` steps: the engine runs each in a thread
    "async": (_async_a, _async_b, _async_c),  # `async def` steps, on the worker's loop
}


async def shape_steps3(bench: Bench, n: int) -> dict[str, Any]:
    engine = bench.engine()
    kind = getattr(bench.options, "steps", "async")
    step_a, step_b, step_c = STEP_FUNCTIONS[kind]

    timeout = getattr(bench.options, "step_timeout", None)

    @engine.workflow()
    async def steps3(ctx: Any, i: int) -> int:
        a = await ctx.step(step_a, i, timeout=timeout)
        b = await ctx.step(step_b, a, timeout=timeout)
        return int(await ctx.step(step_c, b, timeout=timeout))

    async with engine:
        t0 = time.perf_counter()
        handles = [await engine.start("steps3", i) for i in range(n)]
        results = [await h.result(timeout=600) for h in handles]
        seconds = time.perf_counter() - t0
    assert results == [(i + 1) * 2 + 1 for i in range(n)]
    telemetry = getattr(bench.options, "telemetry", "off")
    return {
        "wf_per_s": round(n / seconds, 1),
        "seconds": round(seconds, 3),
        "steps": kind,
        "telemetry": telemetry,
        "trace_ratio": getattr(bench.options, "trace_ratio", 1.0),
        "step_timeout": timeout,
    }


async def shape_heartbeat(bench: Bench, n: int) -> dict[str, Any]:
    from parkway import step_context

    engine = bench.engine()
    beats = getattr(bench.options, "beats", 1000)

    async def export(i: int) -> int:
        ctx = step_context()
        for row in range(beats):
            ctx.heartbeat({"row": row})
        return i

    @engine.workflow()
    async def exporting(ctx: Any, i: int) -> int:
        return int(await ctx.step(export, i))

    async with engine:
        for i in range(20):  # (warm: imports, caches, the first statements)
            await (await engine.start("exporting", i)).result(timeout=60)
        t0 = time.perf_counter()
        for i in range(n):
            assert await (await engine.start("exporting", i)).result(timeout=60) == i
        seconds = time.perf_counter() - t0
    return {"ms_per_run": round(seconds / n * 1000, 4), "beats": beats}


PARKERS: dict[str, Callable[[Any, int], Coroutine[Any, Any, Any]]] = {}


async def _park_signal(ctx: Any, i: int) -> Any:
    return await ctx.wait_for_signal("go")


async def _park_event(ctx: Any, i: int) -> Any:
    # What the "event wait with a match" is: one match field, an integer.
    return await ctx.wait_for_event("order.paid", match={"order_id": i})


async def _park_message(ctx: Any, i: int) -> Any:
    return await ctx.wait_for_message("score", f"APP-{i}")


PARKERS.update(signal=_park_signal, event=_park_event, message=_park_message)


async def shape_park(bench: Bench, n: int) -> dict[str, Any]:
    engine = bench.engine()
    wait = getattr(bench.options, "wait", "signal")
    engine.workflow("parker")(PARKERS[wait])

    async with engine:
        sqlite = bench.url.startswith("sqlite")
        baseline = db_bytes(bench.path)
        empty = table_bytes(bench.path) if sqlite else {}
        t0 = time.perf_counter()
        for i in range(n):
            await engine.start("parker", i, id=f"p{i}")
        await engine.idle(timeout=600)
        seconds = time.perf_counter() - t0
        parked = len(await engine.list_runs(status="parked", limit=n + 1))
        figures = process_figures()
    total = db_bytes(bench.path)
    out = {
        "runs_per_s": round(n / seconds, 1),
        "seconds": round(seconds, 3),
        "parked": parked,
        "wait": wait,
    }
    out.update(figures)
    if sqlite:
        out.update(db_bytes=total, bytes_per_run=round((total - baseline) / n, 1))
        out["per_run"] = per_run_bytes(empty, table_bytes(bench.path), n)
    return out


def per_run_bytes(
    before: dict[str, dict[str, int]], after: dict[str, dict[str, int]], n: int
) -> dict[str, dict[str, float]]:
    """What each table and index grew by, per parked run (pages, and records in them)."""
    out = {}
    for name, figures in sorted(after.items()):
        empty = before.get(name, {})
        grown = {k: (v - empty.get(k, 0)) / n for k, v in figures.items()}
        if any(grown.values()):
            out[name] = {k: round(v, 2) for k, v in grown.items()}
    return out


async def shape_wake(bench: Bench, n: int) -> dict[str, Any]:
    engine = bench.engine()

    @engine.workflow()
    async def parker(ctx: Any, i: int) -> Any:
        return await ctx.wait_for_signal("go")

    async with engine:
        handles = [await engine.start("parker", i) for i in range(n)]
        await engine.idle(timeout=600)
        samples = []
        for i, handle in enumerate(handles):
            t0 = time.perf_counter()
            await handle.signal("go", i)
            assert await handle.result(timeout=30) == i
            samples.append(time.perf_counter() - t0)
    return latency(samples)


SHAPES = {
    "gather": shape_gather,
    "update": shape_update,
    "resume": shape_resume,
    "openloop": shape_openloop,
    "scale": shape_scale,
    "xwake": shape_xwake,
    "steps3": shape_steps3,
    "park": shape_park,
    "wake": shape_wake,
    "publish": shape_publish,
    "subjects": shape_subjects,
    "correlate": shape_correlate,
    "schedules": shape_schedules,
    "spanfloor": shape_spanfloor,
    "heartbeat": shape_heartbeat,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), required=True)
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--db", choices=["sqlite", "memory", "postgres"], default="sqlite")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("PARKWAY_BENCH_POSTGRES_URL", DEFAULT_PG_ADMIN),
        help="admin URL of the PostgreSQL server (a fresh database is made on it)",
    )
    parser.add_argument("--workers", type=int, default=1, help="scale: worker processes")
    parser.add_argument(
        "--via", choices=sorted(XWAKE_VIA), default="signal", help="xwake: what wakes the run"
    )
    parser.add_argument(
        "--steps",
        choices=sorted(STEP_FUNCTIONS),
        default="async",
        help="steps3: `def` steps (sync) or `async def` steps",
    )
    parser.add_argument(
        "--step-timeout",
        type=float,
        default=None,
        help="steps3: each step's timeout= in seconds (default: none)",
    )
    parser.add_argument(
        "--beats", type=int, default=1000, help="heartbeat: heartbeats of each run's step"
    )
    parser.add_argument(
        "--wait", choices=sorted(PARKERS), default="signal", help="park: what the runs wait on"
    )
    parser.add_argument(
        "--telemetry",
        choices=["off", "metrics", "tracing", "on"],
        default="off",
        help="the engine counts Prometheus metrics (metrics), makes OpenTelemetry spans "
        "(tracing: an SDK provider, batched to an exporter that drops them), or both (on)",
    )
    parser.add_argument(
        "--trace-ratio",
        type=float,
        default=1.0,
        help="tracing: the share of traces sampled (ParentBased(TraceIdRatioBased(r)); "
        "1: every span recorded)",
    )
    parser.add_argument(
        "--events", type=int, default=100_000, help="subjects: updates published each half"
    )
    parser.add_argument(
        "--soon",
        action="store_true",
        help="schedules: each schedule ticks within seconds of its adding, not at second "
        "i %% 60 (a smoke run, not the minute-long measurement)",
    )
    parser.add_argument(
        "--depth", type=int, default=5000, help="resume: journal entries of the deep run"
    )
    parser.add_argument(
        "--cached-runs",
        type=int,
        default=None,
        help="parked runs the worker keeps in memory (default: the engine's; 0: replay "
        "every resume, as before the cache)",
    )
    parser.add_argument(
        "--restarts", type=int, default=10, help="resume: restarts, one deep resume after each"
    )
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="openloop: seconds of offered load per rate"
    )
    parser.add_argument(
        "--rates",
        default="0.5,0.8",
        help="openloop: offered rates, as fractions of the capacity measured first",
    )
    parser.add_argument(
        "--capacity-n", type=int, default=10000, help="openloop: messages of the capacity phase"
    )
    parser.add_argument(
        "--sustained",
        type=float,
        default=0.8,
        help="openloop: after the rates, the loop's sustained rate paced (released at 100 %% "
        "of the capacity) and this fraction of it (0: neither)",
    )
    parser.add_argument(
        "--step-ms", type=float, default=20.0, help="gather: each of its steps' time"
    )
    parser.add_argument(
        "--update-via",
        choices=["inproc", "xproc"],
        default="inproc",
        help="update: the run's worker in this process, or in a worker process",
    )
    args = parser.parse_args(argv)
    n = args.n or DEFAULT_N[args.shape]
    with tempfile.TemporaryDirectory(prefix="parkway-bench-") as folder:
        bench = Bench(args.db, Path(folder), args.pg_url, args)
        try:
            figures = asyncio.run(SHAPES[args.shape](bench, n))
        finally:
            bench.close()
    figures.update(shape=args.shape, n=n, db=args.db, available=True, pid=os.getpid())
    sys.stdout.write(orjson.dumps(figures).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
