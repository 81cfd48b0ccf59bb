"""The store's part of a run's streams (a part of the :class:`parkway.store.base.Tx`
protocol): each stream, ``(run id, key)``, is a head row (its next offset, whether
it is closed) and its items, numbered from 0 in the order they were committed.

The head row is what serialises appends: an append takes it (PostgreSQL: a row
lock, in the ``UPDATE`` that moves it on; SQLite and memory: their one writer),
so two writers of one stream, a step's thread and the workflow's commit, say,
never give two items one offset, and a reader never sees offset ``n + 1`` before
``n`` (both commit in order under that lock).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from parkway.store.records import StreamRecord

# The notification channel (PostgreSQL) of commits that changed a run's streams.
STREAM_CHANNEL = "parkway_streams"


class Streams(Protocol):
    """A run's streams inside a transaction (``tx.streams``; see :mod:`parkway.core.streams`)."""

    async def append(
        self, run_id: str, key: str, items: Sequence[tuple[bytes, int | None]], at: float
    ) -> int | None:
        """Append ``items`` (each a JSON value and the attempt that wrote it, ``None``
        from the workflow's body) to the stream; the offset of the first, or ``None``
        when the stream is closed (nothing is written). Other processes reading the
        run's streams are told when the transaction commits."""
        ...

    async def close(self, run_id: str, key: str) -> None:
        """Close the stream (a stream never written is closed empty); idempotent."""
        ...

    async def end_run(self, run_id: str) -> None:
        """The run ended (or is held): tell the readers of its streams in other
        processes, at commit, if it has any (a run's end needs no statement more
        on a store with no other process).

        Its streams are not closed in the store: a reader takes the end of the run
        as their end while it lasts (see :func:`parkway.core.streams.read`), and a
        run retried after its failure writes to them again.
        """
        ...

    async def read(
        self, run_id: str, key: str, offset: int, limit: int
    ) -> tuple[list[StreamRecord], bool]:
        """Up to ``limit`` items from ``offset`` on, in order, and whether the stream
        was closed (``tx.streams.close``; then no item follows the last one read,
        if ``limit`` was not reached)."""
        ...
