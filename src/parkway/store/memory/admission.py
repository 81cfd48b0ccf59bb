"""The memory store's admission (``tx.admission``): concurrency and rate limits."""

from __future__ import annotations

import heapq

from parkway.store.memory.state import _copy, _FlowRun, _Part
from parkway.store.records import FlowEntry, FlowSlot


class MemoryAdmission(_Part):
    """Admission keys, their runs and rate rings. One writer at a time (the store's
    lock) is what serialises a key's changes."""

    async def slot(self, workflow: str, key: str) -> FlowSlot:
        found = self._s.flow_slots.get((workflow, key))
        return FlowSlot() if found is None else _copy(found)

    async def put_slot(self, workflow: str, key: str, slot: FlowSlot) -> None:
        slots, k = self._s.flow_slots, (workflow, key)
        old = slots.get(k)
        slots[k] = _copy(slot)
        self._undo.append(lambda: slots.__setitem__(k, old) if old else slots.pop(k, None))

    async def enter(
        self, run_id: str, workflow: str, key: str, priority: int, *, queued: bool
    ) -> None:
        seq = self._s.next_flow
        self._s.next_flow += 1
        self._s.flow_runs[run_id] = _FlowRun(workflow, key, priority, seq, queued)
        self._undo.append(lambda: self._s.flow_runs.pop(run_id, None))
        if queued:
            heapq.heappush(self._queue(workflow, key), (-priority, seq, run_id))
        else:
            self._hold(workflow, key, run_id, seq)

    def _hold(self, workflow: str, key: str, run_id: str, seq: int) -> None:
        holders = self._s.flow_holders.setdefault((workflow, key), {})
        holders[run_id] = seq
        self._undo.append(lambda: holders.pop(run_id, None))

    def _queue(self, workflow: str, key: str) -> list[tuple[int, int, str]]:
        return self._s.flow_queues.setdefault((workflow, key), [])

    async def entry(self, run_id: str) -> FlowEntry | None:
        found = self._s.flow_runs.get(run_id)
        return None if found is None else FlowEntry(found.workflow, found.key, found.queued)

    async def leave(self, run_id: str) -> FlowEntry | None:
        old = self._s.flow_runs.pop(run_id, None)
        if old is None:
            return None
        self._undo.append(lambda: self._s.flow_runs.__setitem__(run_id, old))
        holders = self._s.flow_holders.get((old.workflow, old.key), {})
        if holders.pop(run_id, None) is not None:
            self._undo.append(lambda: holders.__setitem__(run_id, old.seq))
        return FlowEntry(old.workflow, old.key, old.queued)

    async def next(self, workflow: str, key: str) -> str | None:
        queue = self._queue(workflow, key)
        while queue:
            item = queue[0]
            entry = self._s.flow_runs.get(item[2])
            if entry is None or not entry.queued or entry.seq != item[1]:
                heapq.heappop(queue)  # left or dequeued: dropped lazily
                continue
            heapq.heappop(queue)
            entry.queued = False

            def undo(e: _FlowRun = entry, i: tuple[int, int, str] = item) -> None:
                e.queued = True
                heapq.heappush(queue, i)

            self._undo.append(undo)
            self._hold(workflow, key, item[2], item[1])
            return item[2]
        return None

    async def oldest(self, workflow: str, key: str) -> str | None:
        # (at most `limit` runs hold a slot of one key: the scan is bounded by the limit;
        # an index makes it a lookup on the SQL stores)
        holders = self._s.flow_holders.get((workflow, key), {})
        return min(holders, key=holders.__getitem__) if holders else None

    async def rate_mark(self, workflow: str, key: str, slot: int) -> float | None:
        return self._s.rate_marks.get((workflow, key, slot))

    async def put_rate_mark(self, workflow: str, key: str, slot: int, at: float) -> None:
        marks, k = self._s.rate_marks, (workflow, key, slot)
        old = marks.get(k)
        marks[k] = at
        self._undo.append(lambda: marks.__setitem__(k, old) if old is not None else marks.pop(k))
