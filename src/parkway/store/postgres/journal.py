"""A PostgreSQL transaction's journals (``tx.journal``): what a worker's commit
writes (most of it fused into the commit's fenced update), and its steps' failed
attempts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from parkway.store.postgres.statements import Q
from parkway.store.postgres.transport import Part
from parkway.store.records import AttemptRecord, JournalEntry


class PostgresJournal(Part):
    """A run's journal and its steps' failed attempts."""

    async def read(self, run_id: str) -> list[JournalEntry]:
        return [JournalEntry(*row) for row in await self._t._all(Q["journal"], (run_id,))]

    async def outline(self, run_id: str) -> list[tuple[int, str]]:
        return [
            (int(pos), str(state))
            for pos, state in await self._t._all(Q["journal_outline"], (run_id,))
        ]

    async def copy(self, source_id: str, run_id: str, before: int | None) -> None:
        params = {"run": run_id, "source": source_id, "before": before}
        await self._t._exec(Q["copy_journal"], params)

    async def put(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        # One statement for all; the last entry for a position wins, as on SQLite.
        latest = list({e.pos: e for e in entries}.values())
        if not latest:
            return
        t = self._t
        if len(latest) == 1:
            # The usual case (a step's result): plain values, no arrays to build.
            e = latest[0]
            one = (
                run_id,
                e.pos,
                e.kind,
                e.name,
                e.state,
                e.value,
                e.deadline,
                e.at,
                e.branch,
                e.seq,
            )
            if not t._fuse("put_journal_entry", one, run_id):
                await t._write(Q["put_journal_entry"], one)
            return
        params = (
            run_id,
            [e.pos for e in latest],
            [e.kind for e in latest],
            [e.name for e in latest],
            [e.state for e in latest],
            [e.value for e in latest],
            [e.deadline for e in latest],
            [e.at for e in latest],
            [e.branch for e in latest],
            [e.seq for e in latest],
        )
        if not t._fuse("put_journal", params, run_id):
            await t._write(Q["put_journal"], params)

    async def clear(self, run_id: str) -> None:
        await self._t._write(Q["clear_journal"], {"id": run_id})

    async def add_attempts(self, attempts: Sequence[AttemptRecord]) -> None:
        if attempts:
            columns = list(zip(*(dataclasses.astuple(a) for a in attempts), strict=True))
            await self._t._write(Q["add_attempts"], [list(c) for c in columns])

    async def attempts(self, run_id: str) -> list[AttemptRecord]:
        rows = await self._t._all(Q["attempts"], (run_id,))
        return [AttemptRecord(r, p, s, a, bytes(e), b, x) for r, p, s, a, e, b, x in rows]
