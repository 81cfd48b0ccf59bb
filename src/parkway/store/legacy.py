# mypy: ignore-errors
"""Transitional: the per-entity parts of a transaction over a backend that still
offers the flat methods. Removed once every backend composes its parts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from parkway.errors import LeaseLostError
from parkway.store.records import (
    ENDED,
    EventRecord,
    NewTask,
    RunRecord,
    Sent,
    SubscriptionRecord,
)

_PARTS: dict[str, dict[str, str]] = {}
_FILTERED = {"list_runs", "find_runs", "find_subscriptions", "list_human_tasks", "list_events"}


def _parts() -> dict[str, dict[str, str]]:
    if not _PARTS:
        from parkway.store._legacy_map import MAPPING

        for old, (part, new) in MAPPING.items():
            _PARTS.setdefault(part, {})[new] = old
    return _PARTS


class _Part:
    def __init__(self, tx: Any, part: str, names: dict[str, str]) -> None:
        self._tx, self._part, self._names = tx, part, names

    def __getattr__(self, name: str) -> Any:
        old = self._names[name]
        method = getattr(type(self._tx), old).__get__(self._tx)
        if old in _FILTERED:
            return lambda query: method(**{f.name: getattr(query, f.name) for f in fields(query)})
        return method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # the flat methods named as a part (journal, signals), called by the backend itself
        return getattr(type(self._tx), self._part)(self._tx, *args, **kwargs)


def attach_parts(tx: Any) -> None:
    for part, names in _parts().items():
        setattr(tx, part, _Part(tx, part, names))


class LegacyParts:
    """The parts' attributes, for the type checker (set by :func:`attach_parts`)."""

    runs: Any
    journal: Any
    tasks: Any
    signals: Any
    events: Any
    subscriptions: Any
    messages: Any
    values: Any
    updates: Any
    schedules: Any
    admission: Any
    callbacks: Any
    human_tasks: Any
    streams: Any
    workers: Any
    operators: Any


class ComposedTx:
    """The :class:`Tx` operations made of the primitive ones, for stores whose
    statements are cheap (memory, SQLite). The PostgreSQL store does each in
    one statement instead."""

    def _tx(self) -> Any:
        return self

    async def start_run(
        self, run: RunRecord, due_at: float, *, task_payload: bytes | None = None
    ) -> None:
        tx = self._tx()
        if await tx.get_run(run.id) is None:
            await tx.insert_run(run)
            await tx.add_tasks([NewTask(run.id, due_at, "start", payload=task_payload)])

    async def update_leased(
        self, run_id: str, changes: dict[str, Any], *, owner: str, release: bool = True
    ) -> None:
        if not await self._tx().update_run(run_id, changes, owner=owner, release=release):
            raise LeaseLostError(f"lost the lease on run {run_id!r}")

    async def send_signal(
        self,
        run_id: str,
        name: str,
        payload: bytes | None,
        at: float,
        *,
        task_payload: bytes | None = None,
    ) -> Sent:
        tx = self._tx()
        run = await tx.get_run(run_id)
        if run is None:
            return Sent(None, known=True)
        if run.status not in ENDED:
            await tx.add_signal(run_id, name, payload, at)
            await tx.add_tasks([NewTask(run_id, at, "signal", payload=task_payload)])
        return Sent(run.status, known=True)

    async def record_event(
        self,
        event: EventRecord,
        fresh_after: float,
        *,
        digest: Callable[[str], str | None] | None = None,  # (reads are cheap here)
    ) -> EventRecord | None:
        tx = self._tx()
        existing = await tx.get_event(event.id)
        if existing is not None:
            if existing.published_at >= fresh_after:
                return existing
            await tx.delete_event(event.id)
        await tx.insert_event(event)
        return None

    async def take_message_wait(self, name: str, key: str, now: float) -> SubscriptionRecord | None:
        tx = self._tx()
        wait = await tx.message_wait(name, key)
        if wait is None or (wait.deadline is not None and now > wait.deadline):
            return None
        await tx.delete_subscription(wait.run_id, wait.pos)
        return wait
