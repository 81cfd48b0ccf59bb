"""A Model Context Protocol server over an engine: agents inspect and steer runs.

Needs the ``mcp`` extra (``pip install 'parkway[mcp]'``). Serve it with
``parkway mcp APP`` (stdio, what desktop clients launch) or ``parkway mcp APP
--http 127.0.0.1:8765`` (streamable HTTP at ``/mcp``, behind the HTTP API's
bearer token when ``PARKWAY_API_TOKEN`` is set).

The tools are the Python API's calls, one each: ``list_runs``, ``get_run``,
``history``, ``start``, ``signal``, ``publish``, ``correlate``, ``update``,
``cancel``, ``list_tasks``, ``complete_task``. Their arguments' JSON Schemas come
from the signatures below; a call is checked by the engine as the Python call
is, and a :class:`parkway.ParkwayError` comes back as the tool's error (its type
and message, which names the field at fault), the server serving on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from parkway.engine import Engine
from parkway.errors import InvalidArgumentError, MissingExtraError, ParkwayError

try:  # (one message naming the extra, not a bare ModuleNotFoundError from deep inside)
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import Field
except ImportError as exc:
    raise MissingExtraError("mcp", "parkway.integrations.mcp", exc.name or str(exc)) from exc

__all__ = ["TOOLS", "create_server"]

#: The server's tools, in the order it lists them.
TOOLS = (
    "list_runs",
    "get_run",
    "history",
    "start",
    "signal",
    "publish",
    "correlate",
    "update",
    "cancel",
    "list_tasks",
    "complete_task",
)

T = TypeVar("T")

RunId = Annotated[str, Field(description="The run's id.")]
Limit = Annotated[int, Field(ge=1, le=1000, description="At most this many.")]


async def _call(action: Awaitable[T]) -> T:
    """The engine's answer; its error as the tool's error (the message names the field)."""
    try:
        return await action
    except ParkwayError as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from exc


def create_server(engine: Engine, *, name: str = "parkway") -> MCPServer[Any]:
    """An MCP server whose tools call ``engine`` (opened by the caller).

    Args:
        engine: The engine the tools call, open as a client or with a worker.
        name: The server's name, as clients show it.

    Returns:
        The ``mcp`` SDK's ``MCPServer``: ``await server.run_stdio_async()``, or
        mount ``server.streamable_http_app()``.
    """
    if not isinstance(engine, Engine):
        raise InvalidArgumentError(
            f"engine must be a parkway Engine, not {type(engine).__name__}", field="engine"
        )
    server: MCPServer[Any] = MCPServer(
        name,
        instructions=(
            "Inspect and steer parkway workflow runs: list and read runs and their "
            "history, start runs, send signals, events, messages and updates, cancel "
            "runs, and list and complete human tasks."
        ),
    )

    def tool(description: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return server.tool(description=description, structured_output=True)

    @tool("List runs, newest first, filtered by workflow, status, subject or domain.")
    async def list_runs(
        workflow: str | None = None,
        status: Annotated[
            str | None,
            Field(description="pending, running, parked, held, completed, failed or cancelled"),
        ] = None,
        subject: str | None = None,
        domain: str | None = None,
        limit: Limit = 100,
    ) -> list[dict[str, Any]]:
        runs = await _call(
            engine.list_runs(
                workflow=workflow, status=status, subject=subject, domain=domain, limit=limit
            )
        )
        return [run.to_dict() for run in runs]

    @tool("A run: its status, input, output or error, and what it waits for.")
    async def get_run(run_id: RunId) -> dict[str, Any]:
        return (await _call(engine.get_run(run_id))).to_dict()

    @tool("A run's history: its journal's entries (steps, waits, values), in order.")
    async def history(run_id: RunId) -> list[dict[str, Any]]:
        return [entry.to_dict() for entry in await _call(engine.history(run_id))]

    @tool("Start a run of a workflow; starting an existing id returns that run.")
    async def start(
        workflow: Annotated[str, Field(description="The workflow's registered name.")],
        input: Annotated[Any, Field(description="The run's input (any JSON).")] = None,
        id: Annotated[str | None, Field(description="The run's id (default: a new one).")] = None,
        subject: str | None = None,
        domain: str | None = None,
    ) -> dict[str, Any]:
        handle = await _call(engine.start(workflow, input, id=id, subject=subject, domain=domain))
        return (await _call(engine.get_run(handle.id))).to_dict()

    @tool("Send a signal to a run (it gets it from ctx.wait_for_signal(name)).")
    async def signal(run_id: RunId, name: str, payload: Any = None) -> dict[str, Any]:
        await _call(engine.signal(run_id, name, payload))
        return {"run_id": run_id, "signal": name, "sent": True}

    @tool("Publish an event: it starts the workflows triggered by it and resumes waiting runs.")
    async def publish(
        name: str,
        payload: Any = None,
        id: Annotated[str | None, Field(description="Deduplicates the event.")] = None,
        domain: str | None = None,
        subject: str | None = None,
    ) -> dict[str, Any]:
        result = await _call(engine.publish(name, payload, id=id, domain=domain, subject=subject))
        return result.to_dict()

    @tool("Send a message by name and correlation key (ctx.wait_for_message(name, key)).")
    async def correlate(
        name: str,
        key: str,
        payload: Any = None,
        message_id: Annotated[str | None, Field(description="Deduplicates it.")] = None,
    ) -> dict[str, Any]:
        result = await _call(engine.correlate(name, key, payload, message_id=message_id))
        return result.to_dict()

    @tool("Send an update to a run and return its handler's answer.")
    async def update(
        run_id: RunId,
        name: str,
        payload: Any = None,
        id: Annotated[str | None, Field(description="Deduplicates the update.")] = None,
        timeout: Annotated[float, Field(gt=0, description="Seconds to wait for the answer.")] = 30,
    ) -> dict[str, Any]:
        answer = await _call(engine.update(run_id, name, payload, id=id, timeout=timeout))
        return {"run_id": run_id, "update": name, "result": answer}

    @tool("Cancel a run (its compensations run first).")
    async def cancel(run_id: RunId) -> dict[str, Any]:
        await _call(engine.cancel(run_id))
        return (await _call(engine.get_run(run_id))).to_dict()

    @tool("List human tasks (open ones by default), oldest first.")
    async def list_tasks(
        status: Annotated[
            str | None,
            Field(description="open, completed, cancelled or expired; null for all"),
        ] = "open",
        assignee: str | None = None,
        workflow: str | None = None,
        limit: Limit = 100,
    ) -> list[dict[str, Any]]:
        found = await _call(
            engine.tasks(status=status, assignee=assignee, workflow=workflow, limit=limit)
        )
        return [task.to_dict() for task in found]

    @tool("Complete a human task with a result checked against its form.")
    async def complete_task(
        task_id: str,
        result: Annotated[Any, Field(description="What the person decided (the form's JSON).")],
        by: Annotated[str | None, Field(description="Who completes it.")] = None,
    ) -> dict[str, Any]:
        return (await _call(engine.complete_task(task_id, result, by=by))).to_dict()

    return server
