"""A support agent that answers customers, durably: pydantic-ai on parkway.

    python examples/agent/app.py            # serve the page at http://127.0.0.1:8000
    python examples/agent/app.py --demo     # one conversation, offline, in the terminal

The agent has two tools: ``lookup_order`` (runs at once) and ``refund`` (needs a
person's approval: it becomes a human task, approved on the page or in
parkway's dashboard). Every model request and tool call is a step of the
``support`` workflow, so a restart in the middle of a conversation repeats
nothing that completed. The page streams the conversation's progress (each
model request, tool call and approval, then the answer) over Server-Sent Events.

Offline by default: the model is pydantic-ai's ``FunctionModel`` running a
script. Set ``PARKWAY_AGENT_MODEL`` (say ``openai:gpt-5-mini``, with
``OPENAI_API_KEY`` and ``pip install 'pydantic-ai-slim[openai]'``) to talk to a
real one. Needs ``pip install 'parkway[pydantic-ai,http]'``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

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
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, StreamingResponse
from starlette.routing import Route

from parkway import Engine, RunNotFoundError
from parkway.http import lifespan
from parkway.integrations.pydantic_ai import ParkwayAgent

ORDERS = {
    42: {"item": "a kettle", "status": "delivered damaged", "cents": 3900},
    43: {"item": "two mugs", "status": "in transit", "cents": 1800},
}


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The offline model: look the order up, refund it if damaged, then answer."""
    returns = {
        p.tool_name: p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }
    if "lookup_order" not in returns:
        return ModelResponse(parts=[ToolCallPart("lookup_order", {"order": 42})])
    order = returns["lookup_order"]
    if "damaged" in str(order) and "refund" not in returns:
        return ModelResponse(parts=[ToolCallPart("refund", {"order": 42, "cents": 3900})])
    answer = f"I looked your order up: {order}."
    if "refund" in returns:
        answer += f" {returns['refund']}."
    return ModelResponse(parts=[TextPart(answer)])


