"""Schedules (``tx.schedules``)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from parkway.store import Store, open_store
from parkway.store.base import (
    FlowEntry,
    FlowSlot,
    NewTask,
    Tx,
)
from parkway.store.runs import RunFilter, RunSelection
from tests.store.conformance.support import (
    NOW,
    WALL,
    _runs_with_tasks,
    entry,
    one,
    race,
    run,
    schedule,
    shared_pair,
    sub,
    update,
)


async def test_a_schedule_round_trips_every_field_and_is_replaced_by_id(store: Store) -> None:
    full = schedule("b", paused=True, next_at=None, last_run_id="sched:b:x", input=b"[]")
    async with store.transaction() as tx:
        await tx.schedules.put(schedule("a"))
        await tx.schedules.put(full)
    assert await one(store, lambda tx: tx.schedules.get("b"), readonly=True) == full
    assert await one(store, lambda tx: tx.schedules.list(), readonly=True) == [
        schedule("a"),
        full,
    ]
    moved = schedule("a", last_tick=NOW + 300, next_at=NOW + 600, last_run_id="r", cron="0 * * * *")
    async with store.transaction() as tx:
        await tx.schedules.put(moved)
    assert await one(store, lambda tx: tx.schedules.get("a")) == moved
    assert await one(store, lambda tx: tx.schedules.delete("a")) is True
    assert await one(store, lambda tx: tx.schedules.delete("a")) is False
    assert await one(store, lambda tx: tx.schedules.get("a")) is None
    assert [s.id for s in await one(store, lambda tx: tx.schedules.list())] == ["b"]


async def test_due_schedules_are_the_unpaused_ones_due_the_earliest_first(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.schedules.next_at() is None
        await tx.schedules.put(schedule("late", next_at=NOW - 10))
        await tx.schedules.put(schedule("early", next_at=NOW - 60))
        await tx.schedules.put(schedule("now", next_at=NOW))
        await tx.schedules.put(schedule("future", next_at=NOW + 1))
        await tx.schedules.put(schedule("paused", paused=True, next_at=None))
        await tx.schedules.put(schedule("paused-due", paused=True, next_at=NOW - 100))
        await tx.schedules.put(schedule("ended", next_at=None))
    async with store.transaction() as tx:
        assert [s.id for s in await tx.schedules.due(NOW, 10)] == ["early", "late", "now"]
        assert [s.id for s in await tx.schedules.due(NOW, 2)] == ["early", "late"]
        assert await tx.schedules.due(NOW - 61, 10) == []
    assert await one(store, lambda tx: tx.schedules.next_at(), readonly=True) == NOW - 60


async def test_a_failed_transaction_leaves_the_schedules_as_they_were(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.schedules.put(schedule("kept"))
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await tx.schedules.put(schedule("kept", next_at=NOW + 9999))
            await tx.schedules.put(schedule("new"))
            await tx.schedules.delete("kept")
            raise RuntimeError("rolled back")
    assert await one(store, lambda tx: tx.schedules.list()) == [schedule("kept")]


@pytest.mark.requires("persistent")
async def test_schedules_survive_closing_and_reopening(engine_url: str) -> None:
    first = open_store(engine_url)
    await first.open()
    async with first.transaction() as tx:
        await tx.schedules.put(schedule("kept", paused=True, next_at=None))
    await first.close()
    second = open_store(engine_url)
    await second.open()
    try:
        got = await one(second, lambda tx: tx.schedules.get("kept"), readonly=True)
        assert got == schedule("kept", paused=True, next_at=None)
    finally:
        await second.close()


@pytest.mark.requires("shared")
async def test_race_two_firings_take_a_due_schedule_once(engine_url: str) -> None:
    """parkway.core.schedules.fire_due: due_schedules, the tick's run, the row moved on,
    in one transaction; a second worker firing meanwhile must not see the tick due."""
    async with shared_pair(engine_url) as (first, second):
        await one(first, lambda tx: tx.schedules.put(schedule("s", next_at=NOW)))

        async def fire(tx: Tx) -> list[str]:
            due = await tx.schedules.due(NOW, 10)
            for record in due:
                await tx.runs.start(run(f"sched:{record.id}:tick"), NOW)
                record.last_tick, record.next_at = NOW, NOW + 300
                await tx.schedules.put(record)
            return [record.id for record in due]

        assert await race(first, second, fire, fire) == (["s"], [])
        got = await one(first, lambda tx: tx.schedules.get("s"))
        assert got is not None and (got.last_tick, got.next_at) == (NOW, NOW + 300)


async def test_flow_slot_reads_zeros_for_a_new_key_and_keeps_what_is_put(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.admission.slot("wf", "k") == FlowSlot(0, 0, 0)
        await tx.admission.put_slot("wf", "k", FlowSlot(active=2, started=7, limit=3))
    async with store.transaction() as tx:
        assert await tx.admission.slot("wf", "k") == FlowSlot(2, 7, 3)
        assert await tx.admission.slot("wf", "other") == FlowSlot(0, 0, 0)
        assert await tx.admission.slot("wf2", "k") == FlowSlot(0, 0, 0)


async def test_flow_next_takes_queued_runs_by_priority_then_arrival(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.admission.enter("holder", "wf", "k", 0, queued=False)
        for run_id, priority in [("p0", 0), ("p5", 5), ("p1", 1), ("p5b", 5), ("n", -2)]:
            await tx.admission.enter(run_id, "wf", "k", priority, queued=True)
        await tx.admission.enter("elsewhere", "wf", "k2", 9, queued=True)
    order = []
    async with store.transaction() as tx:
        while (taken := await tx.admission.next("wf", "k")) is not None:
            order.append(taken)
            assert await tx.admission.entry(taken) == FlowEntry("wf", "k", queued=False)
    assert order == ["p5", "p5b", "p1", "p0", "n"]
    async with store.transaction() as tx:
        assert await tx.admission.next("wf", "k") is None
        assert await tx.admission.next("wf", "k2") == "elsewhere"
        assert await tx.admission.next("other", "k") is None


async def test_flow_next_rolled_back_leaves_the_run_queued(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.admission.enter("q", "wf", "k", 0, queued=True)
    with contextlib.suppress(RuntimeError):
        async with store.transaction() as tx:
            assert await tx.admission.next("wf", "k") == "q"
            raise RuntimeError("roll back")
    async with store.transaction() as tx:
        assert await tx.admission.entry("q") == FlowEntry("wf", "k", queued=True)
        assert await tx.admission.next("wf", "k") == "q"


async def test_flow_leave_returns_the_entry_and_flow_oldest_the_first_holder(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await tx.admission.enter("a", "wf", "k", 0, queued=False)
        await tx.admission.enter("b", "wf", "k", 9, queued=False)
        await tx.admission.enter("queued", "wf", "k", 0, queued=True)
        assert await tx.admission.oldest("wf", "k") == "a"
        assert await tx.admission.oldest("wf", "none") is None
    async with store.transaction() as tx:
        assert await tx.admission.leave("a") == FlowEntry("wf", "k", queued=False)
        assert await tx.admission.leave("a") is None
        assert await tx.admission.entry("a") is None
        assert await tx.admission.oldest("wf", "k") == "b"
        assert await tx.admission.leave("queued") == FlowEntry("wf", "k", queued=True)
        assert await tx.admission.next("wf", "k") is None  # (it left the queue)
        assert await tx.admission.entry("nobody") is None


async def test_rate_marks_are_kept_per_key_and_place(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.admission.rate_mark("wf", "k", 0) is None
        await tx.admission.put_rate_mark("wf", "k", 0, NOW)
        await tx.admission.put_rate_mark("wf", "k", 1, NOW + 1)
        await tx.admission.put_rate_mark("wf", "k2", 0, NOW + 2)
    async with store.transaction() as tx:
        await tx.admission.put_rate_mark("wf", "k", 0, NOW + 60)
    async with store.transaction(readonly=True) as tx:
        assert await tx.admission.rate_mark("wf", "k", 0) == NOW + 60
        assert await tx.admission.rate_mark("wf", "k", 1) == NOW + 1
        assert await tx.admission.rate_mark("wf", "k2", 0) == NOW + 2
        assert await tx.admission.rate_mark("wf", "k", 2) is None


async def test_deferred_tasks_wait_for_the_start_and_come_due_when_woken(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("queued"))
        await tx.runs.insert(run("windowed"))
        await tx.tasks.add([NewTask("queued", NOW, "signal"), NewTask("windowed", NOW, "signal")])
        await tx.tasks.add([NewTask("windowed", NOW + 60, "start")])
    async with store.transaction() as tx:
        for run_id in ("queued", "windowed"):
            ids = [t.id for t in await tx.tasks.due(run_id, NOW)]
            await tx.tasks.defer(run_id, ids)
        assert await tx.tasks.due("queued", NOW + 3600) == []
        assert [t.kind for t in await tx.tasks.due("windowed", NOW + 59)] == []
        assert sorted(t.kind for t in await tx.tasks.due("windowed", NOW + 60)) == [
            "signal",
            "start",
        ]
    assert await store.claim("w", now=NOW + 30, wall_now=WALL, lease_until=WALL + 9, limit=9) == []
    assert await store.next_due() == NOW + 60
    async with store.transaction() as tx:
        await tx.tasks.add([NewTask("queued", NOW + 10, "start")])
        await tx.tasks.wake_deferred("queued", NOW + 10)
    async with store.transaction(readonly=True) as tx:
        kinds = sorted(t.kind for t in await tx.tasks.due("queued", NOW + 10))
    assert kinds == ["signal", "start"]
    claimed = await store.claim("w", now=NOW + 10, wall_now=WALL, lease_until=WALL + 9, limit=9)
    assert claimed == ["queued"]


@pytest.mark.requires("shared")
async def test_race_two_starts_never_take_the_last_slot_of_a_key_both(engine_url: str) -> None:
    """flow.admit: the key's slot row, read and counted, then written."""
    async with shared_pair(engine_url) as (first, second):

        async def take(tx: Tx) -> bool:
            slot = await tx.admission.slot("wf", "k")
            if slot.active >= 1:
                return False
            slot.active += 1
            await tx.admission.put_slot("wf", "k", slot)
            return True

        assert await race(first, second, take, take) == (True, False)
        async with first.transaction(readonly=True) as tx:
            assert (await tx.admission.slot("wf", "k")).active == 1


