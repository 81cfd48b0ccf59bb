"""Engine time. Real time by default; :class:`parkway.testing.ManualClock` in tests."""

from __future__ import annotations

import time
from typing import Protocol


class ClockUser(Protocol):
    """What a manual clock asks of an engine that uses it (see ``ManualClock.advance``)."""

    def poke(self) -> None:
        """Look for work now: time moved."""
        ...

    async def idle(self, timeout: float = 10) -> None:
        """Return once no task is due and no run is in flight."""
        ...

    async def next_due(self, *, after: float | None = None) -> float | None:
        """The earliest task due time, strictly after ``after`` when given."""
        ...


class Clock(Protocol):
    """What the engine asks of a clock: the time, and to be told who uses it."""

    def now(self) -> float:
        """Seconds since the epoch, in engine time."""
        ...

    def attach(self, user: ClockUser) -> None:
        """Called when an engine starts using this clock."""
        ...

    def detach(self, user: ClockUser) -> None:
        """Called when an engine stops using this clock."""
        ...

    @property
    def is_manual(self) -> bool:
        """Whether time only moves when told to (workers then never sleep on due times)."""
        ...


class SystemClock:
    """Wall-clock time."""

    is_manual = False

    def now(self) -> float:
        return time.time()

    def attach(self, user: ClockUser) -> None:
        pass

    def detach(self, user: ClockUser) -> None:
        pass
