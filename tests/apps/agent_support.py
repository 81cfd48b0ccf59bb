"""A support agent for the agent integration's tests: a scripted model, two tools.

The model is pydantic-ai's ``FunctionModel`` (no network): it looks the order up,
asks to refund it (a tool that needs approval), then answers with what the tools
returned. Each model request and tool call appends a line to the file named by
``AGENT_LOG`` when it is set, so a test counts what really ran (across processes).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel


def record(line: str) -> None:
    log = os.environ.get("AGENT_LOG")
    if log:
        # One write on an O_APPEND descriptor, then fsync: the line survives a SIGKILL.
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{line}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)


def _returns(messages: list[ModelMessage]) -> dict[str, str]:
    found: dict[str, str] = {}
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    found[part.tool_name] = str(part.content)
    return found


def support_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = _returns(messages)
    record(f"model {len(returns)}")
    if "lookup_order" not in returns:
        return ModelResponse(parts=[ToolCallPart("lookup_order", {"order": 42})])
    if "refund" not in returns:
        return ModelResponse(parts=[ToolCallPart("refund", {"order": 42, "cents": 1250})])
    return ModelResponse(parts=[TextPart(f"{returns['lookup_order']}; {returns['refund']}")])


async def stream_support_model(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
    """``support_model``'s response, streamed: text a word at a time, tool calls whole."""
    response = support_model(messages, info)
    for index, part in enumerate(response.parts):
        if isinstance(part, ToolCallPart):
            yield {index: DeltaToolCall(part.tool_name, json.dumps(part.args))}
        elif isinstance(part, TextPart):
            for word in part.content.split(" "):
                yield word + " " if word != part.content.split(" ")[-1] else word


def make_agent(name: str | None = "support", *, approval: bool = True) -> Agent[None, str]:
    agent = Agent(FunctionModel(support_model, stream_function=stream_support_model), name=name)

    @agent.tool_plain
    def lookup_order(order: int) -> str:
        """Look an order up."""
        record(f"tool lookup_order {order}")
        return f"order {order}: a kettle, delivered damaged"

    @agent.tool_plain(requires_approval=approval)
    def refund(order: int, cents: int) -> str:
        """Refund an order (needs a person's approval)."""
        record(f"tool refund {order}")
        if os.environ.get("AGENT_HANG_IN_REFUND"):  # (the crash test kills the worker here)
            time.sleep(120)
        return f"refunded {cents} cents on order {order}"

    return agent
