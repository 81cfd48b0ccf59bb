"""Durable OpenAI Agents SDK runs: every model call and function tool a journaled step.

Needs the ``openai-agents`` extra (``pip install 'parkway[openai-agents]'``)::

    from agents import Agent, function_tool
    from parkway.integrations.openai_agents import ParkwayRunner

    triage = Agent(name="triage", instructions="...", tools=[lookup_order])

    @engine.workflow()
    async def answer(ctx, question):
        result = await ParkwayRunner.run(ctx, triage, question)
        return result.final_output

The agent (and the agents it hands off to) runs with its model wrapped so that
each ``get_response`` is a step whose result is the SDK's ``ModelResponse`` as
JSON (rebuilt with its pydantic type adapter on a replay), and each
``FunctionTool`` wrapped so that each invocation is a step, as Temporal's plugin
for the SDK does with activities. The run loop itself is the SDK's own
``Runner.run``, beside the workflow's code (see ``parkway.integrations._bridge``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from parkway import _json
from parkway.errors import InvalidArgumentError, MissingExtraError, WorkflowUsageError
from parkway.integrations import _bridge
from parkway.models import Retry

try:  # (one message naming the extra, not a bare ModuleNotFoundError from deep inside)
    from agents import Agent, FunctionTool, RunConfig, Runner, RunResult
    from agents.items import ModelResponse, TResponseStreamEvent
    from agents.models.interface import Model, ModelProvider
    from agents.models.multi_provider import MultiProvider
    from pydantic import TypeAdapter
except ImportError as exc:
    raise MissingExtraError(
        "openai-agents", "parkway.integrations.openai_agents", exc.name or str(exc)
    ) from exc

__all__ = ["ParkwayRunner"]

_RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)


class _ParkwayModel(Model):
    """A model whose responses are steps of the run (named ``<agent>.model``)."""

    def __init__(self, wrapped: Model, name: str, retry: Retry | None) -> None:
        self.wrapped, self.name, self.retry = wrapped, name, retry

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        async def request() -> Any:
            response = await self.wrapped.get_response(*args, **kwargs)
            return _RESPONSE.dump_python(response, mode="json", by_alias=True)

        payload = await _bridge.call(self.name, request, self.retry)
        return _RESPONSE.validate_python(payload)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        if not _bridge.in_workflow():
            return self.wrapped.stream_response(*args, **kwargs)
        raise WorkflowUsageError(
            "ParkwayRunner runs agents with Runner.run: a streamed model call cannot be "
            "journaled as one step"
        )


class _ParkwayProvider(ModelProvider):
    """Wraps what a provider gives for model names (an agent's ``model="gpt-5"``)."""

    def __init__(self, wrapped: ModelProvider, retry: Retry | None) -> None:
        self.wrapped, self.retry = wrapped, retry

    def get_model(self, model_name: str | None) -> Model:
        return _ParkwayModel(
            self.wrapped.get_model(model_name), f"model:{model_name or 'default'}", self.retry
        )


def _durable_tool(tool: FunctionTool, agent: str, retry: Retry | None) -> FunctionTool:
    invoke = tool.on_invoke_tool

    async def on_invoke_tool(tool_context: Any, arguments: str) -> Any:
        async def call() -> Any:
            result = await invoke(tool_context, arguments)
            # What the model will read: JSON as it is, anything else as its text.
            try:
                _json.dumps(result, "a tool's result")
            except Exception:
                return str(result)
            return result

        return await _bridge.call(f"{agent}.tool:{tool.name}", call, retry)

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


def _durable_agent(
    agent: Agent[Any],
    model_retry: Retry | None,
    tool_retry: Retry | None,
    done: dict[int, Agent[Any]],
) -> Agent[Any]:
    """A clone of ``agent`` (and of the agents it hands off to) with durable I/O."""
    if id(agent) in done:
        return done[id(agent)]
    changes: dict[str, Any] = {
        "tools": [
            _durable_tool(t, agent.name, tool_retry) if isinstance(t, FunctionTool) else t
            for t in agent.tools
        ]
    }
    if isinstance(agent.model, Model):
        changes["model"] = _ParkwayModel(agent.model, f"{agent.name}.model", model_retry)
    clone = agent.clone(**changes)
    done[id(agent)] = clone
    clone.handoffs = [
        _durable_agent(h, model_retry, tool_retry, done) if isinstance(h, Agent) else h
        for h in agent.handoffs
    ]
    return clone


class ParkwayRunner:
    """``Runner.run`` inside a workflow, with model calls and function tools as steps."""

    @classmethod
    async def run(
        cls,
        ctx: Any,
        agent: Agent[Any],
        input: Any,
        *,
        model_retry: Retry | None = None,
        tool_retry: Retry | None = None,
        **kwargs: Any,
    ) -> RunResult:
        """Run ``agent`` on ``input`` durably, from a workflow's code.

        Args:
            ctx: The workflow's context.
            agent: The ``agents.Agent`` to run (it is not changed: a clone runs).
            input: Its input: a string, or a list of input items.
            model_retry: How each model call is retried (a :class:`parkway.Retry`).
            tool_retry: How each function tool call is retried.
            **kwargs: The rest of ``Runner.run``'s arguments (``context``,
                ``max_turns``, ``run_config``, ...).

        Returns:
            The SDK's ``RunResult`` (``result.final_output``).

        Raises:
            InvalidArgumentError: ``agent`` is not an ``agents.Agent``, or a retry
                is not a :class:`parkway.Retry`.
        """
        if not isinstance(agent, Agent):
            raise InvalidArgumentError(
                f"agent must be an agents.Agent, not {type(agent).__name__}", field="agent"
            )
        for field, value in (("model_retry", model_retry), ("tool_retry", tool_retry)):
            if value is not None and not isinstance(value, Retry):
                raise InvalidArgumentError(
                    f"{field} must be a parkway.Retry or None, not {type(value).__name__}",
                    field=field,
                )
        config = kwargs.pop("run_config", None) or RunConfig()
        if not isinstance(config, RunConfig):
            raise InvalidArgumentError("run_config must be an agents.RunConfig", field="run_config")
        provider = config.model_provider or MultiProvider()
        changes: dict[str, Any] = {"model_provider": _ParkwayProvider(provider, model_retry)}
        if isinstance(config.model, Model):
            changes["model"] = _ParkwayModel(config.model, "run.model", model_retry)
        config = dataclasses.replace(config, **changes)
        durable = _durable_agent(agent, model_retry, tool_retry, {})
        return await _bridge.drive(
            ctx, lambda: Runner.run(durable, input, run_config=config, **kwargs)
        )
