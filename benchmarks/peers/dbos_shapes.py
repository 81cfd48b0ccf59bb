"""DBOS's side of each shape: its workflows, and one function per (shape, variant).

Part of the DBOS adapter (``benchmarks.peers.dbos_bench``, whose docstring says what
each variant does and why).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from benchmarks.harness import latency, process_figures
from benchmarks.peers.dbos_db import REACHED, BenchDB, wait_finished, wait_parked
from benchmarks.procs import logger, own_figures

APP_NAME = "parkway_dbos_bench"
QUEUE_NAME = "bench_queue"
TOPIC = "bench"
RECV_TIMEOUT_S = 86400.0
SEND_CHUNK = 1000

log = logger("dbos_bench")


@dataclass(frozen=True)
class Workflows:
    steps3: Callable[[int], int]
    steps3_async: Callable[[int], Coroutine[Any, Any, int]]
    parker: Callable[[], Any]
    parker_async: Callable[[], Coroutine[Any, Any, Any]]


def define_workflows() -> Workflows:
    """Register the benchmark's workflows with DBOS (called once, before DBOS launches)."""
    from dbos import DBOS

    @DBOS.step(name="bench_step_a")
    def step_a(i: int) -> int:
        return i + 1

    @DBOS.step(name="bench_step_b")
    def step_b(x: int) -> dict[str, int]:
        return {"v": x}

    @DBOS.step(name="bench_step_c")
    def step_c(d: dict[str, int]) -> int:
        return d["v"] * 2

    @DBOS.workflow(name="bench_steps3")
    def steps3(i: int) -> int:
        return step_c(step_b(step_a(i)))

    @DBOS.step(name="bench_step_a_async")
    async def step_a_async(i: int) -> int:
        return i + 1

    @DBOS.step(name="bench_step_b_async")
    async def step_b_async(x: int) -> dict[str, int]:
        return {"v": x}

    @DBOS.step(name="bench_step_c_async")
    async def step_c_async(d: dict[str, int]) -> int:
        return d["v"] * 2

    @DBOS.workflow(name="bench_steps3_async")
    async def steps3_async(i: int) -> int:
        return await step_c_async(await step_b_async(await step_a_async(i)))

    @DBOS.workflow(name="bench_parker")
    def parker() -> Any:
        REACHED.incr()
        return DBOS.recv(TOPIC, timeout_seconds=RECV_TIMEOUT_S)

    @DBOS.workflow(name="bench_parker_async")
    async def parker_async() -> Any:
        REACHED.incr()
        return await DBOS.recv_async(TOPIC, timeout_seconds=RECV_TIMEOUT_S)

    return Workflows(steps3, steps3_async, parker, parker_async)


def expected_steps3(i: int) -> int:
    return (i + 1) * 2


def launch_dbos(url: str, args: argparse.Namespace) -> None:
    from dbos import DBOS, DBOSConfig

    config: DBOSConfig = {
        "name": APP_NAME,
        "system_database_url": url,
        "log_level": args.log_level,
    }
    if args.notification_poll is not None:
        config["notification_listener_polling_interval_sec"] = args.notification_poll
    if args.db == "sqlite" and args.sqlite_journal == "wal":
        from sqlalchemy import Engine, event

        def synchronous_normal(dbapi_conn: Any, _record: Any) -> None:
            if isinstance(dbapi_conn, sqlite3.Connection):
                dbapi_conn.execute("PRAGMA synchronous=NORMAL")

        event.listen(Engine, "connect", synchronous_normal)
    DBOS(config=config)
    DBOS.launch()


def destroy_dbos(timeout_s: float) -> bool:
    """DBOS.destroy() on a side thread, so that a stuck shutdown cannot hang the harness."""
    from dbos import DBOS

    done = threading.Event()

    def target() -> None:
        try:
            DBOS.destroy()
        except Exception as e:  # pragma: no cover - reported, not fatal
            log(f"DBOS.destroy failed: {e!r}")
        done.set()

    threading.Thread(target=target, name="bench-destroy", daemon=True).start()
    if not done.wait(timeout_s):
        return False
    # Work already running on DBOS's executor (e.g. a cancelled async workflow's last
    # write) outlives destroy(); give it a moment so that it cannot re-create the SQLite
    # file after we delete it. Threads still parked in a sync recv() are left behind.
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and any(
        t.name.startswith("dbos-executor-") for t in threading.enumerate()
    ):
        time.sleep(0.05)
    return True


# --------------------------------------------------------------------------- measurements


