"""Durable OpenAI Agents SDK runs (``parkway.integrations.openai_agents``), offline.

The model is a fake ``agents.Model`` scripted to call a function tool, then to
answer with what it returned; every test runs on every backend.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, Model, ModelResponse, RunConfig, Runner, function_tool
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from parkway import Engine, InvalidArgumentError, Retry
from parkway.integrations.openai_agents import ParkwayRunner
from parkway.testing import ManualClock

CALLS: list[str] = []


class ScriptedModel(Model):
    """Calls ``lookup_order`` once, then answers with its result (no network)."""

    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any):
        CALLS.append("model")
        if self.fail_first:
            self.fail_first -= 1
            raise ConnectionError("the provider hung up")
        outputs = [
            i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        if not outputs:
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id="call-1",
                name="lookup_order",
                arguments=json.dumps({"order": 42}),
            )
            return ModelResponse(output=[call], usage=Usage(requests=1), response_id=None)
        text = ResponseOutputText(
            type="output_text", text=f"Found: {outputs[0]['output']}", annotations=[]
        )
        message = ResponseOutputMessage(
            id="msg-1", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def lookup_order(order: int) -> str:
    """Look an order up."""
    CALLS.append(f"tool {order}")
    return f"order {order}: a kettle"


def make_agent(model: Model | None = None) -> Agent[Any]:
    return Agent(
        name="support", instructions="Help.", model=model or ScriptedModel(), tools=[lookup_order]
    )


QUIET = RunConfig(tracing_disabled=True)


@pytest.fixture(autouse=True)
def _calls() -> None:
    CALLS.clear()


@pytest.mark.replays
async def test_the_output_is_the_plain_runs_and_every_call_is_a_step(engine: Engine) -> None:
    plain = (await Runner.run(make_agent(), "Where is my kettle?", run_config=QUIET)).final_output
    CALLS.clear()

    @engine.workflow()
    async def support(ctx, question):
        result = await ParkwayRunner.run(ctx, make_agent(), question, run_config=QUIET)
        return result.final_output

    handle = await engine.start(support, "Where is my kettle?")
    assert await handle.result(timeout=30) == plain == "Found: order 42: a kettle"
    steps = [(e.name, e.status) for e in await engine.history(handle.id) if e.kind == "step"]
    assert steps == [
        ("support.model", "done"),
        ("support.tool:lookup_order", "done"),
        ("support.model", "done"),
    ]
    # Each ran once, though every step's commit was followed by a replay (cached_runs=0).
    assert CALLS == ["model", "tool 42", "model"]
    [first] = [e for e in await engine.history(handle.id) if e.kind == "step"][:1]
    assert first.result["output"][0]["name"] == "lookup_order"


@pytest.mark.replays
async def test_the_agents_events_are_in_the_runs_stream_in_order(engine: Engine) -> None:
    @engine.workflow()
    async def support(ctx, question):
        result = await ParkwayRunner.run(
            ctx, make_agent(), question, run_config=QUIET, stream_key="events"
        )
        return result.final_output

    handle = await engine.start(support, "Where is my kettle?")
    answer = await handle.result(timeout=30)
    items = await handle.read_stream("events", limit=1000)
    assert [i.offset for i in items] == list(range(len(items)))
    events = [i.value for i in items]
    assert [(e["type"], e["name"], e["item"]["type"]) for e in events] == [
        ("run_item_stream_event", "tool_called", "tool_call_item"),
        ("run_item_stream_event", "tool_output", "tool_call_output_item"),
        ("run_item_stream_event", "message_output_created", "message_output_item"),
    ]
    assert all(e["agent"] == "support" for e in events)
    called, output, message = (e["item"] for e in events)
    assert called["raw_item"]["name"] == "lookup_order"
    assert json.loads(called["raw_item"]["arguments"]) == {"order": 42}
    assert output["output"] == "order 42: a kettle"
    assert output["raw_item"] == {
        "type": "function_call_output",
        "call_id": "call-1",
        "output": "order 42: a kettle",
    }
    assert message["raw_item"]["content"][0]["text"] == answer
    # Each written once: no replay (cached_runs=0) wrote them again.
    assert all(i.attempt == 1 for i in items)


async def test_no_stream_key_writes_no_events(engine: Engine) -> None:
    @engine.workflow()
    async def support(ctx, question):
        result = await ParkwayRunner.run(
            ctx, make_agent(), question, run_config=QUIET, stream_key=None
        )
        return result.final_output

    handle = await engine.start(support, "Where is my kettle?")
    assert await handle.result(timeout=30) == "Found: order 42: a kettle"
    assert await handle.read_stream("agent", limit=10) == []


async def test_a_failing_model_call_is_retried_with_model_retry(
    engine: Engine, clock: ManualClock
) -> None:
    @engine.workflow()
    async def support(ctx, question):
        result = await ParkwayRunner.run(
            ctx,
            make_agent(ScriptedModel(fail_first=1)),
            question,
            run_config=QUIET,
            model_retry=Retry(max_attempts=2, backoff=1),
        )
        return result.final_output

    handle = await engine.start(support, "Where is my kettle?")
    await engine.idle()
    await clock.advance(1)
    assert await handle.result(timeout=30) == "Found: order 42: a kettle"
    assert CALLS == ["model", "model", "tool 42", "model"]


@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        ((object(), "hi"), {}, "agent"),
        ((make_agent(), "hi"), {"model_retry": 2}, "model_retry"),
        ((make_agent(), "hi"), {"tool_retry": "x"}, "tool_retry"),
        ((make_agent(), "hi"), {"run_config": {"tracing_disabled": True}}, "run_config"),
        ((make_agent(), "hi"), {"stream_key": ""}, "stream_key"),
        ((make_agent(), "hi"), {"stream_key": 3}, "stream_key"),
    ],
)
async def test_bad_arguments_name_the_field(
    args: tuple[Any, ...], kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=field) as caught:
        await ParkwayRunner.run(None, *args, **kwargs)
    assert caught.value.field == field
