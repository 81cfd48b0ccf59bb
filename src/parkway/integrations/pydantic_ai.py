"""Durable pydantic-ai agents: every model request and tool call a journaled step.

Needs the ``pydantic-ai`` extra (``pip install 'parkway[pydantic-ai]'``)::

    from pydantic_ai import Agent
    from parkway.integrations.pydantic_ai import ParkwayAgent

    support = ParkwayAgent(Agent("openai:gpt-5", name="support"))

    @engine.workflow()
    async def answer(ctx, question):
        result = await support.run(ctx, question)
        return result.output

An agent whose tools are all function tools (the common case) runs with its
model and its function toolsets wrapped at pydantic-ai's public wrapping points
(``WrapperModel``, ``WrapperToolset``), as its DBOS and Prefect agents do: each
model request and each tool call is one ``ctx.step``, whose result is its JSON
(a ``ModelResponse`` as its type adapter dumps it; a tool call's outcome as
pydantic-ai's ``CallToolResult``), so a replay rebuilds the very response the
model gave and what the tool returned. An agent with other toolsets (MCP
servers, dynamic toolsets) runs with pydantic-ai's generic durability capability
(:class:`ParkwayDurability`, on
:class:`pydantic_ai.durable_exec.BaseDurabilityCapability`), which journals the
same steps under the same names; it costs more per operation (it binds and
dispatches every operation through its generic layer), which is why the
function-tools case does without it.

pydantic-ai runs its graph in asyncio tasks of its own, where a workflow may not
await ctx operations, so the agent runs beside the workflow's code and hands it
each operation to run as a step, in the order asked (see
``parkway.integrations._bridge``).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from parkway.errors import InvalidArgumentError, MissingExtraError
from parkway.integrations import _bridge
from parkway.models import Retry
from parkway.worker.step_context import step_context

try:  # (one message naming the extra, not a bare ModuleNotFoundError from deep inside)
    from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolDenied
    from pydantic_ai.agent import AbstractAgent, AgentRunResult
    from pydantic_ai.durable_exec import (
        JSON_CODEC,
        BaseDurabilityCapability,
        DurabilityEngineSpec,
        DurableOperationBackend,
        DurableOperationId,
        JournalCallableOperationBackend,
        RoleBasedOperationConfig,
    )
    from pydantic_ai.messages import (
        ModelMessage,
    )
    from pydantic_ai.models import (
        Model,
        infer_model,
    )
    from pydantic_ai.tools import RunContext
    from pydantic_ai.toolsets import AbstractToolset, FunctionToolset
except ImportError as exc:
    raise MissingExtraError(
        "pydantic-ai", "parkway.integrations.pydantic_ai", exc.name or str(exc)
    ) from exc

from parkway.integrations._pydantic_ai_steps import (
    _EVENT,
    _ParkwayModel,
    _ParkwayToolset,
)

__all__ = ["APPROVAL_FORM", "ParkwayAgent", "ParkwayDurability"]

DepsT = TypeVar("DepsT")
OutputT = TypeVar("OutputT")

#: The form of an approval's human task: ``{"approved": true}`` lets the tool run;
#: ``{"approved": false, "message": "..."}`` denies it, and the model reads the message.
APPROVAL_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "Let the agent make this tool call?"},
        "message": {
            "type": "string",
            "description": "Why not (the agent reads it when the call is denied)",
        },
    },
    "required": ["approved"],
}


class _ParkwayBackend(JournalCallableOperationBackend[Retry | None]):
    """Runs each of pydantic-ai's durable operations as one ``ctx.step`` of the run."""

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: Retry | None,
    ) -> object:
        return await _bridge.call(name, body, config)


def _stream_writer(key: str) -> Callable[[RunContext[Any], AsyncIterable[Any]], Awaitable[None]]:
    """pydantic-ai's event stream handler that appends each event to the run's stream ``key``.

    pydantic-ai calls it inside steps: a model request's own (its events as the
    model streams them) and, for a tool call's events, a step of their own. So
    each event is written once its step runs, at least once (a retried attempt
    writes its events again, each item carrying its ``attempt``), and never by a
    replay, which takes the steps' results from the journal.
    """

    async def write(run_context: RunContext[Any], events: AsyncIterable[Any]) -> None:
        writer = step_context()
        async for event in events:
            writer.write_stream(key, _EVENT.dump_python(event, mode="json"))

    return write


