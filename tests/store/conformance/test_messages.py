"""Messages: buffered, dead-lettered, and the waits they go to (``tx.messages``)."""

from __future__ import annotations

import pytest

from parkway.store import Store
from tests.store.conformance.support import (
    NOW,
    WALL,
    deliver_message,
    entry,
    message,
    message_wait,
    run,
    sub,
)


async def test_a_message_wait_is_found_by_name_and_key(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.subscriptions.add(message_wait("r", "payment", "APP-1", pos=4))
        await tx.subscriptions.add(sub("e", subject="APP-1", name="payment"))  # an event wait
    async with store.transaction() as tx:
        wait = await tx.messages.wait("payment", "APP-1")
        assert wait is not None and (wait.run_id, wait.pos, wait.kind) == ("r", 4, "message")
        assert await tx.messages.wait("payment", "APP-2") is None
        assert await tx.messages.wait("other", "APP-1") is None
        await tx.subscriptions.delete("r", 4)
        assert await tx.messages.wait("payment", "APP-1") is None


async def test_take_message_wait_removes_a_live_wait_and_leaves_a_timed_out_one(
    store: Store,
) -> None:
    late = sub("late", 0, kind="message", name="payment", subject="K2", deadline=NOW - 1)
    async with store.transaction() as tx:
        await tx.subscriptions.add(message_wait("r", "payment", "K1", pos=3))
        await tx.subscriptions.add(late)
        await tx.subscriptions.add(sub("e", subject="K1", name="payment"))  # an event wait
    async with store.transaction() as tx:
        taken = await tx.messages.take_wait("payment", "K1", NOW)
        assert taken is not None and (taken.run_id, taken.pos, taken.kind) == ("r", 3, "message")
        assert await tx.messages.take_wait("payment", "K1", NOW) is None  # gone
        assert await tx.messages.take_wait("payment", "K2", NOW) is None  # its timeout won
        assert await tx.messages.take_wait("payment", "K3", NOW) is None  # nobody waits
    async with store.transaction() as tx:
        assert await tx.messages.wait("payment", "K1") is None
        assert await tx.messages.wait("payment", "K2") == late
        assert len(await tx.subscriptions.list(name="payment")) == 2  # late and the event wait
        # At its deadline exactly, the wait still takes the message.
        assert await tx.messages.take_wait("payment", "K2", NOW - 1) == late


async def test_deliver_message_takes_the_wait_gives_its_run_the_task_and_remembers_the_id(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r", status="parked"))
        await tx.subscriptions.add(message_wait("r", "payment", "K1", pos=2))
    async with store.transaction() as tx:
        delivery = await deliver_message(
            tx, "payment", "K1", b"body", NOW, message_id="m-1", fresh_after=NOW - 60
        )
    assert (delivery.known, delivery.outcome, delivery.run_id) == (True, "delivered", "r")
    assert delivery.lease is None  # none asked for
    async with store.transaction(readonly=True) as tx:
        assert await tx.messages.wait("payment", "K1") is None
        tasks = await tx.tasks.due("r", NOW)
        assert [(t.kind, t.pos, t.payload, t.due_at) for t in tasks] == [
            ("message", 2, b"body", NOW)
        ]
        assert await tx.messages.id_seen("m-1") == NOW
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == ["r"]


async def test_deliver_message_with_nobody_waiting_writes_nothing(store: Store) -> None:
    late = sub("late", 0, kind="message", name="payment", subject="K2", deadline=NOW - 1)
    async with store.transaction() as tx:
        await tx.runs.insert(run("late", status="parked"))
        await tx.subscriptions.add(late)
        await tx.subscriptions.add(sub("e", subject="K1", name="payment"))  # an event wait
    async with store.transaction() as tx:
        nobody = await deliver_message(
            tx, "payment", "K1", b"b", NOW, message_id="m-1", fresh_after=NOW - 60
        )
        timed_out = await deliver_message(
            tx,
            "payment",
            "K2",
            b"b",
            NOW,
            message_id=None,
            fresh_after=NOW - 60,
            owner="w",
            wall_now=WALL,
            lease_until=WALL + 30,
        )
    assert (nobody.known, nobody.outcome, nobody.run_id) == (True, None, None)
    # A wait past its deadline stays: its timeout wins. Nothing is leased.
    assert (timed_out.known, timed_out.outcome, timed_out.lease) == (True, None, None)
    async with store.transaction(readonly=True) as tx:
        assert await tx.messages.wait("payment", "K2") == late
        assert await tx.tasks.due("late", NOW) == []
        assert await tx.messages.id_seen("m-1") is None  # not remembered: not received
        assert len(await tx.subscriptions.list(name="payment")) == 2
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == []


async def test_deliver_message_refuses_a_fresh_duplicate_and_takes_a_stale_one(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r", status="parked"))
        await tx.subscriptions.add(message_wait("r", "payment", "K1"))
        await tx.messages.remember_id("fresh", NOW - 10)
        await tx.messages.remember_id("stale", NOW - 100)
    async with store.transaction() as tx:
        duplicate = await deliver_message(
            tx, "payment", "K1", b"b", NOW, message_id="fresh", fresh_after=NOW - 60
        )
    assert (duplicate.known, duplicate.outcome, duplicate.run_id) == (True, "duplicate", None)
    async with store.transaction(readonly=True) as tx:
        assert await tx.messages.wait("payment", "K1") is not None  # still waiting
        assert await tx.tasks.due("r", NOW) == []
    async with store.transaction() as tx:
        again = await deliver_message(
            tx, "payment", "K1", b"b", NOW, message_id="stale", fresh_after=NOW - 60
        )
    assert (again.outcome, again.run_id) == ("delivered", "r")
    async with store.transaction(readonly=True) as tx:
        assert await tx.messages.id_seen("stale") == NOW


async def test_deliver_message_leases_the_run_it_delivers_to(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r", status="parked"))
        await tx.journal.put("r", [entry(0, state="pending", kind="message", name="payment")])
        await tx.subscriptions.add(message_wait("r", "payment", "K1"))
        await tx.runs.insert(run("held", status="parked", lease_owner="x", lease_until=WALL + 9))
        await tx.subscriptions.add(message_wait("held", "payment", "K2"))
    async with store.transaction() as tx:
        delivery = await deliver_message(
            tx,
            "payment",
            "K1",
            b"body",
            NOW,
            message_id=None,
            fresh_after=NOW - 60,
            owner="w",
            wall_now=WALL,
            lease_until=WALL + 30,
        )
    assert (delivery.outcome, delivery.run_id) == ("delivered", "r")
    lease = delivery.lease
    assert lease is not None and lease.run_id == "r" and lease.taken is True
    assert lease.loaded is not None and lease.loaded.run.lease_owner == "w"
    assert [(t.kind, t.payload) for t in lease.loaded.tasks] == [("message", b"body")]
    assert [e.pos for e in lease.loaded.journal] == [0]
    assert await store.claim("other", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == []
    # A run leased to another worker gets the message all the same, but no lease.
    async with store.transaction() as tx:
        busy = await deliver_message(
            tx,
            "payment",
            "K2",
            b"b",
            NOW,
            message_id=None,
            fresh_after=NOW - 60,
            owner="w",
            wall_now=WALL,
            lease_until=WALL + 30,
        )
    assert busy.outcome == "delivered" and busy.lease is not None
    assert busy.lease.taken is False
    async with store.transaction(readonly=True) as tx:
        held = await tx.runs.get("held")
        assert held is not None and held.lease_owner == "x"
        assert [t.kind for t in await tx.tasks.due("held", NOW)] == ["message"]


async def test_deliver_message_rolls_back_with_its_transaction(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r", status="parked"))
        await tx.subscriptions.add(message_wait("r", "payment", "K1"))
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await deliver_message(
                tx,
                "payment",
                "K1",
                b"b",
                NOW,
                message_id="m",
                fresh_after=NOW - 60,
                owner="w",
                wall_now=WALL,
                lease_until=WALL + 30,
            )
            raise RuntimeError("roll back")
    async with store.transaction(readonly=True) as tx:
        assert await tx.messages.wait("payment", "K1") is not None
        assert await tx.tasks.due("r", NOW) == []
        assert await tx.messages.id_seen("m") is None
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == []


async def test_at_most_one_wait_per_message_name_and_key(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.subscriptions.add(message_wait("first", "payment", "K"))
    # A second wait on the same (name, key) is refused (the transaction fails) or
    # replaces the first; never do both stand.
    try:
        async with store.transaction() as tx:
            await tx.subscriptions.add(message_wait("second", "payment", "K"))
    except Exception:
        pass
    async with store.transaction(readonly=True) as tx:
        waits = [s for s in await tx.subscriptions.list(name="payment") if s.kind == "message"]
        assert len(waits) == 1
        holder = await tx.messages.wait("payment", "K")
        assert holder is not None and holder.run_id == waits[0].run_id


async def test_buffered_messages_oldest_first_then_dead_letters(store: Store) -> None:
    async with store.transaction() as tx:
        m1 = await tx.messages.add(message("pay", "K", b'"1"', expires_at=NOW + 10))
        m2 = await tx.messages.add(
            message("pay", "K", b'"2"', message_id="mid", expires_at=NOW + 5)
        )
        m3 = await tx.messages.add(message("pay", "L", b'"3"', expires_at=NOW + 10))
    assert m1 < m2 < m3
    async with store.transaction() as tx:
        oldest = await tx.messages.oldest("pay", "K", NOW)
        assert oldest == message("pay", "K", b'"1"', id=m1, expires_at=NOW + 10)
        assert await tx.messages.oldest("pay", "nope", NOW) is None
        # Past its TTL a message is not handed out, even before it is dead-lettered.
        older = await tx.messages.oldest("pay", "K", NOW + 7)
        assert older is not None and older.id == m1
        assert await tx.messages.oldest("pay", "K", NOW + 10) is None
        got = await tx.messages.get(m2)
        assert got is not None and (got.message_id, got.payload) == ("mid", b'"2"')
        assert await tx.messages.get(999_999) is None
        expired = await tx.messages.expire(NOW + 5, "too late")  # expires_at <= now
        assert [(m.id, m.status, m.reason) for m in expired] == [(m2, "expired", "too late")]
        assert await tx.messages.expire(NOW + 5, "again") == []
        assert [m.id for m in await tx.messages.list(None)] == [m1, m2, m3]
        assert [m.id for m in await tx.messages.list("buffered")] == [m1, m3]
        assert [m.id for m in await tx.messages.list("expired")] == [m2]
        await tx.messages.update(m2, "buffered", None, NOW + 100)
        revived = await tx.messages.oldest("pay", "K", NOW + 50)
        assert revived is not None and revived.id == m2
        await tx.messages.delete(m1)
        await tx.messages.delete(m1)
        assert [m.id for m in await tx.messages.list(None)] == [m2, m3]


async def test_message_ids_are_remembered_then_pruned(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.messages.id_seen("a") is None
        await tx.messages.remember_id("a", NOW)
        await tx.messages.remember_id("b", NOW + 10)
        await tx.messages.remember_id("a", NOW + 1)  # a repeat moves it on
    async with store.transaction() as tx:
        assert await tx.messages.id_seen("a") == NOW + 1
        await tx.messages.prune_ids(NOW + 5)
        assert await tx.messages.id_seen("a") is None
        assert await tx.messages.id_seen("b") == NOW + 10
