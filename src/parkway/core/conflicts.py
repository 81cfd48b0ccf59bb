"""A client operation done again when the store rolled it back for a conflict.

On PostgreSQL two transactions that lock the same rows in opposite orders
deadlock, and the server rolls one back (as it does a serialization failure).
A worker's commit is retried by its committer; a client's transaction (a
start that locks a concurrency key's slot row, say) would hand the caller a
:class:`StoreError` that only says to try again. Nothing of a rolled-back
transaction was saved, so doing it again is what the caller would do.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from parkway.errors import StoreError

T = TypeVar("T")

# Attempts in all, and the first pause between two (doubled each time, jittered so
# that the two sides of a deadlock do not meet again).
ATTEMPTS = 4
FIRST_PAUSE = 0.002


async def again_on_conflict(operation: Callable[[], Awaitable[T]]) -> T:
    """``operation()``, done again (up to ATTEMPTS in all) while the store rolls it
    back for a conflict (:attr:`StoreError.conflict`); any other error at once."""
    pause = FIRST_PAUSE
    for _ in range(ATTEMPTS - 1):
        try:
            return await operation()
        except StoreError as exc:
            if not exc.conflict:
                raise
        await asyncio.sleep(pause * (0.5 + random.random()))
        pause *= 2
    return await operation()