async def scripted_stream(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
    """The offline model, streaming: its answer a word at a time, as a real one would."""
    for index, part in enumerate(scripted(messages, info).parts):
        if isinstance(part, ToolCallPart):
            yield {index: DeltaToolCall(part.tool_name, json.dumps(part.args))}
        elif isinstance(part, TextPart):
            words = part.content.split(" ")
            for i, word in enumerate(words):
                yield word if i == len(words) - 1 else word + " "


agent = Agent(
    os.environ.get("PARKWAY_AGENT_MODEL")
    or FunctionModel(scripted, stream_function=scripted_stream),
    name="support",
    instructions=(
        "You are a shop's support agent. Look the customer's order up; refund an "
        "order that arrived damaged. Answer in one or two sentences."
    ),
)


@agent.tool_plain
def lookup_order(order: int) -> str:
    """Look an order up by its number."""
    found = ORDERS.get(order)
    if found is None:
        return f"there is no order {order}"
    return f"order {order}: {found['item']}, {found['status']}"


@agent.tool_plain(requires_approval=True)
def refund(order: int, cents: int) -> str:
    """Refund an order (a person approves it first)."""
    return f"Refunded {cents / 100:.2f} EUR on order {order}"


support = ParkwayAgent(agent)
engine = Engine(os.environ.get("PARKWAY_URL", "sqlite:///agent.db"))


@engine.workflow()
async def conversation(ctx: Any, question: str) -> str:
    result = await support.run(ctx, question)
    return str(result.output)


# -- the web page -----------------------------------------------------------------------------

PAGE = """<!doctype html><meta charset="utf-8"><title>Support</title>
<style>body{font:16px system-ui;max-width:40em;margin:2em auto}li{margin:.3em 0}</style>
<h1>Ask support</h1>
<form id="ask"><input name="q" size="50" value="My kettle arrived broken (order 42)">
<button>Ask</button></form><ol id="log"></ol>
<script>
const log = document.getElementById("log");
function say(html) { const li = document.createElement("li"); li.innerHTML = html; log.append(li); }
document.getElementById("ask").onsubmit = async (e) => {
  e.preventDefault(); log.innerHTML = "";
  const question = e.target.q.value;
  const r = await fetch("ask", {method: "POST", body: JSON.stringify({question})});
  const {run_id} = await r.json();
  const events = new EventSource(`runs/${run_id}/events`);
  say(""); const words = log.lastChild;
  events.onmessage = (m) => {
    const ev = JSON.parse(m.data);
    if (ev.kind === "approval") {
      say(`Approve <b>${ev.tool}</b> ${JSON.stringify(ev.args)}? ` +
          `<button onclick="decide('${ev.task_id}', true)">Approve</button> ` +
          `<button onclick="decide('${ev.task_id}', false)">Deny</button>`);
    } else if (ev.kind === "answer") { say(`<b>${ev.text}</b>`); events.close(); }
    else if (ev.kind === "words") { words.textContent += ev.text; }
    else { say(ev.text); }
  };
};
async function decide(id, approved) {
  await fetch(`tasks/${id}`, {method: "POST", body: JSON.stringify({approved})});
}
</script>"""


async def page(request: Request) -> HTMLResponse:
    return HTMLResponse(PAGE)


async def ask(request: Request) -> JSONResponse:
    body = await request.json()
    question = body.get("question") if isinstance(body, dict) else None
    if not isinstance(question, str) or not question.strip():
        return JSONResponse({"error": "question must be a non-empty string"}, status_code=422)
    handle = await engine.start(conversation, question)
    return JSONResponse({"run_id": handle.id})


async def progress(run_id: str) -> AsyncIterator[dict[str, Any]]:
    """The conversation as it goes: its steps, its approvals, then its answer."""
    seen, asked, offset = 0, set(), 0
    handle = engine.handle(run_id)
    while True:
        info = await engine.get_run(run_id)
        history = [
            e
            for e in await engine.history(run_id)
            if e.kind == "step" and ("model.request" in e.name or ".call_tool:" in e.name)
        ]
        for entry in history[seen:]:
            if "model.request" in entry.name:
                yield {"kind": "model", "text": "The agent thought."}
            else:
                tool = entry.name.rpartition(":")[2]
                yield {"kind": "tool", "text": f"{tool}: {entry.result.get('result')}"}
        seen = len(history)
        # The answer's words, as the model writes them (the agent's stream, see ParkwayAgent).
        for item in await handle.read_stream("agent", offset=offset, limit=1000):
            offset = item.offset + 1
            event = item.value
            part, delta = event.get("part") or {}, event.get("delta") or {}
            if event["event_kind"] == "part_start" and part.get("part_kind") == "text":
                yield {"kind": "words", "text": part["content"]}
            elif event["event_kind"] == "part_delta" and "content_delta" in delta:
                yield {"kind": "words", "text": delta["content_delta"]}
        for task in await engine.tasks(workflow="conversation"):
            if task.run_id == run_id and task.id not in asked:
                asked.add(task.id)
                yield {
                    "kind": "approval", "task_id": task.id, "tool": task.name,
                    "args": task.data["args"],
                }  # fmt: skip
        if info.status in ("completed", "failed", "cancelled"):
            text = info.output if info.status == "completed" else f"({info.status})"
            yield {"kind": "answer", "text": text}
            return
        await asyncio.sleep(0.1)


async def events(request: Request) -> StreamingResponse | JSONResponse:
    run_id = request.path_params["run_id"]
    try:
        await engine.get_run(run_id)
    except RunNotFoundError:
        return JSONResponse({"error": f"no run {run_id!r}"}, status_code=404)

    async def sse() -> AsyncIterator[str]:
        async for event in progress(run_id):
            yield f"data: {json.dumps(event)}\n\n"

    return StreamingResponse(sse(), media_type="text/event-stream")


async def decide(request: Request) -> JSONResponse:
    body = await request.json()
    approved = body.get("approved") if isinstance(body, dict) else None
    if not isinstance(approved, bool):
        return JSONResponse({"error": "approved must be true or false"}, status_code=422)
    task = await engine.complete_task(request.path_params["task_id"], {"approved": approved})
    return JSONResponse({"status": task.status})


app = Starlette(
    routes=[
        Route("/", page),
        Route("/ask", ask, methods=["POST"]),
        Route("/runs/{run_id}/events", events),
        Route("/tasks/{task_id}", decide, methods=["POST"]),
    ],
    lifespan=lifespan(engine),  # (opens the engine, with its worker, with the app)
)


async def demo() -> None:
    """One conversation through the page's own routes, offline, printed."""
    import httpx

    transport = httpx.ASGITransport(app=app)
    async with engine, httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
        run_id = (await http.post("/ask", json={"question": "My kettle broke"})).json()["run_id"]
        await engine.idle()
        [task] = await engine.tasks(workflow="conversation")
        print(f"approval asked: {task.name} {task.data['args']}")
        print((await http.post(f"/tasks/{task.id}", json={"approved": True})).json())
        # (httpx's in-process transport hands the stream over once it has ended.)
        stream = await http.get(f"/runs/{run_id}/events")
        words = ""
        for line in stream.text.splitlines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                if event["kind"] == "words":
                    words += event["text"]
                    continue
                # (The words come as the model writes them, which may be before its
                # step shows in the history: printed together, before the answer.)
                if words and event["kind"] == "answer":
                    print(f"words: {words}")
                    words = ""
                print(f"{event['kind']}: {event.get('text', event.get('tool'))}")


if __name__ == "__main__":
    if "--demo" in sys.argv:
        with tempfile.TemporaryDirectory() as folder:
            engine.configure(url=f"sqlite:///{Path(folder) / 'agent.db'}")
            asyncio.run(demo())
    else:
        import uvicorn

        uvicorn.run(app, host="127.0.0.1", port=8000)
