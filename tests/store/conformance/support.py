"""What the conformance tests share: builders of records, and a second store in a
thread of its own for the tests of several processes."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import orjson
import pytest

from parkway.core import messages as core_messages
from parkway.core import publishing
from parkway.matching import match_digest, payload_digest, shape_of
from parkway.store import Store, open_store
from parkway.store.base import (
    AttemptRecord,
    EventDelivery,
    EventRecord,
    JournalEntry,
    MessageDelivery,
    MessageRecord,
    NewTask,
    RunRecord,
    ScheduleRecord,
    SubscriptionRecord,
    Tx,
    UpdateRecord,
)
from parkway.store.people import HumanTaskRecord
from parkway.store.runs import RunFilter

T = TypeVar("T")


NOW = 1_000_000.0  # engine time


WALL = 2_000_000.0  # wall-clock time, for leases


def run(run_id: str, **fields: Any) -> RunRecord:
    values: dict[str, Any] = dict(
        id=run_id,
        workflow="wf",
        version="1",
        status="pending",
        input=b'{"n": 1}',
        output=None,
        error=None,
        domain="default",
        subject=None,
        parent_id=None,
        trigger=None,
        generation=0,
        created_at=NOW,
        updated_at=NOW,
    )
    values.update(fields)
    return RunRecord(**values)


def entry(pos: int, state: str = "done", value: bytes | None = b"1", **fields: Any) -> JournalEntry:
    values: dict[str, Any] = dict(
        pos=pos, kind="step", name=f"s{pos}", state=state, value=value, deadline=None, at=NOW
    )
    values.update(fields)
    return JournalEntry(**values)


def event(event_id: str, name: str = "order.paid", **fields: Any) -> EventRecord:
    values: dict[str, Any] = dict(
        id=event_id,
        name=name,
        domain="default",
        subject=None,
        payload=b'{"a": 1}',
        published_at=NOW,
    )
    values.update(fields)
    return EventRecord(**values)


def sub(run_id: str, pos: int = 0, **fields: Any) -> SubscriptionRecord:
    values: dict[str, Any] = dict(
        run_id=run_id,
        pos=pos,
        kind="event",
        domain="default",
        name="order.paid",
        subject="*",
        shape="",
        digest="",
        match=None,
        wait=f"wait#{pos}",
        expires_at=NOW + 3600,
        created_at=NOW,
    )
    values.update(fields)
    return SubscriptionRecord(**values)


def message_wait(run_id: str, name: str, key: str, pos: int = 0) -> SubscriptionRecord:
    return sub(run_id, pos, kind="message", name=name, subject=key, wait=f"wait_for_message#{pos}")


def message(name: str, key: str, payload: bytes = b'"m"', **fields: Any) -> MessageRecord:
    values: dict[str, Any] = dict(
        id=0,
        name=name,
        key=key,
        payload=payload,
        message_id=None,
        status="buffered",
        reason=None,
        received_at=NOW,
        expires_at=NOW + 60,
    )
    values.update(fields)
    return MessageRecord(**values)


async def one(store: Store, body: Callable[[Tx], Awaitable[T]], *, readonly: bool = False) -> T:
    """``body`` in one transaction of its own."""
    async with store.transaction(readonly=readonly) as tx:
        return await body(tx)


async def _list(store: Store, **filters: Any) -> list[str]:
    args: dict[str, Any] = dict(
        workflow=None, status=None, subject=None, domain=None, parent_id=None, limit=100
    )
    args.update(filters)
    async with store.transaction(readonly=True) as tx:
        return [r.id for r in await tx.runs.list(RunFilter(**args))]


def attempt(run_id: str, pos: int, n: int, error: bytes = b'{"type":"E"}') -> AttemptRecord:
    return AttemptRecord(run_id, pos, "charge", n, error, NOW + n, NOW + n + 0.5)


def update(run_id: str, update_id: str, name: str = "add") -> UpdateRecord:
    return UpdateRecord(run_id, update_id, name, b"1", "pending", None, NOW)


class _Rollback(Exception):
    pass


def _fused(tx: Tx) -> bool:
    """Whether ``tx`` is a store's that fuses the senders' fast paths (the ``"fused"``
    capability): then its own one-operation version is tested, else the core's
    composed path. Both are held to the same contract here."""
    return callable(getattr(tx.events, "deliver", None))


async def deliver_event(tx: Tx, *args: Any, **options: Any) -> EventDelivery:
    return await publishing.deliver_event(tx, *args, fused=_fused(tx), **options)


async def deliver_message(tx: Tx, *args: Any, **options: Any) -> MessageDelivery:
    return await core_messages.deliver_message(tx, *args, fused=_fused(tx), **options)


async def show_shapes(store: Store, *shapes: str, name: str = "order.paid") -> None:
    """Let ``store`` read waits of ``shapes`` on ``name`` (a store may decline
    deliver_event for a shape it has not seen); nothing is kept."""
    with contextlib.suppress(_Rollback):
        async with store.transaction() as tx:
            for i, shape in enumerate(shapes):
                await tx.subscriptions.add(sub(f"shape-probe-{i}", shape=shape, name=name))
            assert set(shapes) <= set(await tx.subscriptions.shapes("default", name))
            raise _Rollback


def event_wait(run_id: str, match: dict[str, Any] | None, pos: int = 0, **fields: Any) -> Any:
    """An event wait on order.paid with ``match``, indexed as the engine indexes it."""
    return sub(
        run_id,
        pos,
        shape=shape_of(match),
        digest=match_digest(match),
        match=None if match is None else orjson.dumps(match),
        **fields,
    )


def forged(run_id: str, match: dict[str, Any], payload: dict[str, Any]) -> SubscriptionRecord:
    """A wait indexed under ``payload``'s digest though its match may not hold for it
    (a digest collision, as far as the store can tell): the match rule must decide."""
    shape = shape_of(match)
    digest = payload_digest(payload, shape)
    assert digest is not None
    return sub(run_id, shape=shape, digest=digest, match=orjson.dumps(match))


async def deliver(
    store: Store, payload: Any, event_id: str = "e1", **options: Any
) -> EventDelivery:
    """deliver_event of order.paid with ``payload``, in a transaction of its own."""
    body = orjson.dumps(payload)
    record = event(event_id, payload=body, **options.pop("fields", {}))
    async with store.transaction() as tx:
        delivery = await deliver_event(
            tx, record, payload, b"envelope:" + body, fresh_after=NOW - 60, **options
        )
    assert delivery.known
    return delivery


async def _runs_with_tasks(store: Store, spec: dict[str, list[float]], **fields: Any) -> None:
    async with store.transaction() as tx:
        for run_id, dues in spec.items():
            await tx.runs.insert(run(run_id, **fields))
            await tx.tasks.add([NewTask(run_id, due, "start") for due in dues])


async def _has_delivery(tx: Tx, run_id: str) -> bool:
    return any(t.kind in ("delivery", "message") for t in await tx.tasks.due(run_id, NOW))


async def _deliver_now(tx: Tx, event_id: str = "e1") -> EventDelivery:
    """deliver_event of order.paid (no match) in ``tx``, sent at once (a read after it
    sends what a store queued), so that it holds its locks while the other party runs."""
    delivery = await deliver_event(
        tx, event(event_id, payload=b"{}"), {}, b"{}", fresh_after=NOW - 60
    )
    await tx.runs.get("nobody")
    return delivery


async def _show_no_shape(store: Store) -> None:
    await show_shapes(store, "")


class shared_pair:
    """Two stores on one URL: this loop's, and one living in a thread with its own loop."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def __aenter__(self) -> tuple[Store, Store]:
        self.thread.start()
        self.mine = open_store(self.url)
        await self.mine.open()
        self.other = RemoteStore(open_store(self.url), self.loop)
        await self.other.open()
        return self.mine, self.other

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.other.close()
            await self.mine.close()
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            await asyncio.to_thread(self.thread.join, 10)
            self.loop.close()