@dataclass(init=False, kw_only=True)
class ParkwayDurability(BaseDurabilityCapability[Any]):
    """pydantic-ai's durability capability for parkway (what :class:`ParkwayAgent` attaches).

    Args:
        name: The agent's name in its steps' names (``"<name>__model.request"``).
        model_retry: The retry of model-request steps (``None``: the step default).
        tool_retry: The retry of tool-call steps.
        stream_key: The run's stream the agent's events are written to (``None``:
            none are).
    """

    engine_spec = DurabilityEngineSpec(
        engine_name="parkway",
        durable_unit_noun="step",
        durable_container_noun="workflow",
        # parkway journals JSON: pydantic-ai reduces each result to JSON through its
        # type adapters, and rebuilds it from the journal on a replay.
        codec=JSON_CODEC,
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={
            "function": "enter-always",
            "mcp": "enter-in-durable-unit",
            "dynamic": "enter-never",
        },
        # The run's steps are taken one at a time, in the order the agent asks for them.
        sequential_tools_in_durable_context=True,
        tool_config_key="parkway",
    )

    def __init__(
        self,
        *,
        name: str | None = None,
        model_retry: Retry | None = None,
        tool_retry: Retry | None = None,
        stream_key: str | None = None,
    ) -> None:
        super().__init__(
            name=name,
            event_stream_handler=None if stream_key is None else _stream_writer(stream_key),
        )
        self._model_retry = model_retry
        self._tool_retry = tool_retry

    @property
    def in_durable_context(self) -> bool:
        return _bridge.in_workflow()

    def get_durable_operation_backend(self) -> DurableOperationBackend[Any]:
        config: RoleBasedOperationConfig[Retry | None] = RoleBasedOperationConfig(
            model=self._model_retry,
            event=self._model_retry,
            capability=self._tool_retry,
            tool=self._tool_retry,
        )
        return _ParkwayBackend(agent_name=self.name or "agent", config=config)


def _check_retry(value: Any, field: str) -> Retry | None:
    if value is not None and not isinstance(value, Retry):
        raise InvalidArgumentError(
            f"{field} must be a parkway.Retry or None, not {type(value).__name__}", field=field
        )
    return value


