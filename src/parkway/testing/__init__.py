"""Helpers for testing your own workflows: a clock you move by hand.

Example::

    clock = ManualClock()
    async with Engine("memory://", clock=clock) as engine:
        handle = await engine.start("reminder")
        await clock.advance("1d")      # the run's one-day sleep fires now
        assert await handle.result(timeout=5) == "reminded"
"""

from __future__ import annotations

from datetime import UTC, datetime

from parkway.clock import ClockUser
from parkway.durations import Duration, to_seconds

__all__ = ["ManualClock"]


class ManualClock:
    """Engine time that moves only when :meth:`advance` is awaited.

    Args:
        start: The initial time (an aware or naive-UTC ``datetime``); now if omitted.
    """

    is_manual = True

    def __init__(self, start: datetime | None = None) -> None:
        if start is None:
            self._now = datetime.now(UTC).timestamp()
        else:
            if start.tzinfo is None:
                start = start.replace(tzinfo=UTC)
            self._now = start.timestamp()
        self._engines: list[ClockUser] = []

    def now(self) -> float:
        """Current engine time, in seconds since the epoch."""
        return self._now

    def datetime(self) -> datetime:
        """Current engine time as an aware UTC ``datetime``."""
        return datetime.fromtimestamp(self._now, UTC)

    def attach(self, engine: ClockUser) -> None:
        if engine not in self._engines:
            self._engines.append(engine)

    def detach(self, engine: ClockUser) -> None:
        if engine in self._engines:
            self._engines.remove(engine)

    async def advance(self, duration: Duration, *, idle_timeout: float = 30.0) -> None:
        """Move time forward by ``duration``, stopping at every due time on the way.

        At each due time the runs woken there act (and may set new timers, which
        count from that moment) before time moves on.

        Args:
            duration: How far to move.
            idle_timeout: Wall-clock seconds to wait for the engines to settle at
                each stop.
        """
        target = self._now + to_seconds(duration)
        await self._settle(idle_timeout)
        while True:
            due = [await e.next_due(after=self._now) for e in self._engines]
            upcoming = [d for d in due if d is not None and d <= target]
            if not upcoming:
                break
            self._now = max(self._now, min(upcoming))
            await self._settle(idle_timeout)
        self._now = target
        await self._settle(idle_timeout)

    async def _settle(self, idle_timeout: float) -> None:
        for engine in list(self._engines):
            engine.poke()
        for engine in list(self._engines):
            await engine.idle(timeout=idle_timeout)
