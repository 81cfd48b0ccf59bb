"""A SQLite transaction's run streams (``tx.streams``).

Every write transaction is ``BEGIN IMMEDIATE``: an append reads and moves the
stream's head under the one writer, so no other process appends to it between.
Other processes' readers are told at commit by a wake-up datagram (see
:mod:`parkway.store.sqlite.wakeup`); this process's by the core.
"""

from __future__ import annotations

from collections.abc import Sequence

from parkway.store.records import StreamRecord
from parkway.store.sqlite.transport import Part
from parkway.store.sqltext import load_queries

S = load_queries(__package__, "streams.sql")


class SQLiteStreams(Part):
    """Run streams over the transaction's connection; the runs whose streams changed
    are noted (``Transport.streamed``): other processes are told at commit."""

    async def append(
        self, run_id: str, key: str, items: Sequence[tuple[bytes, int | None]], at: float
    ) -> int | None:
        row = self._c.execute(S["take_offsets"], (run_id, key, len(items))).fetchone()
        if row is None:
            return None
        first = int(row[0])
        self._c.executemany(
            S["put_item"],
            [(run_id, key, first + i, v, attempt, at) for i, (v, attempt) in enumerate(items)],
        )
        self._t.streamed.add(run_id)
        return first

    async def close(self, run_id: str, key: str) -> None:
        self._c.execute(S["close_stream"], (run_id, key))
        self._t.streamed.add(run_id)

    async def end_run(self, run_id: str) -> None:
        if self._c.execute(S["has_streams"], (run_id,)).fetchone() is not None:
            self._t.streamed.add(run_id)

    async def read(
        self, run_id: str, key: str, offset: int, limit: int
    ) -> tuple[list[StreamRecord], bool]:
        rows = self._c.execute(S["read_items"], (run_id, key, offset, limit)).fetchall()
        closed = self._c.execute(S["stream_closed"], (run_id, key)).fetchone()
        return [StreamRecord(*row) for row in rows], bool(closed and closed[0])
