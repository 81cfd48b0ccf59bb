"""The app of the version-aware worker tests: workflow ``deploy`` in the versions
named by ``FLEET_VERSIONS`` (comma-separated, default ``v1``), for ``parkway worker
fleet_app:engine`` subprocesses. A run waits for signal ``go``, then its one step
answers which version and which process ran it. The store comes from
``PARKWAY_URL``."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from parkway import Engine, WorkflowContext


def _deploy(version: str) -> Callable[[WorkflowContext, Any], Awaitable[Any]]:
    async def deploy(ctx: WorkflowContext, input: Any) -> Any:
        await ctx.wait_for_signal("go")
        return await ctx.step(lambda: [version, os.getpid()], name="where")

    return deploy


def build(url: str | None = None, *, versions: str | None = None, worker: bool = True) -> Engine:
    engine = Engine(url, worker=worker)
    for version in (versions or os.environ.get("FLEET_VERSIONS", "v1")).split(","):
        engine.workflow(name="deploy", version=version)(_deploy(version))
    return engine


engine = build()
