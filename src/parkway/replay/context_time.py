"""The ``ctx``'s engine time: sleeps, and the values the same on every replay."""

from __future__ import annotations

import random as _random
import uuid as _uuid
from datetime import UTC, datetime

from parkway.durations import Duration, to_seconds
from parkway.errors import InvalidArgumentError, shown
from parkway.replay.commands import SleepCmd
from parkway.replay.context_base import ContextBase


class Time(ContextBase):
    """``ctx.sleep``, ``ctx.sleep_until``, ``ctx.now``, ``ctx.uuid`` and ``ctx.random``."""

    async def sleep(self, duration: Duration) -> None:
        """Park for ``duration`` (engine time); survives restarts."""
        await SleepCmd(seconds=to_seconds(duration, "ctx.sleep duration"))

    async def sleep_until(self, when: datetime) -> None:
        """Park until ``when`` (a naive datetime is taken as UTC)."""
        if not isinstance(when, datetime):
            raise InvalidArgumentError(f"ctx.sleep_until needs a datetime, got {shown(when)}")
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        await SleepCmd(until=when.timestamp())

    def now(self) -> datetime:
        """The current engine time as an aware UTC ``datetime``, the same on every replay."""
        return datetime.fromtimestamp(self._sides.side("now", self._sides.clock_now), UTC)

    def uuid(self) -> _uuid.UUID:
        """A random UUID, the same on every replay."""
        return _uuid.UUID(self._sides.side("uuid", lambda: str(_uuid.uuid4())))

    def random(self) -> float:
        """A random float in [0, 1), the same on every replay."""
        return float(self._sides.side("random", _random.random))
