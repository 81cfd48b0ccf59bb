"""Helpers for testing your own workflows: a clock you move by hand, and a check of
your code against a run exported from production.

Example::

    clock = ManualClock()
    async with Engine("memory://", clock=clock) as engine:
        handle = await engine.start("reminder")
        await clock.advance("1d")      # the run's one-day sleep fires now
        assert await handle.result(timeout=5) == "reminded"

    # A run exported with `parkway export RUN > run.json`, replayed by the code:
    check_replay(engine, json.loads(Path("run.json").read_text()))
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from parkway.clock import ClockUser
from parkway.core import repairs
from parkway.durations import Duration, to_seconds

if TYPE_CHECKING:
    from parkway.engine import Engine

__all__ = ["ManualClock", "check_replay"]


class Replayed:
    """What :func:`check_replay` returns when the run replays: nothing to look at, but
    it may be awaited (``await check_replay(...)`` reads as well in an async test)."""

    def __await__(self) -> Generator[Any, None, None]:
        return None
        yield  # (a generator: awaiting it finishes at once)


def check_replay(engine: Engine, exported: Mapping[str, Any]) -> Replayed:
    """Replay one exported run (``engine.export_run``, ``parkway export RUN``) against
    the code ``engine`` registers: its workflow at the run's version (else the latest
    one). Nothing runs but the workflow's own code up to the end of the journal;
    the engine need not be open, and no store is used.

    Raises:
        NonDeterminismError: The code no longer replays the run's journal (its
            ``position``, ``expected`` and ``got`` say where and how).
        UnknownWorkflowError: The engine does not register the run's workflow.
        InvalidArgumentError: ``exported`` is not an exported run.
    """
    run, journal = repairs.imported(exported)
    rt = engine._rt  # (the engine's runtime: its registry, clock and settings)
    wf = rt.registry.get(run.workflow, run.version) or rt.registry.latest(run.workflow)
    held = repairs.divergence(rt, wf, run, journal)
    if held is not None:
        raise held
    return Replayed()


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
