"""WAL checkpoints of a SQLite store, off the commits' path.

SQLite's default has the commit that fills the WAL past 1,000 pages copy it
back into the database file, on that commit's path: 3-4 ms on the event loop
every ~50 wakes. Here a thread of the store's checkpoints instead (PASSIVE: it
never blocks a writer) every CHECKPOINT_EVERY seconds while commits come; a
commit still checkpoints itself past FOREGROUND_CHECKPOINT_PAGES, should that
thread fall behind.

A PASSIVE checkpoint copies the frames committed before it started; under a
steady load more are committed while it runs, so it never finds the WAL fully
copied, and SQLite starts the WAL over only when it is. The WAL then grew to
FOREGROUND_CHECKPOINT_PAGES (82 MB) and the commit that got there copied the
rest on the event loop: 5-15 ms with every task of the process stopped, every
~1.5 s under an open-loop load of 1,300 messages a second. So once the WAL holds
RESTART_FRAMES, the thread checkpoints once more with this process's writes
held back (``writable`` cleared, which the store's write transactions wait for,
and the one under way finished): that pass copies only what the previous one
left (~2 ms of work), completes, and the next commit starts the WAL over.
Writers wait meanwhile, but the event loop is free for everything else, reads
included. (Another process committing in between can still keep it from
completing: its commits then meet the foreground threshold, as before.)

Not the store's lock held across the pass: an ``asyncio.Lock`` with a waiter
queues every later acquirer behind it, one loop turn each, and under load that
queue never drained again (a measured tenfold p99). Nor that last pass on the
event loop, on the store's connection: it stops every task for its ~2 ms, and
in paired runs the messages' p99 and p999 were worse than held-back writes'.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sqlite3

log = logging.getLogger("parkway.store.sqlite")

CHECKPOINT_EVERY = 0.1
FOREGROUND_CHECKPOINT_PAGES = 20_000
# Frames in the WAL (~16 MB of 4 KB pages) past which a checkpoint of the thread is
# followed by one with this process's writes held back, which completes it.
RESTART_FRAMES = 4_000


class Checkpoints:
    """Background checkpoints of the WAL of the database at ``path``; ``lock``: the
    lock the store's transactions hold."""

    def __init__(self, path: str, lock: asyncio.Lock) -> None:
        self.path = path
        self._lock = lock
        # Set but while a checkpoint completes the WAL: the store's write
        # transactions wait for it before they take the lock.
        self.writable = asyncio.Event()
        self.writable.set()
        self.restarts = 0  # checkpoints that completed with writes held back, for tests
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
                frames = await loop.run_in_executor(self._thread, self._checkpoint)
                if frames >= RESTART_FRAMES:
                    self.writable.clear()
                    try:
                        # Writers that got past ``writable`` queue on the lock ahead
                        # of this: once it is had, none is left.
                        async with self._lock:
                            pass
                        await loop.run_in_executor(self._thread, self._checkpoint)
                    finally:
                        self.writable.set()
                    self.restarts += 1
            except sqlite3.Error as exc:  # busy, say: the commits' own checkpoint is the net
                log.debug("background checkpoint of %s failed: %s", self.path, exc)

    def _checkpoint(self) -> int:
        """On the checkpoint thread, with a connection of its own: a PASSIVE checkpoint.
        Returns how many frames the WAL holds (copied or not)."""
        if self._conn is None:
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA busy_timeout = 1000")
        _, frames, _ = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return max(0, int(frames))  # (-1 when the database is not in WAL mode)

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
