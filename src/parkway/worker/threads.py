"""The threads sync steps run in: a pool made for many short calls from one loop.

A ``def`` step may block (an HTTP client, file I/O), so it runs off the event
loop. ``loop.run_in_executor`` costs about three times what the step itself
usually does: a ``concurrent.futures.Future`` chained to an asyncio one, and
one wake-up of the loop (a write to its self-pipe) per step. Here a step's
result goes straight to an asyncio future, and the results that finish while
the loop is busy are handed over together, by one wake-up: the loop is woken
once per batch of results, not once per step (see docs/performance.md).

Threads start as they are needed, up to ``size``, and are not daemons: a step
still running at shutdown is seen (and waited for, or abandoned by the command
line) as before. A call given up on (its step timed out) leaves its thread
running it, uncounted: another thread may start in its place, and once the
late call returns the pool shrinks back to ``size``.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

# A call: its future, the caller's context, the function and its arguments.
_Call = tuple[
    asyncio.Future[Any], contextvars.Context, Callable[..., Any], tuple[Any, ...], dict[str, Any]
]
_STOP = None

# Every pool of this process, told to stop when the interpreter exits: its threads
# are not daemons (a step running at shutdown is waited for), so an idle one left by
# an engine that was never closed would otherwise keep the process from exiting.
_POOLS: weakref.WeakSet[StepThreads] = weakref.WeakSet()


def _stop_all() -> None:
    for pool in list(_POOLS):
        pool.shutdown()


class Carried(Exception):
    """What a call raised that an asyncio future cannot pass on as it is (see
    :meth:`StepThreads.run`): ``error``."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__} raised in a step's thread")
        self.error = error


def _passable(error: BaseException) -> BaseException:
    """``error``, or a :class:`Carried` of it if asyncio would mishandle it: a task
    woken by a future's ``GeneratorExit`` throws it into its coroutine, which closes
    every coroutine that coroutine awaits (no ``except`` on the way sees it); a
    future refuses ``StopIteration``; ``SystemExit`` and ``KeyboardInterrupt``
    that get past the awaiting coroutine stop the event loop."""
    if isinstance(error, Exception) and not isinstance(error, StopIteration):
        return error
    return Carried(error)


class StepThreads:
    """Up to ``size`` threads running sync calls for the loop that submits them."""

    def __init__(self, size: int, *, name: str = "parkway-step") -> None:
        self.size, self.name = size, name
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._results: collections.deque[tuple[asyncio.Future[Any], Any, BaseException | None]]
        self._results = collections.deque()
        self._threads: list[threading.Thread] = []
        self._started = 0  # threads started in all (their names)
        self._busy = 0  # calls submitted, their results not handed over yet (loop side)
        # Calls given up on (their step timed out) whose thread still runs them: those
        # threads are not counted against ``size`` (loop side).
        self._abandoned: set[asyncio.Future[Any]] = set()
        self._handing = False  # a hand-over is scheduled on the loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        _POOLS.add(self)

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        """Call ``fn(*args, **kwargs)`` in a thread, in a copy of the caller's context
        (as ``asyncio.to_thread``); its result or exception, in a future of the loop.

        An exception that is no ``Exception`` (``SystemExit``...) or a ``StopIteration``
        comes as a :class:`Carried` of it.
        """
        if self._closed:
            raise RuntimeError("the step threads are shut down")
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._busy += 1
        serving = len(self._threads) - len(self._abandoned)
        if self._busy > serving and serving < self.size:
            self._start_thread()
        self._calls.put((future, contextvars.copy_context(), fn, args, kwargs))
        return future

    def abandon(self, future: asyncio.Future[Any], error: BaseException) -> None:
        """Give up on the call of ``future`` (from :meth:`run`), which fails with
        ``error`` now: its thread cannot be stopped, so it no longer counts against
        ``size`` (another may start in its place) and what it returns is dropped."""
        if future.done() or future in self._abandoned:
            return
        self._abandoned.add(future)
        self._busy -= 1
        future.set_exception(error)

    def shutdown(self) -> None:
        """Let the threads go once their current call, if any, returns (not waited for)."""
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._calls.put(_STOP)

    # -- the threads' side -------------------------------------------------------------------

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._serve, name=f"{self.name}-{self._started}")
        self._started += 1
        self._threads.append(thread)
        thread.start()

    def _serve(self) -> None:
        calls, results = self._calls, self._results
        while True:
            call = calls.get()
            if call is None:
                self._threads.remove(threading.current_thread())
                return
            future, context, fn, args, kwargs = call
            try:
                outcome: tuple[Any, BaseException | None] = (context.run(fn, *args, **kwargs), None)
            except BaseException as exc:  # (handed to the awaiting step, as an executor does)
                outcome = (None, exc)
            del call, fn, args, kwargs, context  # (nothing of the call kept while idle)
            results.append((future, *outcome))
            # One wake-up for the results that finish before the loop takes them: the
            # flag is set back (on the loop) before it takes them, so none is missed.
            if not self._handing:
                self._handing = True
                assert self._loop is not None
                try:
                    self._loop.call_soon_threadsafe(self._hand_over)
                except RuntimeError:  # the loop is closed: nobody awaits the result
                    return

    # -- the loop's side ---------------------------------------------------------------------

    def _hand_over(self) -> None:
        self._handing = False
        results = self._results
        while results:
            future, value, error = results.popleft()
            if future in self._abandoned:  # (late: its step timed out)
                self._abandoned.discard(future)
                if len(self._threads) - len(self._abandoned) > self.size:
                    self._calls.put(_STOP)  # one thread too many now: an idle one ends
                continue
            self._busy -= 1
            if future.done():
                continue
            if error is None:
                future.set_result(value)
            else:
                future.set_exception(_passable(error))


# Run before the interpreter joins its non-daemon threads (as concurrent.futures'
# pools are stopped), unlike atexit, which runs after.
_register = getattr(threading, "_register_atexit", None)
if _register is not None:
    _register(_stop_all)