class RemoteStore:
    """A store driven from another thread's event loop (a stand-in for another process)."""

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop) -> None:
        self.store, self.loop = store, loop
        self.capabilities = store.capabilities

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    async def open(self) -> None:
        await self.call(self.store.open())

    async def close(self) -> None:
        await self.call(self.store.close())

    async def run(self, body: Callable[[Any], Awaitable[T]]) -> T:
        """``body(store)`` if it takes the store, else ``body(tx)`` in a transaction."""
        if "store" in inspect.signature(body).parameters:
            return await self.call(body(self.store))

        async def inner() -> T:
            async with self.store.transaction() as tx:
                return await body(tx)

        return await self.call(inner())

    def transaction(self, *, readonly: bool = False) -> Any:
        raise NotImplementedError("use run() across threads")

    async def claim(self, *args: Any, **kwargs: Any) -> list[str]:
        return await self.call(self.store.claim(*args, **kwargs))

    async def changed(self) -> bool:
        return await self.call(self.store.changed())


async def race(
    first: Store,
    second: Store,
    first_body: Callable[[Tx], Awaitable[T]],
    second_body: Callable[[Tx], Awaitable[Any]] | Callable[[Store], Awaitable[Any]],
    *,
    then: Callable[[Tx], Awaitable[Any]] | None = None,
    hold: float = 0.3,
) -> tuple[T, Any]:
    """``first_body`` runs in a transaction of ``first``, which stays open while
    ``second_body`` starts on the other store (in a transaction of its own, unless it
    takes the store); ``then`` runs ``hold`` seconds later, and ``first`` commits.
    Returns both bodies' results."""
    assert isinstance(second, RemoteStore)
    async with first.transaction() as tx:
        first_result = await first_body(tx)
        other = asyncio.ensure_future(second.run(second_body))
        await asyncio.sleep(hold)
        if other.done() and other.exception() is not None:
            raise other.exception()  # type: ignore[misc]
        if then is not None:
            await then(tx)
    return first_result, await asyncio.wait_for(other, 30)