@pytest.mark.requires("shared")
@pytest.mark.parametrize("queue_first", [True, False])
async def test_race_a_queued_start_and_a_release_never_strand_the_run(
    engine_url: str, queue_first: bool
) -> None:
    """flow.admit finding the key full (queues its run) against flow.release (hands
    the slot to the next queued run, or frees it): whichever goes first, the run
    ends up holding the slot."""
    async with shared_pair(engine_url) as (first, second):
        async with first.transaction() as tx:
            await tx.admission.put_slot("wf", "k", FlowSlot(active=1, limit=1))
            await tx.admission.enter("holder", "wf", "k", 0, queued=False)

        async def start(tx: Tx) -> str:
            slot = await tx.admission.slot("wf", "k")
            if slot.active >= 1:
                await tx.admission.enter("new", "wf", "k", 0, queued=True)
                return "queued"
            slot.active += 1
            await tx.admission.put_slot("wf", "k", slot)
            await tx.admission.enter("new", "wf", "k", 0, queued=False)
            return "admitted"

        async def release(tx: Tx) -> str | None:
            slot = await tx.admission.slot("wf", "k")
            assert await tx.admission.leave("holder") is not None
            following = await tx.admission.next("wf", "k")
            if following is None:
                slot.active -= 1
                await tx.admission.put_slot("wf", "k", slot)
            return following

        if queue_first:
            assert await race(first, second, start, release) == ("queued", "new")
        else:
            assert await race(first, second, release, start) == (None, "admitted")
        async with first.transaction(readonly=True) as tx:
            assert await tx.admission.entry("new") == FlowEntry("wf", "k", queued=False)
            assert (await tx.admission.slot("wf", "k")).active == 1


