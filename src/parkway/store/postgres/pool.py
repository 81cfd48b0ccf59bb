"""The PostgreSQL store's connection pool: psycopg's, handing out the connection
returned last first (LIFO) instead of the one idle longest (FIFO).

A worker's few concurrent users (its claim loop, its commits, a sender, the
heartbeat) grow the pool to three or four connections; handed out in turn,
each transaction then lands on the server process that has been asleep the
longest. A server process that has slept costs more to wake than one that
has just run (its CPU may have gone idle, its caches cold): on the 2-core
virtual machine of ``docs/performance.md``, a round trip after a 2 ms pause
takes twice as long as one back to back. Reusing the most recent connection keeps one server process
hot: a wake in one process (publish → resumed, signal → resumed) took
1.37-1.42 instead of 1.63 ms and 1.18-1.25 instead of 1.40-1.47 ms, even and
odd wakes interleaved on the two orders.

The least recently used connections still sit at the far end, where the pool
closes the idle ones it does not need (``max_idle``), as with SQLAlchemy's
``pool_use_lifo``, PgBouncer's default and node-postgres's pool. psycopg_pool has no such option:
the pool's ready connections are a deque it takes from the left, so turning
the deque by one before each take hands out its right end, the connection
returned last. ``tests/store/test_postgres.py`` checks the order, so that a
psycopg_pool release that changes this fails a test rather than the speed.
"""

from __future__ import annotations

from collections import deque

import psycopg_pool

from parkway.store.postgres.wire import Conn


class LifoPool(psycopg_pool.AsyncConnectionPool[Conn]):
    """:class:`psycopg_pool.AsyncConnectionPool` that reuses the connection returned last."""

    async def _get_ready_connection(self, timeout: float | None) -> Conn | None:
        ready = getattr(self, "_pool", None)
        if isinstance(ready, deque) and len(ready) > 1:
            ready.rotate(1)  # the right end (returned last) to the left, taken next
        return await super()._get_ready_connection(timeout)
