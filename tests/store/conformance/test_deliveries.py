"""A publish or a message that only resumes waits, in one operation (``FusedTx``) or composed."""

from __future__ import annotations

from typing import Any

import pytest

from parkway.matching import shape_of
from parkway.store import Store
from tests.store.conformance.support import (
    NOW,
    WALL,
    deliver,
    deliver_event,
    entry,
    event,
    event_wait,
    forged,
    run,
    show_shapes,
    sub,
)


async def test_deliver_event_records_it_and_takes_every_wait_it_matches(store: Store) -> None:
    waits = [
        event_wait("one", {"order_id": 1}),
        event_wait("two", {"order_id": 2}),
        event_wait("any", None, pos=3),
        event_wait("both", {"order_id": 1, "amount": 5}),
        event_wait("late", {"order_id": 1}, deadline=NOW - 1),  # its timeout passed first
        event_wait("edge", {"order_id": 1}, deadline=NOW),  # at its deadline: still on time
        event_wait("gone", {"order_id": 1}, expires_at=NOW - 1),  # expired
        event_wait("other-subject", {"order_id": 1}, subject="acme"),
        sub("message", kind="message", subject="K1"),  # a message wait of the same name
    ]
    async with store.transaction() as tx:
        for wait in waits:
            await tx.subscriptions.add(wait)
    await show_shapes(store, *{w.shape for w in waits})
    delivery = await deliver(store, {"order_id": 1, "amount": 5})
    assert delivery.outcome == "published" and delivery.lease is None
    assert sorted(delivery.waits) == [
        ("any", "wait#3"),
        ("both", "wait#0"),
        ("edge", "wait#0"),
        ("one", "wait#0"),
    ]
    async with store.transaction(readonly=True) as tx:
        recorded = await tx.events.get("e1")
        assert recorded is not None and recorded.payload == b'{"order_id":1,"amount":5}'
        for run_id, _ in delivery.waits:
            tasks = await tx.tasks.due(run_id, NOW)
            assert [(t.kind, t.due_at, t.payload) for t in tasks] == [
                ("delivery", NOW, b'envelope:{"order_id":1,"amount":5}')
            ]
        left = sorted(s.run_id for s in await tx.subscriptions.list())
        assert left == ["gone", "late", "message", "other-subject", "two"]
        assert await tx.tasks.due("two", NOW) == []
    # A second publish finds the taken waits gone.
    again = await deliver(store, {"order_id": 1, "amount": 5}, "e2")
    assert (again.outcome, again.waits) == ("published", [])


async def test_deliver_event_takes_the_oldest_wait_first_within_a_shape(store: Store) -> None:
    async with store.transaction() as tx:
        for i, run_id in enumerate(["c", "a", "b"]):
            await tx.subscriptions.add(event_wait(run_id, {"k": 1}, created_at=NOW + i))
    await show_shapes(store, shape_of({"k": 1}))
    delivery = await deliver(store, {"k": 1})
    assert delivery.waits == [("c", "wait#0"), ("a", "wait#0"), ("b", "wait#0")]


async def test_deliver_event_applies_the_match_rule_not_just_the_digest(store: Store) -> None:
    """The digest only narrows: each wait it finds must still match (JSON equality)."""
    cases = {
        # run id: (the wait's match, the payload), and whether it matches
        "other-value": ({"k": 2}, {"k": 1}, False),
        "int-float": ({"k": 1}, {"k": 1.0}, True),  # numbers by value
        "bool-int": ({"k": True}, {"k": 1}, False),  # booleans apart from numbers
        "null": ({"k": None}, {"k": None}, True),
        "nested": ({"k": {"a": [1, 2]}}, {"k": {"a": [1, 2]}, "x": 0}, True),
        "longer-list": ({"k": [1]}, {"k": [1, 2]}, False),  # not containment
        "wider-object": ({"k": {"a": 1}}, {"k": {"a": 1, "b": 2}}, False),
        "reordered": ({"k": [1, 2]}, {"k": [2, 1]}, False),
        "string": ({"k": "é"}, {"k": "\u00e9"}, True),
        "string-number": ({"k": "1"}, {"k": 1}, False),
    }
    for run_id, (match, payload, expected) in cases.items():
        async with store.transaction() as tx:
            await tx.subscriptions.add(forged(run_id, match, payload))
        await show_shapes(store, shape_of(match))
        delivery = await deliver(store, payload, event_id=f"e-{run_id}")
        assert delivery.outcome == "published"
        assert delivery.waits == ([(run_id, "wait#0")] if expected else []), run_id
        async with store.transaction(readonly=True) as tx:
            assert (await tx.subscriptions.list(run_id=run_id) == []) is expected, run_id


