"""Several processes on one store: what each sees of the other's commits."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from parkway.store import Store
from parkway.store.base import (
    NewTask,
    Tx,
)
from parkway.store.subscriptions import WaitKey
from tests.helpers import wait_for
from tests.store.conformance.support import (
    NOW,
    WALL,
    RemoteStore,
    _deliver_now,
    _runs_with_tasks,
    _show_no_shape,
    event,
    message,
    message_wait,
    one,
    race,
    run,
    settle,
    shared_pair,
    show_shapes,
    sub,
)


@pytest.mark.requires("shared")
async def test_changed_reports_commits_of_another_process(engine_url: str) -> None:
    async with shared_pair(engine_url) as (mine, other):
        await settle(mine)

        async def commit(tx: Tx) -> None:
            await tx.runs.insert(run("r"))
            await tx.tasks.add([NewTask("r", NOW, "start")])

        assert isinstance(other, RemoteStore)
        await other.run(commit)
        await wait_for(mine.changed, timeout=5, what="changed() after another store's commit")


@pytest.mark.requires("push")
async def test_watch_reports_the_earliest_due_time_of_each_commit_that_adds_tasks(
    engine_url: str,
) -> None:
    async with shared_pair(engine_url) as (mine, other):
        reported: asyncio.Queue[float | None] = asyncio.Queue()
        mine.watch(reported.put_nowait)
        await asyncio.sleep(0.3)  # the listener is up (and reported "unknown" once)
        while not reported.empty():
            assert reported.get_nowait() is None

        async def commit(tx: Tx) -> None:
            await tx.runs.insert(run("r"))
            await tx.tasks.add([NewTask("r", NOW + 5, "timer"), NewTask("r", NOW + 2, "timer")])
            await tx.tasks.add([NewTask("r", NOW + 9, "timer")])  # not earlier: no news

        assert isinstance(other, RemoteStore)
        await other.run(commit)
        assert await asyncio.wait_for(reported.get(), timeout=5) == NOW + 2
        # This process's own commits are reported once, when they commit, and an
        # earlier task later in the transaction is reported too.
        async with mine.transaction() as tx:
            await tx.tasks.add([NewTask("r", NOW + 3, "timer")])
            await tx.tasks.add([NewTask("r", NOW + 1, "timer")])
            assert reported.empty()  # not before the commit
        assert await asyncio.wait_for(reported.get(), timeout=5) == NOW + 1
        # A commit that adds no task, and one that rolls back, report nothing.
        async with mine.transaction() as tx:
            await tx.runs.update("r", {"updated_at": NOW + 1})
        with pytest.raises(RuntimeError):
            async with mine.transaction() as tx:
                await tx.tasks.add([NewTask("r", NOW, "signal")])
                raise RuntimeError("roll back")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reported.get(), timeout=0.5)


@pytest.mark.requires("shared")
async def test_two_processes_never_claim_the_same_run(engine_url: str) -> None:
    async with shared_pair(engine_url) as (first, second):
        await _runs_with_tasks(first, {f"r{i:03d}": [NOW] for i in range(60)})

        async def drain(store: Store, owner: str) -> list[str]:
            got: list[str] = []
            while batch := await store.claim(
                owner, now=NOW, wall_now=WALL, lease_until=WALL + 60, limit=4
            ):
                got += batch
            return got

        one_side, other_side = await asyncio.gather(drain(first, "w1"), drain(second, "w2"))
        assert not set(one_side) & set(other_side)
        assert sorted(one_side + other_side) == [f"r{i:03d}" for i in range(60)]


@pytest.mark.requires("shared")
async def test_race_two_publishes_deliver_one_subscription_once(engine_url: str) -> None:
    """publishing._resume_waiters: find the subscription, delete it, add a delivery."""
    async with shared_pair(engine_url) as (first, second):
        async with first.transaction() as tx:
            await tx.runs.insert(run("waiter", status="parked"))
            await tx.subscriptions.add(sub("waiter", 2))

        async def publish(tx: Tx) -> list[str]:
            found = await tx.subscriptions.find(
                WaitKey(
                    domain="default",
                    name="order.paid",
                    shape="",
                    digest="",
                    subject=None,
                    kind="event",
                )
            )
            for s in found:
                await tx.subscriptions.delete(s.run_id, s.pos)
                await tx.tasks.add([NewTask(s.run_id, NOW, "delivery", s.pos, b"{}")])
            return [s.run_id for s in found]

        a, b = await race(first, second, publish, publish)
        assert (a, b) == (["waiter"], [])
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.tasks.due("waiter", NOW)) == 1


@pytest.mark.requires("shared")
@pytest.mark.parametrize("first_party", ["publish", "park"])
async def test_race_a_publish_and_a_since_start_park_never_lose_the_event(
    engine_url: str, first_party: str
) -> None:
    """replay.Lookback.register (events_since, then add_subscription) vs a publish."""
    async with shared_pair(engine_url) as (first, second):

        async def publish(tx: Tx) -> list[str]:
            await tx.events.insert(event("e1", published_at=NOW + 1))
            found = await tx.subscriptions.find(
                WaitKey(
                    domain="default",
                    name="order.paid",
                    shape="",
                    digest="",
                    subject=None,
                    kind="event",
                )
            )
            for s in found:
                await tx.subscriptions.delete(s.run_id, s.pos)
                await tx.tasks.add([NewTask(s.run_id, NOW + 1, "delivery", s.pos, b"{}")])
            return [s.run_id for s in found]

        async def park(tx: Tx) -> list[str]:
            seen = await tx.events.since("default", "order.paid", NOW)
            if seen:
                await tx.tasks.add([NewTask("parker", NOW + 1, "delivery", 0, b"{}")])
            else:
                await tx.subscriptions.add(sub("parker", 0))
            return [e.id for e in seen]

        if first_party == "publish":
            delivered, looked_back = await race(first, second, publish, park)
            assert (delivered, looked_back) == ([], ["e1"])
        else:
            looked_back, delivered = await race(first, second, park, publish)
            assert (looked_back, delivered) == ([], ["parker"])
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.tasks.due("parker", NOW + 1)) == 1
            assert await tx.subscriptions.list() == []


@pytest.mark.requires("shared")
async def test_race_two_deliver_events_take_one_wait_once(engine_url: str) -> None:
    async with shared_pair(engine_url) as (first, second):
        async with first.transaction() as tx:
            await tx.subscriptions.add(sub("waiter", 2))
        await show_shapes(first, "")
        await second.run(_show_no_shape)
        a, b = await race(first, second, _deliver_now, lambda tx: _deliver_now(tx, "e2"))
        assert (a.outcome, a.waits) == ("published", [("waiter", "wait#2")])
        assert (b.outcome, b.waits) == ("published", [])
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.tasks.due("waiter", NOW)) == 1


@pytest.mark.requires("shared")
@pytest.mark.parametrize("first_party", ["publish", "park"])
async def test_race_deliver_event_and_a_since_start_park_never_lose_the_event(
    engine_url: str, first_party: str
) -> None:
    async with shared_pair(engine_url) as (first, second):
        await show_shapes(first, "")
        await second.run(_show_no_shape)

        async def park(tx: Tx) -> list[str]:
            seen = await tx.events.since("default", "order.paid", NOW)
            if seen:
                await tx.tasks.add([NewTask("parker", NOW, "delivery", 0, b"{}")])
            else:
                await tx.subscriptions.add(sub("parker", 0))
            return [e.id for e in seen]

        if first_party == "publish":
            delivered, looked_back = await race(first, second, _deliver_now, park)
            assert (delivered.waits, looked_back) == ([], ["e1"])
        else:
            looked_back, delivered = await race(first, second, park, _deliver_now)
            assert (looked_back, delivered.waits) == ([], [("parker", "wait#0")])
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.tasks.due("parker", NOW)) == 1
            assert await tx.subscriptions.list() == []


@pytest.mark.requires("shared")
async def test_race_deliver_event_twice_with_one_id(engine_url: str) -> None:
    async with shared_pair(engine_url) as (first, second):
        async with first.transaction() as tx:
            await tx.subscriptions.add(sub("waiter", 0))
        await show_shapes(first, "")
        await second.run(_show_no_shape)
        a, b = await race(first, second, _deliver_now, _deliver_now)
        assert (a.outcome, a.waits) == ("published", [("waiter", "wait#0")])
        # The second sees the first's event: a duplicate, or declined for the usual path
        # to say so; either way it wrote nothing.
        assert b.outcome in ("duplicate", None) and b.waits == []
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.tasks.due("waiter", NOW)) == 1


@pytest.mark.requires("shared")
async def test_race_the_same_event_id_twice_is_a_duplicate(engine_url: str) -> None:
    """publishing.publish_in_tx: events.get (de-duplication), then events.insert."""
    async with shared_pair(engine_url) as (first, second):

        async def publish(tx: Tx) -> bool:
            if await tx.events.get("same") is not None:
                return False
            await tx.events.insert(event("same"))
            return True

        assert await race(first, second, publish, publish) == (True, False)


@pytest.mark.requires("shared")
async def test_race_the_same_message_id_twice_is_a_duplicate(engine_url: str) -> None:
    """messages.correlate_in_tx: message_id_seen, then remember_message_id."""
    async with shared_pair(engine_url) as (first, second):

        async def correlate(tx: Tx) -> bool:
            if await tx.messages.id_seen("mid") is not None:
                return False
            await tx.messages.add(message("pay", "K"))
            await tx.messages.remember_id("mid", NOW)
            return True

        assert await race(first, second, correlate, correlate) == (True, False)
        messages = await one(first, lambda tx: tx.messages.list(None))
        assert len(messages) == 1


@pytest.mark.requires("shared")
async def test_race_two_correlations_deliver_one_wait_once(engine_url: str) -> None:
    """messages.correlate_in_tx: message_wait, delete_subscription, delivery; else buffer."""
    async with shared_pair(engine_url) as (first, second):
        async with first.transaction() as tx:
            await tx.subscriptions.add(message_wait("waiter", "pay", "K", pos=1))

        async def correlate(tx: Tx) -> str:
            wait = await tx.messages.wait("pay", "K")
            if wait is None:
                await tx.messages.add(message("pay", "K"))
                return "buffered"
            await tx.subscriptions.delete(wait.run_id, wait.pos)
            await tx.tasks.add([NewTask(wait.run_id, NOW, "message", wait.pos, b"{}")])
            return "delivered"

        assert await race(first, second, correlate, correlate) == ("delivered", "buffered")
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.tasks.due("waiter", NOW)) == 1
            assert len(await tx.messages.list("buffered")) == 1


@pytest.mark.requires("shared")
@pytest.mark.parametrize("first_party", ["correlate", "wait"])
async def test_race_a_correlation_and_a_message_wait_meet(
    engine_url: str, first_party: str
) -> None:
    """messages.MessageWait.register (message_wait, oldest_message, add_subscription)."""
    async with shared_pair(engine_url) as (first, second):

        async def correlate(tx: Tx) -> str:
            wait = await tx.messages.wait("pay", "K")
            if wait is None:
                await tx.messages.add(message("pay", "K"))
                return "buffered"
            await tx.subscriptions.delete(wait.run_id, wait.pos)
            await tx.tasks.add([NewTask(wait.run_id, NOW, "message", wait.pos, b"{}")])
            return "delivered"

        async def register(tx: Tx) -> str:
            if await tx.messages.wait("pay", "K") is not None:
                return "refused"
            buffered = await tx.messages.oldest("pay", "K", NOW)
            if buffered is not None:
                await tx.messages.delete(buffered.id)
                await tx.tasks.add([NewTask("waiter", NOW, "message", 0, b"{}")])
                return "consumed"
            await tx.subscriptions.add(message_wait("waiter", "pay", "K"))
            return "waiting"

        if first_party == "correlate":
            assert await race(first, second, correlate, register) == ("buffered", "consumed")
        else:
            assert await race(first, second, register, correlate) == ("waiting", "delivered")
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.tasks.due("waiter", NOW)) == 1
            assert await tx.messages.list(None) == []
            assert await tx.subscriptions.list() == []


@pytest.mark.requires("shared")
async def test_race_two_consumers_never_take_the_same_buffered_message(engine_url: str) -> None:
    """messages.after_run_ends / MessageWait.register: oldest_message, then delete_message."""
    async with shared_pair(engine_url) as (first, second):
        async with first.transaction() as tx:
            older = await tx.messages.add(message("pay", "K", b'"1"'))
            newer = await tx.messages.add(message("pay", "K", b'"2"'))

        async def consume(tx: Tx) -> int | None:
            found = await tx.messages.oldest("pay", "K", NOW)
            if found is not None:
                await tx.messages.delete(found.id)
            return None if found is None else found.id

        assert await race(first, second, consume, consume) == (older, newer)


@pytest.mark.requires("shared")
async def test_race_a_delivery_committed_while_the_run_stops_waiting_is_seen(
    engine_url: str,
) -> None:
    """messages.rebuffer: the run's commit reads its message deliveries, then deletes its
    tasks; a correlation that delivered in between must be among what it read."""
    async with shared_pair(engine_url) as (first, second):
        async with first.transaction() as tx:
            await tx.runs.insert(run("waiter", status="parked"))
            await tx.subscriptions.add(message_wait("waiter", "pay", "K", pos=1))

        async def correlate(tx: Tx) -> str:
            wait = await tx.messages.wait("pay", "K")
            assert wait is not None
            await tx.subscriptions.delete(wait.run_id, wait.pos)
            await tx.tasks.add([NewTask(wait.run_id, NOW, "message", wait.pos, b"{}")])
            return "delivered"

        async def stop_waiting(tx: Tx) -> list[str]:
            assert await tx.runs.update("waiter", {"status": "failed"})
            seen = [t.kind for t in await tx.tasks.due("waiter", float("inf"))]
            await tx.tasks.delete_waits("waiter", 1)
            await tx.subscriptions.delete("waiter", 1)
            return seen

        assert await race(first, second, correlate, stop_waiting) == ("delivered", ["message"])


@pytest.mark.requires("shared")
async def test_race_two_starts_of_one_run_id_both_succeed(engine_url: str) -> None:
    """Engine.start: get_run, then insert_run when absent; a concurrent twin must not fail."""
    async with shared_pair(engine_url) as (first, second):

        async def start(tx: Tx) -> bool:
            if await tx.runs.get("twin") is not None:
                return False
            await tx.runs.insert(run("twin"))
            await tx.tasks.add([NewTask("twin", NOW, "start")])
            return True

        a, _b = await race(first, second, start, start)
        assert a is True  # the second either saw the run or inserted nothing
        assert await one(first, lambda tx: tx.runs.get("twin")) == run("twin")


@pytest.mark.requires("shared")
async def test_race_unique_per_subject_starts_one_run(engine_url: str) -> None:
    """publishing.start_event_run with unique_per_subject: runs.active, then runs.insert."""
    async with shared_pair(engine_url) as (first, second):

        def start(run_id: str) -> Callable[[Tx], Awaitable[bool]]:
            async def body(tx: Tx) -> bool:
                if await tx.runs.active("wf", "default", "client:5") is not None:
                    return False
                await tx.runs.insert(run(run_id, subject="client:5"))
                return True

            return body

        assert await race(first, second, start("a"), start("b")) == (True, False)


@pytest.mark.requires("shared")
async def test_race_a_claim_cannot_slip_between_a_cancels_read_and_write(engine_url: str) -> None:
    """Engine.cancel reads the lease (none: cancel it now) and then writes the run; a
    worker claiming it in between would replay it as if nothing happened."""
    async with shared_pair(engine_url) as (first, second):
        await _runs_with_tasks(first, {"r": [NOW]})

        async def read(tx: Tx) -> str | None:
            found = await tx.runs.get("r")
            assert found is not None
            return found.lease_owner

        async def write(tx: Tx) -> None:
            assert await tx.runs.update("r", {"status": "cancelled"})

        async def claim_and_load(store: Store) -> str | None:
            claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5)
            if not claimed:
                return None
            async with store.transaction(readonly=True) as tx:
                loaded = await tx.runs.get("r")
            assert loaded is not None
            return loaded.status

        owner, seen_by_worker = await race(first, second, read, claim_and_load, then=write)
        assert owner is None
        # Either the claim waited for the cancel (and its worker sees it), or it skipped the run.
        assert seen_by_worker in (None, "cancelled")
