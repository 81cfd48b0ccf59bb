"""The PostgreSQL store's LISTEN connection: how a worker hears of tasks other
processes committed.

Apart from the store because it is a connection and a task of its own, outside
the pool, with its own life: started on first use (client-only engines never
listen, and keep one connection fewer), reconnecting by itself, and then
reporting a change, since notifications sent meanwhile are lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg

from parkway.store.postgres.failures import first_line

log = logging.getLogger("parkway.store.postgres")

CHANNEL = "parkway_tasks"
# Commits that changed a run's streams: "<store token> <run id>" (see streams.py).
STREAMS = "parkway_streams"
# The listener probes its connection this often when no notification came.
LISTEN_PROBE = 30.0


class Listener:
    """Notifications of other processes' commits, reported to the watchers.

    A notification's payload is ``"<store token> <earliest due time>"``; the
    ones that carry this store's own token are dropped: its own commits are
    reported at commit (:meth:`report`, from the store's ``transaction()``).
    """

    def __init__(self, conninfo: str, *, display: str, token: str) -> None:
        self.conninfo = conninfo
        self.display = display
        self.token = token
        self.watchers: list[Callable[[float | None], None]] = []
        # Stream readers of this process, told of other processes' stream commits.
        self.stream_watchers: list[Callable[[str | None], None]] = []
        self._task: asyncio.Task[None] | None = None
        self._changed = False

    def start(self) -> None:
        """Listen from now on (a no-op while listening)."""
        if self._task is None:
            self._task = asyncio.create_task(self._listen(), name="parkway-listener")

    async def stop(self) -> None:
        """Stop listening and close the connection (the store is closing)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def changed(self) -> bool:
        """Whether another process committed tasks since the last call (the first
        call starts listening, and says so)."""
        if self._task is None:
            self.start()
            return True
        changed, self._changed = self._changed, False
        return changed

    def report(self, due: float | None) -> None:
        """Tell the watchers of tasks due from ``due`` on (None: unknown)."""
        for callback in self.watchers:
            callback(due)

    def _change(self, due: float | None = None) -> None:
        """Another process committed tasks (the earliest due at ``due``, if known)."""
        self._changed = True
        self.report(due)

    def _streamed(self, run_id: str | None) -> None:
        """Another process changed the run's streams (``None``: unknown whose)."""
        for callback in self.stream_watchers:
            callback(run_id)

    async def _listen(self) -> None:
        """Hold a LISTEN connection; set the changed flag on every foreign notification."""
        delay = 0.1
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    await conn.execute(f"LISTEN {STREAMS}")
                    # Whatever was committed while nobody listened: look once.
                    self._change()
                    self._streamed(None)
                    delay = 0.1
                    while True:
                        async for note in conn.notifies(timeout=LISTEN_PROBE):
                            token, _, rest = note.payload.partition(" ")
                            if token == self.token:
                                continue
                            if note.channel == STREAMS:
                                self._streamed(rest)
                            else:
                                self._change(_due(rest))
                        # Quiet for a while: a dead peer only shows when we talk to it.
                        await conn.execute("SELECT 1")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning(
                    "notification connection to %s lost (%s); reconnecting in %.1fs",
                    self.display,
                    first_line(exc),
                    delay,
                )
                self._change()
                self._streamed(None)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


def _due(text: str) -> float | None:
    """The due time a notification announces (``None``: unknown, as from an older
    parkway, which sent only its token)."""
    try:
        return float(text)
    except ValueError:
        return None
