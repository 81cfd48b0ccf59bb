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
from collections.abc import Callable

from parkway.store.base import ENDED, RunRecord, Store

# How many rows of runs that ended here are kept for result().
FINAL_ROWS = 1024


class Results:
    """Waiters for runs' ends, and the latest ended rows (the oldest go first)."""

    def __init__(self) -> None:
        self._waiters: dict[str, list[asyncio.Event]] = {}
        # An ended run changes again only when retried (which forgets its row here),
        # so its committed row can be handed out.
        self._final: collections.OrderedDict[str, RunRecord] = collections.OrderedDict()
        # Told of every notification too (the stream readers: a run's end closes
        # its streams).
        self.listeners: list[Callable[[str], None]] = []

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
        for listener in self.listeners:
            listener(run_id)

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


class StreamReaders:
    """Readers following runs' streams in this process, and how they are woken.

    A commit of this process that changed a run's streams (a step's write, the
    workflow's commit, the run's end) wakes them here as it returns; another
    process's reaches them through the store (``Store.watch_streams``: PostgreSQL's
    ``LISTEN``, SQLite's wake-up socket), which starts listening with the first
    reader.
    """

    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._watching = False

    def watch(self, store: Store) -> None:
        """Hear other processes' stream commits from now on (once per process)."""
        if not self._watching:
            self._watching = True
            store.watch_streams(self.notify)

    def notify(self, run_id: str | None) -> None:
        """The run's streams changed (``None``: some run's, unknown which)."""
        if run_id is None:
            for waiters in self._waiters.values():
                for event in waiters:
                    event.set()
            return
        for event in self._waiters.get(run_id, ()):
            event.set()

    def register(self, run_id: str) -> asyncio.Event:
        """An event set whenever the run's streams change, until :meth:`unregister`."""
        event = asyncio.Event()
        self._waiters.setdefault(run_id, set()).add(event)
        return event

    def unregister(self, run_id: str, event: asyncio.Event) -> None:
        waiters = self._waiters.get(run_id)
        if waiters is not None:
            waiters.discard(event)
            if not waiters:
                del self._waiters[run_id]
