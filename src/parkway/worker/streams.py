"""A step's writes to its run's streams (``step_context().write_stream``).

A step writes as it goes, so its items are visible at once: each write is
committed in a transaction of its own (:func:`parkway.core.streams.append`),
not with the run's journal, and a retried attempt writes again (its items carry
its attempt). The advance sets the attempt's writer (:class:`StepStreams`) in a
context variable around the call, so the step's own code, and a ``def`` step's
thread (which runs in a copy of the caller's context), finds it.

From a ``def`` step's thread a write blocks until it is committed. From an
``async def`` step it starts at once and returns an awaitable: awaiting it waits
for the commit, and not awaiting it is fine too. Writes made while an earlier
one commits queue, and go together in the next transaction, in the order made:
a step writing tokens as fast as a model sends them pays one commit per batch,
not per token. The step's result is recorded only after all its writes have
committed (:meth:`StepStreams.settle`); one that failed unawaited fails the step.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Generator
from typing import Any

from parkway import _json
from parkway.core import streams as core_streams
from parkway.core.runtime import Runtime
from parkway.errors import WorkflowUsageError

CURRENT: contextvars.ContextVar[StepStreams | None] = contextvars.ContextVar(
    "parkway_step_streams", default=None
)


class _Committed:
    """What a write from a ``def`` step's thread returns: it has committed already."""

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # (a generator that yields nothing: awaiting it returns at once)


_COMMITTED = _Committed()


class StepStreams:
    """The stream writes of one attempt of a step."""

    def __init__(self, rt: Runtime, run_id: str, attempt: int) -> None:
        self.rt, self.run_id, self.attempt = rt, run_id, attempt
        self._loop = asyncio.get_running_loop()
        self._pending: list[tuple[str, bytes, asyncio.Future[None]]] = []
        self._drainer: asyncio.Task[None] | None = None
        self._written: list[asyncio.Future[None]] = []

    def write(self, key: str, value: Any) -> Awaitable[None]:
        """Append ``value`` to the run's stream ``key`` (see the module's docstring)."""
        core_streams.check_key(key)
        data = _json.dumps(value, f"stream {key!r} item")
        if self._on_loop():
            return self._queue(key, data)
        # A def step's thread: wait here for the commit, on the run's loop.
        done = asyncio.run_coroutine_threadsafe(self._committed(key, data), self._loop)
        done.result()
        return _COMMITTED

    def _on_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:  # (no loop runs in this thread: a def step's)
            return False

    async def _committed(self, key: str, data: bytes) -> None:
        await self._queue(key, data)

    def _queue(self, key: str, data: bytes) -> asyncio.Future[None]:
        future: asyncio.Future[None] = self._loop.create_future()
        self._pending.append((key, data, future))
        self._written.append(future)
        if self._drainer is None:
            self._drainer = self._loop.create_task(self._drain())
        return future

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    await core_streams.append(
                        self.rt, self.run_id, [(k, d) for k, d, _ in batch], self.attempt
                    )
                except Exception as exc:
                    for _, _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for _, _, future in batch:
                    if not future.done():
                        future.set_result(None)
        finally:
            self._drainer = None

    @property
    def used(self) -> bool:
        """Whether the attempt wrote anything (else :meth:`settle` has nothing to do)."""
        return bool(self._written) or self._drainer is not None

    async def settle(self) -> None:
        """Wait for every write of the attempt to commit; raise the first that failed
        (awaited by the step or not: either way the step has not done what it said).
        """
        while self._drainer is not None:
            await asyncio.shield(self._drainer)
        failed: BaseException | None = None
        for future in self._written:
            error = future.exception() if future.done() and not future.cancelled() else None
            if error is not None and failed is None:
                failed = error
        self._written.clear()
        if failed is not None:
            raise failed


def write_stream(key: str, value: Any) -> Awaitable[None]:
    """Append ``value`` to the current step's run's stream ``key``.

    Raises:
        WorkflowUsageError: Called outside a step.
    """
    streams = CURRENT.get()
    if streams is None:
        raise WorkflowUsageError(
            "step_context().write_stream may only be called while its step runs"
        )
    return streams.write(key, value)
