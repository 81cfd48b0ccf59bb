"""The Restate services that ``restate_bench`` measures, as an ASGI app for hypercorn.

Served in its own process by ``hypercorn benchmarks.peers.restate_app:app``; the harness
starts it and registers it with the Restate server. Three services, one per shape family:

``BenchSteps/run``
    A plain service handler of 3 trivial ``ctx.run`` steps (int -> int -> dict -> int), the
    same chain as the DBOS and parkway ``steps3`` workflows. The steps are ``async def``: the
    SDK runs a plain ``def`` step on a thread-pool executor, which would only add a hop.
``BenchAwake/run``
    Creates an awakeable and waits on it; returns what it is resolved with. Before waiting it
    announces ``"<key>\\t<awakeable id>"`` on the file named by ``RESTATE_BENCH_ANNOUNCE``
    (one ``O_APPEND`` write, outside the journal, so it costs Restate nothing; on a replay
    the same line is written again, and the harness keeps the first). The harness cannot
    learn an awakeable's id any other way without adding a durable step.
``BenchPromise`` (a workflow keyed by the harness)
    ``run`` announces ``"<key>\tpromise"`` as above, then waits on the durable promise
    ``go``; the shared handler ``signal`` resolves it.
"""

from __future__ import annotations

import os
from typing import Any

import restate

ANNOUNCE_ENV = "RESTATE_BENCH_ANNOUNCE"

steps = restate.Service("BenchSteps")
awake = restate.Service("BenchAwake")
promise = restate.Workflow("BenchPromise")

_announce_fd: int | None = None


def _announce(key: str, awakeable_id: str) -> None:
    global _announce_fd
    path = os.environ.get(ANNOUNCE_ENV)
    if not path:
        return
    if _announce_fd is None:
        _announce_fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(_announce_fd, f"{key}\t{awakeable_id}\n".encode())


async def _step_a(i: int) -> int:
    return i + 1


async def _step_b(x: int) -> dict[str, int]:
    return {"v": x}


async def _step_c(d: dict[str, int]) -> int:
    return d["v"] * 2


@steps.handler("run")
async def steps3(ctx: restate.Context, i: int) -> int:
    a = await ctx.run_typed("a", _step_a, i=i)
    b = await ctx.run_typed("b", _step_b, x=a)
    return await ctx.run_typed("c", _step_c, d=b)


@awake.handler("run")
async def await_awakeable(ctx: restate.Context, key: str) -> Any:
    name, future = ctx.awakeable(type_hint=int)
    _announce(key, name)
    return await future


@promise.main("run")
async def await_promise(ctx: restate.WorkflowContext) -> Any:
    _announce(ctx.key(), "promise")
    return await ctx.promise("go", type_hint=int).value()


@promise.handler("signal")
async def signal(ctx: restate.WorkflowSharedContext, value: int) -> None:
    await ctx.promise("go", type_hint=int).resolve(value)


app = restate.app(services=[steps, awake, promise])
