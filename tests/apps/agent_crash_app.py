"""The app of the agent crash test: ``agent_support``'s agent in a workflow.

A ``parkway worker agent_crash_app:engine`` subprocess (store from ``PARKWAY_URL``)
runs it; ``AGENT_LOG`` names the file each model request and tool call is
counted in.
"""

from __future__ import annotations

import os
from typing import Any

from agent_support import make_agent  # type: ignore[import-not-found]

from parkway import Engine, WorkflowContext
from parkway.integrations.pydantic_ai import ParkwayAgent

engine = Engine(os.environ.get("PARKWAY_URL", "memory://"))
durable = ParkwayAgent(make_agent(approval=False))


@engine.workflow()
async def support(ctx: WorkflowContext, question: Any) -> Any:
    return (await durable.run(ctx, question)).output