def dbos_process_figures() -> dict[str, Any]:
    """This process's figures, with the executor threads DBOS runs sync workflows on."""
    executor = sum(1 for t in threading.enumerate() if t.name.startswith("dbos-executor-"))
    return {**process_figures(), "executor_threads": executor, **own_figures()}


@dataclass
class Context:
    args: argparse.Namespace
    db: BenchDB
    wfs: Workflows
    partial: dict[str, Any]


def steps3_start(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS

    n = ctx.args.n
    t0 = time.perf_counter()
    handles = [DBOS.start_workflow(ctx.wfs.steps3, i) for i in range(n)]
    started = time.perf_counter() - t0
    results = [h.get_result() for h in handles]
    seconds = time.perf_counter() - t0
    return steps3_figures(n, results, seconds, started)


def steps3_queue(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS

    n, poll = ctx.args.n, ctx.args.queue_poll
    queue = DBOS.register_queue(QUEUE_NAME, polling_interval_sec=poll)
    # The queue manager discovers new queues once a second: let its worker start first,
    # as it would have long before any work arrives in a real application.
    time.sleep(1.5)
    t0 = time.perf_counter()
    handles = [queue.enqueue(ctx.wfs.steps3, i) for i in range(n)]
    started = time.perf_counter() - t0
    results = [h.get_result(polling_interval_sec=poll) for h in handles]
    seconds = time.perf_counter() - t0
    figures = steps3_figures(n, results, seconds, started)
    figures["queue_polling_interval_sec"] = poll
    return figures


def steps3_async(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS

    n = ctx.args.n

    async def run() -> dict[str, Any]:
        t0 = time.perf_counter()
        handles = [await DBOS.start_workflow_async(ctx.wfs.steps3_async, i) for i in range(n)]
        started = time.perf_counter() - t0
        results = await asyncio.gather(*(h.get_result() for h in handles))
        seconds = time.perf_counter() - t0
        return steps3_figures(n, list(results), seconds, started)

    return asyncio.run(run())


def steps3_direct(ctx: Context) -> dict[str, Any]:
    """The workflow function called directly, one call after the other (DBOS runs it
    in the calling thread, durably: its fastest way to run workflows here)."""
    n = ctx.args.n
    t0 = time.perf_counter()
    results = [ctx.wfs.steps3(i) for i in range(n)]
    seconds = time.perf_counter() - t0
    return steps3_figures(n, results, seconds, seconds)


def steps3_direct_async(ctx: Context) -> dict[str, Any]:
    """The async workflow function awaited directly, one call after the other."""
    n = ctx.args.n

    async def run() -> dict[str, Any]:
        t0 = time.perf_counter()
        results = [await ctx.wfs.steps3_async(i) for i in range(n)]
        seconds = time.perf_counter() - t0
        return steps3_figures(n, results, seconds, seconds)

    return asyncio.run(run())


def steps3_figures(n: int, results: list[int], seconds: float, started: float) -> dict[str, Any]:
    wrong = sum(1 for i, r in enumerate(results) if r != expected_steps3(i))
    if wrong:
        raise RuntimeError(f"{wrong}/{n} steps3 results were wrong")
    return {
        "wf_per_s": round(n / seconds, 1),
        "seconds": round(seconds, 4),
        "start_seconds": round(started, 4),
    }


def park_sync(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS, SendMessage

    args, db = ctx.args, ctx.db
    baseline = db.size_bytes()
    t0 = time.perf_counter()
    ids = [DBOS.start_workflow(ctx.wfs.parker).get_workflow_id() for _ in range(args.n)]
    figures = park_figures(ctx, baseline, t0, wait_parked(db, args.n, t0, args.park_timeout))
    if args.finish == "send":
        for k in range(0, len(ids), SEND_CHUNK):
            DBOS.send_bulk([SendMessage(w, "go", TOPIC) for w in ids[k : k + SEND_CHUNK]])
        figures.update(wait_finished(db, args.n, args.finish_timeout))
    return figures


def park_async(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS, SendMessage

    args, db = ctx.args, ctx.db

    async def run() -> dict[str, Any]:
        baseline = db.size_bytes()
        t0 = time.perf_counter()
        ids = []
        for _ in range(args.n):
            handle = await DBOS.start_workflow_async(ctx.wfs.parker_async)
            ids.append(handle.get_workflow_id())
        parked = await asyncio.to_thread(wait_parked, db, args.n, t0, args.park_timeout)
        figures = park_figures(ctx, baseline, t0, parked)
        if args.finish == "send":
            for k in range(0, len(ids), SEND_CHUNK):
                await DBOS.send_bulk_async(
                    [SendMessage(w, "go", TOPIC) for w in ids[k : k + SEND_CHUNK]]
                )
            figures.update(await asyncio.to_thread(wait_finished, db, args.n, args.finish_timeout))
        return figures

    return asyncio.run(run())


def park_figures(ctx: Context, baseline: int, t0: float, parked: dict[str, Any]) -> dict[str, Any]:
    figures = {**parked, **dbos_process_figures()}
    db_bytes = ctx.db.size_bytes()
    figures.update(
        db_bytes=db_bytes,
        db_baseline_bytes=baseline,
        bytes_per_run=round((db_bytes - baseline) / ctx.args.n, 1),
    )
    ctx.partial.update(figures)
    log(f"parked {ctx.args.n}: {figures}")
    return figures


def wake_sync(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS, SendMessage

    args, db = ctx.args, ctx.db
    t0 = time.perf_counter()
    handles = [DBOS.start_workflow(ctx.wfs.parker) for _ in range(args.n)]
    parked = wait_parked(db, args.n, t0, args.park_timeout)
    ctx.partial.update(park_seconds=parked["seconds"])
    latencies: list[float] = []
    ctx.partial["latencies"] = latencies
    start = time.perf_counter()
    for i, handle in enumerate(handles):
        if time.perf_counter() - start > args.max_seconds:
            break
        t = time.perf_counter()
        DBOS.send(handle.get_workflow_id(), i, TOPIC)
        result = handle.get_result()
        latencies.append(time.perf_counter() - t)
        if result != i:
            raise RuntimeError(f"run {i} returned {result!r}")
    figures = wake_figures(ctx, latencies, time.perf_counter() - start)
    rest = [h.get_workflow_id() for h in handles[len(latencies) :]]
    if args.finish == "send" and rest:
        for k in range(0, len(rest), SEND_CHUNK):
            DBOS.send_bulk([SendMessage(w, "go", TOPIC) for w in rest[k : k + SEND_CHUNK]])
        figures.update(wait_finished(db, args.n, args.finish_timeout))
    return figures


def wake_async(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS, SendMessage

    args, db = ctx.args, ctx.db

    async def run() -> dict[str, Any]:
        t0 = time.perf_counter()
        handles = [await DBOS.start_workflow_async(ctx.wfs.parker_async) for _ in range(args.n)]
        parked = await asyncio.to_thread(wait_parked, db, args.n, t0, args.park_timeout)
        ctx.partial.update(park_seconds=parked["seconds"])
        latencies: list[float] = []
        ctx.partial["latencies"] = latencies
        start = time.perf_counter()
        for i, handle in enumerate(handles):
            remaining = args.max_seconds - (time.perf_counter() - start)
            if remaining <= 0:
                break
            t = time.perf_counter()
            await DBOS.send_async(handle.get_workflow_id(), i, TOPIC)
            try:
                result = await asyncio.wait_for(handle.get_result(), timeout=remaining + 5)
            except TimeoutError:
                log(f"run {i} did not wake within the budget")
                break
            latencies.append(time.perf_counter() - t)
            if result != i:
                raise RuntimeError(f"run {i} returned {result!r}")
        figures = wake_figures(ctx, latencies, time.perf_counter() - start)
        rest = [h.get_workflow_id() for h in handles[len(latencies) :]]
        if args.finish == "send" and rest:
            for k in range(0, len(rest), SEND_CHUNK):
                await DBOS.send_bulk_async(
                    [SendMessage(w, "go", TOPIC) for w in rest[k : k + SEND_CHUNK]]
                )
            figures.update(await asyncio.to_thread(wait_finished, db, args.n, args.finish_timeout))
        return figures

    return asyncio.run(run())


def wake_figures(ctx: Context, latencies: list[float], seconds: float) -> dict[str, Any]:
    figures = {
        "park_seconds": ctx.partial.get("park_seconds"),
        **latency(latencies, extremes=True),
        "wake_loop_seconds": round(seconds, 3),
        "budget_exhausted": len(latencies) < ctx.args.n,
    }
    ctx.partial.pop("latencies", None)
    ctx.partial.update(figures)
    return figures


RUNNERS: dict[tuple[str, str], Callable[[Context], dict[str, Any]]] = {
    ("steps3", "start"): steps3_start,
    ("steps3", "queue"): steps3_queue,
    ("steps3", "async"): steps3_async,
    ("steps3", "direct"): steps3_direct,
    ("steps3", "direct_async"): steps3_direct_async,
    ("park", "sync"): park_sync,
    ("park", "async"): park_async,
    ("wake", "sync"): wake_sync,
    ("wake", "async"): wake_async,
}
