"""Durable pydantic-ai agents (``parkway.integrations.pydantic_ai``), offline.

The agent is ``agent_support``'s: pydantic-ai's ``FunctionModel`` scripted to call
two tools, one of which needs a person's approval. Every test runs on every
backend through the public API; the crash of a worker process is in
``test_agents_crash.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from parkway import Engine, InvalidArgumentError, Retry, RunStatus
from parkway.integrations.pydantic_ai import APPROVAL_FORM, ParkwayAgent
from parkway.testing import ManualClock
from tests.apps.agent_support import make_agent


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def open_tasks(engine: Engine, run_id: str) -> list[Any]:
    await engine.idle()
    return [t for t in await engine.tasks() if t.run_id == run_id]


@pytest.mark.replays
async def test_the_output_is_the_plain_agents_and_every_call_is_a_step(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = (await make_agent(approval=False).run("My kettle arrived broken")).output
    log = tmp_path / "calls.log"
    monkeypatch.setenv("AGENT_LOG", str(log))
    durable = ParkwayAgent(make_agent(approval=False))

    @engine.workflow()
    async def support(ctx, question):
        result = await durable.run(ctx, question)
        return result.output

    handle = await engine.start(support, "My kettle arrived broken")
    assert await handle.result(timeout=30) == plain
    history = await engine.history(handle.id)
    # (The steps that write tool calls' events to the stream aside: see the stream test.)
    steps = [
        (e.kind, e.name, e.status)
        for e in history
        if e.kind == "step" and e.name != "support__event_stream_handler"
    ]
    assert steps == [
        ("step", "support__model.request_stream", "done"),
        ("step", "support__function_toolset__<agent>.call_tool:lookup_order", "done"),
        ("step", "support__model.request_stream", "done"),
        ("step", "support__function_toolset__<agent>.call_tool:refund", "done"),
        ("step", "support__model.request_stream", "done"),
    ]
    # Each ran once, though every step's commit was followed by a replay (cached_runs=0).
    assert lines(log) == [
        "model 0",
        "tool lookup_order 42",
        "model 1",
        "tool refund 42",
        "model 2",
    ]


@pytest.mark.replays
async def test_the_agents_events_are_in_the_runs_stream_in_order(engine: Engine) -> None:
    durable = ParkwayAgent(make_agent(approval=False), stream_key="events")

    @engine.workflow()
    async def support(ctx, question):
        return (await durable.run(ctx, question)).output

    handle = await engine.start(support, "My kettle arrived broken")
    answer = await handle.result(timeout=30)
    items = await handle.read_stream("events", limit=1000)
    assert [i.offset for i in items] == list(range(len(items)))
    events = [i.value for i in items]
    tools = [
        (e["event_kind"], e["part"]["tool_name"] if "part" in e else e["result"]["tool_name"])
        for e in events
        if e["event_kind"] in ("function_tool_call", "function_tool_result")
    ]
    assert tools == [
        ("function_tool_call", "lookup_order"),
        ("function_tool_result", "lookup_order"),
        ("function_tool_call", "refund"),
        ("function_tool_result", "refund"),
    ]
    # The answer's text, as the model streamed it, word by word.
    text = [e for e in events if e["event_kind"] in ("part_start", "part_delta")]
    words = [
        e["part"]["content"] if e["event_kind"] == "part_start" else e["delta"]["content_delta"]
        for e in text
        if e.get("part", {}).get("part_kind") == "text"
        or e.get("delta", {}).get("part_delta_kind") == "text"
    ]
    assert "".join(words) == answer
    assert len(words) > 1
    # Each written once: no replay (cached_runs=0) wrote them again.
    assert all(i.attempt == 1 for i in items)


async def test_a_tool_asking_the_model_to_retry_is_journaled_and_the_model_retries(
    engine: Engine,
) -> None:
    from pydantic_ai import ModelRetry

    calls: list[int] = []
    agent = Agent(TestModel(custom_output_text="ok"), name="retrier")

    @agent.tool_plain(retries=2)
    def lookup(order: int) -> str:
        calls.append(order)
        if len(calls) == 1:
            raise ModelRetry("try another order")
        return "found"

    durable = ParkwayAgent(agent)

    @engine.workflow()
    async def ask(ctx, _input):
        return (await durable.run(ctx, "hi")).output

    handle = await engine.start(ask)
    assert await handle.result(timeout=30) == "ok"
    steps = [(e.name, e.status) for e in await engine.history(handle.id) if e.kind == "step"]
    tool = "retrier__function_toolset__<agent>.call_tool:lookup"
    # The retry is the tool's answer (journaled as data), not a failed step.
    assert [s for s in steps if s[0] == tool] == [(tool, "done"), (tool, "done")]
    assert len(calls) == 2
    events = [i.value for i in await handle.read_stream("agent", limit=1000)]
    results = [e["part"]["outcome"] for e in events if e["event_kind"] == "function_tool_result"]
    assert results == ["retried", "success"]


@pytest.mark.replays
async def test_an_agent_with_a_dynamic_toolset_runs_on_the_generic_layer(engine: Engine) -> None:
    from pydantic_ai.toolsets import FunctionToolset

    agent = Agent(TestModel(custom_output_text="done"), name="dyn")

    @agent.toolset(id="extra")
    def extra(ctx: Any) -> FunctionToolset[Any]:
        def stock(item: str) -> int:
            """Items in stock."""
            return 3

        return FunctionToolset([stock], id="inner")

    durable = ParkwayAgent(agent)

    @engine.workflow()
    async def ask(ctx, _input):
        return (await durable.run(ctx, "hi")).output

    handle = await engine.start(ask)
    assert await handle.result(timeout=30) == "done"
    names = [e.name for e in await engine.history(handle.id) if e.kind == "step"]
    assert "dyn__dynamic_toolset__extra.call_tool:stock" in names
    assert "dyn__model.request_stream" in names


async def test_the_journal_holds_the_models_response_as_json(engine: Engine) -> None:
    durable = ParkwayAgent(Agent(TestModel(custom_output_text="hello"), name="greeter"))

    @engine.workflow()
    async def greet(ctx, _input):
        return (await durable.run(ctx, "hi")).output

    handle = await engine.start(greet)
    assert await handle.result(timeout=30) == "hello"
    [entry] = [e for e in await engine.history(handle.id) if e.kind == "step"]
    assert entry.name == "greeter__model.request_stream"
    assert entry.result["kind"] == "response"
    assert entry.result["parts"][0] == {**entry.result["parts"][0], "content": "hello"}


@pytest.mark.replays
async def test_a_tool_needing_approval_is_a_human_task_and_approving_lets_it_run(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "calls.log"
    monkeypatch.setenv("AGENT_LOG", str(log))
    durable = ParkwayAgent(make_agent())

    @engine.workflow()
    async def support(ctx, question):
        return (await durable.run(ctx, question)).output

    handle = await engine.start(support, "My kettle arrived broken")
    [task] = await open_tasks(engine, handle.id)
    assert (await handle.info()).status == RunStatus.PARKED
    assert task.name == "refund"
    assert task.form_schema == APPROVAL_FORM
    assert task.data == {
        "agent": "support",
        "tool": "refund",
        "args": {"order": 42, "cents": 1250},
        "tool_call_id": task.data["tool_call_id"],
    }
    assert lines(log) == ["model 0", "tool lookup_order 42", "model 1"]

    await engine.complete_task(task.id, {"approved": True}, by="ana")
    answer = await handle.result(timeout=30)
    assert answer == ("order 42: a kettle, delivered damaged; refunded 1250 cents on order 42")
    # The run replayed its journal after the approval: nothing that completed ran again.
    assert lines(log) == [
        "model 0",
        "tool lookup_order 42",
        "model 1",
        "tool refund 42",
        "model 2",
    ]


async def test_a_denied_approval_tells_the_model_why_and_the_tool_never_runs(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "calls.log"
    monkeypatch.setenv("AGENT_LOG", str(log))
    durable = ParkwayAgent(make_agent())

    @engine.workflow()
    async def support(ctx, question):
        return (await durable.run(ctx, question)).output

    handle = await engine.start(support, "Refund me")
    [task] = await open_tasks(engine, handle.id)
    await engine.complete_task(task.id, {"approved": False, "message": "over the limit"})
    answer = await handle.result(timeout=30)
    assert answer == "order 42: a kettle, delivered damaged; over the limit"
    assert "tool refund 42" not in lines(log)


async def test_a_failing_model_request_is_retried_with_model_retry(
    engine: Engine, clock: ManualClock
) -> None:
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    attempts: list[int] = []

    def flaky(messages: Any, info: Any) -> ModelResponse:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("the provider hung up")
        return ModelResponse(parts=[TextPart("fine")])

    durable = ParkwayAgent(
        Agent(FunctionModel(flaky), name="flaky"),
        stream_key=None,  # (FunctionModel(flaky) makes no streamed responses)
        model_retry=Retry(max_attempts=2, backoff=1),
    )

    @engine.workflow()
    async def ask(ctx, _input):
        return (await durable.run(ctx, "hi")).output

    handle = await engine.start(ask)
    await engine.idle()
    assert len(attempts) == 1
    await clock.advance(1)
    assert await handle.result(timeout=30) == "fine"
    assert len(attempts) == 2


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"agent": object()}, "agent"),
        ({"agent": Agent(TestModel())}, "name"),
        ({"agent": Agent(TestModel()), "name": " "}, "name"),
        ({"agent": Agent(TestModel(), name="a"), "model_retry": 3}, "model_retry"),
        ({"agent": Agent(TestModel(), name="a"), "tool_retry": {"max_attempts": 2}}, "tool_retry"),
        ({"agent": Agent(TestModel(), name="a"), "stream_key": ""}, "stream_key"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    agent = kwargs.pop("agent")
    with pytest.raises(InvalidArgumentError, match=field) as caught:
        ParkwayAgent(agent, **kwargs)
    assert caught.value.field == field
