"""WAL checkpoints of a SQLite store, off the commits' path.

SQLite's default has the commit that fills the WAL past 1,000 pages copy it
back into the database file, on that commit's path: 3-4 ms on the event loop
every ~50 wakes. Here a thread of the store's checkpoints instead (PASSIVE: it
never blocks a writer) every CHECKPOINT_EVERY seconds while commits come; a
commit still checkpoints itself past FOREGROUND_CHECKPOINT_PAGES, should that
thread fall behind.

Apart from the store because it is a thread, a connection and a task of its
own, with nothing to do with what the store's transactions read or write.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sqlite3

log = logging.getLogger("parkway.store.sqlite")

CHECKPOINT_EVERY = 0.1
FOREGROUND_CHECKPOINT_PAGES = 20_000


class Checkpoints:
    """Background checkpoints of the WAL of the database at ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        # Commits so far and at the last checkpoint, the task that schedules the
        # checkpoints and the thread (and its connection) that runs them.
        self._commits = self._checkpointed = 0
        self._task: asyncio.Task[None] | None = None
        self._thread: concurrent.futures.ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._open = False

    def start(self) -> None:
        """The store is open: checkpoint while commits come."""
        self._open = True

    def committed(self) -> None:
        """A commit wrote to the WAL: checkpoint it soon (unless that is planned)."""
        self._commits += 1
        if self._open and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._checkpoint_while_busy())

    async def close(self) -> None:
        self._open = False
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._close_conn)
            self._thread.shutdown()
            self._thread = None

    async def _checkpoint_while_busy(self) -> None:
        """Checkpoint the WAL in the background while commits come (see CHECKPOINT_EVERY)."""
        loop = asyncio.get_running_loop()
        while self._open:
            await asyncio.sleep(CHECKPOINT_EVERY)
            if self._commits == self._checkpointed:
                return  # quiet: the next commit starts this again
            self._checkpointed = self._commits
            if self._thread is None:
                self._thread = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="parkway-checkpoint"
                )
            try:
                await loop.run_in_executor(self._thread, self._checkpoint)
            except sqlite3.Error as exc:  # busy, say: the commits' own checkpoint is the net
                log.debug("background checkpoint of %s failed: %s", self.path, exc)

    def _checkpoint(self) -> None:
        # On the checkpoint thread, with a connection of its own.
        if self._conn is None:
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA busy_timeout = 1000")
        self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
