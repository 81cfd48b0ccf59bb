"""The ``ctx``'s publishes and child runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parkway import limits
from parkway.errors import InvalidArgumentError, shown
from parkway.events import PublishResult
from parkway.replay.commands import ChildResultCmd, PublishCmd, StartChildCmd
from parkway.replay.context_base import ContextBase


class ChildHandle:
    """A child run started from a workflow; ``await handle.result()`` waits for it."""

    def __init__(self, run_id: str) -> None:
        self.id = run_id

    async def result(self) -> Any:
        """Park until the child finishes; return its output or raise its failure.

        Raises:
            WorkflowFailedError: The child failed.
            RunCancelledError: The child was cancelled.
        """
        return await ChildResultCmd(self.id)

    def __repr__(self) -> str:
        return f"ChildHandle({shown(self.id)})"


class Runs(ContextBase):
    """``ctx.publish``, ``ctx.start_child`` and ``ctx.child``."""

    async def publish(
        self,
        name: str,
        payload: Any = None,
        *,
        id: str | None = None,
        subject: str | None = None,
    ) -> PublishResult:
        """Publish an event from this run, exactly once (it is journaled with its effects).

        The event is in this run's domain; its subject is ``subject``, else the
        engine's extractor's, else this run's.
        """
        name = limits.name(name, "event name")
        id = limits.optional_identifier(id, "event id", field="id")
        subject = limits.subject(subject)
        result: PublishResult = await PublishCmd(name, payload, id, subject)
        return result

    async def _start_run(self, workflow: str, input: Any, *, trigger: dict[str, Any]) -> str:
        """Internal: start a top-level run of ``workflow`` as if ``trigger`` had started it."""
        run_id: str = await StartChildCmd(workflow, input, None, trigger=trigger)
        return run_id

    async def start_child(
        self, workflow: str | Callable[..., Any], input: Any = None, *, id: str | None = None
    ) -> ChildHandle:
        """Start a child run (exactly once); ``await handle.result()`` waits for it."""
        name = _workflow_name(workflow)
        id = limits.optional_identifier(id, "child run id", field="id")
        child_id: str = await StartChildCmd(name, input, id)
        return ChildHandle(child_id)

    async def child(
        self, workflow: str | Callable[..., Any], input: Any = None, *, id: str | None = None
    ) -> Any:
        """Start a child run and wait for its result."""
        handle = await self.start_child(workflow, input, id=id)
        return await handle.result()


def _workflow_name(workflow: str | Callable[..., Any]) -> str:
    if isinstance(workflow, str):
        return limits.name(workflow, "workflow name", field="workflow")
    name = getattr(workflow, "__parkway_workflow__", None)
    if not isinstance(name, str):
        raise InvalidArgumentError(
            f"{shown(workflow)} is not a registered workflow (nor a workflow name)"
        )
    return name
