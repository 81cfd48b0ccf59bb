"""Engine time. Real time by default; :class:`parkway.testing.ManualClock` in tests."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from parkway.engine import Engine


class Clock(Protocol):
    """What the engine asks of a clock: the time, and to be told who uses it."""

    def now(self) -> float:
        """Seconds since the epoch, in engine time."""
        ...

    def attach(self, engine: Engine) -> None:
        """Called when an engine starts using this clock."""
        ...

    def detach(self, engine: Engine) -> None:
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

    def attach(self, engine: Engine) -> None:
        pass

    def detach(self, engine: Engine) -> None:
        pass