async def settle(store: Store, quiet: float = 0.5) -> None:
    """Poll ``changed()`` until it has said False for ``quiet`` seconds in a row
    (the first calls may say True: a backend may start listening on first use)."""
    loop = asyncio.get_running_loop()
    deadline, quiet_since = loop.time() + 10, loop.time()
    while loop.time() - quiet_since < quiet:
        if await store.changed():
            quiet_since = loop.time()
        if loop.time() > deadline:
            pytest.fail("changed() kept saying True with nothing committed")
        await asyncio.sleep(0.01)


def schedule(schedule_id: str, **fields: Any) -> ScheduleRecord:
    values: dict[str, Any] = dict(
        id=schedule_id,
        workflow="wf",
        cron="*/5 * * * *",
        timezone="Europe/Paris",
        catch_up="latest",
        input=b'{"n": 1}',
        paused=False,
        last_tick=NOW,
        next_at=NOW + 300,
        last_run_id=None,
        created_at=NOW,
        updated_at=NOW,
    )
    values.update(fields)
    return ScheduleRecord(**values)


def human_task(task_id: str, run_id: str = "r1", **fields: Any) -> HumanTaskRecord:
    values: dict[str, Any] = dict(
        id=task_id,
        run_id=run_id,
        workflow="wf",
        name="approve",
        title="Approve?",
        form_schema=b'{"type": "object"}',
        form_model="app:Approval",
        data=b'{"order": 1}',
        assignees='["ana", "ben"]',
        signal=f"\x1ftask:{task_id}",
        status="open",
        created_at=NOW,
        due_at=NOW + 60,
        completed_by=None,
        completed_at=None,
        result=None,
    )
    values.update(fields)
    return HumanTaskRecord(**values)
