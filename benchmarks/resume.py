"""The ``resume`` shape: what a resume costs as a run's journal grows.

A long-lived entity workflow (a counter, a subscription, a chat session) parks on
a signal, is resumed, does its work and parks again, for ever. Today a resume
replays the whole journal, so its cost grows with the run's history; this shape
measures it at two depths in one process, interleaved, so that the ratio of the
two is from one run and the machine's drift hits both alike.

Runs of one workflow, which first runs ``depth`` trivial async steps, then loops on
``wait_for_signal("go")`` (each resume adds one journal entry): one ``deep`` run
(``--depth``, 5,000 by default) and N + 1 + ``--restarts`` shallow ones (depth 0).
A shallow run is resumed once only, so that its journal holds nothing but its
wait when it is resumed: resuming one run N times would measure depths 0 to N (a
resume at depth 100 costs twice one at depth 0). After one warm-up resume each,
N times: signal the next shallow run and wait until the engine is idle (the run
resumed, its advance committed, it parked again), then the same for ``deep``. The
clock runs from just before ``signal()`` to ``engine.idle()`` returning, which
after the advance is one ``has_due`` query: the same small overhead at both depths.
Every run was parked by this engine's worker, and is resumed by it.

Then ``--restarts`` times: close the engine, open a new one on the same database
(a new worker, as after a process restart: nothing of the runs is held in memory,
the SQLite page cache is the new connections'), resume a fresh shallow run once
to warm the new engine's connections and statements, and time one resume of
``deep``: the first resume of a deep run after a restart.

Figures: ``shallow_*`` and ``deep_*`` (p50/p99/mean ms), ``ratio_p50`` (deep /
shallow), ``restart_*`` (p50/max ms of the first deep resume after each restart),
``deep_journal`` / ``shallow_journal`` (history entries at the end, from
``engine.history``) and ``build_s`` (the deep run's steps).
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.harness import Bench, latency


async def _tick(i: int) -> int:
    return i


async def _entity(ctx: Any, depth: int) -> str:
    for i in range(depth):
        await ctx.step(_tick, i, name="tick")
    while True:
        if await ctx.wait_for_signal("go") == "stop":
            return "stopped"


def _engine(bench: Bench) -> Any:
    engine = bench.engine()
    engine.workflow("entity")(_entity)
    return engine


async def _resume(engine: Any, run_id: str, payload: int) -> float:
    """Signal one parked run; seconds until it has parked again (the engine idle)."""
    t0 = time.perf_counter()
    await engine.signal(run_id, "go", payload)
    await engine.idle(timeout=120)
    return time.perf_counter() - t0


async def shape_resume(bench: Bench, n: int) -> dict[str, Any]:
    depth: int = bench.options.depth
    restarts: int = bench.options.restarts
    fresh = (f"s{i}" for i in range(n + 1 + restarts))
    shallow: list[float] = []
    deep: list[float] = []
    async with _engine(bench) as engine:
        t0 = time.perf_counter()
        await engine.start("entity", depth, id="deep")
        await engine.idle(timeout=900)
        build = time.perf_counter() - t0
        for i in range(n + 1 + restarts):
            await engine.start("entity", 0, id=f"s{i}")
        await engine.idle(timeout=900)
        for run_id in (next(fresh), "deep"):  # warm-up: the first resume of each kind
            await _resume(engine, run_id, -1)
        for i in range(n):
            shallow.append(await _resume(engine, next(fresh), i))
            deep.append(await _resume(engine, "deep", i))
    after_restart = []
    for r in range(restarts):
        async with _engine(bench) as engine:
            await _resume(engine, next(fresh), n + r)
            after_restart.append(await _resume(engine, "deep", n + r))
    async with _engine(bench) as engine:
        journals = {run_id: len(await engine.history(run_id)) for run_id in ("s0", "deep")}
        for run_id in ("s0", "deep"):
            info = await engine.get_run(run_id)
            assert info.status == "parked", info
    # Each resume journals one entry: fewer means some signals did not resume the run
    # (an advance that failed and was left to a retry, say), and its figure is not a
    # resume's. (Its steps, the signals taken and the wait it is parked on.)
    expected = {"s0": 2, "deep": depth + 1 + n + restarts + 1}
    if journals != expected:
        raise RuntimeError(
            f"journal lengths {journals}, expected {expected}: not every signal resumed "
            "its run (see the engine's log above)"
        )
    out: dict[str, Any] = {
        "depth": depth,
        "build_s": round(build, 3),
        "shallow_journal": journals["s0"],
        "deep_journal": journals["deep"],
    }
    out.update({f"shallow_{k}": v for k, v in latency(shallow).items()})
    out.update({f"deep_{k}": v for k, v in latency(deep).items()})
    out["ratio_p50"] = round(out["deep_p50_ms"] / out["shallow_p50_ms"], 2)
    if after_restart:
        out.update(
            restart_p50_ms=latency(after_restart)["p50_ms"],
            restart_max_ms=round(max(after_restart) * 1000, 3),
            restarts=len(after_restart),
        )
    return out
