"""Callers awaiting a run's end in this process (``parkway.core.results``)."""

from __future__ import annotations

import asyncio
import time

from parkway.core.results import Results


async def test_a_notification_due_with_the_timeout_is_not_lost() -> None:
    # The loop is busy past both: the wait's timeout and then the notification
    # run in one turn, before the wait resumes. The wait was told; it must say
    # so, not time out (its caller would then wait a whole poll interval more:
    # ~10 ms a run in the gather benchmark).
    results = Results()
    loop = asyncio.get_running_loop()
    loop.call_later(0.01, results.notify, "r1")
    loop.call_soon(time.sleep, 0.03)
    assert await results.wait("r1", 0.005) is True


async def test_a_wait_without_a_notification_times_out() -> None:
    results = Results()
    results.notify("someone else")
    assert await results.wait("r1", 0.01) is False
