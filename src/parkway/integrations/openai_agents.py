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

The run's events (the model's output items, each tool call and its output) are
written to the run's stream ``stream_key`` from inside those steps, as the SDK's
``RunItemStreamEvent`` would carry them, in JSON: once per attempt, never by a
replay.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from parkway import _json
from parkway.errors import InvalidArgumentError, MissingExtraError, WorkflowUsageError
from parkway.integrations import _bridge
from parkway.models import Retry
from parkway.worker.step_context import step_context

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

# The run item stream event each kind of output item of a model response makes
# (the names of the SDK's ``RunItemStreamEvent``), and its item's type.
_OUTPUT_EVENTS = {
    "message": ("message_output_created", "message_output_item"),
    "function_call": ("tool_called", "tool_call_item"),
    "reasoning": ("reasoning_item_created", "reasoning_item"),
}


def _emit(key: str | None, event: dict[str, Any]) -> None:
    """Append ``event`` to the run's stream ``key`` (from inside the step writing it).

    The write commits before the step's result is recorded; nothing to await.
    """
    if key is not None:
        step_context().write_stream(key, event)


def _item_event(name: str, item: dict[str, Any], agent: str | None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "run_item_stream_event", "name": name, "item": item}
    if agent is not None:
        event["agent"] = agent
    return event


def _response_events(payload: dict[str, Any], agent: str | None) -> list[dict[str, Any]]:
    """The run item events of a model response (``payload``: its JSON)."""
    events = []
    for raw in payload.get("output") or ():
        kind = raw.get("type") if isinstance(raw, dict) else None
        name, item_type = _OUTPUT_EVENTS.get(kind or "", ("tool_called", "tool_call_item"))
        events.append(_item_event(name, {"type": item_type, "raw_item": raw}, agent))
    return events


class _ParkwayModel(Model):
    """A model whose responses are steps of the run (named ``<agent>.model``)."""

    def __init__(
        self,
        wrapped: Model,
        name: str,
        retry: Retry | None,
        stream_key: str | None,
        agent: str | None = None,
    ) -> None:
        self.wrapped, self.name, self.retry = wrapped, name, retry
        self.stream_key, self.agent = stream_key, agent

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        async def request() -> Any:
            response = await self.wrapped.get_response(*args, **kwargs)
            payload = _RESPONSE.dump_python(response, mode="json", by_alias=True)
            if self.stream_key is not None:
                for event in _response_events(payload, self.agent):
                    _emit(self.stream_key, event)
            return payload

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

    def __init__(self, wrapped: ModelProvider, retry: Retry | None, stream_key: str | None) -> None:
        self.wrapped, self.retry, self.stream_key = wrapped, retry, stream_key

    def get_model(self, model_name: str | None) -> Model:
        return _ParkwayModel(
            self.wrapped.get_model(model_name),
            f"model:{model_name or 'default'}",
            self.retry,
            self.stream_key,
        )


def _durable_tool(
    tool: FunctionTool, agent: str, retry: Retry | None, stream_key: str | None
) -> FunctionTool:
    invoke = tool.on_invoke_tool

    async def on_invoke_tool(tool_context: Any, arguments: str) -> Any:
        async def call() -> Any:
            result = await invoke(tool_context, arguments)
            # What the model will read: JSON as it is, anything else as its text.
            try:
                _json.dumps(result, "a tool's result")
            except Exception:
                result = str(result)
            if stream_key is not None:
                raw = {
                    "type": "function_call_output",
                    "call_id": getattr(tool_context, "tool_call_id", None),
                    "output": result if isinstance(result, str) else _json.dumps(result).decode(),
                }
                item = {"type": "tool_call_output_item", "raw_item": raw, "output": result}
                _emit(stream_key, _item_event("tool_output", item, agent))
            return result

        return await _bridge.call(f"{agent}.tool:{tool.name}", call, retry)

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


def _durable_agent(
    agent: Agent[Any],
    model_retry: Retry | None,
    tool_retry: Retry | None,
    stream_key: str | None,
    done: dict[int, Agent[Any]],
) -> Agent[Any]:
    """A clone of ``agent`` (and of the agents it hands off to) with durable I/O."""
    if id(agent) in done:
        return done[id(agent)]
    changes: dict[str, Any] = {
        "tools": [
            _durable_tool(t, agent.name, tool_retry, stream_key)
            if isinstance(t, FunctionTool)
            else t
            for t in agent.tools
        ]
    }
    if isinstance(agent.model, Model):
        changes["model"] = _ParkwayModel(
            agent.model, f"{agent.name}.model", model_retry, stream_key, agent.name
        )
    clone = agent.clone(**changes)
    done[id(agent)] = clone
    clone.handoffs = [
        _durable_agent(h, model_retry, tool_retry, stream_key, done) if isinstance(h, Agent) else h
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
        stream_key: str | None = "agent",
        **kwargs: Any,
    ) -> RunResult:
        """Run ``agent`` on ``input`` durably, from a workflow's code.

        Args:
            ctx: The workflow's context.
            agent: The ``agents.Agent`` to run (it is not changed: a clone runs).
            input: Its input: a string, or a list of input items.
            model_retry: How each model call is retried (a :class:`parkway.Retry`).
            tool_retry: How each function tool call is retried.
            stream_key: The run's stream the agent's events are written to as they
                happen: each output item of a model response (``message_output_created``,
                ``tool_called``, ``reasoning_item_created``) and each tool's output
                (``tool_output``), each a JSON dict shaped as the SDK's
                ``RunItemStreamEvent`` (``type``, ``name``, ``agent``, ``item``
                with its ``raw_item``). ``None`` writes none.
            **kwargs: The rest of ``Runner.run``'s arguments (``context``,
                ``max_turns``, ``run_config``, ...).

        Returns:
            The SDK's ``RunResult`` (``result.final_output``).

        Raises:
            InvalidArgumentError: ``agent`` is not an ``agents.Agent``, a retry
                is not a :class:`parkway.Retry`, or ``stream_key`` is not a
                non-empty string or ``None``.
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
        if stream_key is not None and (not isinstance(stream_key, str) or not stream_key):
            raise InvalidArgumentError(
                "stream_key must be a non-empty string, or None", field="stream_key"
            )
        config = kwargs.pop("run_config", None) or RunConfig()
        if not isinstance(config, RunConfig):
            raise InvalidArgumentError("run_config must be an agents.RunConfig", field="run_config")
        provider = config.model_provider or MultiProvider()
        changes: dict[str, Any] = {
            "model_provider": _ParkwayProvider(provider, model_retry, stream_key)
        }
        if isinstance(config.model, Model):
            changes["model"] = _ParkwayModel(config.model, "run.model", model_retry, stream_key)
        config = dataclasses.replace(config, **changes)
        durable = _durable_agent(agent, model_retry, tool_retry, stream_key, {})
        return await _bridge.drive(
            ctx, lambda: Runner.run(durable, input, run_config=config, **kwargs)
        )
