"""The memory store's events (``tx.events``): published events kept for de-duplication,
accumulation and browsing, and the runs each started and resumed."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from parkway.store import composed
from parkway.store.base import EventRecord
from parkway.store.events import EventFilter
from parkway.store.fleet import EventLink
from parkway.store.memory.state import _Part


class MemoryEvents(_Part):
    """Events by id in publish order (a dict's), their links by event."""

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
        return self._s.events.get(event_id)

    async def insert(self, event: EventRecord) -> None:
        if event.id in self._s.events:
            raise KeyError(f"event {event.id!r} exists")
        self._s.events[event.id] = event
        self._undo.append(lambda: self._s.events.pop(event.id, None))

    async def delete(self, event_id: str) -> None:
        old = self._s.events.pop(event_id, None)
        if old is not None:
            self._undo.append(lambda: self._s.events.__setitem__(event_id, old))
        links = self._s.event_links.pop(event_id, None)
        if links is not None:
            self._undo.append(lambda: self._s.event_links.__setitem__(event_id, links))

    async def since(self, domain: str, name: str, since: float) -> builtins.list[EventRecord]:
        # dicts keep insertion order, which is publish order.
        out = [
            e
            for e in self._s.events.values()
            if e.domain == domain and e.name == name and e.published_at >= since
        ]
        return sorted(out, key=lambda e: e.published_at)

    async def prune(self, before: float) -> int:
        old = [e for e in self._s.events.values() if e.published_at < before]
        for event in old:
            await self.delete(event.id)
        return len(old)

    async def list(
        self, query: EventFilter
    ) -> builtins.list[tuple[str, str, str, str | None, bytes | None, float]]:
        name, subject, since = query.name, query.subject, query.since
        found = [
            e
            for e in self._s.events.values()
            if (name is None or e.name == name)
            and (subject is None or e.subject == subject)
            and (since is None or e.published_at >= since)
        ]
        # (Newest first; dicts keep insertion order, which breaks ties the same way.)
        order = {event_id: i for i, event_id in enumerate(self._s.events)}
        found.sort(key=lambda e: (e.published_at, order[e.id]), reverse=True)
        return [
            (e.id, e.name, e.domain, e.subject, e.payload, e.published_at)
            for e in found[: query.limit]
        ]

    async def link(self, event_id: str, at: float, how: str, run_ids: Sequence[str]) -> None:
        links = self._s.event_links.setdefault(event_id, [])
        before = len(links)
        links += [EventLink(event_id, how, run_id) for run_id in run_ids]
        self._undo.append(lambda: links.__delitem__(slice(before, None)))

    async def links(self, event_ids: Sequence[str]) -> builtins.list[EventLink]:
        return [link for event_id in event_ids for link in self._s.event_links.get(event_id, ())]