async def test_a_paused_run_is_neither_claimed_nor_leased_nor_due(store: Store) -> None:
    await _runs_with_tasks(store, {"paused": [NOW - 1], "free": [NOW]})
    assert await one(store, lambda tx: tx.runs.update("paused", {"paused": True}))
    async with store.transaction(readonly=True) as tx:
        got = await tx.runs.get("paused")
        listed = await tx.runs.list(RunFilter(limit=10))
    assert got is not None and bool(got.paused)
    assert {r.id: bool(r.paused) for r in listed} == {"paused": True, "free": False}
    claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10)
    assert claimed == ["free"]  # the paused run's task is older, and stays
    await store.release_leases("w")
    async with store.transaction() as tx:
        lease = await tx.runs.lease(
            "paused", owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 30
        )
    assert lease.taken is False
    async with store.transaction() as tx:  # only the paused run's task is left
        free = await tx.tasks.due("free", NOW)
        await tx.tasks.delete([t.id for t in free])
    assert not await store.has_due(NOW)
    assert [t.kind for t in await one(store, lambda tx: tx.tasks.due("paused", NOW))] == ["start"]
    assert await one(store, lambda tx: tx.runs.update("paused", {"paused": False}))
    assert await store.has_due(NOW)
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10) == [
        "paused"
    ]


