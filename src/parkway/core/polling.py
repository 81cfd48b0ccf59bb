"""How often a caller reads again for what another process commits.

A caller waiting on a run (``result()``, an update's answer, a value) is woken at
once by a commit of its own process (see :mod:`parkway.core.results`); another
process's commit it learns of only by reading again. The first reads come soon,
because most answers do (a worker in another process usually answers an update
within a few milliseconds), and the interval then grows, so a caller waiting an
hour reads 20 times a second, not a thousand: 0.5 ms, growing by half each
time, to 50 ms. A store nobody else writes to (``memory://``)
announces every commit, so its callers read again only every 50 ms, as a net.
"""

from __future__ import annotations

from parkway.store.base import Store
from parkway.store.vocabulary import Capability

FIRST = 0.0005
GROWTH = 1.5
LAST = 0.05


class Polls:
    """The intervals between one caller's reads (seconds)."""

    def __init__(self, store: Store) -> None:
        self._next = FIRST if Capability.SHARED in store.capabilities else LAST

    def next(self, remaining: float | None = None) -> float:
        """How long to wait before the next read (at most ``remaining``)."""
        wait = self._next
        self._next = min(wait * GROWTH, LAST)
        return wait if remaining is None else min(wait, remaining)
