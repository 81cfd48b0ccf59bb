"""Operations made of a store's primitive ones, for stores whose statements are cheap
(memory, SQLite): their parts call these. The PostgreSQL store does each in one
statement instead."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parkway.errors import LeaseLostError
from parkway.store.base import Tx
from parkway.store.records import (
    ENDED,
    EventRecord,
    NewTask,
    RunRecord,
    Sent,
    SubscriptionRecord,
)


async def start_run(
    tx: Tx, run: RunRecord, due_at: float, *, task_payload: bytes | None = None
) -> None:
    """:meth:`parkway.store.runs.Runs.start` from ``get``, ``insert`` and ``tasks.add``."""
    if await tx.runs.get(run.id) is None:
        await tx.runs.insert(run)
        await tx.tasks.add([NewTask(run.id, due_at, "start", payload=task_payload)])


async def update_leased(
    tx: Tx, run_id: str, changes: dict[str, Any], *, owner: str, release: bool = True
) -> None:
    """:meth:`parkway.store.runs.Runs.update_leased`: ``update``, raising when the lease is lost."""
    if not await tx.runs.update(run_id, changes, owner=owner, release=release):
        raise LeaseLostError(f"lost the lease on run {run_id!r}")


async def send_signal(
    tx: Tx,
    run_id: str,
    name: str,
    payload: bytes | None,
    at: float,
    *,
    task_payload: bytes | None = None,
) -> Sent:
    """:meth:`parkway.store.signals.Signals.send` from a read of the run, ``add`` and a task."""
    run = await tx.runs.get(run_id)
    if run is None:
        return Sent(None, known=True)
    if run.status not in ENDED:
        await tx.signals.add(run_id, name, payload, at)
        await tx.tasks.add([NewTask(run_id, at, "signal", payload=task_payload)])
    return Sent(run.status, known=True)


async def record_event(
    tx: Tx,
    event: EventRecord,
    fresh_after: float,
    *,
    digest: Callable[[str], str | None] | None = None,  # (reads are cheap here)
) -> EventRecord | None:
    """:meth:`parkway.store.events.Events.record` from ``get``, ``delete`` and ``insert``."""
    existing = await tx.events.get(event.id)
    if existing is not None:
        if existing.published_at >= fresh_after:
            return existing
        await tx.events.delete(event.id)
    await tx.events.insert(event)
    return None


async def take_message_wait(tx: Tx, name: str, key: str, now: float) -> SubscriptionRecord | None:
    """:meth:`parkway.store.messages.Messages.take_wait` from ``wait`` and a delete."""
    wait = await tx.messages.wait(name, key)
    if wait is None or (wait.deadline is not None and now > wait.deadline):
        return None
    await tx.subscriptions.delete(wait.run_id, wait.pos)
    return wait
