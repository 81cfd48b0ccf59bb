"""Step functions the acceptance tests share."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


def blocking_step(result: str) -> tuple[asyncio.Event, asyncio.Event, Callable[[], Awaitable[str]]]:
    """A step that sets ``entered`` and then waits for ``release`` before returning
    ``result``: a test holds a run inside a step with it. Returns (entered,
    release, step)."""
    entered, release = asyncio.Event(), asyncio.Event()

    async def step() -> str:
        entered.set()
        await release.wait()
        return result

    return entered, release, step
