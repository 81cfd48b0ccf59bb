"""Events and the publish index of parked runs' waits (``tx.events``, ``tx.subscriptions``)."""

from __future__ import annotations

from parkway.store import Store
from parkway.store.subscriptions import WaitKey
from tests.store.conformance.support import NOW, event, message_wait, one, sub


async def test_record_event_keeps_a_recent_id_and_reuses_an_old_one(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.events.record(event("e1", published_at=NOW), NOW - 60) is None
        assert await tx.events.record(event("old", published_at=NOW - 100), NOW - 200) is None
    async with store.transaction() as tx:
        # Seen within the window: a duplicate, nothing changes.
        again = event("e1", published_at=NOW + 5, payload=b'{"a": 2}')
        assert await tx.events.record(again, NOW - 60) == event("e1", published_at=NOW)
        # Seen before the window: replaced by the new event.
        reused = event("old", published_at=NOW + 5, subject="client:1")
        assert await tx.events.record(reused, NOW - 60) is None
    async with store.transaction() as tx:
        assert await tx.events.get("e1") == event("e1", published_at=NOW)
        assert await tx.events.get("old") == reused
        # The shapes of waits on the name are read as usual after it.
        await tx.subscriptions.add(sub("r1", 0, shape="order_id", digest="d1"))
    async with store.transaction() as tx:
        assert await tx.events.record(event("e2", published_at=NOW + 6), NOW - 60) is None
        assert await tx.subscriptions.shapes("default", "order.paid") == ["order_id"]


async def test_events_are_kept_by_id_and_looked_back_in_publish_order(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.events.insert(event("e1", published_at=NOW))
        await tx.events.insert(event("e2", published_at=NOW + 1, subject="client:5"))
        await tx.events.insert(event("e3", published_at=NOW + 1))  # same instant: publish order
        await tx.events.insert(event("e4", name="other", published_at=NOW + 2))
        await tx.events.insert(event("e5", domain="d2", published_at=NOW + 2))
    async with store.transaction() as tx:
        assert await tx.events.get("e2") == event("e2", published_at=NOW + 1, subject="client:5")
        assert await tx.events.get("nope") is None
        since = await tx.events.since("default", "order.paid", NOW + 0.5)
        assert [e.id for e in since] == ["e2", "e3"]
        assert [e.id for e in await tx.events.since("default", "order.paid", NOW)] == [
            "e1",
            "e2",
            "e3",
        ]
        await tx.events.delete("e1")
        await tx.events.delete("nope")
        assert await tx.events.get("e1") is None
        assert await tx.events.prune(NOW + 2) == 2  # e2, e3
        assert [e.id for e in await tx.events.since("d2", "order.paid", 0)] == ["e5"]
        assert await tx.events.get("e4") is not None


async def test_an_event_id_can_be_reused_after_its_event_is_deleted(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.events.insert(event("e1", published_at=NOW))
        await tx.events.delete("e1")
        await tx.events.insert(event("e1", published_at=NOW + 1, payload=b"2"))
    got = await one(store, lambda tx: tx.events.get("e1"))
    assert got is not None and got.payload == b"2"


async def test_subscriptions_are_found_by_exact_key_or_wildcard(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.subscriptions.add(sub("own", subject="product:1", shape="sku", digest="d1"))
        await tx.subscriptions.add(
            sub("any", subject="*", shape="sku", digest="d1", created_at=NOW + 1)
        )
        await tx.subscriptions.add(sub("other", subject="product:2", shape="sku", digest="d1"))
        await tx.subscriptions.add(sub("digest", subject="product:1", shape="sku", digest="d2"))
        await tx.subscriptions.add(sub("plain", subject="*", shape="", digest=""))
        await tx.subscriptions.add(sub("dom", subject="*", domain="d2", shape="sku", digest="d1"))
        await tx.subscriptions.add(message_wait("msg", "order.paid", "product:1"))

    async def find(
        subject: str | None, shape: str = "sku", digest: str = "d1", kind: str = "event"
    ) -> list[str]:
        async with store.transaction() as tx:
            found = await tx.subscriptions.find(
                WaitKey(
                    domain="default",
                    name="order.paid",
                    shape=shape,
                    digest=digest,
                    subject=subject,
                    kind=kind,
                )
            )
            return [s.run_id for s in found]

    assert await find("product:1") == ["own", "any"]  # oldest first
    assert await find("product:2") == ["other", "any"]
    assert await find(None) == ["any"]  # no subject: wildcards only
    assert await find("product:1", digest="d2") == ["digest"]
    assert await find("product:9", shape="", digest="") == ["plain"]
    assert await find("product:1", shape="", digest="", kind="message") == ["msg"]
    assert await find("product:2", shape="", digest="", kind="message") == []
    async with store.transaction(readonly=True) as tx:
        assert sorted(await tx.subscriptions.shapes("default", "order.paid")) == ["", "sku"]
        assert await tx.subscriptions.shapes("default", "nothing") == []
        found = await tx.subscriptions.find(
            WaitKey(
                domain="default",
                name="order.paid",
                shape="sku",
                digest="d1",
                subject="product:1",
                kind="event",
            )
        )
        assert found[0] == sub("own", subject="product:1", shape="sku", digest="d1")


async def test_a_subscription_round_trips_every_field(store: Store) -> None:
    full = sub(
        "r",
        7,
        kind="event",
        domain="shop",
        name="paid",
        subject="client:5",
        shape="a|b",
        digest="ff00",
        match=b'{"a": 1, "b": [2]}',
        wait="wait_for_event:paid#7",
        expires_at=NOW + 99.5,
        created_at=NOW + 0.25,
        deadline=NOW + 60,
    )
    async with store.transaction() as tx:
        await tx.subscriptions.add(full)
        await tx.subscriptions.add(sub("bare", 0))
    async with store.transaction(readonly=True) as tx:
        assert await tx.subscriptions.list(run_id="r") == [full]
        assert [s.deadline for s in await tx.subscriptions.list(run_id="bare")] == [None]


async def test_adding_a_subscription_twice_replaces_it(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.subscriptions.add(sub("r", 3, subject="a", match=b'{"x": 1}'))
        await tx.subscriptions.add(sub("r", 3, subject="b", match=b'{"x": 2}'))
    subs = await one(store, lambda tx: tx.subscriptions.list(run_id="r"))
    assert [(s.subject, s.match) for s in subs] == [("b", b'{"x": 2}')]


async def test_list_and_delete_subscriptions(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.subscriptions.add(sub("r", 1, created_at=NOW + 2))
        await tx.subscriptions.add(sub("r", 2, name="other", created_at=NOW + 1))
        await tx.subscriptions.add(sub("s", 1, created_at=NOW))
    async with store.transaction() as tx:
        assert [(s.run_id, s.pos) for s in await tx.subscriptions.list()] == [
            ("s", 1),
            ("r", 2),
            ("r", 1),
        ]
        assert [s.pos for s in await tx.subscriptions.list(run_id="r")] == [2, 1]
        assert [s.run_id for s in await tx.subscriptions.list(name="order.paid")] == ["s", "r"]
        assert [s.pos for s in await tx.subscriptions.list(run_id="r", name="other")] == [2]
        await tx.subscriptions.delete("r", 2)
        await tx.subscriptions.delete("r", 99)
        assert [s.pos for s in await tx.subscriptions.list(run_id="r")] == [1]
        await tx.subscriptions.delete_run("r")
        assert [s.run_id for s in await tx.subscriptions.list()] == ["s"]


async def test_the_sweep_drops_expired_subscriptions_and_unused_shapes(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.subscriptions.add(sub("old", shape="a", expires_at=NOW - 1))
        await tx.subscriptions.add(sub("edge", shape="b", expires_at=NOW))
        await tx.subscriptions.add(sub("new", shape="b", expires_at=NOW + 1))
    async with store.transaction() as tx:
        assert await tx.subscriptions.sweep(NOW) == 1  # expires_at < now
        assert sorted(s.run_id for s in await tx.subscriptions.list()) == ["edge", "new"]
        assert await tx.subscriptions.shapes("default", "order.paid") == ["b"]
        await tx.subscriptions.delete_run("edge")
        await tx.subscriptions.delete_run("new")
        assert await tx.subscriptions.sweep(NOW) == 0
        assert await tx.subscriptions.shapes("default", "order.paid") == []
