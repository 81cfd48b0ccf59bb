"""One attempt of a step: run on the loop (``async def``) or in a thread (``def``),
with its :class:`~parkway.worker.step_context.StepContext`, its heartbeats and its
``timeout``."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from parkway import _json
from parkway.errors import StepTimeoutError
from parkway.replay.commands import StepCmd
from parkway.replay.requests import RunStep, StepResult
from parkway.store.base import RunRecord
from parkway.worker import step_context
from parkway.worker.deadlines import Deadlines
from parkway.worker.heartbeat import Heartbeats
from parkway.worker.step_context import StepContext
from parkway.worker.threads import Carried, StepThreads


async def call_step(
    run: RunRecord,
    request: RunStep,
    executor: StepThreads,
    heartbeat: Callable[[bytes], Awaitable[None]],
    deadlines: Deadlines,
) -> StepResult:
    """Run one attempt of a step of ``run``: what it returned, or the exception it raised.

    A sync step may block (requests, file I/O): it runs in ``executor``, with
    the caller's context variables (as ``asyncio.to_thread`` would), the step's
    :class:`StepContext` among them. ``heartbeat(data)`` commits the details its
    heartbeats record.

    The step's ``timeout`` bounds the attempt (on ``deadlines``, the worker's one
    timer for them): an async
    step is cancelled at the deadline; a sync step's thread cannot be, so the
    attempt is abandoned (the executor frees its place, and ignores what the
    thread returns later). Either way it fails with :class:`StepTimeoutError`.

    Any exception fails the attempt, ``BaseException``s too (``SystemExit`` from a
    library's ``sys.exit()``, ``KeyboardInterrupt``...): the step's code is the
    user's, and what it raises is its run's business, never the worker's (left to
    propagate, one such step stopped the whole process, and every restart claimed
    its run and went down again). Only the engine's own cancellation of the
    advance (a worker stopping) goes on as a cancellation.
    """
    cmd = request.cmd
    last = _json.loads(request.last_heartbeat) if request.last_heartbeat is not None else None
    beats = Heartbeats(heartbeat, what=f"run {run.id!r} step {cmd.name!r}")
    token = step_context.enter(
        StepContext(
            run.id,
            run.workflow,
            cmd.name,
            request.position,
            request.attempt,
            f"{run.id}:{request.position}",
            last,
            beats,
        )
    )
    try:
        if inspect.iscoroutinefunction(cmd.fn):
            if cmd.timeout is None:
                result = await cmd.fn(*cmd.args, **cmd.kwargs)
            else:
                result = await _within(cmd, cmd.fn(*cmd.args, **cmd.kwargs), deadlines)
        else:
            future = executor.run(cmd.fn, *cmd.args, **cmd.kwargs)
            if cmd.timeout is None:
                result = await future
            else:
                expired = StepTimeoutError(cmd.name, cmd.timeout)
                box = deadlines.add(
                    cmd.timeout, functools.partial(executor.abandon, future, expired)
                )
                try:
                    result = await future
                finally:
                    deadlines.cancel(box)
        if inspect.isawaitable(result):
            result = await result
    except Carried as carried:  # (a sync step's SystemExit...: see StepThreads.run)
        return StepResult(error=carried.error, heartbeat=await _closed(beats, succeeded=False))
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        # (The step's own: it cancelled something of its own.)
        return StepResult(error=exc, heartbeat=await _closed(beats, succeeded=False))
    except BaseException as exc:
        return StepResult(error=exc, heartbeat=await _closed(beats, succeeded=False))
    finally:
        step_context.leave(token)
    return StepResult(value=result, heartbeat=await _closed(beats, succeeded=True))


async def _within(cmd: StepCmd, coro: Coroutine[Any, Any, Any], deadlines: Deadlines) -> Any:
    """Await ``coro`` (an async step's attempt), cancelled at ``cmd.timeout`` (as
    ``asyncio.timeout`` would, on the worker's one deadline timer)."""
    assert cmd.timeout is not None
    task = asyncio.current_task()
    assert task is not None
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    box = deadlines.add(cmd.timeout, expire)
    try:
        return await coro
    except asyncio.CancelledError:
        # Ours (not a cancel of the worker's own): the attempt ran out of time.
        if expired and task.uncancel() == 0:
            raise StepTimeoutError(cmd.name, cmd.timeout) from None
        raise
    finally:
        deadlines.cancel(box)


async def _closed(beats: Heartbeats, *, succeeded: bool) -> bytes | None:
    """The attempt's heartbeats written out; the last details recorded, if any."""
    if beats.close_unused():  # (most steps: nothing to write)
        return None
    with contextlib.suppress(Exception):  # (logged; the attempt's outcome stands)
        await beats.close(succeeded=succeeded)
    return beats.written


async def settled(future: asyncio.Future[Any]) -> None:
    # (As a Task would: the future has been seen as blocking by the workflow's await.)
    future._asyncio_future_blocking = False
    await asyncio.wait([future])