async def test_deliver_event_refuses_a_fresh_duplicate_and_a_stale_id_is_free(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await tx.subscriptions.add(event_wait("r", {"k": 1}))
        await tx.events.insert(event("fresh", published_at=NOW - 10))
        await tx.events.insert(event("stale", published_at=NOW - 100, payload=b"old"))
    await show_shapes(store, shape_of({"k": 1}))
    duplicate = await deliver(store, {"k": 1}, "fresh")
    assert (duplicate.outcome, duplicate.waits, duplicate.lease) == ("duplicate", [], None)
    async with store.transaction(readonly=True) as tx:
        assert len(await tx.subscriptions.list(run_id="r")) == 1  # still waiting
        assert await tx.tasks.due("r", NOW) == []
    # Past retention the id is free again; a store may leave that case to the usual
    # path (declined: nothing written).
    stale = await deliver(store, {"k": 1}, "stale")
    async with store.transaction(readonly=True) as tx:
        recorded = await tx.events.get("stale")
        assert recorded is not None
        if stale.outcome is None:
            assert stale.waits == [] and recorded.payload == b"old"
            assert len(await tx.subscriptions.list(run_id="r")) == 1
        else:
            assert stale.outcome == "published" and stale.waits == [("r", "wait#0")]
            assert recorded.payload == b'{"k":1}' and recorded.published_at == NOW


async def test_deliver_event_with_no_waits_records_the_event(store: Store) -> None:
    published = await deliver(store, [1, 2], "e1", fields={"subject": "acme"})
    assert (published.outcome, published.waits) == ("published", [])
    async with store.transaction(readonly=True) as tx:
        recorded = await tx.events.get("e1")
        assert recorded is not None and (recorded.subject, recorded.payload) == ("acme", b"[1,2]")


async def test_deliver_event_leases_the_first_run_it_delivers_to(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r", status="parked"))
        await tx.journal.put("r", [entry(0, state="pending", kind="event", name="order.paid")])
        await tx.subscriptions.add(event_wait("r", {"k": 1}, created_at=NOW - 1))
        await tx.runs.insert(run("r2", status="parked"))
        await tx.subscriptions.add(event_wait("r2", {"k": 1}))
        await tx.runs.insert(run("held", status="parked", lease_owner="x", lease_until=WALL + 9))
        await tx.subscriptions.add(event_wait("held", {"k": 2}))
    await show_shapes(store, shape_of({"k": 1}))
    terms: dict[str, Any] = dict(owner="w", wall_now=WALL, lease_until=WALL + 30)
    delivery = await deliver(store, {"k": 1}, **terms)
    assert delivery.outcome == "published"
    assert delivery.waits == [("r", "wait#0"), ("r2", "wait#0")]
    lease = delivery.lease
    assert lease is not None and lease.run_id == "r" and lease.taken is True
    assert lease.loaded is not None and lease.loaded.run.lease_owner == "w"
    assert [(t.kind, t.pos) for t in lease.loaded.tasks] == [("delivery", 0)]
    assert [e.pos for e in lease.loaded.journal] == [0]
    # The second run is left to a claim.
    assert await store.claim("other", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == [
        "r2"
    ]
    # A run leased to another worker gets the event all the same, but no lease;
    # a publish that delivers nothing leases nothing.
    busy = await deliver(store, {"k": 2}, "e2", **terms)
    assert busy.waits == [("held", "wait#0")]
    assert busy.lease is not None and busy.lease.taken is False
    nobody = await deliver(store, {"k": 3}, "e3", **terms)
    assert (nobody.outcome, nobody.waits, nobody.lease) == ("published", [], None)
    async with store.transaction(readonly=True) as tx:
        held = await tx.runs.get("held")
        assert held is not None and held.lease_owner == "x"


async def test_deliver_event_rolls_back_with_its_transaction(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r", status="parked"))
        await tx.subscriptions.add(event_wait("r", {"k": 1}))
    await show_shapes(store, shape_of({"k": 1}))
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await deliver_event(
                tx,
                event("e1", payload=b'{"k": 1}'),
                {"k": 1},
                b"env",
                fresh_after=NOW - 60,
                owner="w",
                wall_now=WALL,
                lease_until=WALL + 30,
            )
            raise RuntimeError("roll back")
    async with store.transaction(readonly=True) as tx:
        assert await tx.events.get("e1") is None
        assert len(await tx.subscriptions.list(run_id="r")) == 1
        assert await tx.tasks.due("r", NOW) == []
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == []


async def test_deliver_event_shares_a_transaction_with_others(store: Store) -> None:
    """A sender's publishes in flight share a transaction: each sees what the one
    before it did."""
    async with store.transaction() as tx:
        await tx.subscriptions.add(event_wait("r", {"k": 1}))
    await show_shapes(store, shape_of({"k": 1}))
    async with store.transaction() as tx:
        first = await deliver_event(
            tx, event("e1", payload=b'{"k":1}'), {"k": 1}, b"env", fresh_after=NOW - 60
        )
        same_id = await deliver_event(
            tx, event("e1", payload=b'{"k":1}'), {"k": 1}, b"env", fresh_after=NOW - 60
        )
        same_wait = await deliver_event(
            tx, event("e2", payload=b'{"k":1}'), {"k": 1}, b"env", fresh_after=NOW - 60
        )
    assert (first.outcome, first.waits) == ("published", [("r", "wait#0")])
    assert (same_id.outcome, same_id.waits) == ("duplicate", [])
    assert (same_wait.outcome, same_wait.waits) == ("published", [])
