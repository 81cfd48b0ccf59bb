"""Opening and closing a store, its transactions and the gauges metrics read."""

from __future__ import annotations

from typing import Any

import pytest

from parkway.store import Store, open_store
from parkway.store.base import (
    NewTask,
    StoreStats,
)
from tests.store.conformance.support import (
    NOW,
    WALL,
    _runs_with_tasks,
    entry,
    event,
    message,
    one,
    run,
    sub,
)


async def test_the_store_has_the_capabilities_the_suite_tests_it_for(
    store: Store, backend: Any
) -> None:
    assert store.capabilities == backend.capabilities


async def test_open_twice_and_close_twice_are_harmless(engine_url: str) -> None:
    store = open_store(engine_url)
    await store.open()
    await store.open()
    await store.close()
    await store.close()


@pytest.mark.requires("persistent")
async def test_data_survives_closing_and_reopening(engine_url: str) -> None:
    first = open_store(engine_url)
    await first.open()
    async with first.transaction() as tx:
        await tx.runs.insert(run("kept"))
    await first.close()
    second = open_store(engine_url)
    await second.open()
    try:
        got = await one(second, lambda tx: tx.runs.get("kept"), readonly=True)
        assert got == run("kept")
    finally:
        await second.close()


async def test_stats_of_an_empty_store(store: Store) -> None:
    assert await store.stats(NOW) == StoreStats({}, 0, None, 0, 0)


async def test_stats_count_parked_runs_the_due_backlog_and_dead_letters(store: Store) -> None:
    async with store.transaction() as tx:
        for run_id, workflow, status in [
            ("p1", "order", "parked"),
            ("p2", "order", "parked"),
            ("p3", "refund", "parked"),
            ("r1", "order", "running"),
            ("c1", "order", "completed"),
            ("x1", "order", "pending"),
        ]:
            await tx.runs.insert(run(run_id, workflow=workflow, status=status))
        await tx.tasks.add(
            [
                NewTask("p1", NOW - 30, "delivery", 1, b"{}"),
                NewTask("p1", NOW - 10, "timer", 2),
                NewTask("x1", NOW - 20, "start"),
                NewTask("p3", NOW + 100, "timer", 1),  # not due yet
            ]
        )
        await tx.messages.add(message("reply", "k1", expires_at=NOW - 1))
        await tx.messages.add(message("reply", "k2", expires_at=NOW - 1))
        await tx.messages.add(message("reply", "k3", expires_at=NOW + 60))
        await tx.messages.expire(NOW, "expired")
    stats = await store.stats(NOW)
    assert stats.parked == {"order": 2, "refund": 1}
    assert (stats.due, stats.oldest_due_at) == (3, NOW - 30)
    assert stats.dead_letters == 2
    later = await store.stats(NOW + 100)
    assert (later.due, later.oldest_due_at) == (4, NOW - 30)
    async with store.transaction() as tx:  # done tasks leave the backlog
        await tx.tasks.delete([t.id for t in await tx.tasks.due("p1", NOW)])
    assert (await store.stats(NOW)).oldest_due_at == NOW - 20
    # A paused run's tasks wait for its resume, not for a worker: not the backlog.
    assert await one(store, lambda tx: tx.runs.update("x1", {"paused": True}))
    assert ((await store.stats(NOW)).due, (await store.stats(NOW)).oldest_due_at) == (0, None)


