"""Runs: their rows, listings, held runs and forks (``tx.runs``)."""

from __future__ import annotations

from typing import Any

from parkway.store import Store
from parkway.store.base import (
    NewTask,
)
from parkway.store.events import EventFilter
from parkway.store.runs import RunFilter, RunSelection
from tests.store.conformance.support import (
    NOW,
    WALL,
    _list,
    _runs_with_tasks,
    entry,
    event,
    one,
    run,
)


async def test_a_run_round_trips_every_field(store: Store) -> None:
    full = run(
        "r1",
        workflow="order",
        version="2",
        status="parked",
        input=b'{"x": [1, 2]}',
        output=b'"out"',
        error=b'{"type": "E"}',
        domain="shop",
        subject="client:5",
        parent_id="p",
        trigger=b'{"id": "e1"}',
        generation=3,
        created_at=NOW + 0.125,
        updated_at=NOW + 0.5,
    )
    async with store.transaction() as tx:
        await tx.runs.insert(full)
        await tx.runs.insert(run("r2"))
    async with store.transaction(readonly=True) as tx:
        assert await tx.runs.get("r1") == full
        assert await tx.runs.get("r2") == run("r2")
        assert await tx.runs.get("nope") is None
    got = await one(store, lambda tx: tx.runs.get("r1"), readonly=True)
    assert got is not None and isinstance(got.input, bytes) and got.lease_owner is None


