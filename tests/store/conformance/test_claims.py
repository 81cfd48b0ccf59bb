"""Claims and leases: how workers take runs, and the fences on them."""

from __future__ import annotations

import contextlib

import pytest

from parkway.errors import LeaseLostError
from parkway.store import Store
from parkway.store.base import (
    NewTask,
)
from tests.store.conformance.support import (
    NOW,
    WALL,
    _runs_with_tasks,
    entry,
    event,
    run,
)


async def test_claim_leases_runs_with_due_tasks_oldest_first(store: Store) -> None:
    await _runs_with_tasks(
        store, {"late": [NOW + 60], "b": [NOW - 1, NOW], "a": [NOW - 2], "c": [NOW]}
    )
    claimed = await store.claim("w1", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=2)
    assert sorted(claimed) == ["a", "b"]
    rest = await store.claim("w2", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10)
    assert rest == ["c"]  # a and b are leased; "late" is not due
    async with store.transaction(readonly=True) as tx:
        a = await tx.runs.get("a")
        c = await tx.runs.get("c")
    assert a is not None and (a.lease_owner, a.lease_until, a.status) == (
        "w1",
        WALL + 30,
        "running",
    )
    assert c is not None and c.lease_owner == "w2"


async def test_claim_starts_pending_runs_only(store: Store) -> None:
    await _runs_with_tasks(store, {"p": [NOW]}, status="pending")
    await _runs_with_tasks(store, {"k": [NOW]}, status="parked")
    await _runs_with_tasks(store, {"d": [NOW]}, status="completed")
    claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 1, limit=10)
    assert sorted(claimed) == ["d", "k", "p"]
    async with store.transaction(readonly=True) as tx:
        status = {r: (await tx.runs.get(r)).status for r in claimed}  # type: ignore[union-attr]
    assert status == {"p": "running", "k": "parked", "d": "completed"}


async def test_a_lease_is_taken_over_only_after_it_expires(store: Store) -> None:
    await _runs_with_tasks(store, {"r": [NOW]})
    assert await store.claim("w1", now=NOW, wall_now=WALL, lease_until=WALL + 10, limit=5) == ["r"]
    # Still live at exactly lease_until; expired strictly after.
    assert (
        await store.claim("w2", now=NOW, wall_now=WALL + 10, lease_until=WALL + 40, limit=5) == []
    )
    await store.extend_leases("w2", ["r"], WALL + 100)  # not its lease: no effect
    await store.extend_leases("w1", ["r"], WALL + 20)
    assert (
        await store.claim("w2", now=NOW, wall_now=WALL + 15, lease_until=WALL + 45, limit=5) == []
    )
    taken = await store.claim("w2", now=NOW, wall_now=WALL + 21, lease_until=WALL + 51, limit=5)
    assert taken == ["r"]
    async with store.transaction() as tx:
        # The first worker's commit is fenced off now.
        assert await tx.runs.update("r", {"status": "parked"}, owner="w1") is False
        assert await tx.runs.update("r", {"status": "parked"}, owner="w2", release=False)


async def test_release_leases_frees_every_run_of_one_owner(store: Store) -> None:
    await _runs_with_tasks(store, {"a": [NOW], "b": [NOW], "c": [NOW]})
    assert len(await store.claim("w1", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=2)) == 2
    assert await store.claim("w2", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=2) == ["c"]
    await store.release_leases("w1")
    async with store.transaction(readonly=True) as tx:
        owners = {r: (await tx.runs.get(r)).lease_owner for r in "abc"}  # type: ignore[union-attr]
    assert owners == {"a": None, "b": None, "c": "w2"}
    again = await store.claim("w3", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5)
    assert sorted(again) == ["a", "b"]


async def test_a_run_is_claimed_once_however_many_tasks_are_due(store: Store) -> None:
    await _runs_with_tasks(store, {"busy": [NOW - 3, NOW - 2, NOW - 1], "calm": [NOW]})
    claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5)
    assert sorted(claimed) == ["busy", "calm"]


