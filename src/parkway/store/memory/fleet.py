"""The memory store's workers, operator entries and event links (a part of
:class:`parkway.store.memory.MemoryTx`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

from parkway.store.fleet import EventLink, OperatorRecord, WorkerRecord, run_key
from parkway.store.memory.state import _State


class MemoryFleet:
    """Workers, operator entries and event links in dicts and lists, undone with the
    transaction."""

    _s: _State
    _undo: list[Callable[[], object]]

    async def beat_worker(self, worker: WorkerRecord) -> None:
        workers = self._s.workers
        before = workers.get(worker.id)
        if before is None:
            self._undo.append(lambda: workers.pop(worker.id, None))
        else:
            self._undo.append(lambda: workers.__setitem__(worker.id, before))
            worker = dataclasses.replace(worker, started_at=before.started_at)
        workers[worker.id] = dataclasses.replace(
            worker, workflows={k: list(v) for k, v in worker.workflows.items()}
        )

    async def list_workers(self, now: float) -> list[WorkerRecord]:
        found = [dataclasses.replace(w) for w in self._s.workers.values() if w.alive_until > now]
        return sorted(found, key=lambda w: (w.started_at, w.id))

    async def prune_workers(self, now: float) -> int:
        gone = [w for w in self._s.workers.values() if w.alive_until < now]
        for worker in gone:
            del self._s.workers[worker.id]
            self._undo.append(functools.partial(self._s.workers.__setitem__, worker.id, worker))
        return len(gone)

    async def unserved_runs(self, keys: Sequence[str], now: float, limit: int) -> list[str]:
        served = set(keys)
        found: set[str] = set()
        for task in self._s.tasks.values():
            if task.due_at > now or task.run_id in found:
                continue
            run = self._s.runs.get(task.run_id)
            if run is None or run.paused or run_key(run.workflow, run.version) in served:
                continue
            found.add(run.id)
        return sorted(found)[:limit]

    async def add_operator_entry(self, entry: OperatorRecord) -> None:
        entries = self._s.operator_entries.setdefault(entry.run_id, [])
        entries.append(dataclasses.replace(entry))
        self._undo.append(entries.pop)

    async def operator_entries(self, run_id: str) -> list[OperatorRecord]:
        return [dataclasses.replace(e) for e in self._s.operator_entries.get(run_id, ())]

    def _delete_operator_entries(self, run_id: str) -> None:
        entries = self._s.operator_entries.pop(run_id, None)
        if entries is not None:
            self._undo.append(lambda: self._s.operator_entries.__setitem__(run_id, entries))

    async def link_event(self, event_id: str, at: float, how: str, run_ids: Sequence[str]) -> None:
        links = self._s.event_links.setdefault(event_id, [])
        before = len(links)
        links += [EventLink(event_id, how, run_id) for run_id in run_ids]
        self._undo.append(lambda: links.__delitem__(slice(before, None)))

    def _delete_event_links(self, event_id: str) -> None:
        links = self._s.event_links.pop(event_id, None)
        if links is not None:
            self._undo.append(lambda: self._s.event_links.__setitem__(event_id, links))

    async def list_events(
        self,
        *,
        name: str | None,
        subject: str | None,
        since: float | None,
        limit: int,
    ) -> list[tuple[str, str, str, str | None, bytes | None, float]]:
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
            (e.id, e.name, e.domain, e.subject, e.payload, e.published_at) for e in found[:limit]
        ]

    async def event_links(self, event_ids: Sequence[str]) -> list[EventLink]:
        return [link for event_id in event_ids for link in self._s.event_links.get(event_id, ())]