async def test_update_run_changes_fields_and_fences_on_the_lease(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r"))
    assert await store.claim("w1", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=1) == []
    async with store.transaction() as tx:
        await tx.tasks.add([NewTask("r", NOW, "start")])
    assert await store.claim("w1", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=1) == ["r"]
    async with store.transaction() as tx:
        assert await tx.runs.update("r", {"status": "parked"}, owner="w2") is False
        assert await tx.runs.update("r", {"updated_at": NOW + 1}, owner="w1", release=False)
        held = await tx.runs.get("r")
        assert held is not None and held.lease_owner == "w1" and held.lease_until == WALL + 30
        assert await tx.runs.update("r", {"status": "parked", "output": b"1"}, owner="w1")
        released = await tx.runs.get("r")
        assert released is not None
        assert (released.status, released.output, released.updated_at) == ("parked", b"1", NOW + 1)
        assert (released.lease_owner, released.lease_until) == (None, None)
        # Without an owner, the update is unconditional.
        assert await tx.runs.update("r", {"status": "cancelled", "generation": 1})
        assert await tx.runs.update("missing", {"status": "cancelled"}) is False
    final = await one(store, lambda tx: tx.runs.get("r"))
    assert final is not None and (final.status, final.generation) == ("cancelled", 1)


async def test_list_runs_filters_newest_first_and_hides_internal_runs(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("a", created_at=NOW + 1, subject="s1", status="parked"))
        await tx.runs.insert(run("b", created_at=NOW + 2, workflow="other", domain="d2"))
        await tx.runs.insert(run("c", created_at=NOW + 2, subject="s1", parent_id="a"))
        await tx.runs.insert(run("acc", created_at=NOW + 3, workflow="parkway.debounce:wf"))

    async def ids(**filters: Any) -> list[str]:
        args: dict[str, Any] = dict(
            workflow=None, status=None, subject=None, domain=None, parent_id=None, limit=100
        )
        args.update(filters)
        async with store.transaction(readonly=True) as tx:
            return [r.id for r in await tx.runs.list(RunFilter(**args))]

    assert await ids() == ["c", "b", "a"]  # created_at DESC, then id DESC
    assert await ids(limit=2) == ["c", "b"]
    assert await ids(workflow="wf") == ["c", "a"]
    assert await ids(status="parked") == ["a"]
    assert await ids(subject="s1") == ["c", "a"]
    assert await ids(domain="d2") == ["b"]
    assert await ids(parent_id="a") == ["c"]
    assert await ids(workflow="parkway.debounce:wf") == ["acc"]


async def test_list_runs_searches_ids_and_subjects_by_prefix(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("order-1", created_at=NOW + 1, subject="client:5"))
        await tx.runs.insert(run("order-12", created_at=NOW + 2, subject=None))
        await tx.runs.insert(run("invoice-1", created_at=NOW + 3, subject="order-9"))
        await tx.runs.insert(run("x%_1", created_at=NOW + 4, subject="client:50"))
        await tx.runs.insert(run("Order-3", created_at=NOW + 5, subject="client:6"))
        await tx.runs.insert(run("parkway-acc", created_at=NOW + 6, workflow="parkway.batch:wf"))
    assert await _list(store, search="order-1") == ["order-12", "order-1"]
    assert await _list(store, search="order-") == ["invoice-1", "order-12", "order-1"]
    assert await _list(store, search="order-12") == ["order-12"]  # the exact id
    assert await _list(store, search="client:5") == ["x%_1", "order-1"]
    # Case-sensitive, and no wildcard: "%" and "_" are themselves.
    assert await _list(store, search="Order") == ["Order-3"]
    assert await _list(store, search="x%") == ["x%_1"]
    assert await _list(store, search="x_") == []
    assert await _list(store, search="%") == []
    assert await _list(store, search="parkway") == []  # internal runs stay hidden
    assert await _list(store, search="order-1", subject="client:5") == ["order-1"]
    assert await _list(store, search="order-1", limit=1) == ["order-12"]


async def test_list_runs_by_creation_time_half_open(store: Store) -> None:
    async with store.transaction() as tx:
        for i in range(5):
            await tx.runs.insert(run(f"r{i}", created_at=NOW + i, status="parked"))
    assert await _list(store, created_after=NOW + 1) == ["r4", "r3", "r2", "r1"]
    assert await _list(store, created_before=NOW + 1) == ["r0"]
    assert await _list(store, created_after=NOW + 1, created_before=NOW + 3) == ["r2", "r1"]
    assert await _list(store, created_after=NOW + 3.5, created_before=NOW + 3.5) == []
    assert await _list(store, created_after=NOW + 2, status="completed") == []


async def test_list_runs_pages_by_keyset_without_gaps_or_repeats(store: Store) -> None:
    # Runs created at one instant too (a manual clock, a burst): the id breaks the tie.
    async with store.transaction() as tx:
        for i in range(7):
            await tx.runs.insert(run(f"t{i}", created_at=NOW + (i // 3), subject=f"s{i % 2}"))
    everything = await _list(store)
    assert everything == ["t6", "t5", "t4", "t3", "t2", "t1", "t0"]
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = await _list(store, limit=2, before=cursor)
        if not page:
            break
        pages.append(page)
        cursor = page[-1]
    assert pages == [["t6", "t5"], ["t4", "t3"], ["t2", "t1"], ["t0"]]
    # With a filter, the cursor run need not match it.
    assert await _list(store, subject="s0", before="t5") == ["t4", "t2", "t0"]
    assert await _list(store, before="t0") == []
    assert await _list(store, before="no-such-run") == []
    # The cursor's run changing status does not move the page boundary.
    async with store.transaction() as tx:
        await tx.runs.update("t4", {"status": "completed", "updated_at": NOW + 50})
    assert await _list(store, before="t4", limit=2) == ["t3", "t2"]


async def test_run_counts_by_workflow_and_status(store: Store) -> None:
    async with store.transaction(readonly=True) as tx:
        assert await tx.runs.counts() == []
    async with store.transaction() as tx:
        await tx.runs.insert(run("a", status="parked"))
        await tx.runs.insert(run("b", status="parked"))
        await tx.runs.insert(run("c", status="failed"))
        await tx.runs.insert(run("d", workflow="billing", status="completed"))
        await tx.runs.insert(run("e", workflow="parkway.debounce:wf", status="parked"))
    async with store.transaction(readonly=True) as tx:
        assert await tx.runs.counts() == [
            ("billing", "completed", 1),
            ("wf", "failed", 1),
            ("wf", "parked", 2),
        ]


async def test_active_run_finds_an_unfinished_run_per_subject(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("done", subject="k", status="completed"))
        await tx.runs.insert(run("live", subject="k", status="parked"))
        await tx.runs.insert(run("nosub", subject=None, status="running"))
        await tx.runs.insert(run("failed", subject="f", status="failed"))
    async with store.transaction() as tx:
        assert await tx.runs.active("wf", "default", "k") == "live"
        assert await tx.runs.active("wf", "default", None) == "nosub"
        assert await tx.runs.active("wf", "default", "f") is None
        assert await tx.runs.active("wf", "other", "k") is None
        assert await tx.runs.active("other", "default", "k") is None


async def test_a_held_run_is_neither_claimed_nor_leased_nor_due_nor_backlog(store: Store) -> None:
    await _runs_with_tasks(store, {"held": [NOW - 1], "free": [NOW]})
    assert await one(store, lambda tx: tx.runs.update("held", {"status": "held"}))
    claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10)
    assert claimed == ["free"]  # the held run's task is older, and stays (its input is kept)
    await store.release_leases("w")
    async with store.transaction() as tx:
        lease = await tx.runs.lease(
            "held", owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 30
        )
    assert lease.taken is False  # (PostgreSQL: known once committed)
    async with store.transaction() as tx:
        free = await tx.tasks.due("free", NOW)
        await tx.tasks.delete([t.id for t in free])
    assert not await store.has_due(NOW)
    stats = await store.stats(NOW)
    assert (stats.due, stats.held, stats.parked) == (0, {"wf": 1}, {})
    assert [t.kind for t in await one(store, lambda tx: tx.tasks.due("held", NOW))] == ["start"]
    # A retry makes it running again: claimable, its kept task with it.
    assert await one(store, lambda tx: tx.runs.update("held", {"status": "running"}))
    assert await store.has_due(NOW)
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10) == [
        "held"
    ]


async def test_a_held_run_is_a_live_run_of_its_subject(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("h", status="held", subject="s1"))
        assert await tx.runs.active("wf", "default", "s1") == "h"


async def test_a_journal_is_outlined_and_copied_in_the_store(store: Store) -> None:
    source = [
        entry(0),
        entry(1, value=b'{"big": [1, 2, 3]}', branch="0.1", seq=4),
        entry(2, "error", b'{"type": "X", "message": "m"}'),
        entry(3, "pending", None),
        entry(5, deadline=NOW + 9),
    ]
    async with store.transaction() as tx:
        await tx.journal.put("src", source)
        assert await tx.journal.outline("src") == [
            (0, "done"),
            (1, "done"),
            (2, "error"),
            (3, "pending"),
            (5, "done"),
        ]
        assert await tx.journal.outline("nothing") == []
        await tx.journal.copy("src", "two", 2)
        await tx.journal.copy("src", "all", None)
        await tx.journal.copy("src", "none", 0)
    async with store.transaction(readonly=True) as tx:
        assert await tx.journal.read("two") == source[:2]
        assert await tx.journal.read("all") == [source[0], source[1], source[2], source[4]]
        assert await tx.journal.read("none") == []
        assert await tx.journal.read("src") == source  # the source is left as it is


async def test_a_fork_records_where_it_came_from(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("fork"))
        assert await tx.runs.update("fork", {"forked_from": "src", "forked_at": 3})
        await tx.runs.insert(run("plain"))
    async with store.transaction(readonly=True) as tx:
        got = await tx.runs.get("fork")
        plain = await tx.runs.get("plain")
        listed = await tx.runs.list(RunFilter(limit=10))
        found = await tx.runs.find(RunSelection(statuses=["pending"], limit=10))
    assert got is not None and (got.forked_from, got.forked_at) == ("src", 3)
    assert plain is not None and (plain.forked_from, plain.forked_at) == (None, None)
    assert {r.id: r.forked_from for r in listed} == {"fork": "src", "plain": None}
    assert {r.id: r.forked_at for r in found} == {"fork": 3, "plain": None}


async def test_a_claim_with_serves_leases_only_the_runs_it_serves(store: Store) -> None:
    from parkway.store.fleet import serve_keys

    async with store.transaction() as tx:
        await tx.runs.insert(run("v1", workflow="wf", version="1"))
        await tx.runs.insert(run("v2", workflow="wf", version="2"))
        await tx.runs.insert(run("any", workflow="wf", version=""))  # started by name
        await tx.runs.insert(run("other", workflow="other", version="1"))
        await tx.tasks.add([NewTask(r, NOW, "start") for r in ("v1", "v2", "any", "other")])
    serves = serve_keys({"wf": ["2"]})
    claimed = await store.claim(
        "w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10, serves=serves
    )
    assert sorted(claimed) == ["any", "v2"]
    async with store.transaction(readonly=True) as tx:
        assert await tx.runs.unserved(serves, NOW, 10) == ["other", "v1"]
        assert await tx.runs.unserved(serves, NOW, 1) == ["other"]
        assert await tx.runs.unserved(serve_keys({"wf": ["1", "2"], "other": ["1"]}), NOW, 10) == []
    # Without serves, every due run (as before there were versions to serve).
    rest = await store.claim("w2", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10)
    assert sorted(rest) == ["other", "v1"]


async def test_workers_are_listed_while_alive_and_pruned_after(store: Store) -> None:
    from parkway.store.fleet import WorkerRecord

    first = WorkerRecord("h:1:a", "h", 1, WALL, WALL, WALL + 3, {"wf": ["1"]})
    second = WorkerRecord("h:2:b", "h", 2, WALL + 1, WALL + 1, WALL + 4, {"wf": ["2"], "x": ["1"]})
    async with store.transaction() as tx:
        await tx.workers.beat(first)
        await tx.workers.beat(second)
    async with store.transaction(readonly=True) as tx:
        assert await tx.workers.list(WALL + 2) == [first, second]
        assert await tx.workers.list(WALL + 3.5) == [second]
    renewed = WorkerRecord("h:1:a", "h", 1, WALL + 9, WALL + 5, WALL + 8, {"wf": ["1", "2"]})
    async with store.transaction() as tx:
        await tx.workers.beat(renewed)  # (its start stays the first's)
    async with store.transaction() as tx:
        (found,) = await tx.workers.list(WALL + 6)
        assert found == WorkerRecord("h:1:a", "h", 1, WALL, WALL + 5, WALL + 8, {"wf": ["1", "2"]})
        assert await tx.workers.prune(WALL + 6) == 1
        assert await tx.workers.list(0) == [found]


async def test_operator_entries_are_kept_in_order_and_go_with_their_run(store: Store) -> None:
    from parkway.store.fleet import OperatorRecord

    entries = [OperatorRecord("r", "pause", "ann", NOW), OperatorRecord("r", "resume", None, NOW)]
    async with store.transaction() as tx:
        await tx.runs.insert(run("r"))
        for one in entries:
            await tx.operators.add(one)
        await tx.operators.add(OperatorRecord("other", "cancel", "bo", NOW))
    async with store.transaction(readonly=True) as tx:
        assert await tx.operators.list("r") == entries
    async with store.transaction() as tx:
        await tx.runs.delete(["r"])
    async with store.transaction(readonly=True) as tx:
        assert await tx.operators.list("r") == []
        assert len(await tx.operators.list("other")) == 1


async def test_event_links_are_listed_with_their_events_and_go_with_them(store: Store) -> None:
    from parkway.store.fleet import EventLink

    async with store.transaction() as tx:
        await tx.events.insert(event("e1", subject="s1", published_at=NOW))
        await tx.events.insert(event("e2", name="other", published_at=NOW + 1))
        await tx.events.link("e1", NOW, "resumed", ["r1", "r2"])
        await tx.events.link("e1", NOW, "started", ["r3"])
        await tx.events.link("e2", NOW + 1, "started", [])
    async with store.transaction(readonly=True) as tx:
        listed = await tx.events.list(EventFilter(limit=10))
        assert [row[0] for row in listed] == ["e2", "e1"]
        assert listed[1] == ("e1", "order.paid", "default", "s1", b'{"a": 1}', NOW)
        assert [r[0] for r in await tx.events.list(EventFilter(name="order.paid", limit=10))] == [
            "e1"
        ]
        assert [r[0] for r in await tx.events.list(EventFilter(subject="s1", limit=10))] == ["e1"]
        assert [r[0] for r in await tx.events.list(EventFilter(since=NOW + 1, limit=10))] == ["e2"]
        assert [r[0] for r in await tx.events.list(EventFilter(limit=1))] == ["e2"]
        assert await tx.events.links(["e1", "e2"]) == [
            EventLink("e1", "resumed", "r1"),
            EventLink("e1", "resumed", "r2"),
            EventLink("e1", "started", "r3"),
        ]
    async with store.transaction() as tx:
        assert await tx.events.prune(NOW + 0.5) == 1
    async with store.transaction(readonly=True) as tx:
        assert await tx.events.links(["e1"]) == []
