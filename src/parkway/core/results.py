"""Callers awaiting runs' ends in this process, and the rows of runs that ended here.

A worker that ends a run (or holds it) announces it here, with the row as just
committed: ``result()`` callers in this process waiting for it wake at once and
take that row instead of reading it back. A caller that comes later reads the
run: the id may belong to another run by then (the one that ended deleted by
retention, a new one started under its id, in any process). Another process's ends are polled (see
:func:`parkway.core.runs.wait_result`).
"""

from __future__ import annotations

import asyncio
import collections

from parkway.store.base import ENDED, RunRecord

# How many rows of runs that ended here are kept for result().
FINAL_ROWS = 1024


class Results:
    """Waiters for runs' ends, and the latest ended rows (the oldest go first)."""

    def __init__(self) -> None:
        self._waiters: dict[str, list[asyncio.Event]] = {}
        # An ended run changes again only when retried (which forgets its row here),
        # so its committed row can be handed out.
        self._final: collections.OrderedDict[str, RunRecord] = collections.OrderedDict()

    def final(self, run_id: str) -> RunRecord | None:
        """The row of ``run_id`` as committed when it ended here, if kept."""
        return self._final.get(run_id)

    def notify(self, run_id: str, final: RunRecord | None = None) -> None:
        """The run ended (or is held): wake whoever awaits its result here.

        ``final``: its row as just committed, if known and ended.
        """
        if final is not None and final.status in ENDED:
            self._final[run_id] = final
            if len(self._final) > FINAL_ROWS:
                self._final.popitem(last=False)
        for event in self._waiters.get(run_id, ()):
            event.set()

    def forget(self, run_id: str) -> None:
        """The run goes on after all (``engine.retry``): its ended row is stale."""
        self._final.pop(run_id, None)

    async def wait(self, run_id: str, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a notification about ``run_id``;
        whether one came."""
        event = asyncio.Event()
        waiters = self._waiters.setdefault(run_id, [])
        waiters.append(event)
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            # A notification may have come while the timeout was being handled (both
            # due in one turn of a busy loop): it counts, or the caller would wait
            # a whole poll interval more for what it was told.
            return event.is_set()
        finally:
            waiters.remove(event)
            if not waiters:
                self._waiters.pop(run_id, None)
        return True
