"""The app of the stream tests' worker and server subprocesses (``streams_app:engine``,
its store from ``PARKWAY_URL``).

``chunks``: the workflow's body writes items 0-4 to stream ``out``, runs a step
that holds while the file named by ``STREAMS_HOLD`` exists (the test kills the
worker meanwhile), then writes items 5-9. ``paced``: writes item ``k`` and
waits for signal ``next`` before item ``k + 1``, for a reader that resumes.
"""

from __future__ import annotations

import os
import time
from typing import Any

from parkway import Engine, WorkflowContext

engine = Engine(os.environ.get("PARKWAY_URL"))


def hold() -> str:
    hold = os.environ.get("STREAMS_HOLD")
    while hold and os.path.exists(hold):
        time.sleep(0.01)
    return "held"


@engine.workflow()
async def chunks(ctx: WorkflowContext, input: Any) -> str:
    for i in range(5):
        await ctx.write_stream("out", i)
    await ctx.step(hold)
    for i in range(5, 10):
        await ctx.write_stream("out", i)
    return "done"


@engine.workflow()
async def paced(ctx: WorkflowContext, count: int) -> int:
    for k in range(count):
        await ctx.write_stream("out", {"k": k})
        if k + 1 < count:
            await ctx.wait_for_signal("next")
    await ctx.close_stream("out")
    return count