@pytest.mark.requires("push")
async def test_a_claim_short_of_its_limit_left_nothing_claimable(store: Store) -> None:
    # Its worker claims again only when told of new tasks (see Store.claim): the
    # runs behind one whose many due tasks filled the limit come in the same claim.
    spec = {"busy": [NOW - 9, NOW - 8, NOW - 7, NOW - 6], "calm": [NOW - 1], "quiet": [NOW]}
    await _runs_with_tasks(store, spec)
    claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=3)
    assert sorted(claimed) == ["busy", "calm", "quiet"]


async def test_lease_run_hands_a_run_over_in_the_transaction_that_gave_it_a_task(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r", status="parked"))
        await tx.journal.put("r", [entry(0, state="pending", kind="signal", name="go")])
    async with store.transaction() as tx:
        sent = await tx.signals.send("r", "go", b"1", NOW)
        lease = await tx.runs.lease("r", owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 30)
    assert sent.status == "parked"
    # Known once committed: the run and what advancing it needs, this
    # transaction's signal and task among them.
    assert lease.run_id == "r" and lease.taken is True and lease.loaded is not None
    assert lease.loaded.run.lease_owner == "w" and lease.loaded.run.lease_until == WALL + 30
    assert [t.kind for t in lease.loaded.tasks] == ["signal"]
    assert [(s.name, s.payload) for s in lease.loaded.signals or []] == [("go", b"1")]
    assert [e.pos for e in lease.loaded.journal] == [0]
    # Leased as a claim leases: no claim takes it.
    assert await store.claim("other", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == []


async def test_lease_run_takes_a_run_started_in_its_transaction(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.start(run("new"), NOW)
        lease = await tx.runs.lease("new", owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 9)
    assert lease.taken is True and lease.loaded is not None
    started = lease.loaded.run
    assert (started.id, started.status, started.lease_owner, started.lease_until) == (
        "new",
        "running",
        "w",
        WALL + 9,
    )
    assert [(t.kind, t.due_at) for t in lease.loaded.tasks] == [("start", NOW)]
    assert lease.loaded.journal == []
    async with store.transaction(readonly=True) as tx:
        assert [t.id for t in await tx.tasks.due("new", NOW)] == [lease.loaded.tasks[0].id]
    assert await store.claim("other", now=NOW, wall_now=WALL, lease_until=WALL + 9, limit=5) == []
    # A second start of the id changes nothing, and leases nothing.
    async with store.transaction() as tx:
        await tx.runs.start(run("new", input=b"2"), NOW + 1)
        again = await tx.runs.lease("new", owner="v", now=NOW, wall_now=WALL, lease_until=WALL + 9)
    assert again.taken is False
    async with store.transaction(readonly=True) as tx:
        kept = await tx.runs.get("new")
        assert kept is not None and kept.lease_owner == "w" and kept.input == run("new").input
        assert len(await tx.tasks.due("new", NOW + 1)) == 1


async def test_lease_run_starts_a_pending_run_and_leaves_any_other_status(store: Store) -> None:
    # Runs of earlier transactions: one not yet started, one parked, one running
    # whose lease lapsed. Only the pending one changes status.
    async with store.transaction() as tx:
        await tx.runs.insert(run("p", status="pending"))
        await tx.runs.insert(run("k", status="parked"))
        await tx.runs.insert(run("r", status="running", lease_owner="x", lease_until=WALL - 1))
    async with store.transaction() as tx:
        leases = {
            r: await tx.runs.lease(r, owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 9)
            for r in ("p", "k", "r")
        }
    assert all(lease.taken is True for lease in leases.values())
    async with store.transaction(readonly=True) as tx:
        rows = {r: await tx.runs.get(r) for r in leases}
    assert {r: (row.status, row.lease_owner) for r, row in rows.items() if row} == {
        "p": ("running", "w"),
        "k": ("parked", "w"),
        "r": ("running", "w"),
    }


async def test_lease_run_leaves_a_leased_ended_or_missing_run_alone(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("held", status="running", lease_owner="x", lease_until=WALL + 9))
        await tx.runs.insert(run("lapsed", status="running", lease_owner="x", lease_until=WALL - 1))
        await tx.runs.insert(run("done", status="completed"))
        await tx.runs.insert(run("new"))  # pending: leased, it is running
    leases = {}
    async with store.transaction() as tx:
        for run_id in ("held", "lapsed", "done", "nobody", "new"):
            leases[run_id] = await tx.runs.lease(
                run_id, owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 30
            )
    assert {k: v.taken for k, v in leases.items()} == {
        "held": False,
        "lapsed": True,
        "done": False,
        "nobody": False,
        "new": True,
    }
    assert leases["new"].loaded is not None and leases["new"].loaded.run.status == "running"
    async with store.transaction(readonly=True) as tx:
        held, done = await tx.runs.get("held"), await tx.runs.get("done")
    assert held is not None and held.lease_owner == "x"
    assert done is not None and done.lease_owner is None


async def test_lease_run_rolls_back_with_its_transaction(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r", status="parked"))
        await tx.tasks.add([NewTask("r", NOW, "signal")])
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await tx.runs.lease("r", owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 30)
            raise RuntimeError("roll back")
    assert await store.claim("w2", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == ["r"]


async def test_tasks_of_unknown_runs_are_not_claimed(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.tasks.add([NewTask("ghost", NOW, "start")])
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == []


async def test_start_run_inserts_a_run_and_its_start_task_once(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.start(run("r"), NOW)
    async with store.transaction() as tx:
        await tx.runs.start(run("r", input=b'"other"'), NOW + 5)  # the same id again
        await tx.runs.start(run("s"), NOW + 1)
    async with store.transaction(readonly=True) as tx:
        assert await tx.runs.get("r") == run("r")
        assert [(t.kind, t.due_at, t.pos) for t in await tx.tasks.due("r", NOW + 10)] == [
            ("start", NOW, None)
        ]
        assert [t.due_at for t in await tx.tasks.due("s", NOW + 10)] == [NOW + 1]
    assert sorted(
        await store.claim("w", now=NOW + 1, wall_now=WALL, lease_until=WALL + 1, limit=5)
    ) == ["r", "s"]


async def test_load_run_hands_over_the_run_its_due_tasks_and_journal(store: Store) -> None:
    await _runs_with_tasks(store, {"r": [NOW - 1, NOW + 60], "done": [NOW], "s": [NOW]})
    async with store.transaction() as tx:
        await tx.signals.add("s", "go", b"1", NOW)
        await tx.signals.add("s", "go", b"2", NOW)
        await tx.signals.add("r", "go", b"3", NOW)  # no signal task: the mailbox is not read
        await tx.tasks.add([NewTask("s", NOW, "signal"), NewTask("s", NOW, "signal")])
        await tx.journal.put("r", [entry(0), entry(1, state="pending")])
        await tx.journal.put("done", [entry(0)])
        await tx.runs.update("done", {"status": "completed"})
    claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5)
    assert sorted(claimed) == ["done", "r", "s"]
    loaded = await store.load_run("r", NOW)
    assert loaded is not None
    assert (loaded.run.id, loaded.run.lease_owner, loaded.run.status) == ("r", "w", "running")
    assert [t.due_at for t in loaded.tasks] == [NOW - 1]  # the task due later stays
    assert loaded.journal == [entry(0), entry(1, state="pending")]
    assert loaded.signals is None
    woken = await store.load_run("s", NOW)
    assert woken is not None and [t.kind for t in woken.tasks] == ["start", "signal", "signal"]
    assert woken.signals is not None
    assert [(m.name, m.payload) for m in woken.signals] == [("go", b"1"), ("go", b"2")]
    again_s = await store.load_run("s", NOW)
    assert again_s is not None and again_s.signals == woken.signals
    ended = await store.load_run("done", NOW)
    assert ended is not None and ended.run.status == "completed" and ended.journal == []
    # Loaded again (the claim's read is used once): from the store, the same answer.
    again = await store.load_run("r", NOW)
    assert again is not None and again.journal == loaded.journal
    assert [t.id for t in again.tasks] == [t.id for t in loaded.tasks]
    assert await store.load_run("ghost", NOW) is None


async def test_a_claim_hands_each_run_its_own_journal_and_tasks(store: Store) -> None:
    # Several runs claimed at once, each loaded for the claimer: every run gets its
    # own entries and tasks, none of another's; a run the claimer parked last comes
    # without its journal (its worker holds it), a pending one with none.
    spec = {"a": [NOW - 3, NOW], "b": [NOW - 2], "c": [NOW - 1], "fresh": [NOW - 4]}
    await _runs_with_tasks(store, spec, status="parked")
    async with store.transaction() as tx:
        await tx.runs.update("fresh", {"status": "pending"})
        await tx.journal.put("a", [entry(0), entry(1), entry(2, state="pending")])
        await tx.journal.put("b", [entry(0, value=b"7")])
        await tx.journal.put("c", [entry(0), entry(1, state="pending")])
        await tx.runs.update("c", {"advanced_by": "w"})
    claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10)
    assert sorted(claimed) == ["a", "b", "c", "fresh"]
    loaded = {r: await store.load_run(r, NOW, owner="w") for r in claimed}
    assert all(one is not None and one.run.lease_owner == "w" for one in loaded.values())
    a, b, c, fresh = (loaded[r] for r in ("a", "b", "c", "fresh"))
    assert a is not None and b is not None and c is not None and fresh is not None
    assert a.journal == [entry(0), entry(1), entry(2, state="pending")]
    assert [t.due_at for t in a.tasks] == [NOW - 3, NOW]
    assert b.journal == [entry(0, value=b"7")] and [t.due_at for t in b.tasks] == [NOW - 2]
    assert c.journal is None and [t.due_at for t in c.tasks] == [NOW - 1]
    assert c.run.status == "parked"
    assert fresh.journal == [] and fresh.run.status == "running"
    assert {t.run_id for one in loaded.values() for t in one.tasks} == set(claimed)
    assert all(t.run_id == r for r, one in loaded.items() for t in one.tasks)  # type: ignore[union-attr]


async def test_dropping_cache_marks_clears_only_the_owners_and_rolls_back(store: Store) -> None:
    # A worker's cache let go of "a" and "b": the rows that still name it stop
    # naming it, so its claims load their journals; another worker's mark and a
    # run it never marked stay as they are.
    await _runs_with_tasks(store, {"a": [NOW], "b": [NOW], "c": [NOW], "d": [NOW]}, status="parked")
    async with store.transaction() as tx:
        for run_id, mark in (("a", "w"), ("b", "other"), ("c", "w")):
            await tx.runs.update(run_id, {"advanced_by": mark})
        await tx.journal.put("a", [entry(0)])
    with contextlib.suppress(RuntimeError):
        async with store.transaction() as tx:
            await tx.runs.drop_cache_marks(["a"], "w")
            raise RuntimeError("rolled back")
    async with store.transaction() as tx:
        assert (await tx.runs.get("a")).advanced_by == "w"  # type: ignore[union-attr]
        await tx.runs.drop_cache_marks(["a", "b", "d", "missing"], "w")
        await tx.runs.drop_cache_marks([], "w")
    async with store.transaction(readonly=True) as tx:
        marks = {r: (await tx.runs.get(r)).advanced_by for r in "abcd"}  # type: ignore[union-attr]
    assert marks == {"a": None, "b": "other", "c": "w", "d": None}
    claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10)
    assert sorted(claimed) == ["a", "b", "c", "d"]
    a, c = await store.load_run("a", NOW, owner="w"), await store.load_run("c", NOW, owner="w")
    assert a is not None and a.journal == [entry(0)]
    assert c is not None and c.journal is None


async def test_a_task_given_between_a_claim_and_the_load_is_not_lost(store: Store) -> None:
    # A store may hand over what its claim read (PostgreSQL, SQLite) or read at the
    # load (memory): a task given after the claim is in the load, or still due once
    # the advance that deleted what it was handed let go of the lease.
    await _runs_with_tasks(store, {"r": [NOW]}, status="parked")
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == ["r"]
    async with store.transaction() as tx:
        await tx.signals.add("r", "go", b"1", NOW)
        await tx.tasks.add([NewTask("r", NOW, "signal")])
    loaded = await store.load_run("r", NOW, owner="w")
    assert loaded is not None and loaded.run.lease_owner == "w"
    handed = [t.kind for t in loaded.tasks]
    async with store.transaction() as tx:
        await tx.tasks.delete([t.id for t in loaded.tasks])
        await tx.runs.update_leased("r", {"status": "parked"}, owner="w")
    later: list[str] = []
    if await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == ["r"]:
        again = await store.load_run("r", NOW, owner="w")
        assert again is not None
        later = [t.kind for t in again.tasks]
        assert again.signals is not None and [m.payload for m in again.signals] == [b"1"]
    assert sorted(handed + later) == ["signal", "start"]


async def test_update_leased_is_fenced_by_the_lease(store: Store) -> None:
    await _runs_with_tasks(store, {"mine": [NOW], "theirs": [NOW]})
    assert await store.claim("w1", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=1)
    assert await store.claim("w2", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=1)
    async with store.transaction(readonly=True) as tx:
        owners = {r: (await tx.runs.get(r)).lease_owner for r in ("mine", "theirs")}  # type: ignore[union-attr]
    w1 = next(r for r, o in owners.items() if o == "w1")
    w2 = next(r for r, o in owners.items() if o == "w2")
    async with store.transaction() as tx:
        await tx.runs.update_leased(w1, {"status": "parked"}, owner="w1", release=False)
        await tx.journal.put(w1, [entry(0)])
    # Not its lease: the transaction fails (at once, or at commit) and keeps nothing.
    with pytest.raises(LeaseLostError):
        async with store.transaction() as tx:
            await tx.journal.put(w1, [entry(1)])
            await tx.runs.update_leased(w2, {"status": "parked"}, owner="w1")
            await tx.journal.put(w2, [entry(0)])
    async with store.transaction() as tx:
        await tx.runs.update_leased(w1, {"status": "completed"}, owner="w1")  # releases it
    with pytest.raises(LeaseLostError):
        async with store.transaction() as tx:
            await tx.runs.update_leased(w1, {"status": "failed"}, owner="w1")
    async with store.transaction(readonly=True) as tx:
        first, second = await tx.runs.get(w1), await tx.runs.get(w2)
        assert await tx.journal.read(w1) == [entry(0)]
        assert await tx.journal.read(w2) == []
    assert first is not None and (first.status, first.lease_owner) == ("completed", None)
    assert second is not None and (second.status, second.lease_owner) == ("running", "w2")


async def test_a_write_that_fails_fails_its_transaction_and_saves_nothing(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.events.insert(event("e0"))

    # The duplicate event id fails, whenever the backend sends it (at once, or with
    # the commit): either way the transaction raises and keeps nothing.
    with pytest.raises(Exception):  # noqa: B017 - each backend raises its own error type
        async with store.transaction() as tx:
            await tx.runs.insert(run("lost"))
            await tx.tasks.add([NewTask("lost", NOW, "start")])
            await tx.events.insert(event("e0"))
            await tx.journal.put("lost", [entry(0)])
    async with store.transaction(readonly=True) as tx:
        assert await tx.runs.get("lost") is None
        assert await tx.journal.read("lost") == []
    assert not await store.has_due(NOW)
