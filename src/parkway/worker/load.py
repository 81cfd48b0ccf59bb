"""Whether the event loop is busy: the share of the last moments its thread spent
on the CPU.

A message that comes alone costs the worker more than one in a flood does on
SQLite: its delivery leases its run, the run is loaded, advanced and committed
by itself, where a flood's runs are claimed, loaded and committed a hundred at
a time and share the statements, the pages and the loop's turns. So a load that
comes paced can keep a loop busy at a fraction of the rate a flood runs at, and
past that it queues until a backlog forms that batches again, with waits far
longer than a run's own work (see docs/performance.md). While the loop is
busy the worker therefore batches on purpose (see ``Worker.reserve`` and the
claim loop); when it is not, every run goes at once, as before. A loop that is
saturated, nearly all of its time on the CPU, is falling behind: its worker
then makes the batches larger still (a longer interval between claims), which
lowers what each run costs until the loop has room again.

Measured by ``time.thread_time`` (the loop's thread only: sync steps' threads do
not count), over windows of WINDOW seconds, with two thresholds so that a load
near one of them does not flip the worker between the two ways at every window.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# The loop counts as busy from a window it spent more than BUSY_ABOVE of on the
# CPU, and again as not from one under IDLE_BELOW.
BUSY_ABOVE = 0.75
IDLE_BELOW = 0.5
# Saturated from SATURATED_WINDOWS windows in a row over SATURATED_ABOVE (a
# moment's spike under a load the loop keeps up with is not it), and again as
# merely busy from one under UNSATURATED_BELOW: a saturated loop is falling
# behind, and its worker makes its batches larger (SATURATED_FACTOR times the
# interval) until the loop has room again. The lower threshold is under what a
# loop batching that way keeps busy at the load that saturated it, so that it
# does not flip back at once; and over what the short interval keeps a lighter
# load at, so that such a load never gets the longer one.
SATURATED_ABOVE = 0.95
UNSATURATED_BELOW = 0.85
SATURATED_WINDOWS = 3
SATURATED_FACTOR = 2.5
WINDOW = 0.05


class LoopLoad:
    """Whether the event loop's thread has been busy; ask it from that thread."""

    def __init__(
        self,
        wall: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.thread_time,
    ) -> None:
        self._wall, self._cpu_time = wall, cpu  # (other clocks in tests)
        self._since = wall()
        self._cpu = cpu()
        self._busy = False
        self._saturated = False
        self._over = 0  # windows in a row over SATURATED_ABOVE
        self.switches = 0  # times it changed its mind, for tests and benchmarks

    def busy(self) -> bool:
        """Whether the last full window was busy (a window lasts until asked after
        WINDOW seconds: one ending after a long quiet reads as quiet)."""
        now = self._wall()
        if now - self._since >= WINDOW:
            cpu = self._cpu_time()
            share = (cpu - self._cpu) / (now - self._since)
            busy = share > (IDLE_BELOW if self._busy else BUSY_ABOVE)
            if busy != self._busy:
                self._busy = busy
                self.switches += 1
            if self._saturated:
                self._saturated = share > UNSATURATED_BELOW
                self._over = 0
            else:
                self._over = self._over + 1 if share > SATURATED_ABOVE else 0
                self._saturated = self._over >= SATURATED_WINDOWS
            self._since, self._cpu = now, cpu
        return self._busy

    def saturated(self) -> bool:
        """Whether the loop was saturated in the last full window (read with
        :meth:`busy`, which moves the window)."""
        return self._saturated