async def test_stats_count_the_runs_taken_over_from_an_expired_lease(store: Store) -> None:
    await _runs_with_tasks(store, {"a": [NOW], "b": [NOW]}, status="running")
    assert sorted(
        await store.claim("w1", now=NOW, wall_now=WALL, lease_until=WALL + 10, limit=5)
    ) == ["a", "b"]
    # Live leases are not taken; a run no one leases is no takeover either.
    assert await store.claim("w2", now=NOW, wall_now=WALL + 5, lease_until=WALL + 35, limit=5) == []
    assert (await store.stats(NOW)).takeovers == 0
    assert await store.claim("w2", now=NOW, wall_now=WALL + 11, lease_until=WALL + 41, limit=1) in (
        ["a"],
        ["b"],
    )
    assert (await store.stats(NOW)).takeovers == 1
    async with store.transaction() as tx:  # w1 died: its other run, handed over (not counted)
        leases = [
            await tx.runs.lease(r, owner="w3", now=NOW, wall_now=WALL + 12, lease_until=WALL + 42)
            for r in ("a", "b")
        ]
    assert sum(1 for lease in leases if lease.taken) == 1
    assert (await store.stats(NOW)).takeovers == 1
    await store.release_leases("w2")  # released, not expired: no takeover
    await store.release_leases("w3")
    assert (
        len(await store.claim("w4", now=NOW, wall_now=WALL + 13, lease_until=WALL + 43, limit=5))
        == 2
    )
    assert (await store.stats(NOW)).takeovers == 1
    taken = await store.claim("w5", now=NOW, wall_now=WALL + 44, lease_until=WALL + 74, limit=5)
    assert len(taken) == 2
    assert (await store.stats(NOW)).takeovers == 3


async def test_start_run_and_send_signal_give_their_task_its_payload(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.start(run("r"), NOW, task_payload=b'{"trace": {"traceparent": "x"}}')
    async with store.transaction() as tx:
        sent = await tx.signals.send("r", "go", b"1", NOW, task_payload=b'{"trace": {}}')
    assert sent.status == "pending"
    async with store.transaction(readonly=True) as tx:
        tasks = await tx.tasks.due("r", NOW)
    assert sorted((t.kind, t.payload) for t in tasks) == [
        ("signal", b'{"trace": {}}'),
        ("start", b'{"trace": {"traceparent": "x"}}'),
    ]


async def test_a_failed_transaction_leaves_nothing_behind(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r"))
        await tx.tasks.add([NewTask("r", NOW, "start")])
        await tx.journal.put("r", [entry(0)])
        await tx.signals.add("r", "go", b"1", NOW)
        await tx.subscriptions.add(sub("r", 0))
        await tx.events.insert(event("e0"))
        m = await tx.messages.add(message("pay", "K"))

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        async with store.transaction() as tx:
            await tx.runs.insert(run("new"))
            await tx.runs.update("r", {"status": "parked"})
            await tx.tasks.add([NewTask("new", NOW, "start")])
            await tx.tasks.delete([t.id for t in await tx.tasks.due("r", NOW)])
            await tx.journal.put("r", [entry(0, value=b"2"), entry(1)])
            await tx.signals.add("r", "go", b"2", NOW)
            await tx.signals.delete([s.id for s in await tx.signals.list("r")])
            await tx.subscriptions.add(sub("new", 0))
            await tx.subscriptions.delete_run("r")
            await tx.events.insert(event("e1"))
            await tx.events.delete("e0")
            await tx.messages.add(message("pay", "K"))
            await tx.messages.delete(m)
            await tx.messages.remember_id("mid", NOW)
            raise Boom

    async with store.transaction(readonly=True) as tx:
        assert await tx.runs.get("new") is None
        kept = await tx.runs.get("r")
        assert kept is not None and kept.status == "pending"
        assert [t.kind for t in await tx.tasks.due("r", NOW)] == ["start"]
        assert await tx.tasks.due("new", NOW) == []
        assert await tx.journal.read("r") == [entry(0)]
        assert [s.payload for s in await tx.signals.list("r")] == [b"1"]
        assert [s.run_id for s in await tx.subscriptions.list()] == ["r"]
        assert await tx.events.get("e0") is not None and await tx.events.get("e1") is None
        assert [x.id for x in await tx.messages.list(None)] == [m]
        assert await tx.messages.id_seen("mid") is None
    assert await store.has_due(NOW)


async def test_a_read_only_transaction_reads_what_was_committed(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r"))
    async with store.transaction(readonly=True) as tx:
        assert await tx.runs.get("r") is not None
        assert await tx.journal.read("r") == []
        assert await tx.messages.wait("x", "y") is None
