"""A transaction of the memory store: its operations over the state, with an undo log."""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import heapq
from collections.abc import Callable, Sequence
from typing import Any

from parkway.models import RunStatus
from parkway.store.base import (
    ENDED,
    RUN_MUTABLE,
    ComposedTx,
    EventRecord,
    JournalEntry,
    Lease,
    MessageRecord,
    NewTask,
    RunRecord,
    SignalRecord,
    SubscriptionRecord,
    TaskRecord,
    load_in,
)
from parkway.store.memory.fleet import MemoryFleet
from parkway.store.memory.flow import _FlowControl
from parkway.store.memory.people import MemoryPeople
from parkway.store.memory.schedules import MemorySchedules
from parkway.store.memory.state import _copy, _internal, _restore, _State, claimable
from parkway.store.memory.streams import _Streams
from parkway.store.memory.values import _ValuesAndUpdates


class MemoryTx(
    _ValuesAndUpdates,
    _Streams,
    MemorySchedules,
    MemoryPeople,
    MemoryFleet,
    _FlowControl,
    ComposedTx,
):
    """A transaction over :class:`_State` with an undo log."""

    def __init__(self, state: _State) -> None:
        self._s = state
        self._undo: list[Callable[[], object]] = []
        self._schedules = state.schedules

    def rollback(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    async def get_run(self, run_id: str) -> RunRecord | None:
        run = self._s.runs.get(run_id)
        return _copy(run) if run else None

    async def insert_run(self, run: RunRecord) -> None:
        if run.id in self._s.runs:
            raise KeyError(f"run {run.id!r} exists")
        self._s.runs[run.id] = _copy(run)
        self._undo.append(lambda: self._s.runs.pop(run.id, None))

    async def update_run(
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

    async def drop_cache_marks(self, run_ids: Sequence[str], owner: str) -> None:
        for run_id in run_ids:
            run = self._s.runs.get(run_id)
            if run is not None and run.advanced_by == owner:
                await self.update_run(run_id, {"advanced_by": None})

    async def lease_run(
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
        return Lease(run_id, taken=True, loaded=await load_in(self, run_id, now, owner))

    async def list_runs(
        self,
        *,
        workflow: str | None,
        status: str | None,
        subject: str | None,
        domain: str | None,
        parent_id: str | None,
        limit: int,
        search: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
        before: str | None = None,
    ) -> list[RunRecord]:
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
        return out[:limit]

    async def run_counts(self) -> list[tuple[str, str, int]]:
        counts = collections.Counter(
            (r.workflow, r.status) for r in self._s.runs.values() if not _internal(r.workflow)
        )
        return [(w, s, n) for (w, s), n in sorted(counts.items())]

    async def find_runs(
        self,
        *,
        statuses: Sequence[str],
        workflow: str | None,
        subject: str | None,
        created_before: float | None,
        after: str | None,
        limit: int,
    ) -> list[RunRecord]:
        wanted = set(statuses)
        out = sorted(
            (
                r for r in self._s.runs.values()
                if r.status in wanted
                and (r.workflow == workflow if workflow is not None else not _internal(r.workflow))
                and (subject is None or r.subject == subject)
                and (created_before is None or r.created_at < created_before)
                and (after is None or r.id > after)
            ),
            key=lambda r: r.id,
        )  # fmt: skip
        return [_copy(r) for r in out[:limit]]

    async def expired_runs(
        self, before: float, *, workflow: str | None, exclude: Sequence[str], limit: int
    ) -> list[str]:
        skip = set(exclude)
        out = sorted(
            (
                r for r in self._s.runs.values()
                if r.status in ENDED and r.updated_at < before
                and (r.workflow == workflow if workflow is not None else r.workflow not in skip)
            ),
            key=lambda r: (r.updated_at, r.id),
        )  # fmt: skip
        return [r.id for r in out[:limit]]

    async def delete_runs(self, run_ids: Sequence[str]) -> None:
        state = self._s
        for run_id in run_ids:
            run = state.runs.pop(run_id, None)
            if run is None:
                continue
            self._undo.append(functools.partial(state.runs.__setitem__, run_id, run))
            await self.clear_journal(run_id)
            await self.delete_all_tasks(run_id)
            await self.delete_run_subscriptions(run_id)
            await self.delete_signals(list(state.run_signals.get(run_id, ())))
            self._drop_streams(run_id)
            values = state.values.pop(run_id, None)
            if values is not None:
                self._undo.append(functools.partial(state.values.__setitem__, run_id, values))
            for key in [k for k in state.updates if k[0] == run_id]:
                update = state.updates.pop(key)
                self._undo.append(functools.partial(state.updates.__setitem__, key, update))
            self._delete_people(run_id)
            self._delete_operator_entries(run_id)

    async def journal(self, run_id: str) -> list[JournalEntry]:
        entries = self._s.journal.get(run_id, {})
        return [_copy(entries[p]) for p in sorted(entries)]

    async def put_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        book = self._s.journal.setdefault(run_id, {})
        for entry in entries:
            previous = book.get(entry.pos)
            book[entry.pos] = _copy(entry)
            self._undo.append(_restore(book, entry.pos, previous))

    async def journal_outline(self, run_id: str) -> list[tuple[int, str]]:
        entries = self._s.journal.get(run_id, {})
        return [(p, entries[p].state) for p in sorted(entries)]

    async def copy_journal(self, source_id: str, run_id: str, before: int | None) -> None:
        await self.put_journal(
            run_id,
            [
                e for e in await self.journal(source_id)
                if (before is None or e.pos < before) and e.state != "pending"
            ],
        )  # fmt: skip

    async def clear_journal(self, run_id: str) -> None:
        old = self._s.journal.pop(run_id, None)
        if old is not None:
            self._undo.append(lambda: self._s.journal.__setitem__(run_id, old))
        attempts = self._s.attempts.pop(run_id, None)
        if attempts is not None:
            self._undo.append(lambda: self._s.attempts.__setitem__(run_id, attempts))

    async def add_tasks(self, tasks: Sequence[NewTask]) -> None:
        for task in tasks:
            task_id = self._s.next_task
            self._s.next_task += 1
            record = TaskRecord(
                task_id, task.run_id, task.due_at, task.kind, task.pos, task.payload
            )
            self._s.tasks[task_id] = record
            self._s.run_tasks.setdefault(task.run_id, set()).add(task_id)
            heapq.heappush(self._s.due_heap, (task.due_at, task_id))
            self._undo.append(functools.partial(self._drop_task, task_id))

    def _drop_task(self, task_id: int) -> TaskRecord | None:
        task = self._s.tasks.pop(task_id, None)
        if task is not None:
            self._s.run_tasks.get(task.run_id, set()).discard(task_id)
        return task

    def _restore_task(self, task: TaskRecord) -> None:
        self._s.tasks[task.id] = task
        self._s.run_tasks.setdefault(task.run_id, set()).add(task.id)
        heapq.heappush(self._s.due_heap, (task.due_at, task.id))

    async def due_tasks(self, run_id: str, now: float) -> list[TaskRecord]:
        ids = self._s.run_tasks.get(run_id, ())
        due = [self._s.tasks[i] for i in ids if self._s.tasks[i].due_at <= now]
        return sorted(due, key=lambda t: t.id)

    async def delete_tasks(self, ids: Sequence[int]) -> None:
        for task_id in ids:
            task = self._drop_task(task_id)
            if task is not None:
                self._undo.append(functools.partial(self._restore_task, task))

    async def delete_wait_tasks(
        self, run_id: str, pos: int | None = None, *, keep: Sequence[int] = ()
    ) -> None:
        kept = set(keep)
        ids = [
            i
            for i in self._s.run_tasks.get(run_id, ())
            if self._s.tasks[i].pos is not None
            and (pos is None or self._s.tasks[i].pos == pos)
            and i not in kept
        ]
        await self.delete_tasks(ids)

    async def delete_all_tasks(self, run_id: str) -> None:
        await self.delete_tasks(list(self._s.run_tasks.get(run_id, ())))

    async def add_signal(self, run_id: str, name: str, payload: bytes | None, at: float) -> None:
        signal_id = self._s.next_signal
        self._s.next_signal += 1
        self._s.signals[signal_id] = SignalRecord(signal_id, run_id, name, payload, at)
        self._s.run_signals.setdefault(run_id, []).append(signal_id)

        def undo() -> None:
            self._s.signals.pop(signal_id, None)
            self._s.run_signals[run_id].remove(signal_id)

        self._undo.append(undo)

    async def signals(self, run_id: str) -> list[SignalRecord]:
        return [self._s.signals[i] for i in self._s.run_signals.get(run_id, ())]

    async def delete_signals(self, ids: Sequence[int]) -> None:
        for signal_id in ids:
            signal = self._s.signals.pop(signal_id, None)
            if signal is None:
                continue
            queue = self._s.run_signals[signal.run_id]
            queue.remove(signal_id)

            def undo(s: SignalRecord = signal, q: list[int] = queue) -> None:
                self._s.signals[s.id] = s
                bisect.insort(q, s.id)

            self._undo.append(undo)

    async def get_event(self, event_id: str) -> EventRecord | None:
        return self._s.events.get(event_id)

    async def insert_event(self, event: EventRecord) -> None:
        if event.id in self._s.events:
            raise KeyError(f"event {event.id!r} exists")
        self._s.events[event.id] = event
        self._undo.append(lambda: self._s.events.pop(event.id, None))

    async def delete_event(self, event_id: str) -> None:
        old = self._s.events.pop(event_id, None)
        if old is not None:
            self._undo.append(lambda: self._s.events.__setitem__(event_id, old))
        self._delete_event_links(event_id)

    async def events_since(self, domain: str, name: str, since: float) -> list[EventRecord]:
        # dicts keep insertion order, which is publish order.
        out = [
            e
            for e in self._s.events.values()
            if e.domain == domain and e.name == name and e.published_at >= since
        ]
        return sorted(out, key=lambda e: e.published_at)

    async def prune_events(self, before: float) -> int:
        old = [e for e in self._s.events.values() if e.published_at < before]
        for event in old:
            await self.delete_event(event.id)
        return len(old)

    async def add_subscription(self, sub: SubscriptionRecord) -> None:
        key = (sub.run_id, sub.pos)
        if key in self._s.subs:
            await self.delete_subscription(*key)
        if sub.kind == "message":
            wait_key = (sub.name, sub.subject)
            if wait_key in self._s.message_waits:
                raise KeyError(f"message wait {wait_key} is taken")
            self._s.message_waits[wait_key] = key
            self._undo.append(lambda: self._s.message_waits.pop(wait_key, None))
        self._s.subs[key] = sub
        index = (sub.domain, sub.name, sub.shape, sub.digest, sub.subject)
        self._s.sub_index.setdefault(index, set()).add(key)
        self._s.run_subs.setdefault(sub.run_id, set()).add(sub.pos)
        shapes = self._s.shapes.setdefault((sub.domain, sub.name), set())
        new_shape = sub.shape not in shapes
        shapes.add(sub.shape)

        def undo() -> None:
            self._s.subs.pop(key, None)
            self._s.sub_index[index].discard(key)
            self._s.run_subs[sub.run_id].discard(sub.pos)
            if new_shape:
                shapes.discard(sub.shape)

        self._undo.append(undo)

    async def shapes(self, domain: str, name: str) -> list[str]:
        return sorted(self._s.shapes.get((domain, name), ()))

    async def find_subscriptions(
        self, *, domain: str, name: str, shape: str, digest: str, subject: str | None, kind: str
    ) -> list[SubscriptionRecord]:
        keys: set[tuple[str, int]] = set()
        for candidate in {subject or "*", "*"}:
            keys |= self._s.sub_index.get((domain, name, shape, digest, candidate), set())
        found = [self._s.subs[k] for k in keys if self._s.subs[k].kind == kind]
        return sorted(found, key=lambda s: (s.created_at, s.run_id))

    async def list_subscriptions(
        self, *, run_id: str | None = None, name: str | None = None
    ) -> list[SubscriptionRecord]:
        out = [
            s
            for s in self._s.subs.values()
            if (run_id is None or s.run_id == run_id) and (name is None or s.name == name)
        ]
        return sorted(out, key=lambda s: s.created_at)

    async def delete_subscription(self, run_id: str, pos: int) -> None:
        key = (run_id, pos)
        sub = self._s.subs.pop(key, None)
        if sub is None:
            return
        index = (sub.domain, sub.name, sub.shape, sub.digest, sub.subject)
        self._s.sub_index[index].discard(key)
        self._s.run_subs[run_id].discard(pos)
        if sub.kind == "message":
            wait_key = (sub.name, sub.subject)
            self._s.message_waits.pop(wait_key, None)
            self._undo.append(lambda: self._s.message_waits.__setitem__(wait_key, key))

        def undo() -> None:
            self._s.subs[key] = sub
            self._s.sub_index.setdefault(index, set()).add(key)
            self._s.run_subs.setdefault(run_id, set()).add(pos)

        self._undo.append(undo)

    async def delete_run_subscriptions(self, run_id: str) -> None:
        for pos in list(self._s.run_subs.get(run_id, ())):
            await self.delete_subscription(run_id, pos)

    async def sweep_subscriptions(self, now: float) -> int:
        expired = [k for k, s in self._s.subs.items() if s.expires_at < now]
        for key in expired:
            await self.delete_subscription(*key)
        used = {(s.domain, s.name, s.shape) for s in self._s.subs.values()}
        for (domain, name), shapes in self._s.shapes.items():
            shapes.intersection_update({sh for d, n, sh in used if d == domain and n == name})
        return len(expired)

    async def active_run(self, workflow: str, domain: str, subject: str | None) -> str | None:
        for run in self._s.runs.values():
            if (
                run.workflow == workflow
                and run.domain == domain
                and run.subject == subject
                and run.status not in ("completed", "failed", "cancelled")
            ):
                return run.id
        return None

    async def message_wait(self, name: str, key: str) -> SubscriptionRecord | None:
        found = self._s.message_waits.get((name, key))
        return self._s.subs.get(found) if found else None

    async def add_message(self, message: MessageRecord) -> int:
        message_id = self._s.next_message
        self._s.next_message += 1
        self._s.messages[message_id] = dataclasses.replace(message, id=message_id)
        self._undo.append(lambda: self._s.messages.pop(message_id, None))
        return message_id

    async def oldest_message(self, name: str, key: str, now: float) -> MessageRecord | None:
        for message in self._s.messages.values():  # insertion order = id order
            if (
                message.name == name
                and message.key == key
                and message.status == "buffered"
                and message.expires_at > now
            ):
                return _copy(message)
        return None

    async def get_message(self, message_id: int) -> MessageRecord | None:
        message = self._s.messages.get(message_id)
        return _copy(message) if message else None

    async def list_messages(self, status: str | None) -> list[MessageRecord]:
        return [_copy(m) for m in self._s.messages.values() if status is None or m.status == status]

    async def delete_message(self, message_id: int) -> None:
        old = self._s.messages.pop(message_id, None)
        if old is not None:
            self._undo.append(lambda: self._restore_message(old))

    def _restore_message(self, message: MessageRecord) -> None:
        self._s.messages[message.id] = message
        self._s.messages = dict(sorted(self._s.messages.items()))

    async def update_message(
        self, message_id: int, status: str, reason: str | None, expires_at: float
    ) -> None:
        old = self._s.messages.get(message_id)
        if old is None:
            return
        self._s.messages[message_id] = dataclasses.replace(
            old, status=status, reason=reason, expires_at=expires_at
        )
        self._undo.append(lambda: self._s.messages.__setitem__(message_id, old))

    async def expire_messages(self, now: float, reason: str) -> list[MessageRecord]:
        out = []
        for message in list(self._s.messages.values()):
            if message.status == "buffered" and message.expires_at <= now:
                await self.update_message(message.id, "expired", reason, message.expires_at)
                out.append(self._s.messages[message.id])
        return out

    async def message_id_seen(self, message_id: str) -> float | None:
        return self._s.message_ids.get(message_id)

    async def remember_message_id(self, message_id: str, at: float) -> None:
        old = self._s.message_ids.get(message_id)
        self._s.message_ids[message_id] = at

        def undo() -> None:
            if old is None:
                self._s.message_ids.pop(message_id, None)
            else:
                self._s.message_ids[message_id] = old

        self._undo.append(undo)

    async def prune_message_ids(self, before: float) -> None:
        for message_id, at in list(self._s.message_ids.items()):
            if at < before:
                del self._s.message_ids[message_id]
