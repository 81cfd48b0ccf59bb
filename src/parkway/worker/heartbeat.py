"""Heartbeats of one attempt of a step, coalesced: at most one commit a second.

``step_context().heartbeat(details)`` may be called in a tight loop (each row
of a file, each page of an export): every call only keeps a reference to the
newest details. The first call of an attempt starts a commit at once (it
runs as soon as the step lets the loop run); calls that come before it runs,
while it is in flight or within :data:`HEARTBEAT_INTERVAL` of it join the next
commit, which writes the newest details only. When an attempt fails, details
not yet written are written before its failure is journaled, so the next
attempt (after a failure, a timeout, a crash) finds the latest; when it
succeeds, a commit not begun yet is dropped, its details superseded by the
step's result. A call costs a few hundred nanoseconds; the details are encoded
only when written.

The details are kept in the step's journal entry (pending while the step
runs), written under the run's lease like every other commit of the run: a
replay after a crash finds them where it finds the step.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from parkway import _json

log = logging.getLogger("parkway.worker")

# Seconds between two heartbeat commits of one attempt, at least.
HEARTBEAT_INTERVAL = 1.0

_NOTHING: Any = object()  # (no details waiting: None is a detail a step may give)


class Heartbeats:
    """The heartbeats of one attempt; ``write(data)`` commits the encoded details."""

    def __init__(
        self,
        write: Callable[[bytes], Awaitable[None]],
        *,
        interval: float = HEARTBEAT_INTERVAL,
        what: str = "step",
    ) -> None:
        self._write, self._interval, self._what = write, interval, what
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._lock = threading.Lock()
        self._details: Any = _NOTHING  # the newest details, not written yet
        self._due: asyncio.Future[None] | None = None  # the commit they go in (loop)
        self._due_threads: concurrent.futures.Future[None] | None = None  # (threads)
        self._scheduled = False  # a commit is timed or under way
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._last = float("-inf")  # loop time of the last commit's start
        self._closed = False
        self._writing = False  # the commit under way has begun (its task runs)
        self._beaten = False  # beat() was called (most attempts never call it)
        self.written: bytes | None = None  # the newest details committed

    def beat(self, details: Any) -> Awaitable[None] | concurrent.futures.Future[None]:
        """Keep ``details`` as the newest; the commit they go in (awaitable on the
        loop, a ``concurrent.futures.Future`` in a step's thread)."""
        coming = self._due
        on_loop = threading.get_ident() == self._loop_thread
        if coming is not None and on_loop:
            # (The usual call: a commit is coming that these details join. Only the
            # loop takes them, in _commit, and this is the loop: no lock needed.)
            self._details = details
            return coming
        poke = False
        with self._lock:
            if self._closed:  # (an abandoned attempt's thread, still beating)
                return _settled(on_loop)
            self._beaten = True
            self._details = details
            due: Any
            if on_loop:
                due = self._due
                if due is None:
                    due = self._due = self._loop.create_future()
            else:
                due = self._due_threads
                if due is None:
                    due = self._due_threads = concurrent.futures.Future()
            if not self._scheduled:
                self._scheduled = poke = True
        if poke:
            if on_loop:
                self._schedule()
            else:
                self._loop.call_soon_threadsafe(self._schedule)
        return due  # type: ignore[no-any-return]

    def close_unused(self) -> bool:
        """Close the attempt's heartbeats if it never gave any: whether it did (then
        there is nothing to write, and :meth:`close` need not be awaited)."""
        with self._lock:
            if self._beaten:
                return False
            self._closed = True
            return True

    async def close(self, *, succeeded: bool = False) -> None:
        """The attempt ended: write what is left now (unless it ``succeeded``: its
        result supersedes the details), and take no more."""
        with self._lock:
            self._closed = True
        if succeeded and not self._writing:
            if self._timer is not None:
                self._timer.cancel()
            if self._task is not None:
                self._task.cancel()
            with self._lock:
                due, due_threads, self._details = self._due, self._due_threads, _NOTHING
            _settle(due, due_threads, None)
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._task = self._loop.create_task(self._commit())
        if self._task is not None:
            await asyncio.shield(self._task)
        if self._details is not _NOTHING:  # (came while the last commit was under way)
            await self._commit()

    # -- the loop's side ---------------------------------------------------------------------

    def _schedule(self) -> None:
        if self._closed:  # (asked from a thread just before the attempt ended)
            return
        delay = self._last + self._interval - self._loop.time()
        if delay > 0:
            self._timer = self._loop.call_later(delay, self._start)
        else:
            self._start()

    def _start(self) -> None:
        self._timer = None
        self._task = self._loop.create_task(self._commit())

    async def _commit(self) -> None:
        self._writing = True
        with self._lock:
            details, self._details = self._details, _NOTHING
            due, due_threads = self._due, self._due_threads
            self._due = self._due_threads = None
        error: BaseException | None = None
        if details is not _NOTHING:
            self._last = self._loop.time()
            try:
                data = _json.dumps(details, f"the heartbeat details of {self._what}")
                await self._write(data)
                self.written = data
            except Exception as exc:
                log.warning("%s: a heartbeat was not recorded: %s", self._what, exc)
                error = exc
        _settle(due, due_threads, error)
        self._task, self._writing = None, False
        with self._lock:
            again = self._details is not _NOTHING and not self._closed
            self._scheduled = again
        if again:
            self._schedule()


def _settle(
    due: asyncio.Future[None] | None,
    due_threads: concurrent.futures.Future[None] | None,
    error: BaseException | None,
) -> None:
    if due is not None and not due.done():
        if error is None:
            due.set_result(None)
        else:
            due.set_exception(error)
            due.add_done_callback(_seen)
    if due_threads is not None:
        if error is None:
            due_threads.set_result(None)
        else:
            due_threads.set_exception(error)


def _seen(future: asyncio.Future[None]) -> None:
    # (A step need not await its heartbeat: the failure is logged, not left unretrieved.)
    future.exception()


def _settled(on_loop: bool) -> Awaitable[None] | concurrent.futures.Future[None]:
    if on_loop:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done
    finished: concurrent.futures.Future[None] = concurrent.futures.Future()
    finished.set_result(None)
    return finished
