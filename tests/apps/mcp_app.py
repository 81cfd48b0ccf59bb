"""The app of the MCP server's test: ``parkway mcp mcp_app:engine --url URL``.

The test loads this module too, and runs its workflows with a worker of its own
on the same SQLite store (the MCP server opens its engine as a client only).
"""

from __future__ import annotations

from typing import Any

from parkway import Engine, WorkflowContext

engine = Engine("memory://", worker=False)

REFUND_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "note": {"type": "string"}},
    "required": ["approved"],
}


@engine.workflow()
async def refund(ctx: WorkflowContext, order: Any) -> Any:
    decision = await ctx.human_task("approve-refund", form=REFUND_FORM, data={"order": order})
    return {"order": order, "approved": decision["approved"]}


@engine.workflow()
async def conversation(ctx: WorkflowContext, _input: Any) -> Any:
    state = {"total": 0}

    def add(amount: int) -> int:
        state["total"] += amount
        return state["total"]

    ctx.on_update("add", add)
    said = await ctx.wait_for_signal("say")
    heard = await ctx.wait_for_event("shipped", subject="order:7")
    message = await ctx.wait_for_message("invoice", "inv-1")
    return {"said": said, "heard": heard, "message": message, "total": state["total"]}


@engine.workflow()
async def forever(ctx: WorkflowContext, _input: Any) -> Any:
    return await ctx.wait_for_signal("never")
