"""The memory store: one lock, one state, transactions over it."""

from __future__ import annotations

import asyncio
import collections
import heapq
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

from parkway.models import RunStatus
from parkway.store.base import (
    LoadedRun,
    StoreStats,
    load_in_transaction,
)
from parkway.store.fleet import run_key
from parkway.store.memory.state import _State, claimable
from parkway.store.memory.tx import MemoryTx


class MemoryStore:
    """Everything in this process's memory (``memory://``)."""

    capabilities: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self._state = _State()
        # Store calls never suspend inside a transaction, but a lock keeps that
        # an invariant rather than an accident.
        self._lock = asyncio.Lock()
        # One transaction object, begun again by every transaction (the lock lets one
        # run at a time): its parts are made once, not at every commit.
        self._tx = MemoryTx(self._state)

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    @asynccontextmanager
    async def transaction(self, *, readonly: bool = False) -> AsyncIterator[MemoryTx]:
        async with self._lock:
            tx = self._tx
            tx.begin()
            try:
                yield tx
            except BaseException:
                tx.rollback()
                raise

    async def claim(
        self,
        owner: str,
        *,
        now: float,
        wall_now: float,
        lease_until: float,
        limit: int,
        serves: Sequence[str] | None = None,
    ) -> list[str]:
        served = None if serves is None else frozenset(serves)
        async with self._lock:
            state, heap = self._state, self._state.due_heap
            claimed: list[str] = []
            seen: list[tuple[float, int]] = []
            while heap and len(claimed) < limit and heap[0][0] <= now:
                item = heapq.heappop(heap)
                task = state.tasks.get(item[1])
                if task is None or task.due_at != item[0]:
                    continue  # deleted (or re-added under a new entry): drop lazily
                seen.append(item)  # the task stays until its run's advance deletes it
                run = state.runs.get(task.run_id)
                if run is None or task.run_id in claimed:
                    continue
                if not claimable(run, task.kind):  # (paused: only for its deadline)
                    continue
                if served is not None and run_key(run.workflow, run.version) not in served:
                    continue  # (another worker's: see parkway.store.fleet)
                if run.lease_owner is not None:
                    if (run.lease_until or 0) >= wall_now:
                        continue
                    state.takeovers += 1
                run.lease_owner, run.lease_until = owner, lease_until
                if run.status == "pending":
                    run.status = RunStatus.RUNNING
                claimed.append(task.run_id)
            for item in set(seen):
                heapq.heappush(heap, item)
            return claimed

    async def extend_leases(self, owner: str, run_ids: Sequence[str], lease_until: float) -> None:
        for run_id in run_ids:
            run = self._state.runs.get(run_id)
            if run is not None and run.lease_owner == owner:
                run.lease_until = lease_until

    async def release_leases(self, owner: str) -> None:
        for run in self._state.runs.values():
            if run.lease_owner == owner:
                run.lease_owner, run.lease_until = None, None

    async def next_due(self, *, after: float | None = None) -> float | None:
        times = [t.due_at for t in self._state.tasks.values() if after is None or t.due_at > after]
        return min(times, default=None)

    async def load_run(
        self, run_id: str, now: float, *, owner: str | None = None
    ) -> LoadedRun | None:
        return await load_in_transaction(self, run_id, now, owner)

    def watch(self, callback: Callable[[float | None], None]) -> None:
        pass  # no push: the worker polls changed()

    def watch_streams(self, callback: Callable[[str | None], None]) -> None:
        pass  # no other process: this one's readers are told by the core

    async def has_due(self, now: float) -> bool:
        heap, tasks, runs = self._state.due_heap, self._state.tasks, self._state.runs
        while heap and heap[0][1] not in tasks:
            heapq.heappop(heap)
        if not heap or heap[0][0] > now:
            return False
        head = tasks[heap[0][1]]
        first = runs.get(head.run_id)
        if first is not None and claimable(first, head.kind):
            return True
        # The first due task's run is paused (or gone): look further, the slow way
        # (only while some paused run has due tasks).
        for task in tasks.values():
            run = runs.get(task.run_id)
            if task.due_at <= now and run is not None and claimable(run, task.kind):
                return True
        return False

    async def changed(self) -> bool:
        return False

    async def stats(self, now: float) -> StoreStats:
        async with self._lock:
            state = self._state
            parked = collections.Counter(
                r.workflow for r in state.runs.values() if r.status == "parked"
            )
            due = [
                t.due_at
                for t in state.tasks.values()
                if t.due_at <= now and t.run_id in state.runs and claimable(state.runs[t.run_id])
            ]
            dead = sum(1 for m in state.messages.values() if m.status == "expired")
            held = collections.Counter(
                r.workflow for r in state.runs.values() if r.status == "held"
            )
            return StoreStats(
                dict(parked),
                len(due),
                min(due, default=None),
                dead,
                state.takeovers,
                held=dict(held),
            )
