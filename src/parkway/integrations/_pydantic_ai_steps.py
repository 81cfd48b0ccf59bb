"""The model and function toolsets of a :class:`parkway.integrations.pydantic_ai.ParkwayAgent`,
wrapped so that each model request and each tool call is one step of the run, its
events written to the run's stream from inside that step."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from parkway.errors import MissingExtraError
from parkway.integrations import _bridge
from parkway.models import Retry
from parkway.worker.step_context import step_context

try:  # (one message naming the extra, not a bare ModuleNotFoundError from deep inside)
    from pydantic import TypeAdapter
    from pydantic_ai.durable_exec import (
        CallToolResult,
    )
    from pydantic_ai.durable_exec._toolset import unwrap_tool_call_result, wrap_tool_call_result
    from pydantic_ai.exceptions import ModelRetry
    from pydantic_ai.messages import (
        AgentStreamEvent,
        FunctionToolCallEvent,
        FunctionToolResultEvent,
        ModelMessage,
        ModelResponse,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models import (
        CompletedStreamedResponse,
        Model,
        ModelRequestParameters,
        StreamedResponse,
    )
    from pydantic_ai.models.wrapper import WrapperModel
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import RunContext
    from pydantic_ai.toolsets import ToolsetTool, WrapperToolset
except ImportError as exc:
    raise MissingExtraError(
        "pydantic-ai", "parkway.integrations.pydantic_ai", exc.name or str(exc)
    ) from exc

_EVENT: TypeAdapter[Any] = TypeAdapter(AgentStreamEvent)
_RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)
_TOOL_RESULT: TypeAdapter[Any] = TypeAdapter(CallToolResult)


def _write_event(key: str, event: Any) -> None:
    """Append an agent event to the run's stream ``key``, from inside the step that
    makes it (its write commits before the step's result is recorded)."""
    step_context().write_stream(key, _EVENT.dump_python(event, mode="json"))


class _ParkwayModel(WrapperModel):
    """The agent's model, each request a step of the run (inside :func:`_bridge.drive`).

    With a stream key, a request is made streamed inside its step, which writes
    the model's events as they come and journals the final response (the step
    is named ``request_stream``, as pydantic-ai's own durable integrations name it).
    """

    def __init__(
        self, wrapped: Model, prefix: str, retry: Retry | None, stream_key: str | None
    ) -> None:
        super().__init__(wrapped)
        self._retry, self._stream_key = retry, stream_key
        operation = "model.request" if stream_key is None else "model.request_stream"
        self._step = f"{prefix}__{operation}"

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        if not _bridge.in_workflow():
            return await super().request(messages, model_settings, model_request_parameters)
        model, key = self.wrapped, self._stream_key

        async def body() -> Any:
            if key is None:
                response = await model.request(messages, model_settings, model_request_parameters)
            else:
                async with model.request_stream(
                    messages, model_settings, model_request_parameters
                ) as streamed:
                    async for event in streamed:
                        _write_event(key, event)
                response = streamed.get()
            return _RESPONSE.dump_python(response, mode="json")

        payload = await _bridge.call(self._step, body, self._retry)
        return _RESPONSE.validate_python(payload)

    @contextlib.asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        if not _bridge.in_workflow():
            async with super().request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as streamed:
                yield streamed
            return
        # One step makes the request (streamed inside it when there is a stream
        # key); the agent's side replays the journaled response's parts as events.
        response = await self.request(messages, model_settings, model_request_parameters)
        yield CompletedStreamedResponse(
            response, model_request_parameters=model_request_parameters, replay_events=True
        )


@dataclass
class _ParkwayToolset(WrapperToolset[Any]):
    """A function toolset whose every tool call is a step of the run.

    The step's result is the call's outcome as pydantic-ai records it
    (``CallToolResult``: a return, or a control-flow signal such as
    ``ModelRetry`` carried as data), raised again on the agent's side.
    """

    prefix: str = ""
    retry: Retry | None = None
    stream_key: str | None = None

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if not _bridge.in_workflow():
            return await super().call_tool(name, tool_args, ctx, tool)
        wrapped, key = self.wrapped, self.stream_key

        async def body() -> Any:
            call_id = ctx.tool_call_id or ""
            if key is not None:
                part = ToolCallPart(tool_name=name, args=tool_args, tool_call_id=call_id)
                _write_event(key, FunctionToolCallEvent(part, args_valid=True))
            outcome = await wrap_tool_call_result(wrapped.call_tool(name, tool_args, ctx, tool))
            if key is not None:
                _write_event(key, _result_event(name, call_id, outcome))
            return _TOOL_RESULT.dump_python(outcome, mode="json")

        payload = await _bridge.call(f"{self.prefix}.call_tool:{name}", body, self.retry)
        return unwrap_tool_call_result(_TOOL_RESULT.validate_python(payload))


def _result_event(name: str, call_id: str, outcome: Any) -> Any:
    """The ``function_tool_result`` event of a tool call's recorded outcome."""
    try:
        content = unwrap_tool_call_result(outcome)
    except ModelRetry as retry:  # (the model reads the message, and may call again)
        part = ToolReturnPart(
            tool_name=name, content=retry.message, tool_call_id=call_id, outcome="retried"
        )
        return FunctionToolResultEvent(part)
    except Exception as exc:  # (a deferral, an approval asked for: its name says what)
        content = f"{type(exc).__name__}: {exc}"
    return FunctionToolResultEvent(
        ToolReturnPart(tool_name=name, content=content, tool_call_id=call_id)
    )