async def test_a_paused_run_is_claimed_and_due_for_its_deadline_only(store: Store) -> None:
    # (A run's deadline outranks its pause: see parkway.core.deadlines.)
    await _runs_with_tasks(store, {"paused": [NOW - 5]})
    assert await one(store, lambda tx: tx.runs.update("paused", {"paused": True}))
    async with store.transaction() as tx:
        await tx.tasks.add([NewTask("paused", NOW + 10, "deadline", payload=b'{"timeout": 10}')])
    assert not await store.has_due(NOW)
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10) == []
    assert await store.has_due(NOW + 10)
    later = NOW + 10
    claimed = await store.claim("w", now=later, wall_now=WALL, lease_until=WALL + 30, limit=10)
    assert claimed == ["paused"]
    loaded = await store.load_run("paused", later, owner="w")
    assert loaded is not None
    assert sorted(t.kind for t in loaded.tasks) == ["deadline", "start"]


async def test_find_runs_selects_by_filters_in_id_batches(store: Store) -> None:
    async with store.transaction() as tx:
        for i in range(7):
            status = "failed" if i % 2 else "parked"
            await tx.runs.insert(
                run(f"r{i}", status=status, subject="s" if i < 4 else None, created_at=NOW + i)
            )
        await tx.runs.insert(run("other", workflow="wf2", status="failed"))
        await tx.runs.insert(run("internal", workflow="parkway.acc", status="failed"))

    async def find(**filters: Any) -> list[str]:
        options: dict[str, Any] = dict(
            statuses=["failed"],
            workflow=None,
            subject=None,
            created_before=None,
            after=None,
            limit=100,
        )
        options.update(filters)
        found = await one(store, lambda tx: tx.runs.find(RunSelection(**options)), readonly=True)
        return [r.id for r in found]

    assert await find() == ["other", "r1", "r3", "r5"]  # by id; internal runs left out
    assert await find(workflow="parkway.acc") == ["internal"]
    assert await find(workflow="wf") == ["r1", "r3", "r5"]
    assert await find(subject="s") == ["r1", "r3"]
    assert await find(created_before=NOW + 3) == ["other", "r1"]
    assert await find(statuses=["failed", "parked"], workflow="wf", limit=3) == ["r0", "r1", "r2"]
    assert await find(statuses=["failed", "parked"], workflow="wf", after="r2", limit=3) == [
        "r3",
        "r4",
        "r5",
    ]
    assert await find(statuses=["completed"]) == []


async def test_expired_runs_are_the_ended_ones_past_a_time_and_deleted_with_their_data(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("old", status="completed", updated_at=NOW - 100))
        await tx.runs.insert(run("older", status="failed", updated_at=NOW - 200))
        await tx.runs.insert(run("kept", workflow="keep", status="cancelled", updated_at=NOW - 300))
        await tx.runs.insert(run("new", status="completed", updated_at=NOW))
        await tx.runs.insert(run("active", status="parked", updated_at=NOW - 500))
        await tx.journal.put("old", [entry(0), entry(1)])
        await tx.tasks.add([NewTask("old", NOW + 60, "timer", 1)])
        await tx.signals.add("old", "go", b"1", NOW)
        await tx.subscriptions.add(sub("old"))
        await tx.values.put("old", {"k": b"1"}, NOW)
        await tx.updates.add(update("old", "u1"))
        await tx.streams.append("old", "out", [(b"1", None)], NOW)
        await tx.journal.put("new", [entry(0)])
        await tx.streams.append("new", "out", [(b"2", 1)], NOW)

    def expired(**options: Any) -> Callable[[Tx], Awaitable[list[str]]]:
        return lambda tx: tx.runs.expired(
            NOW - 10, **{"workflow": None, "exclude": [], "limit": 10, **options}
        )

    assert await one(store, expired()) == ["kept", "older", "old"]  # oldest end first
    assert await one(store, expired(exclude=["keep"])) == ["older", "old"]
    assert await one(store, expired(workflow="keep")) == ["kept"]
    assert await one(store, expired(limit=1)) == ["kept"]
    await one(store, lambda tx: tx.runs.delete(["old", "missing"]))
    async with store.transaction(readonly=True) as tx:
        assert await tx.runs.get("old") is None
        assert await tx.journal.read("old") == []
        assert await tx.tasks.due("old", NOW + 3600) == []
        assert await tx.signals.list("old") == []
        assert await tx.subscriptions.list(run_id="old") == []
        assert await tx.values.of_runs(["old"]) == {}
        assert await tx.updates.get("old", "u1") is None
        assert await tx.streams.read("old", "out", 0, 10) == ([], False)
        assert [e.pos for e in await tx.journal.read("new")] == [0]  # another run's stays
        assert [i.value for i in (await tx.streams.read("new", "out", 0, 10))[0]] == [b"2"]
    assert await store.next_due() is None
