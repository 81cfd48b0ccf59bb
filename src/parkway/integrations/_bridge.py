"""Running an agent framework's loop beside a workflow's code, its I/O as steps.

Agent frameworks (pydantic-ai, the OpenAI Agents SDK) run their loops in asyncio
tasks of their own, where a workflow may not await ctx operations: nothing would
order them in the run's journal. So :func:`drive` runs the framework's coroutine
in one task, and the framework's durable points (a model request, a tool call)
:func:`call` the workflow's code, which runs each as ``ctx.step`` in the order
asked. That order is the same on every replay, since every answer the framework
gets comes from the journal (or, live, from the step that journals it).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from parkway.models import Retry

T = TypeVar("T")


@dataclass
class _Operation:
    """One step the framework asked for, waiting for the workflow to run it."""

    name: str
    body: Callable[[], Awaitable[Any]]
    retry: Retry | None
    answer: asyncio.Future[Any]


class _Bridge:
    """Carries the framework's operations from its task to the workflow's code, in order."""

    def __init__(self) -> None:
        self.operations: deque[_Operation] = deque()
        self.task: asyncio.Future[Any] | None = None
        self._wakeup: asyncio.Future[None] | None = None

    def send(self, operation: _Operation) -> None:
        self.operations.append(operation)
        self.wake()

    def wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def next(self) -> None:
        """Until the framework asks for an operation, or ends."""
        assert self.task is not None
        while not self.operations and not self.task.done():
            # A plain future: the workflow awaits it without journaling anything (what
            # follows is decided by the operations' journaled results, not by this wait).
            self._wakeup = asyncio.get_running_loop().create_future()
            await self._wakeup


# The bridge of the run in progress: set in the framework's task only (asyncio copies the
# context into a task when it is created), so a step's own body is not "in" the run.
_BRIDGE: contextvars.ContextVar[_Bridge | None] = contextvars.ContextVar(
    "parkway_agent_bridge", default=None
)


def in_workflow() -> bool:
    """Whether the caller is the framework's loop, driven by :func:`drive`."""
    return _BRIDGE.get() is not None


async def call(name: str, body: Callable[[], Awaitable[T]], retry: Retry | None) -> T:
    """Run ``body`` as the workflow's step ``name``; outside :func:`drive`, just run it."""
    bridge = _BRIDGE.get()
    if bridge is None:
        return await body()
    answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    bridge.send(_Operation(name, body, retry, answer))
    result: T = await answer
    return result


async def drive(ctx: Any, loop: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the framework's ``loop()`` in a task; run each step it asks for with ``ctx.step``."""
    bridge = _Bridge()
    token = _BRIDGE.set(bridge)
    try:
        task: asyncio.Future[T] = asyncio.ensure_future(loop())
        bridge.task = task
    finally:
        _BRIDGE.reset(token)
    task.add_done_callback(lambda _task: bridge.wake())
    try:
        while True:
            await bridge.next()
            if not bridge.operations:
                return task.result()
            op = bridge.operations.popleft()
            try:
                value = await ctx.step(op.body, name=op.name, retry=op.retry)
            except Exception as exc:  # the framework decides (it fails the run, as a rule)
                op.answer.set_exception(exc)
            else:
                op.answer.set_result(value)
    finally:
        if not task.done():  # (the run stopped here: cancelled, or evicted from memory)
            task.cancel()
