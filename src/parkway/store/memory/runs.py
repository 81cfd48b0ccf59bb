"""The memory store's runs (``tx.runs``): their rows, leases and listings."""

from __future__ import annotations

import builtins
import collections
import functools
from collections.abc import Coroutine, Sequence
from typing import Any

from parkway.models import RunStatus
from parkway.store import composed
from parkway.store.base import ENDED, RUN_MUTABLE, Lease, RunRecord, load_in
from parkway.store.fleet import run_key
from parkway.store.memory.fleet import delete_operator_entries
from parkway.store.memory.people import delete_people
from parkway.store.memory.state import _copy, _internal, _Part, claimable
from parkway.store.memory.streams import drop_streams
from parkway.store.runs import RunFilter, RunSelection


class MemoryRuns(_Part):
    """Runs in a dict, every change undone with the transaction."""

    async def get(self, run_id: str) -> RunRecord | None:
        run = self._s.runs.get(run_id)
        return _copy(run) if run else None

    async def insert(self, run: RunRecord) -> None:
        if run.id in self._s.runs:
            raise KeyError(f"run {run.id!r} exists")
        self._s.runs[run.id] = _copy(run)
        self._undo.append(lambda: self._s.runs.pop(run.id, None))

    def start(
        self, run: RunRecord, due_at: float, *, task_payload: bytes | None = None
    ) -> Coroutine[Any, Any, None]:
        # (the composed operation's coroutine itself, not one awaiting it: so for the rest)
        return composed.start_run(self._tx, run, due_at, task_payload=task_payload)

    async def update(
        self,
        run_id: str,
        changes: dict[str, Any],
        *,
        owner: str | None = None,
        release: bool = True,
    ) -> bool:
        run = self._s.runs.get(run_id)
        if run is None or (owner is not None and run.lease_owner != owner):
            return False
        assert set(changes) <= RUN_MUTABLE, set(changes) - RUN_MUTABLE
        before = _copy(run)
        for key, value in changes.items():
            setattr(run, key, value)
        if owner is not None and release:
            run.lease_owner, run.lease_until = None, None
        self._undo.append(lambda: self._s.runs.__setitem__(run_id, before))
        return True

    def update_leased(
        self, run_id: str, changes: dict[str, Any], *, owner: str, release: bool = True
    ) -> Coroutine[Any, Any, None]:
        return composed.update_leased(self._tx, run_id, changes, owner=owner, release=release)

    async def drop_cache_marks(self, run_ids: Sequence[str], owner: str) -> None:
        for run_id in run_ids:
            run = self._s.runs.get(run_id)
            if run is not None and run.advanced_by == owner:
                await self.update(run_id, {"advanced_by": None})

    async def lease(
        self, run_id: str, *, owner: str, now: float, wall_now: float, lease_until: float
    ) -> Lease:
        run = self._s.runs.get(run_id)
        if run is None or run.status in ENDED or not claimable(run):
            return Lease(run_id, taken=False)
        if run.lease_owner is not None and (run.lease_until or 0) >= wall_now:
            return Lease(run_id, taken=False)
        before = _copy(run)
        run.lease_owner, run.lease_until = owner, lease_until
        if run.status == "pending":
            run.status = RunStatus.RUNNING
        self._undo.append(lambda: self._s.runs.__setitem__(run_id, before))
        return Lease(run_id, taken=True, loaded=await load_in(self._tx, run_id, now, owner))

    async def list(self, query: RunFilter) -> builtins.list[RunRecord]:
        workflow, status, subject = query.workflow, query.status, query.subject
        domain, parent_id, search = query.domain, query.parent_id, query.search
        created_after, created_before = query.created_after, query.created_before
        before = query.before
        cursor = self._s.runs.get(before) if before is not None else None
        if before is not None and cursor is None:
            return []  # (as the SQL stores: no row to compare with)
        out = [
            _copy(r)
            for r in self._s.runs.values()
            if (r.workflow == workflow if workflow is not None else not _internal(r.workflow))
            and (status is None or r.status == status)
            and (subject is None or r.subject == subject)
            and (domain is None or r.domain == domain)
            and (parent_id is None or r.parent_id == parent_id)
            and (
                search is None
                or r.id.startswith(search)
                or (r.subject is not None and r.subject.startswith(search))
            )
            and (created_after is None or r.created_at >= created_after)
            and (created_before is None or r.created_at < created_before)
            and (cursor is None or (r.created_at, r.id) < (cursor.created_at, cursor.id))
        ]
        out.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        return out[: query.limit]

    async def counts(self) -> builtins.list[tuple[str, str, int]]:
        counts = collections.Counter(
            (r.workflow, r.status) for r in self._s.runs.values() if not _internal(r.workflow)
        )
        return [(w, s, n) for (w, s), n in sorted(counts.items())]

    async def find(self, query: RunSelection) -> builtins.list[RunRecord]:
        workflow, subject = query.workflow, query.subject
        created_before, after = query.created_before, query.after
        wanted = set(query.statuses)
        out = sorted(
            (
                r
                for r in self._s.runs.values()
                if r.status in wanted
                and (r.workflow == workflow if workflow is not None else not _internal(r.workflow))
                and (subject is None or r.subject == subject)
                and (created_before is None or r.created_at < created_before)
                and (after is None or r.id > after)
            ),
            key=lambda r: r.id,
        )
        return [_copy(r) for r in out[: query.limit]]

    async def expired(
        self, before: float, *, workflow: str | None, exclude: Sequence[str], limit: int
    ) -> builtins.list[str]:
        skip = set(exclude)
        out = sorted(
            (
                r
                for r in self._s.runs.values()
                if r.status in ENDED
                and r.updated_at < before
                and (r.workflow == workflow if workflow is not None else r.workflow not in skip)
            ),
            key=lambda r: (r.updated_at, r.id),
        )
        return [r.id for r in out[:limit]]

    async def delete(self, run_ids: Sequence[str]) -> None:
        state, undo, tx = self._s, self._undo, self._tx
        for run_id in run_ids:
            run = state.runs.pop(run_id, None)
            if run is None:
                continue
            undo.append(functools.partial(state.runs.__setitem__, run_id, run))
            await tx.journal.clear(run_id)
            await tx.tasks.delete_run(run_id)
            await tx.subscriptions.delete_run(run_id)
            await tx.signals.delete(builtins.list(state.run_signals.get(run_id, ())))
            drop_streams(state, undo, run_id)
            values = state.values.pop(run_id, None)
            if values is not None:
                undo.append(functools.partial(state.values.__setitem__, run_id, values))
            for key in [k for k in state.updates if k[0] == run_id]:
                update = state.updates.pop(key)
                undo.append(functools.partial(state.updates.__setitem__, key, update))
            delete_people(state, undo, run_id)
            delete_operator_entries(state, undo, run_id)

    async def active(self, workflow: str, domain: str, subject: str | None) -> str | None:
        for run in self._s.runs.values():
            if (
                run.workflow == workflow
                and run.domain == domain
                and run.subject == subject
                and run.status not in ("completed", "failed", "cancelled")
            ):
                return run.id
        return None

    async def unserved(self, keys: Sequence[str], now: float, limit: int) -> builtins.list[str]:
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
