"""The deadlines of the step attempts of one worker, on one timer of its loop.

A ``timeout=`` on every step must cost next to nothing: a timer of the loop per
attempt (``asyncio.timeout``, ``loop.call_later``) costs a ``TimerHandle`` and a
push onto the loop's heap, whose entries are compared by Python methods, then its
cancellation. Here an attempt's deadline is a tuple pushed onto a heap of our
own (compared in C), its cancellation is a flag, and one timer of the loop is
armed for the earliest deadline only: most attempts end long before theirs, and
attempts given the same timeout come in deadline order, so the timer is rarely
armed again. When it fires, the deadlines that passed are fired (their callbacks
run), the cancelled ones dropped, and the timer armed for the next.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

# An armed deadline: its callback in a box (``[None]`` once cancelled or fired).
Box = list[Callable[[], None] | None]


class Deadlines:
    """Callbacks due at deadlines (loop time), cancellable, on one loop timer."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Box]] = []
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self._live = 0

    def add(self, seconds: float, fire: Callable[[], None]) -> Box:
        """Call ``fire()`` in ``seconds`` unless :meth:`cancel` is given the box first."""
        loop = asyncio.get_running_loop()
        at = loop.time() + seconds
        box: Box = [fire]
        heapq.heappush(self._heap, (at, next(self._order), box))
        self._live += 1
        if at < self._timer_at:
            self._arm(loop, at)
        elif len(self._heap) > 2 * self._live + 1024:  # (mostly cancelled: compact)
            self._heap = [e for e in self._heap if e[2][0] is not None]
            heapq.heapify(self._heap)
        return box

    def cancel(self, box: Box) -> None:
        """Forget the deadline of ``box`` (its attempt ended in time)."""
        if box[0] is not None:
            box[0] = None
            self._live -= 1

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = loop.call_at(at, self._fire), at

    def _fire(self) -> None:
        self._timer, self._timer_at = None, float("inf")
        loop = asyncio.get_running_loop()
        now, heap = loop.time(), self._heap
        while heap and (heap[0][2][0] is None or heap[0][0] <= now):
            _, _, box = heapq.heappop(heap)
            fire = box[0]
            if fire is not None:
                box[0] = None
                self._live -= 1
                fire()
        if heap:
            self._arm(loop, heap[0][0])
