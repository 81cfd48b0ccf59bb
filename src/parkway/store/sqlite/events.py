"""A SQLite transaction's events (``tx.events``): published events kept for
de-duplication, accumulation and browsing, and the runs each started and resumed."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import orjson

from parkway.store import composed
from parkway.store.base import EventRecord
from parkway.store.events import EventFilter
from parkway.store.fleet import EventLink
from parkway.store.sqlite.fleet import S as FLEET
from parkway.store.sqlite.statements import Q
from parkway.store.sqlite.transport import Part


class SQLiteEvents(Part):
    """Events' statements on the transaction's connection."""

    def record(
        self,
        event: EventRecord,
        fresh_after: float,
        *,
        digest: Callable[[str], str | None] | None = None,
    ) -> Coroutine[Any, Any, EventRecord | None]:
        # (the composed operation's coroutine itself, not one awaiting it)
        return composed.record_event(self._tx, event, fresh_after, digest=digest)

    async def get(self, event_id: str) -> EventRecord | None:
        row = self._c.execute(Q["get_event"], (event_id,)).fetchone()
        return EventRecord(*row) if row else None

    async def insert(self, event: EventRecord) -> None:
        self._c.execute(
            Q["insert_event"],
            (event.id, event.name, event.domain, event.subject, event.payload, event.published_at),
        )

    async def delete(self, event_id: str) -> None:
        self._c.execute(Q["delete_event"], (event_id,))
        self._c.execute(FLEET["delete_event_links"], (event_id,))

    async def since(self, domain: str, name: str, since: float) -> builtins.list[EventRecord]:
        rows = self._c.execute(Q["events_since"], (domain, name, since))
        return [EventRecord(*row) for row in rows]

    async def prune(self, before: float) -> int:
        self._c.execute(FLEET["prune_event_links"], (before,))
        return self._c.execute(Q["prune_events"], (before,)).rowcount

    async def list(
        self, query: EventFilter
    ) -> builtins.list[tuple[str, str, str, str | None, bytes | None, float]]:
        params = dict(name=query.name, subject=query.subject, since=query.since, limit=query.limit)
        return [tuple(row) for row in self._c.execute(FLEET["list_events"], params)]

    async def link(self, event_id: str, at: float, how: str, run_ids: Sequence[str]) -> None:
        self._c.executemany(
            FLEET["link_event"], [(event_id, how, run_id, at) for run_id in run_ids]
        )

    async def links(self, event_ids: Sequence[str]) -> builtins.list[EventLink]:
        ids = orjson.dumps(builtins.list(event_ids)).decode()
        return [EventLink(*row) for row in self._c.execute(FLEET["event_links"], (ids,))]