class ParkwayAgent(Generic[DepsT, OutputT]):
    """A pydantic-ai agent whose model requests and tool calls are journaled steps.

    Args:
        agent: The ``pydantic_ai.Agent`` to run.
        name: The name in its steps' names; defaults to the agent's ``name``. It
            must stay the same across deploys while runs are in flight (a replay
            finds each step by it).
        model_retry: How each model request is retried (a :class:`parkway.Retry`).
        tool_retry: How each tool call is retried.
        stream_key: The run's stream the agent's events are written to as they
            happen (text deltas, tool calls and results; each a JSON dict as
            pydantic-ai's ``AgentStreamEvent`` dumps it). Model requests are then
            made streamed, so the model must support streaming; ``None`` writes no
            events (and makes plain requests).

    Raises:
        InvalidArgumentError: An argument is malformed, or neither ``name`` nor
            the agent's own name is given.
    """

    def __init__(
        self,
        agent: AbstractAgent[DepsT, OutputT],
        *,
        name: str | None = None,
        model_retry: Retry | None = None,
        tool_retry: Retry | None = None,
        stream_key: str | None = "agent",
    ) -> None:
        if not isinstance(agent, AbstractAgent):
            raise InvalidArgumentError(
                f"agent must be a pydantic_ai.Agent, not {type(agent).__name__}", field="agent"
            )
        name = agent.name if name is None else name
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgumentError(
                "name must be a non-empty string (give ParkwayAgent(name=...) or "
                "Agent(name=...)): it names the agent's steps in the journal",
                field="name",
            )
        if stream_key is not None and (not isinstance(stream_key, str) or not stream_key):
            raise InvalidArgumentError(
                "stream_key must be a non-empty string, or None", field="stream_key"
            )
        self.agent = agent
        self.name = name
        self.stream_key = stream_key
        self._model_retry = _check_retry(model_retry, "model_retry")
        self._tool_retry = _check_retry(tool_retry, "tool_retry")
        self.durability = ParkwayDurability(
            name=name,
            model_retry=self._model_retry,
            tool_retry=self._tool_retry,
            stream_key=stream_key,
        )
        # The agent's model as last wrapped (a model named by a string is made once).
        self._wrapped_model: tuple[object, _ParkwayModel] | None = None

    async def run(
        self,
        ctx: Any,
        user_prompt: str | Sequence[Any] | None = None,
        *,
        deps: DepsT | None = None,
        message_history: Sequence[ModelMessage] | None = None,
    ) -> AgentRunResult[Any]:
        """Run the agent inside a workflow, durably.

        Every model request and tool call is a step of the run. A tool that needs
        approval (``requires_approval=True``) becomes a human task named after the
        tool (form :data:`APPROVAL_FORM`); once a person completes it, the agent
        goes on with the call approved or denied.

        Args:
            ctx: The workflow's context.
            user_prompt: The user's prompt.
            deps: The agent's dependencies for this run.
            message_history: Earlier messages of the conversation.

        Returns:
            pydantic-ai's ``AgentRunResult`` of the run (``result.output``).
        """
        deferred: DeferredToolResults | None = None
        history = list(message_history) if message_history is not None else None
        prompt = user_prompt
        while True:
            result = await self._run_once(ctx, prompt, deps, history, deferred)
            requests = result.output
            if not isinstance(requests, DeferredToolRequests) or not requests.approvals:
                return result
            deferred = await self._ask_approvals(ctx, requests)
            history, prompt = result.all_messages(), None

    async def _run_once(
        self,
        ctx: Any,
        prompt: str | Sequence[Any] | None,
        deps: Any,
        history: list[ModelMessage] | None,
        deferred: DeferredToolResults | None,
    ) -> AgentRunResult[Any]:
        output_type: Any = self.agent.output_type
        if not _allows_deferred(output_type):
            output_type = [output_type, DeferredToolRequests]
        agent, durability = self.agent, self.durability
        run_id = str(ctx.uuid())  # (the same on every replay: ctx.uuid() is journaled)
        wrapped = self._wrapped()
        if wrapped is None:  # (toolsets only pydantic-ai's generic layer makes durable)
            return await _bridge.drive(
                ctx,
                lambda: agent.run(
                    prompt,
                    deps=deps,
                    message_history=history,
                    deferred_tool_results=deferred,
                    output_type=output_type,
                    run_id=run_id,
                    capabilities=[durability],
                ),
            )
        model, toolsets = wrapped

        async def loop() -> AgentRunResult[Any]:
            # (In the agent's own task: an override holds in the context it is made in.)
            # Tool calls one at a time, so that their steps come in the same order on
            # every replay, as the generic layer has them.
            with (
                agent.override(model=model, toolsets=toolsets, tools=[]),
                agent.parallel_tool_call_execution_mode("sequential"),
            ):
                result: AgentRunResult[Any] = await agent.run(
                    prompt,
                    deps=deps,
                    message_history=history,
                    deferred_tool_results=deferred,
                    output_type=output_type,
                    run_id=run_id,
                )
                return result

        return await _bridge.drive(ctx, loop)

    def _wrapped(self) -> tuple[_ParkwayModel, list[AbstractToolset[Any]]] | None:
        """The agent's model and toolsets with each request and call a step; ``None``
        when the agent needs pydantic-ai's generic durability layer: a toolset other
        than function toolsets with ids (an MCP server, a dynamic toolset), a
        capability of its own (whose operations that layer journals), no model."""
        agent = self.agent
        if not isinstance(agent, Agent) or agent.model is None:
            return None
        if any(type(c) not in _default_capabilities() for c in _capabilities(agent)):
            return None
        leaves: list[AbstractToolset[Any]] = []
        for toolset in agent.toolsets:
            toolset.apply(leaves.append)
        if not all(isinstance(t, FunctionToolset) and t.id is not None for t in leaves):
            return None
        if self._wrapped_model is None or self._wrapped_model[0] is not agent.model:
            base = agent.model if isinstance(agent.model, Model) else infer_model(agent.model)
            model = _ParkwayModel(base, self.name, self._model_retry, self.stream_key)
            self._wrapped_model = (agent.model, model)
        name, retry, key = self.name, self._tool_retry, self.stream_key

        def durable(toolset: AbstractToolset[Any]) -> AbstractToolset[Any]:
            if not isinstance(toolset, FunctionToolset):
                return toolset
            prefix = f"{name}__function_toolset__{toolset.id}"
            return _ParkwayToolset(toolset, prefix=prefix, retry=retry, stream_key=key)

        toolsets = [t.visit_and_replace(durable) for t in agent.toolsets]
        return self._wrapped_model[1], toolsets

    async def _ask_approvals(self, ctx: Any, requests: DeferredToolRequests) -> DeferredToolResults:
        """One human task per call needing approval (all open at once); their answers."""
        tasks = [
            ctx.human_task(
                call.tool_name,
                title=f"Approve {call.tool_name}?",
                form=APPROVAL_FORM,
                data={
                    "agent": self.name,
                    "tool": call.tool_name,
                    "args": call.args_as_dict(),
                    "tool_call_id": call.tool_call_id,
                },
            )
            for call in requests.approvals
        ]
        answers = await ctx.gather(*tasks)
        approvals: dict[str, Any] = {}
        for call, answer in zip(requests.approvals, answers, strict=True):
            if answer.get("approved"):
                approvals[call.tool_call_id] = True
            else:
                approvals[call.tool_call_id] = ToolDenied(
                    answer.get("message") or "The tool call was denied."
                )
        return DeferredToolResults(approvals=approvals)


_DEFAULTS: set[type[Any]] = set()


def _capabilities(agent: Agent[Any, Any]) -> list[Any]:
    return list(getattr(agent.root_capability, "capabilities", ()))


def _default_capabilities() -> set[type[Any]]:
    """The capabilities every pydantic-ai agent has (none of which journals anything)."""
    if not _DEFAULTS:
        from pydantic_ai.models.test import TestModel

        _DEFAULTS.update(type(c) for c in _capabilities(Agent(TestModel())))
    return _DEFAULTS


def _allows_deferred(output_type: Any) -> bool:
    if output_type is DeferredToolRequests:
        return True
    if isinstance(output_type, Sequence) and not isinstance(output_type, str):
        return any(_allows_deferred(t) for t in output_type)
    return False
