"""The app of the admission process tests: workflows under a Concurrency limit
whose steps log what they do, for ``parkway worker admission_app:engine`` subprocesses.

Each step appends ``"<run id> <what>"`` to the file named by ``ADMISSION_LOG`` (one
``write`` on an ``O_APPEND`` descriptor, then ``fsync``), so the log survives a
SIGKILL of the worker. The store comes from ``PARKWAY_URL``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from parkway import Concurrency, Engine, WorkflowContext

# How long the middle step of a "serial" run takes: long enough to kill its worker
# while the run holds the key's one slot.
HOLD = float(os.environ.get("ADMISSION_HOLD", "0.5"))
KEYS = 10
LIMIT = 2


def mark(run_id: str, what: str) -> str:
    fd = os.open(os.environ["ADMISSION_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{run_id} {what}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return what


def build(url: str | None = None, *, worker: bool = True) -> Engine:
    engine = Engine(url, worker=worker)

    @engine.workflow(name="serial", concurrency=Concurrency(1, key="key"))
    async def serial(ctx: WorkflowContext, input: Any) -> str:
        await ctx.step(mark, ctx.run_id, "begin", name="begin")
        await ctx.step(time.sleep, HOLD, name="hold")
        return await ctx.step(mark, ctx.run_id, "end", name="end")

    @engine.workflow(name="limited", concurrency=Concurrency(LIMIT, key="key"))
    async def limited(ctx: WorkflowContext, input: Any) -> str:
        await ctx.step(time.sleep, 0.002, name="work")
        await ctx.sleep("5ms")  # parked: still active, still holding its slot
        await ctx.step(time.sleep, 0.002, name="more work")
        return str(input["key"])

    return engine


engine = build()
