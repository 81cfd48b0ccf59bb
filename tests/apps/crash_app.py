"""The app of the crash-safety test: a workflow of five steps, each logging its execution.

Each step appends ``"<run id> <step index>"`` to the file named by ``CRASH_LOG``
(one ``write`` on an ``O_APPEND`` descriptor, then ``fsync``), so the log
survives a SIGKILL of the worker and tells exactly which steps ran, how often.
The worker subprocess loads it as ``crash_app:engine`` (store from ``PARKWAY_URL``).
"""

from __future__ import annotations

import os
import time
from typing import Any

from parkway import Engine, WorkflowContext

STEPS = 5
# A pause after the side effect widens the window in which a step has run but its
# result is not committed yet: the case a crash must not turn into a lost result.
PAUSE = float(os.environ.get("CRASH_STEP_PAUSE", "0.01"))


def record(run_id: str, index: int) -> str:
    fd = os.open(os.environ["CRASH_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{run_id} {index}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    time.sleep(PAUSE)
    return f"{run_id}:{index}"


def top(run_id: str) -> None:
    """Log that ``run_id``'s code ran from its top (a start, or a replay)."""
    fd = os.open(os.environ["CRASH_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{run_id} -1\n".encode())
    finally:
        os.close(fd)


def build(url: str | None = None, *, worker: bool = True) -> Engine:
    engine = Engine(url, worker=worker)

    @engine.workflow(name="five_steps")
    async def five_steps(ctx: WorkflowContext, input: Any) -> dict[str, Any]:
        results = [await ctx.step(record, ctx.run_id, i, name=f"step-{i}") for i in range(STEPS)]
        return {"run": ctx.run_id, "results": results}

    @engine.workflow(name="signalled")
    async def signalled(ctx: WorkflowContext, input: Any) -> Any:
        # The step after the wait runs before the wait's result is committed (it
        # commits with the step's): a worker killed mid-step must leave the signal
        # where the next worker finds it, the same one.
        payload = await ctx.wait_for_signal("go")
        return await ctx.step(record, ctx.run_id, payload["n"], name="after-signal")

    @engine.workflow(name="gathered")
    async def gathered(ctx: WorkflowContext, input: Any) -> list[list[str]]:
        # Branches of slow sync steps side by side: a worker killed mid-gather must
        # not run again a step whose result was committed, whichever branch it is in.
        async def branch(b: int) -> list[str]:
            return [
                await ctx.step(record, ctx.run_id, b * 10 + k, name=f"b{b}-{k}")
                for k in range(GATHER_STEPS)
            ]

        return list(await ctx.gather(*(branch(b) for b in range(GATHER_BRANCHES))))

    @engine.workflow(name="ticked")
    async def ticked(ctx: WorkflowContext, input: Any) -> list[str]:
        # An entity: parked between inputs, so the worker keeps it in memory and
        # wakes it where it parked. A worker killed while it holds such runs must
        # leave nothing the next worker, replaying their journals, cannot redo.
        top(ctx.run_id)  # (not a step: once per replay from the top)
        done = []
        for i in range(TICKS):
            tick = await ctx.wait_for_signal("tick")
            done.append(await ctx.step(record, ctx.run_id, tick["n"], name=f"tick-{i}"))
        return done

    return engine


TICKS = 3
GATHER_BRANCHES = 4
GATHER_STEPS = 3


def expected_gathered(run_id: str) -> list[list[str]]:
    return [[f"{run_id}:{b * 10 + k}" for k in range(GATHER_STEPS)] for b in range(GATHER_BRANCHES)]


def expected_output(run_id: str) -> dict[str, Any]:
    return {"run": run_id, "results": [f"{run_id}:{i}" for i in range(STEPS)]}


engine = build()
