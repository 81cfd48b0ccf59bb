"""A PostgreSQL transaction's run streams (``tx.streams``).

An append is one statement: the head row's ``UPDATE`` takes the stream's next
offsets and holds the row locked to commit, so appenders of one stream are
serialised and commit in offset order; the items go in with it, and a
``NOTIFY`` on ``parkway_streams`` (transactional: sent at commit) wakes the
readers listening in other processes (see :mod:`parkway.store.postgres.listener`).
"""

from __future__ import annotations

from collections.abc import Sequence

from parkway.store.postgres.statements import Q
from parkway.store.postgres.transport import Part
from parkway.store.records import StreamRecord
from parkway.store.sqltext import load_queries

S = load_queries(__package__, "streams.sql")


class PostgresStreams(Part):
    """Run streams."""

    def _note(self, run_id: str) -> str:
        return f"{self._t._store._token} {run_id}"

    async def append(
        self, run_id: str, key: str, items: Sequence[tuple[bytes, int | None]], at: float
    ) -> int | None:
        t = self._t
        params = dict(
            run=run_id,
            key=key,
            n=len(items),
            at=at,
            note=self._note(run_id),
            values=[value for value, _ in items],
            attempts=[attempt for _, attempt in items],
        )
        t._idempotent = False
        row = await t._one(S["append_stream"], params)
        return None if row is None else int(row[0])

    async def close(self, run_id: str, key: str) -> None:
        await self._t._write(S["close_stream"], (run_id, key, self._note(run_id)), idempotent=True)

    async def end_run(self, run_id: str) -> None:
        # In the run's last commit: a part of its lease-fenced update where it can,
        # so the commit of a run's end stays one statement.
        t = self._t
        params = (run_id, self._note(run_id))
        if not t._fuse("streams_ended", params, run_id):
            await t._write(Q["streams_ended"], params, idempotent=True)

    async def read(
        self, run_id: str, key: str, offset: int, limit: int
    ) -> tuple[list[StreamRecord], bool]:
        rows = await self._t._all(S["read_stream"], (offset, limit, run_id, key))
        items = [
            StreamRecord(int(o), bytes(v), a, float(t)) for _, o, v, a, t in rows if o is not None
        ]
        return items, bool(rows and rows[0][0])
