"""What a running step knows of itself: :func:`step_context`.

The worker sets it around each attempt of a step (on the loop for an ``async
def`` step, inside the thread of a ``def`` one: the thread runs in a copy of
the context the attempt set), so a step can ask which run and attempt it is
and key its side effects to the step rather than to the attempt.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from parkway.errors import WorkflowUsageError
from parkway.worker import streams
from parkway.worker.heartbeat import Heartbeats

__all__ = ["StepContext", "step_context"]


@dataclass(frozen=True)
class StepContext:
    """The step being run, as seen from inside it (:func:`parkway.step_context`).

    Attributes:
        run_id: The run the step belongs to.
        workflow: The run's workflow.
        step: The step's name.
        position: Where the step is journaled in the run (the same on every
            attempt and after a crash).
        attempt: This attempt's number, counting from 1.
        idempotency_key: ``f"{run_id}:{position}"``: the same on every attempt of
            this step, so a payment API given it deduplicates the retries.
        last_heartbeat: The details the latest earlier attempt of this step
            recorded with :meth:`heartbeat` (``None`` on a first attempt, or if
            none did), also after a crash: a long step resumes where it got to.
    """

    run_id: str
    workflow: str
    step: str
    position: int
    attempt: int
    idempotency_key: str
    last_heartbeat: Any = None
    _beats: Heartbeats | None = field(default=None, repr=False, compare=False)

    def heartbeat(self, details: Any = None) -> Awaitable[None] | concurrent.futures.Future[None]:
        """Record ``details`` (JSON) durably: what this attempt has done so far.

        Calls are coalesced: at most one commit a second per attempt
        (:data:`parkway.worker.heartbeat.HEARTBEAT_INTERVAL`), which writes the
        newest details; the last ones are written when the attempt ends. So a
        step may call it in a tight loop.

        Returns:
            Something to wait on for durability, which the caller may ignore: in an
            ``async def`` step an awaitable (``await ctx.heartbeat(d)``), in a
            ``def`` step a ``concurrent.futures.Future`` (``.result()``). Waiting
            raises ``SerializationError`` if ``details`` is not JSON.
        """
        if self._beats is None:  # (a context made by hand, outside the worker)
            raise WorkflowUsageError("this StepContext belongs to no running attempt")
        return self._beats.beat(details)

    def write_stream(self, key: str, value: Any) -> Awaitable[None]:
        """Append a JSON ``value`` to the run's stream ``key``, visible to its readers
        at once (``handle.stream(key)``, ``GET /runs/{id}/streams/{key}``): the tokens
        of a model's answer as they come.

        At least once: the item is committed on its own, not with the run's journal,
        so a retried attempt writes again; each item carries its ``attempt``. From a
        ``def`` step it returns once the item is committed. From an ``async def``
        step the write starts at once and the awaitable returned may be awaited (to
        wait for its commit) or not: writes keep their order either way, and all of
        them commit before the step's result is recorded (one that failed fails the
        step).

        Raises:
            InvalidArgumentError: ``key`` is not a valid name, or the stream was
                closed by the workflow.
            SerializationError: ``value`` is not JSON-serialisable (nothing is written).
            WorkflowUsageError: The step has ended.
        """
        return streams.write_stream(key, value)


_current: contextvars.ContextVar[StepContext | None] = contextvars.ContextVar(
    "parkway_step_context", default=None
)


def step_context() -> StepContext:
    """The :class:`StepContext` of the step running now.

    Raises:
        WorkflowUsageError: Called outside a step (in a workflow's body, or outside
            any run).
    """
    ctx = _current.get()
    if ctx is None:
        raise WorkflowUsageError(
            "parkway.step_context() is only available inside a running step "
            "(a function given to ctx.step)"
        )
    return ctx


def enter(ctx: StepContext) -> contextvars.Token[StepContext | None]:
    """Make ``ctx`` the current step's (the worker, around an attempt)."""
    return _current.set(ctx)


def leave(token: contextvars.Token[StepContext | None]) -> None:
    """Undo :func:`enter`."""
    _current.reset(token)
