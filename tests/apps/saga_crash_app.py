"""The app of the saga crash test: four steps, each with a compensation that logs itself.

The workflow fails after its steps, so its compensations run newest first. Each
compensation appends ``"<run id> <index>"`` to the file named by ``SAGA_LOG``
(one ``write`` on an ``O_APPEND`` descriptor, then ``fsync``), so the log
survives a SIGKILL of the worker. With ``SAGA_HANG`` set, the compensation of
step ``HANG_AT`` hangs after logging, so the test can kill the worker there.
The worker subprocess loads it as ``saga_crash_app:engine`` (store from
``PARKWAY_URL``).
"""

from __future__ import annotations

import os
import time
from typing import Any

from parkway import Engine, WorkflowContext

STEPS = 4
HANG_AT = 1


def log(run_id: str, index: int) -> None:
    fd = os.open(os.environ["SAGA_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{run_id} {index}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def act(run_id: str, index: int) -> dict[str, Any]:
    return {"run": run_id, "index": index}


def undo(done: dict[str, Any]) -> int:
    log(done["run"], done["index"])
    if os.environ.get("SAGA_HANG") and done["index"] == HANG_AT:
        time.sleep(120)  # (killed here)
    return int(done["index"])


def build(url: str | None = None, *, worker: bool = True) -> Engine:
    engine = Engine(url, worker=worker)

    @engine.workflow(name="undone")
    async def undone(ctx: WorkflowContext, input: Any) -> None:
        for i in range(STEPS):
            await ctx.step(act, ctx.run_id, i, name=f"step-{i}", compensate=undo)
        raise RuntimeError("the order cannot be completed")

    return engine


engine = build()
