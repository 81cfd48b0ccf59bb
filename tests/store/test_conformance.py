"""The store conformance suite: the spec of the ``Store`` / ``Tx`` protocol.

Every test runs on every backend (memory, SQLite, PostgreSQL), against the
protocol alone, the way the engine calls it. Tests that need two processes on
one store are marked ``requires("shared")``; the races among them run the second
party on its own store instance, in its own thread and event loop, started while
the first party's transaction is still open: a backend passes only if the second
party sees the world as if the two had run one after the other (SQLite makes it
wait for the write lock; PostgreSQL must make it wait on the right lock).
"""

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
from parkway.errors import LeaseLostError
from parkway.matching import match_digest, payload_digest, shape_of
from parkway.store import Store, open_store
from parkway.store.base import (
    AttemptRecord,
    EventDelivery,
    EventRecord,
    FlowEntry,
    FlowSlot,
    JournalEntry,
    MessageDelivery,
    MessageRecord,
    NewTask,
    RunRecord,
    ScheduleRecord,
    StoreStats,
    SubscriptionRecord,
    Tx,
    UpdateRecord,
)
from parkway.store.people import CallbackRecord, HumanTaskRecord, token_digest

T = TypeVar("T")

NOW = 1_000_000.0  # engine time
WALL = 2_000_000.0  # wall-clock time, for leases


def run(run_id: str, **fields: Any) -> RunRecord:
    values: dict[str, Any] = dict(
        id=run_id, workflow="wf", version="1", status="pending", input=b'{"n": 1}',
        output=None, error=None, domain="default", subject=None, parent_id=None,
        trigger=None, generation=0, created_at=NOW, updated_at=NOW,
    )  # fmt: skip
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
        id=event_id, name=name, domain="default", subject=None, payload=b'{"a": 1}',
        published_at=NOW,
    )  # fmt: skip
    values.update(fields)
    return EventRecord(**values)


def sub(run_id: str, pos: int = 0, **fields: Any) -> SubscriptionRecord:
    values: dict[str, Any] = dict(
        run_id=run_id, pos=pos, kind="event", domain="default", name="order.paid",
        subject="*", shape="", digest="", match=None, wait=f"wait#{pos}",
        expires_at=NOW + 3600, created_at=NOW,
    )  # fmt: skip
    values.update(fields)
    return SubscriptionRecord(**values)


def message_wait(run_id: str, name: str, key: str, pos: int = 0) -> SubscriptionRecord:
    return sub(run_id, pos, kind="message", name=name, subject=key, wait=f"wait_for_message#{pos}")


def message(name: str, key: str, payload: bytes = b'"m"', **fields: Any) -> MessageRecord:
    values: dict[str, Any] = dict(
        id=0, name=name, key=key, payload=payload, message_id=None, status="buffered",
        reason=None, received_at=NOW, expires_at=NOW + 60,
    )  # fmt: skip
    values.update(fields)
    return MessageRecord(**values)


async def one(store: Store, body: Callable[[Tx], Awaitable[T]], *, readonly: bool = False) -> T:
    """``body`` in one transaction of its own."""
    async with store.transaction(readonly=readonly) as tx:
        return await body(tx)


# ---------------------------------------------------------------------------------------------
# Lifecycle


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
        await tx.insert_run(run("kept"))
    await first.close()
    second = open_store(engine_url)
    await second.open()
    try:
        got = await one(second, lambda tx: tx.get_run("kept"), readonly=True)
        assert got == run("kept")
    finally:
        await second.close()


# ---------------------------------------------------------------------------------------------
# Runs


async def test_a_run_round_trips_every_field(store: Store) -> None:
    full = run(
        "r1", workflow="order", version="2", status="parked", input=b'{"x": [1, 2]}',
        output=b'"out"', error=b'{"type": "E"}', domain="shop", subject="client:5",
        parent_id="p", trigger=b'{"id": "e1"}', generation=3, created_at=NOW + 0.125,
        updated_at=NOW + 0.5,
    )  # fmt: skip
    async with store.transaction() as tx:
        await tx.insert_run(full)
        await tx.insert_run(run("r2"))
    async with store.transaction(readonly=True) as tx:
        assert await tx.get_run("r1") == full
        assert await tx.get_run("r2") == run("r2")
        assert await tx.get_run("nope") is None
    got = await one(store, lambda tx: tx.get_run("r1"), readonly=True)
    assert got is not None and isinstance(got.input, bytes) and got.lease_owner is None


async def test_update_run_changes_fields_and_fences_on_the_lease(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("r"))
    assert await store.claim("w1", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=1) == []
    async with store.transaction() as tx:
        await tx.add_tasks([NewTask("r", NOW, "start")])
    assert await store.claim("w1", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=1) == ["r"]
    async with store.transaction() as tx:
        assert await tx.update_run("r", {"status": "parked"}, owner="w2") is False
        assert await tx.update_run("r", {"updated_at": NOW + 1}, owner="w1", release=False)
        held = await tx.get_run("r")
        assert held is not None and held.lease_owner == "w1" and held.lease_until == WALL + 30
        assert await tx.update_run("r", {"status": "parked", "output": b"1"}, owner="w1")
        released = await tx.get_run("r")
        assert released is not None
        assert (released.status, released.output, released.updated_at) == ("parked", b"1", NOW + 1)
        assert (released.lease_owner, released.lease_until) == (None, None)
        # Without an owner, the update is unconditional.
        assert await tx.update_run("r", {"status": "cancelled", "generation": 1})
        assert await tx.update_run("missing", {"status": "cancelled"}) is False
    final = await one(store, lambda tx: tx.get_run("r"))
    assert final is not None and (final.status, final.generation) == ("cancelled", 1)


async def test_list_runs_filters_newest_first_and_hides_internal_runs(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("a", created_at=NOW + 1, subject="s1", status="parked"))
        await tx.insert_run(run("b", created_at=NOW + 2, workflow="other", domain="d2"))
        await tx.insert_run(run("c", created_at=NOW + 2, subject="s1", parent_id="a"))
        await tx.insert_run(run("acc", created_at=NOW + 3, workflow="parkway.debounce:wf"))

    async def ids(**filters: Any) -> list[str]:
        args: dict[str, Any] = dict(
            workflow=None, status=None, subject=None, domain=None, parent_id=None, limit=100
        )
        args.update(filters)
        async with store.transaction(readonly=True) as tx:
            return [r.id for r in await tx.list_runs(**args)]

    assert await ids() == ["c", "b", "a"]  # created_at DESC, then id DESC
    assert await ids(limit=2) == ["c", "b"]
    assert await ids(workflow="wf") == ["c", "a"]
    assert await ids(status="parked") == ["a"]
    assert await ids(subject="s1") == ["c", "a"]
    assert await ids(domain="d2") == ["b"]
    assert await ids(parent_id="a") == ["c"]
    assert await ids(workflow="parkway.debounce:wf") == ["acc"]


async def _list(store: Store, **filters: Any) -> list[str]:
    args: dict[str, Any] = dict(
        workflow=None, status=None, subject=None, domain=None, parent_id=None, limit=100
    )
    args.update(filters)
    async with store.transaction(readonly=True) as tx:
        return [r.id for r in await tx.list_runs(**args)]


async def test_list_runs_searches_ids_and_subjects_by_prefix(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("order-1", created_at=NOW + 1, subject="client:5"))
        await tx.insert_run(run("order-12", created_at=NOW + 2, subject=None))
        await tx.insert_run(run("invoice-1", created_at=NOW + 3, subject="order-9"))
        await tx.insert_run(run("x%_1", created_at=NOW + 4, subject="client:50"))
        await tx.insert_run(run("Order-3", created_at=NOW + 5, subject="client:6"))
        await tx.insert_run(run("parkway-acc", created_at=NOW + 6, workflow="parkway.batch:wf"))
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
            await tx.insert_run(run(f"r{i}", created_at=NOW + i, status="parked"))
    assert await _list(store, created_after=NOW + 1) == ["r4", "r3", "r2", "r1"]
    assert await _list(store, created_before=NOW + 1) == ["r0"]
    assert await _list(store, created_after=NOW + 1, created_before=NOW + 3) == ["r2", "r1"]
    assert await _list(store, created_after=NOW + 3.5, created_before=NOW + 3.5) == []
    assert await _list(store, created_after=NOW + 2, status="completed") == []


async def test_list_runs_pages_by_keyset_without_gaps_or_repeats(store: Store) -> None:
    # Runs created at one instant too (a manual clock, a burst): the id breaks the tie.
    async with store.transaction() as tx:
        for i in range(7):
            await tx.insert_run(run(f"t{i}", created_at=NOW + (i // 3), subject=f"s{i % 2}"))
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
        await tx.update_run("t4", {"status": "completed", "updated_at": NOW + 50})
    assert await _list(store, before="t4", limit=2) == ["t3", "t2"]


async def test_run_counts_by_workflow_and_status(store: Store) -> None:
    async with store.transaction(readonly=True) as tx:
        assert await tx.run_counts() == []
    async with store.transaction() as tx:
        await tx.insert_run(run("a", status="parked"))
        await tx.insert_run(run("b", status="parked"))
        await tx.insert_run(run("c", status="failed"))
        await tx.insert_run(run("d", workflow="billing", status="completed"))
        await tx.insert_run(run("e", workflow="parkway.debounce:wf", status="parked"))
    async with store.transaction(readonly=True) as tx:
        assert await tx.run_counts() == [
            ("billing", "completed", 1),
            ("wf", "failed", 1),
            ("wf", "parked", 2),
        ]


async def test_active_run_finds_an_unfinished_run_per_subject(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("done", subject="k", status="completed"))
        await tx.insert_run(run("live", subject="k", status="parked"))
        await tx.insert_run(run("nosub", subject=None, status="running"))
        await tx.insert_run(run("failed", subject="f", status="failed"))
    async with store.transaction() as tx:
        assert await tx.active_run("wf", "default", "k") == "live"
        assert await tx.active_run("wf", "default", None) == "nosub"
        assert await tx.active_run("wf", "default", "f") is None
        assert await tx.active_run("wf", "other", "k") is None
        assert await tx.active_run("other", "default", "k") is None


# ---------------------------------------------------------------------------------------------
# Journal


async def test_journal_is_ordered_replaced_by_position_and_cleared(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.put_journal("r", [entry(1), entry(0, value=None), entry(2, "pending")])
        await tx.put_journal("other", [entry(0)])
    async with store.transaction() as tx:
        assert [e.pos for e in await tx.journal("r")] == [0, 1, 2]
        first = (await tx.journal("r"))[0]
        assert first == entry(0, value=None)
        await tx.put_journal("r", [entry(2, "done", b'{"ok": true}', deadline=NOW + 5)])
        assert (await tx.journal("r"))[2] == entry(2, "done", b'{"ok": true}', deadline=NOW + 5)
        await tx.clear_journal("r")
        assert await tx.journal("r") == []
        assert len(await tx.journal("other")) == 1


async def test_a_journal_entry_keeps_its_branch_and_order(store: Store) -> None:
    branched = [entry(0, branch="0.1"), entry(1, seq=7), entry(2, "withdrawn", branch="2.0")]
    async with store.transaction() as tx:
        await tx.put_journal("r", branched)  # several in one call
        await tx.put_journal("r", [entry(3, branch="u4", seq=9)])  # one alone
    async with store.transaction(readonly=True) as tx:
        assert await tx.journal("r") == [*branched, entry(3, branch="u4", seq=9)]
    loaded = await store.load_run("r", NOW)
    assert loaded is None  # (no run row: the journal alone loads nothing)


async def test_a_loaded_run_brings_its_journal_with_branches(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("r", status="parked"))
        await tx.put_journal("r", [entry(0, branch="0.0", seq=3), entry(1)])
        await tx.add_tasks([NewTask("r", NOW, "signal")])
    claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=1)
    assert claimed == ["r"]
    loaded = await store.load_run("r", NOW)
    assert loaded is not None
    assert loaded.journal == [entry(0, branch="0.0", seq=3), entry(1)]


# ---------------------------------------------------------------------------------------------
# Values and updates


async def test_values_are_set_replaced_and_read_by_run(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.put_values("a", {"link": b'"x"', "n": b"1"}, NOW)
        await tx.put_values("b", {"n": b"2"}, NOW)
    async with store.transaction() as tx:
        await tx.put_values("a", {"n": b"3"}, NOW + 1)
    async with store.transaction(readonly=True) as tx:
        assert await tx.run_values(["a", "b", "none"]) == {
            "a": {"link": b'"x"', "n": b"3"}, "b": {"n": b"2"},
        }  # fmt: skip
        assert await tx.run_values([]) == {}
    with contextlib.suppress(_Rollback):
        async with store.transaction() as tx:
            await tx.put_values("a", {"n": b"4"}, NOW)
            raise _Rollback
    async with store.transaction(readonly=True) as tx:
        assert (await tx.run_values(["a"]))["a"]["n"] == b"3"


# Streams


async def test_stream_items_are_numbered_in_commit_order_and_read_from_an_offset(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        assert await tx.append_stream("r", "out", [(b'"a"', None), (b'"b"', None)], NOW) == 0
        assert await tx.append_stream("r", "other", [(b"1", 2)], NOW) == 0  # its own numbers
        assert await tx.append_stream("s", "out", [(b"9", None)], NOW) == 0  # another run's
    with contextlib.suppress(_Rollback):
        async with store.transaction() as tx:
            assert await tx.append_stream("r", "out", [(b'"lost"', None)], NOW) == 2
            raise _Rollback  # (rolled back: leaves no gap)
    async with store.transaction() as tx:
        assert await tx.append_stream("r", "out", [(b'"c"', 3)], NOW + 1) == 2
    async with store.transaction(readonly=True) as tx:
        items, closed = await tx.read_stream("r", "out", 0, 100)
        assert not closed
        assert [(i.offset, i.value, i.attempt, i.written_at) for i in items] == [
            (0, b'"a"', None, NOW), (1, b'"b"', None, NOW), (2, b'"c"', 3, NOW + 1),
        ]  # fmt: skip
        assert [i.offset for i in (await tx.read_stream("r", "out", 1, 1))[0]] == [1]
        assert (await tx.read_stream("r", "out", 3, 10))[0] == []
        assert await tx.read_stream("r", "never", 0, 10) == ([], False)
        assert [i.value for i in (await tx.read_stream("r", "other", 0, 10))[0]] == [b"1"]


async def test_a_closed_stream_takes_no_more_items(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.append_stream("r", "out", [(b"1", None)], NOW)
        await tx.close_stream("r", "out")
        await tx.close_stream("r", "out")  # (idempotent)
        await tx.close_stream("r", "empty")  # never written: closed empty
    async with store.transaction() as tx:
        assert await tx.append_stream("r", "out", [(b"2", 1)], NOW) is None
        assert await tx.append_stream("r", "empty", [(b"2", 1)], NOW) is None
    async with store.transaction(readonly=True) as tx:
        items, closed = await tx.read_stream("r", "out", 0, 10)
        assert closed and [i.value for i in items] == [b"1"]
        assert await tx.read_stream("r", "empty", 0, 10) == ([], True)


async def test_a_runs_end_leaves_its_streams_open_for_a_retry(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.append_stream("r", "a", [(b"1", None)], NOW)
        await tx.streams_ended("r")
        await tx.streams_ended("no-streams")
    async with store.transaction() as tx:
        assert not (await tx.read_stream("r", "a", 0, 10))[1]
        assert await tx.append_stream("r", "a", [(b"2", 1)], NOW) == 1


async def test_race_appenders_of_one_stream_never_share_an_offset(engine_url: str) -> None:
    stores = [open_store(engine_url) for _ in range(2 if "memory" not in engine_url else 1)]
    for opened in stores:
        await opened.open()
    try:

        async def appends(opened: Store, writer: int) -> None:
            for i in range(20):
                async with opened.transaction() as tx:
                    items = [(f"[{writer},{i},{j}]".encode(), writer) for j in range(3)]
                    assert await tx.append_stream("r", "out", items, NOW) is not None

        await asyncio.gather(*(appends(stores[w % len(stores)], w) for w in range(4)))
        async with stores[0].transaction(readonly=True) as tx:
            items, _ = await tx.read_stream("r", "out", 0, 1000)
        assert [i.offset for i in items] == list(range(240))
        # Each transaction's items stay together, in the order given.
        for start in range(0, 240, 3):
            batch = [orjson.loads(i.value) for i in items[start : start + 3]]
            assert [b[2] for b in batch] == [0, 1, 2] and len({(b[0], b[1]) for b in batch}) == 1
    finally:
        for opened in stores:
            await opened.close()


@pytest.mark.requires("shared")
async def test_another_process_stream_commits_are_reported(engine_url: str) -> None:
    writer, reader = open_store(engine_url), open_store(engine_url)
    await writer.open()
    await reader.open()
    try:
        heard: list[str | None] = []
        changed = asyncio.Event()

        def told(run_id: str | None) -> None:
            heard.append(run_id)
            changed.set()

        reader.watch_streams(told)
        writer.watch_streams(lambda run_id: None)  # (its own commits are not reported to it)
        await asyncio.sleep(0.2)  # listening (PostgreSQL: its connection is up)
        changed.clear()
        heard.clear()
        async with writer.transaction() as tx:
            await tx.append_stream("r", "out", [(b"1", None)], NOW)
        await asyncio.wait_for(changed.wait(), 5)
        assert "r" in heard
        changed.clear()
        async with writer.transaction() as tx:
            await tx.close_stream("s", "out")
        await asyncio.wait_for(changed.wait(), 5)
        assert "s" in heard
        changed.clear()
        async with writer.transaction() as tx:
            await tx.streams_ended("r")  # (the end of a run with streams)
        await asyncio.wait_for(changed.wait(), 5)
        assert heard[-1] == "r"
    finally:
        await writer.close()
        await reader.close()


def attempt(run_id: str, pos: int, n: int, error: bytes = b'{"type":"E"}') -> AttemptRecord:
    return AttemptRecord(run_id, pos, "charge", n, error, NOW + n, NOW + n + 0.5)


async def test_failed_attempts_are_kept_once_in_order_and_go_with_the_journal(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("a"))
        await tx.insert_run(run("b"))
        await tx.add_attempts([attempt("a", 3, 2), attempt("a", 1, 1), attempt("a", 3, 1)])
        await tx.add_attempts([attempt("b", 0, 1)])
        await tx.add_attempts([])
    async with store.transaction() as tx:
        # One kept already (run, position, attempt) is left as it was.
        await tx.add_attempts([attempt("a", 1, 1, b'{"type":"Other"}')])
    with contextlib.suppress(_Rollback):
        async with store.transaction() as tx:
            await tx.add_attempts([attempt("a", 9, 1)])
            raise _Rollback
    async with store.transaction(readonly=True) as tx:
        assert await tx.attempts("a") == [
            attempt("a", 1, 1),
            attempt("a", 3, 1),
            attempt("a", 3, 2),
        ]
        assert await tx.attempts("none") == []
    async with store.transaction() as tx:
        await tx.clear_journal("a")  # (continue-as-new: positions start again)
    async with store.transaction() as tx:
        assert await tx.attempts("a") == []
        assert await tx.attempts("b") == [attempt("b", 0, 1)]
        await tx.delete_runs(["b"])
    async with store.transaction(readonly=True) as tx:
        assert await tx.attempts("b") == []


def update(run_id: str, update_id: str, name: str = "add") -> UpdateRecord:
    return UpdateRecord(run_id, update_id, name, b"1", "pending", None, NOW)


async def test_updates_are_kept_once_by_id_in_order_until_answered(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.add_update(update("r", "u1")) is None
        assert await tx.add_update(update("r", "u2", "other")) is None
        assert await tx.add_update(update("s", "u1")) is None  # another run's
        again = await tx.add_update(update("r", "u1", "changed"))
        assert again is not None and (again.id, again.name, again.status) == (
            "u1",
            "add",
            "pending",
        )
    async with store.transaction() as tx:
        assert [u.id for u in await tx.pending_updates("r")] == ["u1", "u2"]
        await tx.finish_update("r", "u1", "done", b"42", NOW + 1)
    async with store.transaction(readonly=True) as tx:
        assert [u.id for u in await tx.pending_updates("r")] == ["u2"]
        done = await tx.get_update("r", "u1")
        assert done is not None
        assert (done.status, done.result, done.finished_at) == ("done", b"42", NOW + 1)
        assert await tx.get_update("r", "nope") is None


async def test_cancel_conditions_are_found_by_their_own_kind(store: Store) -> None:
    condition = sub("r", -1, kind="cancel", name="\x1fcancel:order.paid", subject="*")
    async with store.transaction() as tx:
        await tx.add_subscription(condition)
        await tx.add_subscription(sub("r", 0))
    async with store.transaction(readonly=True) as tx:
        found = await tx.find_subscriptions(
            domain="default", name="\x1fcancel:order.paid", shape="", digest="", subject=None,
            kind="cancel",
        )  # fmt: skip
        assert found == [condition]


# ---------------------------------------------------------------------------------------------
# Tasks


async def test_due_tasks_are_per_run_in_insertion_order(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.add_tasks(
            [
                NewTask("r", NOW + 10, "timer", 3),
                NewTask("r", NOW, "start"),
                NewTask("r", NOW, "delivery", 1, b'{"e": 1}'),
                NewTask("s", NOW, "start"),
            ]
        )
        await tx.add_tasks([])
    async with store.transaction(readonly=True) as tx:
        due = await tx.due_tasks("r", NOW)
        assert [(t.kind, t.pos, t.payload, t.due_at) for t in due] == [
            ("start", None, None, NOW),
            ("delivery", 1, b'{"e": 1}', NOW),
        ]
        assert due[0].id < due[1].id and due[0].run_id == "r"
        assert [t.kind for t in await tx.due_tasks("r", NOW + 10)] == ["timer", "start", "delivery"]
        assert await tx.due_tasks("nobody", NOW) == []


async def test_task_deletion_by_id_by_wait_and_by_run(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.add_tasks(
            [
                NewTask("r", NOW, "start"),
                NewTask("r", NOW, "timer", 1),
                NewTask("r", NOW, "delivery", 2, b"{}"),
                NewTask("r", NOW, "signal"),
                NewTask("s", NOW, "timer", 1),
            ]
        )
    async with store.transaction() as tx:
        start = (await tx.due_tasks("r", NOW))[0]
        await tx.delete_tasks([start.id])
        await tx.delete_tasks([])
        assert [t.kind for t in await tx.due_tasks("r", NOW)] == ["timer", "delivery", "signal"]
        await tx.delete_wait_tasks("r", 2)
        assert [t.kind for t in await tx.due_tasks("r", NOW)] == ["timer", "signal"]
        await tx.delete_wait_tasks("r")  # every task aimed at a wait (pos set)
        assert [t.kind for t in await tx.due_tasks("r", NOW)] == ["signal"]
        await tx.delete_all_tasks("r")
        assert await tx.due_tasks("r", NOW) == []
        assert [t.kind for t in await tx.due_tasks("s", NOW)] == ["timer"]


async def test_deleting_a_waits_tasks_can_keep_some(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.add_tasks(
            [
                NewTask("r", NOW, kind, pos, b"{}")
                for pos in (1, 2)
                for kind in ("timer", "delivery")
            ]
        )
    async with store.transaction() as tx:
        timer1, delivery1, timer2, delivery2 = await tx.due_tasks("r", NOW)
        await tx.delete_wait_tasks("r", 1, keep=[delivery1.id, timer2.id])
        await tx.delete_wait_tasks("r", 9, keep=[timer1.id])  # no such wait: nothing goes
    async with store.transaction() as tx:
        assert [t.id for t in await tx.due_tasks("r", NOW)] == [
            delivery1.id,
            timer2.id,
            delivery2.id,
        ]
        await tx.delete_wait_tasks("r", keep=[delivery2.id])
        assert [t.id for t in await tx.due_tasks("r", NOW)] == [delivery2.id]


async def test_task_ids_are_never_reused(store: Store) -> None:
    seen: set[int] = set()
    for _ in range(3):
        async with store.transaction() as tx:
            await tx.add_tasks([NewTask("r", NOW, "start"), NewTask("r", NOW, "signal")])
            tasks = await tx.due_tasks("r", NOW)
            ids = {t.id for t in tasks}
            assert not ids & seen and all(i > max(seen, default=0) for i in ids)
            seen |= ids
            await tx.delete_tasks(list(ids))


async def test_next_due_and_has_due(store: Store) -> None:
    assert await store.next_due() is None
    assert await store.has_due(NOW) is False
    async with store.transaction() as tx:
        await tx.insert_run(run("r"))
        await tx.add_tasks([NewTask("r", NOW + 5, "timer", 0), NewTask("r", NOW + 9, "timer", 1)])
        # A task whose run is gone (a parent deleted by the retention sweep before its
        # child ended) is nobody's work: never claimed, never due.
        await tx.add_tasks([NewTask("gone", NOW, "child")])
    assert await store.next_due() == NOW
    assert await store.next_due(after=NOW) == NOW + 5
    assert await store.next_due(after=NOW + 5) == NOW + 9
    assert await store.next_due(after=NOW + 9) is None
    assert await store.has_due(NOW + 4.999) is False
    assert await store.has_due(NOW + 5) is True


# ---------------------------------------------------------------------------------------------
# Signals (the mailbox)


async def test_signals_keep_send_order_and_are_deleted_by_id(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.add_signal("r", "go", b"1", NOW)
        await tx.add_signal("r", "stop", None, NOW + 1)
        await tx.add_signal("r", "go", b"2", NOW + 2)
        await tx.add_signal("s", "go", b"9", NOW)
    async with store.transaction() as tx:
        mailbox = await tx.signals("r")
        assert [(s.name, s.payload, s.at) for s in mailbox] == [
            ("go", b"1", NOW), ("stop", None, NOW + 1), ("go", b"2", NOW + 2),
        ]  # fmt: skip
        assert mailbox[0].id < mailbox[1].id < mailbox[2].id
        await tx.delete_signals([mailbox[0].id, mailbox[2].id])
        await tx.delete_signals([])
        assert [s.name for s in await tx.signals("r")] == ["stop"]
        assert len(await tx.signals("s")) == 1


async def test_send_signal_buffers_it_with_its_task_only_for_a_live_run(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("live", status="running"))
        await tx.insert_run(run("done", status="completed"))
    sent = []
    async with store.transaction() as tx:
        sent.append(await tx.send_signal("live", "go", b"1", NOW + 1))
        sent.append(await tx.send_signal("done", "go", b"2", NOW + 1))
        sent.append(await tx.send_signal("nobody", "go", b"3", NOW + 1))
    # Known once committed (a store may send them with the COMMIT).
    assert [(s.known, s.status) for s in sent] == [
        (True, "running"), (True, "completed"), (True, None)
    ]  # fmt: skip
    for one in ("live", "done", "nobody"):  # alone in its transaction, too
        async with store.transaction() as tx:
            alone = await tx.send_signal(one, "again", b"4", NOW + 2)
        assert (alone.known, alone.status) == (
            True,
            {"live": "running", "done": "completed"}.get(one),
        )
    async with store.transaction() as tx:
        await tx.delete_signals([s.id for s in await tx.signals("live") if s.name == "again"])
        await tx.delete_tasks(
            [t.id for t in await tx.due_tasks("live", NOW + 9) if t.due_at > NOW + 1]
        )
    async with store.transaction() as tx:
        assert [(s.name, s.payload, s.at) for s in await tx.signals("live")] == [
            ("go", b"1", NOW + 1)
        ]
        assert [(t.kind, t.due_at, t.pos) for t in await tx.due_tasks("live", NOW + 1)] == [
            ("signal", NOW + 1, None)
        ]
        assert await tx.signals("done") == [] and await tx.due_tasks("done", NOW + 9) == []
        assert await tx.signals("nobody") == [] and await tx.due_tasks("nobody", NOW + 9) == []


async def test_send_signal_rolls_back_with_its_transaction(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("live", status="running"))
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await tx.send_signal("live", "go", b"1", NOW)
            raise RuntimeError("roll back")
    async with store.transaction() as tx:
        assert await tx.signals("live") == [] and await tx.due_tasks("live", NOW) == []


# ---------------------------------------------------------------------------------------------
# Events


async def test_record_event_keeps_a_recent_id_and_reuses_an_old_one(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.record_event(event("e1", published_at=NOW), NOW - 60) is None
        assert await tx.record_event(event("old", published_at=NOW - 100), NOW - 200) is None
    async with store.transaction() as tx:
        # Seen within the window: a duplicate, nothing changes.
        again = event("e1", published_at=NOW + 5, payload=b'{"a": 2}')
        assert await tx.record_event(again, NOW - 60) == event("e1", published_at=NOW)
        # Seen before the window: replaced by the new event.
        reused = event("old", published_at=NOW + 5, subject="client:1")
        assert await tx.record_event(reused, NOW - 60) is None
    async with store.transaction() as tx:
        assert await tx.get_event("e1") == event("e1", published_at=NOW)
        assert await tx.get_event("old") == reused
        # The shapes of waits on the name are read as usual after it.
        await tx.add_subscription(sub("r1", 0, shape="order_id", digest="d1"))
    async with store.transaction() as tx:
        assert await tx.record_event(event("e2", published_at=NOW + 6), NOW - 60) is None
        assert await tx.shapes("default", "order.paid") == ["order_id"]


async def test_events_are_kept_by_id_and_looked_back_in_publish_order(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_event(event("e1", published_at=NOW))
        await tx.insert_event(event("e2", published_at=NOW + 1, subject="client:5"))
        await tx.insert_event(event("e3", published_at=NOW + 1))  # same instant: publish order
        await tx.insert_event(event("e4", name="other", published_at=NOW + 2))
        await tx.insert_event(event("e5", domain="d2", published_at=NOW + 2))
    async with store.transaction() as tx:
        assert await tx.get_event("e2") == event("e2", published_at=NOW + 1, subject="client:5")
        assert await tx.get_event("nope") is None
        since = await tx.events_since("default", "order.paid", NOW + 0.5)
        assert [e.id for e in since] == ["e2", "e3"]
        assert [e.id for e in await tx.events_since("default", "order.paid", NOW)] == [
            "e1", "e2", "e3",
        ]  # fmt: skip
        await tx.delete_event("e1")
        await tx.delete_event("nope")
        assert await tx.get_event("e1") is None
        assert await tx.prune_events(NOW + 2) == 2  # e2, e3
        assert [e.id for e in await tx.events_since("d2", "order.paid", 0)] == ["e5"]
        assert await tx.get_event("e4") is not None


async def test_an_event_id_can_be_reused_after_its_event_is_deleted(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_event(event("e1", published_at=NOW))
        await tx.delete_event("e1")
        await tx.insert_event(event("e1", published_at=NOW + 1, payload=b"2"))
    got = await one(store, lambda tx: tx.get_event("e1"))
    assert got is not None and got.payload == b"2"


# ---------------------------------------------------------------------------------------------
# Subscriptions (the publish index)


async def test_subscriptions_are_found_by_exact_key_or_wildcard(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.add_subscription(sub("own", subject="product:1", shape="sku", digest="d1"))
        await tx.add_subscription(sub("any", subject="*", shape="sku", digest="d1",
                                      created_at=NOW + 1))  # fmt: skip
        await tx.add_subscription(sub("other", subject="product:2", shape="sku", digest="d1"))
        await tx.add_subscription(sub("digest", subject="product:1", shape="sku", digest="d2"))
        await tx.add_subscription(sub("plain", subject="*", shape="", digest=""))
        await tx.add_subscription(sub("dom", subject="*", domain="d2", shape="sku", digest="d1"))
        await tx.add_subscription(message_wait("msg", "order.paid", "product:1"))

    async def find(subject: str | None, shape: str = "sku", digest: str = "d1",
                   kind: str = "event") -> list[str]:  # fmt: skip
        async with store.transaction() as tx:
            found = await tx.find_subscriptions(
                domain="default", name="order.paid", shape=shape, digest=digest,
                subject=subject, kind=kind,
            )  # fmt: skip
            return [s.run_id for s in found]

    assert await find("product:1") == ["own", "any"]  # oldest first
    assert await find("product:2") == ["other", "any"]
    assert await find(None) == ["any"]  # no subject: wildcards only
    assert await find("product:1", digest="d2") == ["digest"]
    assert await find("product:9", shape="", digest="") == ["plain"]
    assert await find("product:1", shape="", digest="", kind="message") == ["msg"]
    assert await find("product:2", shape="", digest="", kind="message") == []
    async with store.transaction(readonly=True) as tx:
        assert sorted(await tx.shapes("default", "order.paid")) == ["", "sku"]
        assert await tx.shapes("default", "nothing") == []
        found = await tx.find_subscriptions(
            domain="default", name="order.paid", shape="sku", digest="d1",
            subject="product:1", kind="event",
        )  # fmt: skip
        assert found[0] == sub("own", subject="product:1", shape="sku", digest="d1")


async def test_a_subscription_round_trips_every_field(store: Store) -> None:
    full = sub(
        "r", 7, kind="event", domain="shop", name="paid", subject="client:5", shape="a|b",
        digest="ff00", match=b'{"a": 1, "b": [2]}', wait="wait_for_event:paid#7",
        expires_at=NOW + 99.5, created_at=NOW + 0.25, deadline=NOW + 60,
    )  # fmt: skip
    async with store.transaction() as tx:
        await tx.add_subscription(full)
        await tx.add_subscription(sub("bare", 0))
    async with store.transaction(readonly=True) as tx:
        assert await tx.list_subscriptions(run_id="r") == [full]
        assert [s.deadline for s in await tx.list_subscriptions(run_id="bare")] == [None]


async def test_adding_a_subscription_twice_replaces_it(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.add_subscription(sub("r", 3, subject="a", match=b'{"x": 1}'))
        await tx.add_subscription(sub("r", 3, subject="b", match=b'{"x": 2}'))
    subs = await one(store, lambda tx: tx.list_subscriptions(run_id="r"))
    assert [(s.subject, s.match) for s in subs] == [("b", b'{"x": 2}')]


async def test_list_and_delete_subscriptions(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.add_subscription(sub("r", 1, created_at=NOW + 2))
        await tx.add_subscription(sub("r", 2, name="other", created_at=NOW + 1))
        await tx.add_subscription(sub("s", 1, created_at=NOW))
    async with store.transaction() as tx:
        assert [(s.run_id, s.pos) for s in await tx.list_subscriptions()] == [
            ("s", 1), ("r", 2), ("r", 1),
        ]  # fmt: skip
        assert [s.pos for s in await tx.list_subscriptions(run_id="r")] == [2, 1]
        assert [s.run_id for s in await tx.list_subscriptions(name="order.paid")] == ["s", "r"]
        assert [s.pos for s in await tx.list_subscriptions(run_id="r", name="other")] == [2]
        await tx.delete_subscription("r", 2)
        await tx.delete_subscription("r", 99)
        assert [s.pos for s in await tx.list_subscriptions(run_id="r")] == [1]
        await tx.delete_run_subscriptions("r")
        assert [s.run_id for s in await tx.list_subscriptions()] == ["s"]


async def test_the_sweep_drops_expired_subscriptions_and_unused_shapes(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.add_subscription(sub("old", shape="a", expires_at=NOW - 1))
        await tx.add_subscription(sub("edge", shape="b", expires_at=NOW))
        await tx.add_subscription(sub("new", shape="b", expires_at=NOW + 1))
    async with store.transaction() as tx:
        assert await tx.sweep_subscriptions(NOW) == 1  # expires_at < now
        assert sorted(s.run_id for s in await tx.list_subscriptions()) == ["edge", "new"]
        assert await tx.shapes("default", "order.paid") == ["b"]
        await tx.delete_run_subscriptions("edge")
        await tx.delete_run_subscriptions("new")
        assert await tx.sweep_subscriptions(NOW) == 0
        assert await tx.shapes("default", "order.paid") == []


# ---------------------------------------------------------------------------------------------
# Events at once (Tx.deliver_event: a publish that only resumes waits)


class _Rollback(Exception):
    pass


def _fused(tx: Tx) -> bool:
    """Whether ``tx`` is a store's that fuses the senders' fast paths (the ``"fused"``
    capability): then its own one-operation version is tested, else the core's
    composed path. Both are held to the same contract here."""
    return callable(getattr(tx, "deliver_event", None))


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
                await tx.add_subscription(sub(f"shape-probe-{i}", shape=shape, name=name))
            assert set(shapes) <= set(await tx.shapes("default", name))
            raise _Rollback


def event_wait(run_id: str, match: dict[str, Any] | None, pos: int = 0, **fields: Any) -> Any:
    """An event wait on order.paid with ``match``, indexed as the engine indexes it."""
    return sub(
        run_id, pos, shape=shape_of(match), digest=match_digest(match),
        match=None if match is None else orjson.dumps(match), **fields,
    )  # fmt: skip


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
            await tx.add_subscription(wait)
    await show_shapes(store, *{w.shape for w in waits})
    delivery = await deliver(store, {"order_id": 1, "amount": 5})
    assert delivery.outcome == "published" and delivery.lease is None
    assert sorted(delivery.waits) == [
        ("any", "wait#3"), ("both", "wait#0"), ("edge", "wait#0"), ("one", "wait#0")
    ]  # fmt: skip
    async with store.transaction(readonly=True) as tx:
        recorded = await tx.get_event("e1")
        assert recorded is not None and recorded.payload == b'{"order_id":1,"amount":5}'
        for run_id, _ in delivery.waits:
            tasks = await tx.due_tasks(run_id, NOW)
            assert [(t.kind, t.due_at, t.payload) for t in tasks] == [
                ("delivery", NOW, b'envelope:{"order_id":1,"amount":5}')
            ]
        left = sorted(s.run_id for s in await tx.list_subscriptions())
        assert left == ["gone", "late", "message", "other-subject", "two"]
        assert await tx.due_tasks("two", NOW) == []
    # A second publish finds the taken waits gone.
    again = await deliver(store, {"order_id": 1, "amount": 5}, "e2")
    assert (again.outcome, again.waits) == ("published", [])


async def test_deliver_event_takes_the_oldest_wait_first_within_a_shape(store: Store) -> None:
    async with store.transaction() as tx:
        for i, run_id in enumerate(["c", "a", "b"]):
            await tx.add_subscription(event_wait(run_id, {"k": 1}, created_at=NOW + i))
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
            await tx.add_subscription(forged(run_id, match, payload))
        await show_shapes(store, shape_of(match))
        delivery = await deliver(store, payload, event_id=f"e-{run_id}")
        assert delivery.outcome == "published"
        assert delivery.waits == ([(run_id, "wait#0")] if expected else []), run_id
        async with store.transaction(readonly=True) as tx:
            assert (await tx.list_subscriptions(run_id=run_id) == []) is expected, run_id


async def test_deliver_event_refuses_a_fresh_duplicate_and_a_stale_id_is_free(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await tx.add_subscription(event_wait("r", {"k": 1}))
        await tx.insert_event(event("fresh", published_at=NOW - 10))
        await tx.insert_event(event("stale", published_at=NOW - 100, payload=b"old"))
    await show_shapes(store, shape_of({"k": 1}))
    duplicate = await deliver(store, {"k": 1}, "fresh")
    assert (duplicate.outcome, duplicate.waits, duplicate.lease) == ("duplicate", [], None)
    async with store.transaction(readonly=True) as tx:
        assert len(await tx.list_subscriptions(run_id="r")) == 1  # still waiting
        assert await tx.due_tasks("r", NOW) == []
    # Past retention the id is free again; a store may leave that case to the usual
    # path (declined: nothing written).
    stale = await deliver(store, {"k": 1}, "stale")
    async with store.transaction(readonly=True) as tx:
        recorded = await tx.get_event("stale")
        assert recorded is not None
        if stale.outcome is None:
            assert stale.waits == [] and recorded.payload == b"old"
            assert len(await tx.list_subscriptions(run_id="r")) == 1
        else:
            assert stale.outcome == "published" and stale.waits == [("r", "wait#0")]
            assert recorded.payload == b'{"k":1}' and recorded.published_at == NOW


async def test_deliver_event_with_no_waits_records_the_event(store: Store) -> None:
    published = await deliver(store, [1, 2], "e1", fields={"subject": "acme"})
    assert (published.outcome, published.waits) == ("published", [])
    async with store.transaction(readonly=True) as tx:
        recorded = await tx.get_event("e1")
        assert recorded is not None and (recorded.subject, recorded.payload) == ("acme", b"[1,2]")


async def test_deliver_event_leases_the_first_run_it_delivers_to(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("r", status="parked"))
        await tx.put_journal("r", [entry(0, state="pending", kind="event", name="order.paid")])
        await tx.add_subscription(event_wait("r", {"k": 1}, created_at=NOW - 1))
        await tx.insert_run(run("r2", status="parked"))
        await tx.add_subscription(event_wait("r2", {"k": 1}))
        await tx.insert_run(run("held", status="parked", lease_owner="x", lease_until=WALL + 9))
        await tx.add_subscription(event_wait("held", {"k": 2}))
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
        held = await tx.get_run("held")
        assert held is not None and held.lease_owner == "x"


async def test_deliver_event_rolls_back_with_its_transaction(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("r", status="parked"))
        await tx.add_subscription(event_wait("r", {"k": 1}))
    await show_shapes(store, shape_of({"k": 1}))
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await deliver_event(tx,
                event("e1", payload=b'{"k": 1}'), {"k": 1}, b"env", fresh_after=NOW - 60,
                owner="w", wall_now=WALL, lease_until=WALL + 30,
            )  # fmt: skip
            raise RuntimeError("roll back")
    async with store.transaction(readonly=True) as tx:
        assert await tx.get_event("e1") is None
        assert len(await tx.list_subscriptions(run_id="r")) == 1
        assert await tx.due_tasks("r", NOW) == []
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == []


async def test_deliver_event_shares_a_transaction_with_others(store: Store) -> None:
    """A sender's publishes in flight share a transaction: each sees what the one
    before it did."""
    async with store.transaction() as tx:
        await tx.add_subscription(event_wait("r", {"k": 1}))
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


# ---------------------------------------------------------------------------------------------
# Messages


async def test_a_message_wait_is_found_by_name_and_key(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.add_subscription(message_wait("r", "payment", "APP-1", pos=4))
        await tx.add_subscription(sub("e", subject="APP-1", name="payment"))  # an event wait
    async with store.transaction() as tx:
        wait = await tx.message_wait("payment", "APP-1")
        assert wait is not None and (wait.run_id, wait.pos, wait.kind) == ("r", 4, "message")
        assert await tx.message_wait("payment", "APP-2") is None
        assert await tx.message_wait("other", "APP-1") is None
        await tx.delete_subscription("r", 4)
        assert await tx.message_wait("payment", "APP-1") is None


async def test_take_message_wait_removes_a_live_wait_and_leaves_a_timed_out_one(
    store: Store,
) -> None:
    late = sub("late", 0, kind="message", name="payment", subject="K2", deadline=NOW - 1)
    async with store.transaction() as tx:
        await tx.add_subscription(message_wait("r", "payment", "K1", pos=3))
        await tx.add_subscription(late)
        await tx.add_subscription(sub("e", subject="K1", name="payment"))  # an event wait
    async with store.transaction() as tx:
        taken = await tx.take_message_wait("payment", "K1", NOW)
        assert taken is not None and (taken.run_id, taken.pos, taken.kind) == ("r", 3, "message")
        assert await tx.take_message_wait("payment", "K1", NOW) is None  # gone
        assert await tx.take_message_wait("payment", "K2", NOW) is None  # its timeout won
        assert await tx.take_message_wait("payment", "K3", NOW) is None  # nobody waits
    async with store.transaction() as tx:
        assert await tx.message_wait("payment", "K1") is None
        assert await tx.message_wait("payment", "K2") == late
        assert len(await tx.list_subscriptions(name="payment")) == 2  # late and the event wait
        # At its deadline exactly, the wait still takes the message.
        assert await tx.take_message_wait("payment", "K2", NOW - 1) == late


async def test_deliver_message_takes_the_wait_gives_its_run_the_task_and_remembers_the_id(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("r", status="parked"))
        await tx.add_subscription(message_wait("r", "payment", "K1", pos=2))
    async with store.transaction() as tx:
        delivery = await deliver_message(
            tx, "payment", "K1", b"body", NOW, message_id="m-1", fresh_after=NOW - 60
        )
    assert (delivery.known, delivery.outcome, delivery.run_id) == (True, "delivered", "r")
    assert delivery.lease is None  # none asked for
    async with store.transaction(readonly=True) as tx:
        assert await tx.message_wait("payment", "K1") is None
        tasks = await tx.due_tasks("r", NOW)
        assert [(t.kind, t.pos, t.payload, t.due_at) for t in tasks] == [
            ("message", 2, b"body", NOW)
        ]
        assert await tx.message_id_seen("m-1") == NOW
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == ["r"]


async def test_deliver_message_with_nobody_waiting_writes_nothing(store: Store) -> None:
    late = sub("late", 0, kind="message", name="payment", subject="K2", deadline=NOW - 1)
    async with store.transaction() as tx:
        await tx.insert_run(run("late", status="parked"))
        await tx.add_subscription(late)
        await tx.add_subscription(sub("e", subject="K1", name="payment"))  # an event wait
    async with store.transaction() as tx:
        nobody = await deliver_message(
            tx, "payment", "K1", b"b", NOW, message_id="m-1", fresh_after=NOW - 60
        )
        timed_out = await deliver_message(tx,
            "payment", "K2", b"b", NOW, message_id=None, fresh_after=NOW - 60,
            owner="w", wall_now=WALL, lease_until=WALL + 30,
        )  # fmt: skip
    assert (nobody.known, nobody.outcome, nobody.run_id) == (True, None, None)
    # A wait past its deadline stays: its timeout wins. Nothing is leased.
    assert (timed_out.known, timed_out.outcome, timed_out.lease) == (True, None, None)
    async with store.transaction(readonly=True) as tx:
        assert await tx.message_wait("payment", "K2") == late
        assert await tx.due_tasks("late", NOW) == []
        assert await tx.message_id_seen("m-1") is None  # not remembered: not received
        assert len(await tx.list_subscriptions(name="payment")) == 2
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == []


async def test_deliver_message_refuses_a_fresh_duplicate_and_takes_a_stale_one(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("r", status="parked"))
        await tx.add_subscription(message_wait("r", "payment", "K1"))
        await tx.remember_message_id("fresh", NOW - 10)
        await tx.remember_message_id("stale", NOW - 100)
    async with store.transaction() as tx:
        duplicate = await deliver_message(
            tx, "payment", "K1", b"b", NOW, message_id="fresh", fresh_after=NOW - 60
        )
    assert (duplicate.known, duplicate.outcome, duplicate.run_id) == (True, "duplicate", None)
    async with store.transaction(readonly=True) as tx:
        assert await tx.message_wait("payment", "K1") is not None  # still waiting
        assert await tx.due_tasks("r", NOW) == []
    async with store.transaction() as tx:
        again = await deliver_message(
            tx, "payment", "K1", b"b", NOW, message_id="stale", fresh_after=NOW - 60
        )
    assert (again.outcome, again.run_id) == ("delivered", "r")
    async with store.transaction(readonly=True) as tx:
        assert await tx.message_id_seen("stale") == NOW


async def test_deliver_message_leases_the_run_it_delivers_to(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("r", status="parked"))
        await tx.put_journal("r", [entry(0, state="pending", kind="message", name="payment")])
        await tx.add_subscription(message_wait("r", "payment", "K1"))
        await tx.insert_run(run("held", status="parked", lease_owner="x", lease_until=WALL + 9))
        await tx.add_subscription(message_wait("held", "payment", "K2"))
    async with store.transaction() as tx:
        delivery = await deliver_message(tx,
            "payment", "K1", b"body", NOW, message_id=None, fresh_after=NOW - 60,
            owner="w", wall_now=WALL, lease_until=WALL + 30,
        )  # fmt: skip
    assert (delivery.outcome, delivery.run_id) == ("delivered", "r")
    lease = delivery.lease
    assert lease is not None and lease.run_id == "r" and lease.taken is True
    assert lease.loaded is not None and lease.loaded.run.lease_owner == "w"
    assert [(t.kind, t.payload) for t in lease.loaded.tasks] == [("message", b"body")]
    assert [e.pos for e in lease.loaded.journal] == [0]
    assert await store.claim("other", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == []
    # A run leased to another worker gets the message all the same, but no lease.
    async with store.transaction() as tx:
        busy = await deliver_message(tx,
            "payment", "K2", b"b", NOW, message_id=None, fresh_after=NOW - 60,
            owner="w", wall_now=WALL, lease_until=WALL + 30,
        )  # fmt: skip
    assert busy.outcome == "delivered" and busy.lease is not None
    assert busy.lease.taken is False
    async with store.transaction(readonly=True) as tx:
        held = await tx.get_run("held")
        assert held is not None and held.lease_owner == "x"
        assert [t.kind for t in await tx.due_tasks("held", NOW)] == ["message"]


async def test_deliver_message_rolls_back_with_its_transaction(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("r", status="parked"))
        await tx.add_subscription(message_wait("r", "payment", "K1"))
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await deliver_message(tx,
                "payment", "K1", b"b", NOW, message_id="m", fresh_after=NOW - 60,
                owner="w", wall_now=WALL, lease_until=WALL + 30,
            )  # fmt: skip
            raise RuntimeError("roll back")
    async with store.transaction(readonly=True) as tx:
        assert await tx.message_wait("payment", "K1") is not None
        assert await tx.due_tasks("r", NOW) == []
        assert await tx.message_id_seen("m") is None
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == []


async def test_at_most_one_wait_per_message_name_and_key(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.add_subscription(message_wait("first", "payment", "K"))
    # A second wait on the same (name, key) is refused (the transaction fails) or
    # replaces the first; never do both stand.
    try:
        async with store.transaction() as tx:
            await tx.add_subscription(message_wait("second", "payment", "K"))
    except Exception:
        pass
    async with store.transaction(readonly=True) as tx:
        waits = [s for s in await tx.list_subscriptions(name="payment") if s.kind == "message"]
        assert len(waits) == 1
        holder = await tx.message_wait("payment", "K")
        assert holder is not None and holder.run_id == waits[0].run_id


async def test_buffered_messages_oldest_first_then_dead_letters(store: Store) -> None:
    async with store.transaction() as tx:
        m1 = await tx.add_message(message("pay", "K", b'"1"', expires_at=NOW + 10))
        m2 = await tx.add_message(message("pay", "K", b'"2"', message_id="mid", expires_at=NOW + 5))
        m3 = await tx.add_message(message("pay", "L", b'"3"', expires_at=NOW + 10))
    assert m1 < m2 < m3
    async with store.transaction() as tx:
        oldest = await tx.oldest_message("pay", "K", NOW)
        assert oldest == message("pay", "K", b'"1"', id=m1, expires_at=NOW + 10)
        assert await tx.oldest_message("pay", "nope", NOW) is None
        # Past its TTL a message is not handed out, even before it is dead-lettered.
        older = await tx.oldest_message("pay", "K", NOW + 7)
        assert older is not None and older.id == m1
        assert await tx.oldest_message("pay", "K", NOW + 10) is None
        got = await tx.get_message(m2)
        assert got is not None and (got.message_id, got.payload) == ("mid", b'"2"')
        assert await tx.get_message(999_999) is None
        expired = await tx.expire_messages(NOW + 5, "too late")  # expires_at <= now
        assert [(m.id, m.status, m.reason) for m in expired] == [(m2, "expired", "too late")]
        assert await tx.expire_messages(NOW + 5, "again") == []
        assert [m.id for m in await tx.list_messages(None)] == [m1, m2, m3]
        assert [m.id for m in await tx.list_messages("buffered")] == [m1, m3]
        assert [m.id for m in await tx.list_messages("expired")] == [m2]
        await tx.update_message(m2, "buffered", None, NOW + 100)
        revived = await tx.oldest_message("pay", "K", NOW + 50)
        assert revived is not None and revived.id == m2
        await tx.delete_message(m1)
        await tx.delete_message(m1)
        assert [m.id for m in await tx.list_messages(None)] == [m2, m3]


async def test_message_ids_are_remembered_then_pruned(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.message_id_seen("a") is None
        await tx.remember_message_id("a", NOW)
        await tx.remember_message_id("b", NOW + 10)
        await tx.remember_message_id("a", NOW + 1)  # a repeat moves it on
    async with store.transaction() as tx:
        assert await tx.message_id_seen("a") == NOW + 1
        await tx.prune_message_ids(NOW + 5)
        assert await tx.message_id_seen("a") is None
        assert await tx.message_id_seen("b") == NOW + 10


# ---------------------------------------------------------------------------------------------
# Claims and leases


async def _runs_with_tasks(store: Store, spec: dict[str, list[float]], **fields: Any) -> None:
    async with store.transaction() as tx:
        for run_id, dues in spec.items():
            await tx.insert_run(run(run_id, **fields))
            await tx.add_tasks([NewTask(run_id, due, "start") for due in dues])


async def test_claim_leases_runs_with_due_tasks_oldest_first(store: Store) -> None:
    await _runs_with_tasks(
        store, {"late": [NOW + 60], "b": [NOW - 1, NOW], "a": [NOW - 2], "c": [NOW]}
    )
    claimed = await store.claim("w1", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=2)
    assert sorted(claimed) == ["a", "b"]
    rest = await store.claim("w2", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10)
    assert rest == ["c"]  # a and b are leased; "late" is not due
    async with store.transaction(readonly=True) as tx:
        a = await tx.get_run("a")
        c = await tx.get_run("c")
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
        status = {r: (await tx.get_run(r)).status for r in claimed}  # type: ignore[union-attr]
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
        assert await tx.update_run("r", {"status": "parked"}, owner="w1") is False
        assert await tx.update_run("r", {"status": "parked"}, owner="w2", release=False)


async def test_release_leases_frees_every_run_of_one_owner(store: Store) -> None:
    await _runs_with_tasks(store, {"a": [NOW], "b": [NOW], "c": [NOW]})
    assert len(await store.claim("w1", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=2)) == 2
    assert await store.claim("w2", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=2) == ["c"]
    await store.release_leases("w1")
    async with store.transaction(readonly=True) as tx:
        owners = {r: (await tx.get_run(r)).lease_owner for r in "abc"}  # type: ignore[union-attr]
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
        await tx.insert_run(run("r", status="parked"))
        await tx.put_journal("r", [entry(0, state="pending", kind="signal", name="go")])
    async with store.transaction() as tx:
        sent = await tx.send_signal("r", "go", b"1", NOW)
        lease = await tx.lease_run("r", owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 30)
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
        await tx.start_run(run("new"), NOW)
        lease = await tx.lease_run("new", owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 9)
    assert lease.taken is True and lease.loaded is not None
    started = lease.loaded.run
    assert (started.id, started.status, started.lease_owner, started.lease_until) == (
        "new", "running", "w", WALL + 9,
    )  # fmt: skip
    assert [(t.kind, t.due_at) for t in lease.loaded.tasks] == [("start", NOW)]
    assert lease.loaded.journal == []
    async with store.transaction(readonly=True) as tx:
        assert [t.id for t in await tx.due_tasks("new", NOW)] == [lease.loaded.tasks[0].id]
    assert await store.claim("other", now=NOW, wall_now=WALL, lease_until=WALL + 9, limit=5) == []
    # A second start of the id changes nothing, and leases nothing.
    async with store.transaction() as tx:
        await tx.start_run(run("new", input=b"2"), NOW + 1)
        again = await tx.lease_run("new", owner="v", now=NOW, wall_now=WALL, lease_until=WALL + 9)
    assert again.taken is False
    async with store.transaction(readonly=True) as tx:
        kept = await tx.get_run("new")
        assert kept is not None and kept.lease_owner == "w" and kept.input == run("new").input
        assert len(await tx.due_tasks("new", NOW + 1)) == 1


async def test_lease_run_starts_a_pending_run_and_leaves_any_other_status(store: Store) -> None:
    # Runs of earlier transactions: one not yet started, one parked, one running
    # whose lease lapsed. Only the pending one changes status.
    async with store.transaction() as tx:
        await tx.insert_run(run("p", status="pending"))
        await tx.insert_run(run("k", status="parked"))
        await tx.insert_run(run("r", status="running", lease_owner="x", lease_until=WALL - 1))
    async with store.transaction() as tx:
        leases = {
            r: await tx.lease_run(r, owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 9)
            for r in ("p", "k", "r")
        }
    assert all(lease.taken is True for lease in leases.values())
    async with store.transaction(readonly=True) as tx:
        rows = {r: await tx.get_run(r) for r in leases}
    assert {r: (row.status, row.lease_owner) for r, row in rows.items() if row} == {
        "p": ("running", "w"), "k": ("parked", "w"), "r": ("running", "w"),
    }  # fmt: skip


async def test_lease_run_leaves_a_leased_ended_or_missing_run_alone(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("held", status="running", lease_owner="x", lease_until=WALL + 9))
        await tx.insert_run(run("lapsed", status="running", lease_owner="x", lease_until=WALL - 1))
        await tx.insert_run(run("done", status="completed"))
        await tx.insert_run(run("new"))  # pending: leased, it is running
    leases = {}
    async with store.transaction() as tx:
        for run_id in ("held", "lapsed", "done", "nobody", "new"):
            leases[run_id] = await tx.lease_run(
                run_id, owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 30
            )
    assert {k: v.taken for k, v in leases.items()} == {
        "held": False, "lapsed": True, "done": False, "nobody": False, "new": True,
    }  # fmt: skip
    assert leases["new"].loaded is not None and leases["new"].loaded.run.status == "running"
    async with store.transaction(readonly=True) as tx:
        held, done = await tx.get_run("held"), await tx.get_run("done")
    assert held is not None and held.lease_owner == "x"
    assert done is not None and done.lease_owner is None


async def test_lease_run_rolls_back_with_its_transaction(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("r", status="parked"))
        await tx.add_tasks([NewTask("r", NOW, "signal")])
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await tx.lease_run("r", owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 30)
            raise RuntimeError("roll back")
    assert await store.claim("w2", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == ["r"]


async def test_tasks_of_unknown_runs_are_not_claimed(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.add_tasks([NewTask("ghost", NOW, "start")])
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5) == []


async def test_start_run_inserts_a_run_and_its_start_task_once(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.start_run(run("r"), NOW)
    async with store.transaction() as tx:
        await tx.start_run(run("r", input=b'"other"'), NOW + 5)  # the same id again
        await tx.start_run(run("s"), NOW + 1)
    async with store.transaction(readonly=True) as tx:
        assert await tx.get_run("r") == run("r")
        assert [(t.kind, t.due_at, t.pos) for t in await tx.due_tasks("r", NOW + 10)] == [
            ("start", NOW, None)
        ]
        assert [t.due_at for t in await tx.due_tasks("s", NOW + 10)] == [NOW + 1]
    assert sorted(await store.claim("w", now=NOW + 1, wall_now=WALL, lease_until=WALL + 1,
                                    limit=5)) == ["r", "s"]  # fmt: skip


async def test_load_run_hands_over_the_run_its_due_tasks_and_journal(store: Store) -> None:
    await _runs_with_tasks(store, {"r": [NOW - 1, NOW + 60], "done": [NOW], "s": [NOW]})
    async with store.transaction() as tx:
        await tx.add_signal("s", "go", b"1", NOW)
        await tx.add_signal("s", "go", b"2", NOW)
        await tx.add_signal("r", "go", b"3", NOW)  # no signal task: the mailbox is not read
        await tx.add_tasks([NewTask("s", NOW, "signal"), NewTask("s", NOW, "signal")])
        await tx.put_journal("r", [entry(0), entry(1, state="pending")])
        await tx.put_journal("done", [entry(0)])
        await tx.update_run("done", {"status": "completed"})
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
        await tx.update_run("fresh", {"status": "pending"})
        await tx.put_journal("a", [entry(0), entry(1), entry(2, state="pending")])
        await tx.put_journal("b", [entry(0, value=b"7")])
        await tx.put_journal("c", [entry(0), entry(1, state="pending")])
        await tx.update_run("c", {"advanced_by": "w"})
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
            await tx.update_run(run_id, {"advanced_by": mark})
        await tx.put_journal("a", [entry(0)])
    with contextlib.suppress(RuntimeError):
        async with store.transaction() as tx:
            await tx.drop_cache_marks(["a"], "w")
            raise RuntimeError("rolled back")
    async with store.transaction() as tx:
        assert (await tx.get_run("a")).advanced_by == "w"  # type: ignore[union-attr]
        await tx.drop_cache_marks(["a", "b", "d", "missing"], "w")
        await tx.drop_cache_marks([], "w")
    async with store.transaction(readonly=True) as tx:
        marks = {r: (await tx.get_run(r)).advanced_by for r in "abcd"}  # type: ignore[union-attr]
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
        await tx.add_signal("r", "go", b"1", NOW)
        await tx.add_tasks([NewTask("r", NOW, "signal")])
    loaded = await store.load_run("r", NOW, owner="w")
    assert loaded is not None and loaded.run.lease_owner == "w"
    handed = [t.kind for t in loaded.tasks]
    async with store.transaction() as tx:
        await tx.delete_tasks([t.id for t in loaded.tasks])
        await tx.update_leased("r", {"status": "parked"}, owner="w")
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
        owners = {r: (await tx.get_run(r)).lease_owner for r in ("mine", "theirs")}  # type: ignore[union-attr]
    w1 = next(r for r, o in owners.items() if o == "w1")
    w2 = next(r for r, o in owners.items() if o == "w2")
    async with store.transaction() as tx:
        await tx.update_leased(w1, {"status": "parked"}, owner="w1", release=False)
        await tx.put_journal(w1, [entry(0)])
    # Not its lease: the transaction fails (at once, or at commit) and keeps nothing.
    with pytest.raises(LeaseLostError):
        async with store.transaction() as tx:
            await tx.put_journal(w1, [entry(1)])
            await tx.update_leased(w2, {"status": "parked"}, owner="w1")
            await tx.put_journal(w2, [entry(0)])
    async with store.transaction() as tx:
        await tx.update_leased(w1, {"status": "completed"}, owner="w1")  # releases it
    with pytest.raises(LeaseLostError):
        async with store.transaction() as tx:
            await tx.update_leased(w1, {"status": "failed"}, owner="w1")
    async with store.transaction(readonly=True) as tx:
        first, second = await tx.get_run(w1), await tx.get_run(w2)
        assert await tx.journal(w1) == [entry(0)]
        assert await tx.journal(w2) == []
    assert first is not None and (first.status, first.lease_owner) == ("completed", None)
    assert second is not None and (second.status, second.lease_owner) == ("running", "w2")


async def test_a_write_that_fails_fails_its_transaction_and_saves_nothing(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_event(event("e0"))

    # The duplicate event id fails, whenever the backend sends it (at once, or with
    # the commit): either way the transaction raises and keeps nothing.
    with pytest.raises(Exception):  # noqa: B017 - each backend raises its own error type
        async with store.transaction() as tx:
            await tx.insert_run(run("lost"))
            await tx.add_tasks([NewTask("lost", NOW, "start")])
            await tx.insert_event(event("e0"))
            await tx.put_journal("lost", [entry(0)])
    async with store.transaction(readonly=True) as tx:
        assert await tx.get_run("lost") is None
        assert await tx.journal("lost") == []
    assert not await store.has_due(NOW)


# ---------------------------------------------------------------------------------------------
# Stats (what metrics read)


async def test_stats_of_an_empty_store(store: Store) -> None:
    assert await store.stats(NOW) == StoreStats({}, 0, None, 0, 0)


async def test_stats_count_parked_runs_the_due_backlog_and_dead_letters(store: Store) -> None:
    async with store.transaction() as tx:
        for run_id, workflow, status in [
            ("p1", "order", "parked"), ("p2", "order", "parked"), ("p3", "refund", "parked"),
            ("r1", "order", "running"), ("c1", "order", "completed"), ("x1", "order", "pending"),
        ]:  # fmt: skip
            await tx.insert_run(run(run_id, workflow=workflow, status=status))
        await tx.add_tasks(
            [
                NewTask("p1", NOW - 30, "delivery", 1, b"{}"),
                NewTask("p1", NOW - 10, "timer", 2),
                NewTask("x1", NOW - 20, "start"),
                NewTask("p3", NOW + 100, "timer", 1),  # not due yet
            ]
        )
        await tx.add_message(message("reply", "k1", expires_at=NOW - 1))
        await tx.add_message(message("reply", "k2", expires_at=NOW - 1))
        await tx.add_message(message("reply", "k3", expires_at=NOW + 60))
        await tx.expire_messages(NOW, "expired")
    stats = await store.stats(NOW)
    assert stats.parked == {"order": 2, "refund": 1}
    assert (stats.due, stats.oldest_due_at) == (3, NOW - 30)
    assert stats.dead_letters == 2
    later = await store.stats(NOW + 100)
    assert (later.due, later.oldest_due_at) == (4, NOW - 30)
    async with store.transaction() as tx:  # done tasks leave the backlog
        await tx.delete_tasks([t.id for t in await tx.due_tasks("p1", NOW)])
    assert (await store.stats(NOW)).oldest_due_at == NOW - 20
    # A paused run's tasks wait for its resume, not for a worker: not the backlog.
    assert await one(store, lambda tx: tx.update_run("x1", {"paused": True}))
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
        ["a"], ["b"],
    )  # fmt: skip
    assert (await store.stats(NOW)).takeovers == 1
    async with store.transaction() as tx:  # w1 died: its other run, handed over (not counted)
        leases = [
            await tx.lease_run(r, owner="w3", now=NOW, wall_now=WALL + 12, lease_until=WALL + 42)
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
        await tx.start_run(run("r"), NOW, task_payload=b'{"trace": {"traceparent": "x"}}')
    async with store.transaction() as tx:
        sent = await tx.send_signal("r", "go", b"1", NOW, task_payload=b'{"trace": {}}')
    assert sent.status == "pending"
    async with store.transaction(readonly=True) as tx:
        tasks = await tx.due_tasks("r", NOW)
    assert sorted((t.kind, t.payload) for t in tasks) == [
        ("signal", b'{"trace": {}}'),
        ("start", b'{"trace": {"traceparent": "x"}}'),
    ]


# ---------------------------------------------------------------------------------------------
# Transactions


async def test_a_failed_transaction_leaves_nothing_behind(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("r"))
        await tx.add_tasks([NewTask("r", NOW, "start")])
        await tx.put_journal("r", [entry(0)])
        await tx.add_signal("r", "go", b"1", NOW)
        await tx.add_subscription(sub("r", 0))
        await tx.insert_event(event("e0"))
        m = await tx.add_message(message("pay", "K"))

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        async with store.transaction() as tx:
            await tx.insert_run(run("new"))
            await tx.update_run("r", {"status": "parked"})
            await tx.add_tasks([NewTask("new", NOW, "start")])
            await tx.delete_tasks([t.id for t in await tx.due_tasks("r", NOW)])
            await tx.put_journal("r", [entry(0, value=b"2"), entry(1)])
            await tx.add_signal("r", "go", b"2", NOW)
            await tx.delete_signals([s.id for s in await tx.signals("r")])
            await tx.add_subscription(sub("new", 0))
            await tx.delete_run_subscriptions("r")
            await tx.insert_event(event("e1"))
            await tx.delete_event("e0")
            await tx.add_message(message("pay", "K"))
            await tx.delete_message(m)
            await tx.remember_message_id("mid", NOW)
            raise Boom

    async with store.transaction(readonly=True) as tx:
        assert await tx.get_run("new") is None
        kept = await tx.get_run("r")
        assert kept is not None and kept.status == "pending"
        assert [t.kind for t in await tx.due_tasks("r", NOW)] == ["start"]
        assert await tx.due_tasks("new", NOW) == []
        assert await tx.journal("r") == [entry(0)]
        assert [s.payload for s in await tx.signals("r")] == [b"1"]
        assert [s.run_id for s in await tx.list_subscriptions()] == ["r"]
        assert await tx.get_event("e0") is not None and await tx.get_event("e1") is None
        assert [x.id for x in await tx.list_messages(None)] == [m]
        assert await tx.message_id_seen("mid") is None
    assert await store.has_due(NOW)


async def test_a_read_only_transaction_reads_what_was_committed(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("r"))
    async with store.transaction(readonly=True) as tx:
        assert await tx.get_run("r") is not None
        assert await tx.journal("r") == []
        assert await tx.message_wait("x", "y") is None


# ---------------------------------------------------------------------------------------------
# Several processes on one store


@pytest.mark.requires("shared")
async def test_changed_reports_commits_of_another_process(engine_url: str) -> None:
    async with shared_pair(engine_url) as (mine, other):
        await settle(mine)

        async def commit(tx: Tx) -> None:
            await tx.insert_run(run("r"))
            await tx.add_tasks([NewTask("r", NOW, "start")])

        assert isinstance(other, RemoteStore)
        await other.run(commit)
        await until(mine.changed, timeout=5, what="changed() after another store's commit")


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
            await tx.insert_run(run("r"))
            await tx.add_tasks([NewTask("r", NOW + 5, "timer"), NewTask("r", NOW + 2, "timer")])
            await tx.add_tasks([NewTask("r", NOW + 9, "timer")])  # not earlier: no news

        assert isinstance(other, RemoteStore)
        await other.run(commit)
        assert await asyncio.wait_for(reported.get(), timeout=5) == NOW + 2
        # This process's own commits are reported once, when they commit, and an
        # earlier task later in the transaction is reported too.
        async with mine.transaction() as tx:
            await tx.add_tasks([NewTask("r", NOW + 3, "timer")])
            await tx.add_tasks([NewTask("r", NOW + 1, "timer")])
            assert reported.empty()  # not before the commit
        assert await asyncio.wait_for(reported.get(), timeout=5) == NOW + 1
        # A commit that adds no task, and one that rolls back, report nothing.
        async with mine.transaction() as tx:
            await tx.update_run("r", {"updated_at": NOW + 1})
        with pytest.raises(RuntimeError):
            async with mine.transaction() as tx:
                await tx.add_tasks([NewTask("r", NOW, "signal")])
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


async def _has_delivery(tx: Tx, run_id: str) -> bool:
    return any(t.kind in ("delivery", "message") for t in await tx.due_tasks(run_id, NOW))


@pytest.mark.requires("shared")
async def test_race_two_publishes_deliver_one_subscription_once(engine_url: str) -> None:
    """intake._resume_waiters: find the subscription, delete it, add a delivery."""
    async with shared_pair(engine_url) as (first, second):
        async with first.transaction() as tx:
            await tx.insert_run(run("waiter", status="parked"))
            await tx.add_subscription(sub("waiter", 2))

        async def publish(tx: Tx) -> list[str]:
            found = await tx.find_subscriptions(
                domain="default", name="order.paid", shape="", digest="", subject=None,
                kind="event",
            )  # fmt: skip
            for s in found:
                await tx.delete_subscription(s.run_id, s.pos)
                await tx.add_tasks([NewTask(s.run_id, NOW, "delivery", s.pos, b"{}")])
            return [s.run_id for s in found]

        a, b = await race(first, second, publish, publish)
        assert (a, b) == (["waiter"], [])
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.due_tasks("waiter", NOW)) == 1


@pytest.mark.requires("shared")
@pytest.mark.parametrize("first_party", ["publish", "park"])
async def test_race_a_publish_and_a_since_start_park_never_lose_the_event(
    engine_url: str, first_party: str
) -> None:
    """replay.Lookback.register (events_since, then add_subscription) vs a publish."""
    async with shared_pair(engine_url) as (first, second):

        async def publish(tx: Tx) -> list[str]:
            await tx.insert_event(event("e1", published_at=NOW + 1))
            found = await tx.find_subscriptions(
                domain="default", name="order.paid", shape="", digest="", subject=None,
                kind="event",
            )  # fmt: skip
            for s in found:
                await tx.delete_subscription(s.run_id, s.pos)
                await tx.add_tasks([NewTask(s.run_id, NOW + 1, "delivery", s.pos, b"{}")])
            return [s.run_id for s in found]

        async def park(tx: Tx) -> list[str]:
            seen = await tx.events_since("default", "order.paid", NOW)
            if seen:
                await tx.add_tasks([NewTask("parker", NOW + 1, "delivery", 0, b"{}")])
            else:
                await tx.add_subscription(sub("parker", 0))
            return [e.id for e in seen]

        if first_party == "publish":
            delivered, looked_back = await race(first, second, publish, park)
            assert (delivered, looked_back) == ([], ["e1"])
        else:
            looked_back, delivered = await race(first, second, park, publish)
            assert (looked_back, delivered) == ([], ["parker"])
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.due_tasks("parker", NOW + 1)) == 1
            assert await tx.list_subscriptions() == []


async def _deliver_now(tx: Tx, event_id: str = "e1") -> EventDelivery:
    """deliver_event of order.paid (no match) in ``tx``, sent at once (a read after it
    sends what a store queued), so that it holds its locks while the other party runs."""
    delivery = await deliver_event(
        tx, event(event_id, payload=b"{}"), {}, b"{}", fresh_after=NOW - 60
    )
    await tx.get_run("nobody")
    return delivery


async def _show_no_shape(store: Store) -> None:
    await show_shapes(store, "")


@pytest.mark.requires("shared")
async def test_race_two_deliver_events_take_one_wait_once(engine_url: str) -> None:
    async with shared_pair(engine_url) as (first, second):
        async with first.transaction() as tx:
            await tx.add_subscription(sub("waiter", 2))
        await show_shapes(first, "")
        await second.run(_show_no_shape)
        a, b = await race(first, second, _deliver_now, lambda tx: _deliver_now(tx, "e2"))
        assert (a.outcome, a.waits) == ("published", [("waiter", "wait#2")])
        assert (b.outcome, b.waits) == ("published", [])
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.due_tasks("waiter", NOW)) == 1


@pytest.mark.requires("shared")
@pytest.mark.parametrize("first_party", ["publish", "park"])
async def test_race_deliver_event_and_a_since_start_park_never_lose_the_event(
    engine_url: str, first_party: str
) -> None:
    async with shared_pair(engine_url) as (first, second):
        await show_shapes(first, "")
        await second.run(_show_no_shape)

        async def park(tx: Tx) -> list[str]:
            seen = await tx.events_since("default", "order.paid", NOW)
            if seen:
                await tx.add_tasks([NewTask("parker", NOW, "delivery", 0, b"{}")])
            else:
                await tx.add_subscription(sub("parker", 0))
            return [e.id for e in seen]

        if first_party == "publish":
            delivered, looked_back = await race(first, second, _deliver_now, park)
            assert (delivered.waits, looked_back) == ([], ["e1"])
        else:
            looked_back, delivered = await race(first, second, park, _deliver_now)
            assert (looked_back, delivered.waits) == ([], [("parker", "wait#0")])
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.due_tasks("parker", NOW)) == 1
            assert await tx.list_subscriptions() == []


@pytest.mark.requires("shared")
async def test_race_deliver_event_twice_with_one_id(engine_url: str) -> None:
    async with shared_pair(engine_url) as (first, second):
        async with first.transaction() as tx:
            await tx.add_subscription(sub("waiter", 0))
        await show_shapes(first, "")
        await second.run(_show_no_shape)
        a, b = await race(first, second, _deliver_now, _deliver_now)
        assert (a.outcome, a.waits) == ("published", [("waiter", "wait#0")])
        # The second sees the first's event: a duplicate, or declined for the usual path
        # to say so; either way it wrote nothing.
        assert b.outcome in ("duplicate", None) and b.waits == []
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.due_tasks("waiter", NOW)) == 1


@pytest.mark.requires("shared")
async def test_race_the_same_event_id_twice_is_a_duplicate(engine_url: str) -> None:
    """intake.publish_in_tx: get_event (de-duplication), then insert_event."""
    async with shared_pair(engine_url) as (first, second):

        async def publish(tx: Tx) -> bool:
            if await tx.get_event("same") is not None:
                return False
            await tx.insert_event(event("same"))
            return True

        assert await race(first, second, publish, publish) == (True, False)


@pytest.mark.requires("shared")
async def test_race_the_same_message_id_twice_is_a_duplicate(engine_url: str) -> None:
    """messages.correlate_in_tx: message_id_seen, then remember_message_id."""
    async with shared_pair(engine_url) as (first, second):

        async def correlate(tx: Tx) -> bool:
            if await tx.message_id_seen("mid") is not None:
                return False
            await tx.add_message(message("pay", "K"))
            await tx.remember_message_id("mid", NOW)
            return True

        assert await race(first, second, correlate, correlate) == (True, False)
        messages = await one(first, lambda tx: tx.list_messages(None))
        assert len(messages) == 1


@pytest.mark.requires("shared")
async def test_race_two_correlations_deliver_one_wait_once(engine_url: str) -> None:
    """messages.correlate_in_tx: message_wait, delete_subscription, delivery; else buffer."""
    async with shared_pair(engine_url) as (first, second):
        async with first.transaction() as tx:
            await tx.add_subscription(message_wait("waiter", "pay", "K", pos=1))

        async def correlate(tx: Tx) -> str:
            wait = await tx.message_wait("pay", "K")
            if wait is None:
                await tx.add_message(message("pay", "K"))
                return "buffered"
            await tx.delete_subscription(wait.run_id, wait.pos)
            await tx.add_tasks([NewTask(wait.run_id, NOW, "message", wait.pos, b"{}")])
            return "delivered"

        assert await race(first, second, correlate, correlate) == ("delivered", "buffered")
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.due_tasks("waiter", NOW)) == 1
            assert len(await tx.list_messages("buffered")) == 1


@pytest.mark.requires("shared")
@pytest.mark.parametrize("first_party", ["correlate", "wait"])
async def test_race_a_correlation_and_a_message_wait_meet(
    engine_url: str, first_party: str
) -> None:
    """messages.MessageWait.register (message_wait, oldest_message, add_subscription)."""
    async with shared_pair(engine_url) as (first, second):

        async def correlate(tx: Tx) -> str:
            wait = await tx.message_wait("pay", "K")
            if wait is None:
                await tx.add_message(message("pay", "K"))
                return "buffered"
            await tx.delete_subscription(wait.run_id, wait.pos)
            await tx.add_tasks([NewTask(wait.run_id, NOW, "message", wait.pos, b"{}")])
            return "delivered"

        async def register(tx: Tx) -> str:
            if await tx.message_wait("pay", "K") is not None:
                return "refused"
            buffered = await tx.oldest_message("pay", "K", NOW)
            if buffered is not None:
                await tx.delete_message(buffered.id)
                await tx.add_tasks([NewTask("waiter", NOW, "message", 0, b"{}")])
                return "consumed"
            await tx.add_subscription(message_wait("waiter", "pay", "K"))
            return "waiting"

        if first_party == "correlate":
            assert await race(first, second, correlate, register) == ("buffered", "consumed")
        else:
            assert await race(first, second, register, correlate) == ("waiting", "delivered")
        async with first.transaction(readonly=True) as tx:
            assert len(await tx.due_tasks("waiter", NOW)) == 1
            assert await tx.list_messages(None) == []
            assert await tx.list_subscriptions() == []


@pytest.mark.requires("shared")
async def test_race_two_consumers_never_take_the_same_buffered_message(engine_url: str) -> None:
    """messages.after_run_ends / MessageWait.register: oldest_message, then delete_message."""
    async with shared_pair(engine_url) as (first, second):
        async with first.transaction() as tx:
            older = await tx.add_message(message("pay", "K", b'"1"'))
            newer = await tx.add_message(message("pay", "K", b'"2"'))

        async def consume(tx: Tx) -> int | None:
            found = await tx.oldest_message("pay", "K", NOW)
            if found is not None:
                await tx.delete_message(found.id)
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
            await tx.insert_run(run("waiter", status="parked"))
            await tx.add_subscription(message_wait("waiter", "pay", "K", pos=1))

        async def correlate(tx: Tx) -> str:
            wait = await tx.message_wait("pay", "K")
            assert wait is not None
            await tx.delete_subscription(wait.run_id, wait.pos)
            await tx.add_tasks([NewTask(wait.run_id, NOW, "message", wait.pos, b"{}")])
            return "delivered"

        async def stop_waiting(tx: Tx) -> list[str]:
            assert await tx.update_run("waiter", {"status": "failed"})
            seen = [t.kind for t in await tx.due_tasks("waiter", float("inf"))]
            await tx.delete_wait_tasks("waiter", 1)
            await tx.delete_subscription("waiter", 1)
            return seen

        assert await race(first, second, correlate, stop_waiting) == ("delivered", ["message"])


@pytest.mark.requires("shared")
async def test_race_two_starts_of_one_run_id_both_succeed(engine_url: str) -> None:
    """Engine.start: get_run, then insert_run when absent; a concurrent twin must not fail."""
    async with shared_pair(engine_url) as (first, second):

        async def start(tx: Tx) -> bool:
            if await tx.get_run("twin") is not None:
                return False
            await tx.insert_run(run("twin"))
            await tx.add_tasks([NewTask("twin", NOW, "start")])
            return True

        a, _b = await race(first, second, start, start)
        assert a is True  # the second either saw the run or inserted nothing
        assert await one(first, lambda tx: tx.get_run("twin")) == run("twin")


@pytest.mark.requires("shared")
async def test_race_unique_per_subject_starts_one_run(engine_url: str) -> None:
    """intake.start_event_run with unique_per_subject: active_run, then insert_run."""
    async with shared_pair(engine_url) as (first, second):

        def start(run_id: str) -> Callable[[Tx], Awaitable[bool]]:
            async def body(tx: Tx) -> bool:
                if await tx.active_run("wf", "default", "client:5") is not None:
                    return False
                await tx.insert_run(run(run_id, subject="client:5"))
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
            found = await tx.get_run("r")
            assert found is not None
            return found.lease_owner

        async def write(tx: Tx) -> None:
            assert await tx.update_run("r", {"status": "cancelled"})

        async def claim_and_load(store: Store) -> str | None:
            claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=5)
            if not claimed:
                return None
            async with store.transaction(readonly=True) as tx:
                loaded = await tx.get_run("r")
            assert loaded is not None
            return loaded.status

        owner, seen_by_worker = await race(first, second, read, claim_and_load, then=write)
        assert owner is None
        # Either the claim waited for the cancel (and its worker sees it), or it skipped the run.
        assert seen_by_worker in (None, "cancelled")


# ---------------------------------------------------------------------------------------------
# Helpers for several stores


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


async def until(check: Callable[[], Awaitable[bool]], *, timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"waited {timeout}s for {what}")
        await asyncio.sleep(0.01)


# ---------------------------------------------------------------------------------------------
# Schedules


def schedule(schedule_id: str, **fields: Any) -> ScheduleRecord:
    values: dict[str, Any] = dict(
        id=schedule_id, workflow="wf", cron="*/5 * * * *", timezone="Europe/Paris",
        catch_up="latest", input=b'{"n": 1}', paused=False, last_tick=NOW, next_at=NOW + 300,
        last_run_id=None, created_at=NOW, updated_at=NOW,
    )  # fmt: skip
    values.update(fields)
    return ScheduleRecord(**values)


async def test_a_schedule_round_trips_every_field_and_is_replaced_by_id(store: Store) -> None:
    full = schedule("b", paused=True, next_at=None, last_run_id="sched:b:x", input=b"[]")
    async with store.transaction() as tx:
        await tx.put_schedule(schedule("a"))
        await tx.put_schedule(full)
    assert await one(store, lambda tx: tx.get_schedule("b"), readonly=True) == full
    assert await one(store, lambda tx: tx.list_schedules(), readonly=True) == [
        schedule("a"), full,
    ]  # fmt: skip
    moved = schedule("a", last_tick=NOW + 300, next_at=NOW + 600, last_run_id="r", cron="0 * * * *")
    async with store.transaction() as tx:
        await tx.put_schedule(moved)
    assert await one(store, lambda tx: tx.get_schedule("a")) == moved
    assert await one(store, lambda tx: tx.delete_schedule("a")) is True
    assert await one(store, lambda tx: tx.delete_schedule("a")) is False
    assert await one(store, lambda tx: tx.get_schedule("a")) is None
    assert [s.id for s in await one(store, lambda tx: tx.list_schedules())] == ["b"]


async def test_due_schedules_are_the_unpaused_ones_due_the_earliest_first(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.next_schedule_at() is None
        await tx.put_schedule(schedule("late", next_at=NOW - 10))
        await tx.put_schedule(schedule("early", next_at=NOW - 60))
        await tx.put_schedule(schedule("now", next_at=NOW))
        await tx.put_schedule(schedule("future", next_at=NOW + 1))
        await tx.put_schedule(schedule("paused", paused=True, next_at=None))
        await tx.put_schedule(schedule("paused-due", paused=True, next_at=NOW - 100))
        await tx.put_schedule(schedule("ended", next_at=None))
    async with store.transaction() as tx:
        assert [s.id for s in await tx.due_schedules(NOW, 10)] == ["early", "late", "now"]
        assert [s.id for s in await tx.due_schedules(NOW, 2)] == ["early", "late"]
        assert await tx.due_schedules(NOW - 61, 10) == []
    assert await one(store, lambda tx: tx.next_schedule_at(), readonly=True) == NOW - 60


async def test_a_failed_transaction_leaves_the_schedules_as_they_were(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.put_schedule(schedule("kept"))
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await tx.put_schedule(schedule("kept", next_at=NOW + 9999))
            await tx.put_schedule(schedule("new"))
            await tx.delete_schedule("kept")
            raise RuntimeError("rolled back")
    assert await one(store, lambda tx: tx.list_schedules()) == [schedule("kept")]


@pytest.mark.requires("persistent")
async def test_schedules_survive_closing_and_reopening(engine_url: str) -> None:
    first = open_store(engine_url)
    await first.open()
    async with first.transaction() as tx:
        await tx.put_schedule(schedule("kept", paused=True, next_at=None))
    await first.close()
    second = open_store(engine_url)
    await second.open()
    try:
        got = await one(second, lambda tx: tx.get_schedule("kept"), readonly=True)
        assert got == schedule("kept", paused=True, next_at=None)
    finally:
        await second.close()


@pytest.mark.requires("shared")
async def test_race_two_firings_take_a_due_schedule_once(engine_url: str) -> None:
    """parkway.core.schedules.fire_due: due_schedules, the tick's run, the row moved on,
    in one transaction; a second worker firing meanwhile must not see the tick due."""
    async with shared_pair(engine_url) as (first, second):
        await one(first, lambda tx: tx.put_schedule(schedule("s", next_at=NOW)))

        async def fire(tx: Tx) -> list[str]:
            due = await tx.due_schedules(NOW, 10)
            for record in due:
                await tx.start_run(run(f"sched:{record.id}:tick"), NOW)
                record.last_tick, record.next_at = NOW, NOW + 300
                await tx.put_schedule(record)
            return [record.id for record in due]

        assert await race(first, second, fire, fire) == (["s"], [])
        got = await one(first, lambda tx: tx.get_schedule("s"))
        assert got is not None and (got.last_tick, got.next_at) == (NOW, NOW + 300)


# -- admission (parkway.core.admission) -----------------------------------------------------


async def test_flow_slot_reads_zeros_for_a_new_key_and_keeps_what_is_put(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.flow_slot("wf", "k") == FlowSlot(0, 0, 0)
        await tx.put_flow_slot("wf", "k", FlowSlot(active=2, started=7, limit=3))
    async with store.transaction() as tx:
        assert await tx.flow_slot("wf", "k") == FlowSlot(2, 7, 3)
        assert await tx.flow_slot("wf", "other") == FlowSlot(0, 0, 0)
        assert await tx.flow_slot("wf2", "k") == FlowSlot(0, 0, 0)


async def test_flow_next_takes_queued_runs_by_priority_then_arrival(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.flow_enter("holder", "wf", "k", 0, queued=False)
        for run_id, priority in [("p0", 0), ("p5", 5), ("p1", 1), ("p5b", 5), ("n", -2)]:
            await tx.flow_enter(run_id, "wf", "k", priority, queued=True)
        await tx.flow_enter("elsewhere", "wf", "k2", 9, queued=True)
    order = []
    async with store.transaction() as tx:
        while (taken := await tx.flow_next("wf", "k")) is not None:
            order.append(taken)
            assert await tx.flow_entry(taken) == FlowEntry("wf", "k", queued=False)
    assert order == ["p5", "p5b", "p1", "p0", "n"]
    async with store.transaction() as tx:
        assert await tx.flow_next("wf", "k") is None
        assert await tx.flow_next("wf", "k2") == "elsewhere"
        assert await tx.flow_next("other", "k") is None


async def test_flow_next_rolled_back_leaves_the_run_queued(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.flow_enter("q", "wf", "k", 0, queued=True)
    with contextlib.suppress(RuntimeError):
        async with store.transaction() as tx:
            assert await tx.flow_next("wf", "k") == "q"
            raise RuntimeError("roll back")
    async with store.transaction() as tx:
        assert await tx.flow_entry("q") == FlowEntry("wf", "k", queued=True)
        assert await tx.flow_next("wf", "k") == "q"


async def test_flow_leave_returns_the_entry_and_flow_oldest_the_first_holder(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await tx.flow_enter("a", "wf", "k", 0, queued=False)
        await tx.flow_enter("b", "wf", "k", 9, queued=False)
        await tx.flow_enter("queued", "wf", "k", 0, queued=True)
        assert await tx.flow_oldest("wf", "k") == "a"
        assert await tx.flow_oldest("wf", "none") is None
    async with store.transaction() as tx:
        assert await tx.flow_leave("a") == FlowEntry("wf", "k", queued=False)
        assert await tx.flow_leave("a") is None
        assert await tx.flow_entry("a") is None
        assert await tx.flow_oldest("wf", "k") == "b"
        assert await tx.flow_leave("queued") == FlowEntry("wf", "k", queued=True)
        assert await tx.flow_next("wf", "k") is None  # (it left the queue)
        assert await tx.flow_entry("nobody") is None


async def test_rate_marks_are_kept_per_key_and_place(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.rate_mark("wf", "k", 0) is None
        await tx.put_rate_mark("wf", "k", 0, NOW)
        await tx.put_rate_mark("wf", "k", 1, NOW + 1)
        await tx.put_rate_mark("wf", "k2", 0, NOW + 2)
    async with store.transaction() as tx:
        await tx.put_rate_mark("wf", "k", 0, NOW + 60)
    async with store.transaction(readonly=True) as tx:
        assert await tx.rate_mark("wf", "k", 0) == NOW + 60
        assert await tx.rate_mark("wf", "k", 1) == NOW + 1
        assert await tx.rate_mark("wf", "k2", 0) == NOW + 2
        assert await tx.rate_mark("wf", "k", 2) is None


async def test_deferred_tasks_wait_for_the_start_and_come_due_when_woken(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("queued"))
        await tx.insert_run(run("windowed"))
        await tx.add_tasks([NewTask("queued", NOW, "signal"), NewTask("windowed", NOW, "signal")])
        await tx.add_tasks([NewTask("windowed", NOW + 60, "start")])
    async with store.transaction() as tx:
        for run_id in ("queued", "windowed"):
            ids = [t.id for t in await tx.due_tasks(run_id, NOW)]
            await tx.defer_tasks(run_id, ids)
        assert await tx.due_tasks("queued", NOW + 3600) == []
        assert [t.kind for t in await tx.due_tasks("windowed", NOW + 59)] == []
        assert sorted(t.kind for t in await tx.due_tasks("windowed", NOW + 60)) == [
            "signal",
            "start",
        ]
    assert await store.claim("w", now=NOW + 30, wall_now=WALL, lease_until=WALL + 9, limit=9) == []
    assert await store.next_due() == NOW + 60
    async with store.transaction() as tx:
        await tx.add_tasks([NewTask("queued", NOW + 10, "start")])
        await tx.wake_deferred("queued", NOW + 10)
    async with store.transaction(readonly=True) as tx:
        kinds = sorted(t.kind for t in await tx.due_tasks("queued", NOW + 10))
    assert kinds == ["signal", "start"]
    claimed = await store.claim("w", now=NOW + 10, wall_now=WALL, lease_until=WALL + 9, limit=9)
    assert claimed == ["queued"]


@pytest.mark.requires("shared")
async def test_race_two_starts_never_take_the_last_slot_of_a_key_both(engine_url: str) -> None:
    """flow.admit: the key's slot row, read and counted, then written."""
    async with shared_pair(engine_url) as (first, second):

        async def take(tx: Tx) -> bool:
            slot = await tx.flow_slot("wf", "k")
            if slot.active >= 1:
                return False
            slot.active += 1
            await tx.put_flow_slot("wf", "k", slot)
            return True

        assert await race(first, second, take, take) == (True, False)
        async with first.transaction(readonly=True) as tx:
            assert (await tx.flow_slot("wf", "k")).active == 1


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
            await tx.put_flow_slot("wf", "k", FlowSlot(active=1, limit=1))
            await tx.flow_enter("holder", "wf", "k", 0, queued=False)

        async def start(tx: Tx) -> str:
            slot = await tx.flow_slot("wf", "k")
            if slot.active >= 1:
                await tx.flow_enter("new", "wf", "k", 0, queued=True)
                return "queued"
            slot.active += 1
            await tx.put_flow_slot("wf", "k", slot)
            await tx.flow_enter("new", "wf", "k", 0, queued=False)
            return "admitted"

        async def release(tx: Tx) -> str | None:
            slot = await tx.flow_slot("wf", "k")
            assert await tx.flow_leave("holder") is not None
            following = await tx.flow_next("wf", "k")
            if following is None:
                slot.active -= 1
                await tx.put_flow_slot("wf", "k", slot)
            return following

        if queue_first:
            assert await race(first, second, start, release) == ("queued", "new")
        else:
            assert await race(first, second, release, start) == (None, "admitted")
        async with first.transaction(readonly=True) as tx:
            assert await tx.flow_entry("new") == FlowEntry("wf", "k", queued=False)
            assert (await tx.flow_slot("wf", "k")).active == 1


# -- operator controls: pause, bulk selection, retention --------------------------------------


async def test_a_paused_run_is_neither_claimed_nor_leased_nor_due(store: Store) -> None:
    await _runs_with_tasks(store, {"paused": [NOW - 1], "free": [NOW]})
    assert await one(store, lambda tx: tx.update_run("paused", {"paused": True}))
    async with store.transaction(readonly=True) as tx:
        got = await tx.get_run("paused")
        listed = await tx.list_runs(
            workflow=None, status=None, subject=None, domain=None, parent_id=None, limit=10
        )
    assert got is not None and bool(got.paused)
    assert {r.id: bool(r.paused) for r in listed} == {"paused": True, "free": False}
    claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10)
    assert claimed == ["free"]  # the paused run's task is older, and stays
    await store.release_leases("w")
    async with store.transaction() as tx:
        lease = await tx.lease_run(
            "paused", owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 30
        )
    assert lease.taken is False
    async with store.transaction() as tx:  # only the paused run's task is left
        free = await tx.due_tasks("free", NOW)
        await tx.delete_tasks([t.id for t in free])
    assert not await store.has_due(NOW)
    assert [t.kind for t in await one(store, lambda tx: tx.due_tasks("paused", NOW))] == ["start"]
    assert await one(store, lambda tx: tx.update_run("paused", {"paused": False}))
    assert await store.has_due(NOW)
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10) == [
        "paused"
    ]


async def test_a_paused_run_is_claimed_and_due_for_its_deadline_only(store: Store) -> None:
    # (A run's deadline outranks its pause: see parkway.core.deadlines.)
    await _runs_with_tasks(store, {"paused": [NOW - 5]})
    assert await one(store, lambda tx: tx.update_run("paused", {"paused": True}))
    async with store.transaction() as tx:
        await tx.add_tasks([NewTask("paused", NOW + 10, "deadline", payload=b'{"timeout": 10}')])
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
            await tx.insert_run(
                run(f"r{i}", status=status, subject="s" if i < 4 else None, created_at=NOW + i)
            )
        await tx.insert_run(run("other", workflow="wf2", status="failed"))
        await tx.insert_run(run("internal", workflow="parkway.acc", status="failed"))

    async def find(**filters: Any) -> list[str]:
        options: dict[str, Any] = dict(
            statuses=["failed"], workflow=None, subject=None, created_before=None, after=None,
            limit=100,
        )  # fmt: skip
        options.update(filters)
        found = await one(store, lambda tx: tx.find_runs(**options), readonly=True)
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
        await tx.insert_run(run("old", status="completed", updated_at=NOW - 100))
        await tx.insert_run(run("older", status="failed", updated_at=NOW - 200))
        await tx.insert_run(run("kept", workflow="keep", status="cancelled", updated_at=NOW - 300))
        await tx.insert_run(run("new", status="completed", updated_at=NOW))
        await tx.insert_run(run("active", status="parked", updated_at=NOW - 500))
        await tx.put_journal("old", [entry(0), entry(1)])
        await tx.add_tasks([NewTask("old", NOW + 60, "timer", 1)])
        await tx.add_signal("old", "go", b"1", NOW)
        await tx.add_subscription(sub("old"))
        await tx.put_values("old", {"k": b"1"}, NOW)
        await tx.add_update(update("old", "u1"))
        await tx.append_stream("old", "out", [(b"1", None)], NOW)
        await tx.put_journal("new", [entry(0)])
        await tx.append_stream("new", "out", [(b"2", 1)], NOW)

    def expired(**options: Any) -> Callable[[Tx], Awaitable[list[str]]]:
        return lambda tx: tx.expired_runs(
            NOW - 10, **{"workflow": None, "exclude": [], "limit": 10, **options}
        )

    assert await one(store, expired()) == ["kept", "older", "old"]  # oldest end first
    assert await one(store, expired(exclude=["keep"])) == ["older", "old"]
    assert await one(store, expired(workflow="keep")) == ["kept"]
    assert await one(store, expired(limit=1)) == ["kept"]
    await one(store, lambda tx: tx.delete_runs(["old", "missing"]))
    async with store.transaction(readonly=True) as tx:
        assert await tx.get_run("old") is None
        assert await tx.journal("old") == []
        assert await tx.due_tasks("old", NOW + 3600) == []
        assert await tx.signals("old") == []
        assert await tx.list_subscriptions(run_id="old") == []
        assert await tx.run_values(["old"]) == {}
        assert await tx.get_update("old", "u1") is None
        assert await tx.read_stream("old", "out", 0, 10) == ([], False)
        assert [e.pos for e in await tx.journal("new")] == [0]  # another run's stays
        assert [i.value for i in (await tx.read_stream("new", "out", 0, 10))[0]] == [b"2"]
    assert await store.next_due() is None


# ---------------------------------------------------------------------------------------------
# Callbacks and human tasks


def human_task(task_id: str, run_id: str = "r1", **fields: Any) -> HumanTaskRecord:
    values: dict[str, Any] = dict(
        id=task_id, run_id=run_id, workflow="wf", name="approve", title="Approve?",
        form_schema=b'{"type": "object"}', form_model="app:Approval", data=b'{"order": 1}',
        assignees='["ana", "ben"]', signal=f"\x1ftask:{task_id}", status="open",
        created_at=NOW, due_at=NOW + 60, completed_by=None, completed_at=None, result=None,
    )  # fmt: skip
    values.update(fields)
    return HumanTaskRecord(**values)


async def test_a_callback_is_found_by_its_hash_and_keeps_its_outcome(store: Store) -> None:
    record = CallbackRecord(token_digest("secret"), "r1", "\x1fcallback:1", NOW)
    async with store.transaction() as tx:
        await tx.insert_run(run("r1"))
        await tx.add_callback(record)
        await tx.add_callback(CallbackRecord(token_digest("secret"), "r2", "other", NOW + 1))
    found = await one(store, lambda tx: tx.get_callback(token_digest("secret")), readonly=True)
    assert found == record  # (the second add of one hash changed nothing)
    assert await one(store, lambda tx: tx.get_callback("secret")) is None
    await one(store, lambda tx: tx.finish_callback(record.token_hash, "failed", b'"no"', NOW + 5))
    done = await one(store, lambda tx: tx.get_callback(record.token_hash))
    assert (done.status, done.outcome, done.completed_at) == ("failed", b'"no"', NOW + 5)


async def test_a_human_task_round_trips_every_field_and_finishes_once(store: Store) -> None:
    full = human_task("t1")
    bare = human_task(
        "t2", title=None, form_schema=None, form_model=None, data=None, assignees="[]",
        due_at=None, created_at=NOW + 1,
    )  # fmt: skip
    await one(store, lambda tx: tx.add_human_tasks([full, bare]))
    await one(store, lambda tx: tx.add_human_tasks([human_task("t1", name="again")]))
    assert await one(store, lambda tx: tx.get_human_task("t1"), readonly=True) == full
    assert await one(store, lambda tx: tx.get_human_task("t2")) == bare
    assert await one(store, lambda tx: tx.get_human_task("t3")) is None

    finish = lambda tx: tx.finish_human_task("t1", "completed", NOW + 9, by="ana", result=b"1")  # noqa: E731
    assert await one(store, finish) is True
    assert await one(store, finish) is False  # (no longer open)
    done = await one(store, lambda tx: tx.get_human_task("t1"))
    assert (done.status, done.completed_by, done.completed_at, done.result) == (
        "completed", "ana", NOW + 9, b"1",
    )  # fmt: skip


async def test_human_tasks_are_listed_oldest_first_by_status_assignee_and_workflow(
    store: Store,
) -> None:
    await one(store, lambda tx: tx.add_human_tasks([
        human_task("a", created_at=NOW, assignees='["ana"]'),
        human_task("b", created_at=NOW + 1, assignees="[]", workflow="other"),
        human_task("c", created_at=NOW + 2, assignees='["ben", "cy"]'),
        human_task("d", created_at=NOW + 3, status="completed"),
    ]))  # fmt: skip

    async def listed(**options: Any) -> list[str]:
        query = {"status": "open", "assignee": None, "workflow": None, "limit": 10, **options}
        found = await one(store, lambda tx: tx.list_human_tasks(**query), readonly=True)
        return [t.id for t in found]

    assert await listed() == ["a", "b", "c"]
    assert await listed(status=None) == ["a", "b", "c", "d"]
    assert await listed(status="completed") == ["d"]
    assert await listed(assignee="ana") == ["a", "b"]
    assert await listed(assignee="cy") == ["b", "c"]
    assert await listed(assignee="an") == ["b"]  # (a name, not a prefix)
    assert await listed(workflow="other") == ["b"]
    assert await listed(limit=2) == ["a", "b"]


async def test_a_runs_end_cancels_only_its_open_tasks_and_deletion_removes_all(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        for run_id in ("r1", "r2"):
            await tx.insert_run(run(run_id))
        await tx.add_human_tasks([
            human_task("open1"), human_task("done1", status="completed"),
            human_task("other", run_id="r2"),
        ])  # fmt: skip
        await tx.add_callback(CallbackRecord(token_digest("t"), "r1", "s", NOW))
    await one(store, lambda tx: tx.close_human_tasks("r1", NOW + 5))
    async with store.transaction(readonly=True) as tx:
        closed = await tx.get_human_task("open1")
        assert closed is not None and (closed.status, closed.completed_at) == ("cancelled", NOW + 5)
        assert (await tx.get_human_task("done1")).status == "completed"  # type: ignore[union-attr]
        assert (await tx.get_human_task("other")).status == "open"  # type: ignore[union-attr]
    await one(store, lambda tx: tx.delete_runs(["r1"]))
    async with store.transaction(readonly=True) as tx:
        assert await tx.get_human_task("open1") is None
        assert await tx.get_human_task("done1") is None
        assert await tx.get_callback(token_digest("t")) is None
        assert await tx.get_human_task("other") is not None


# ---------------------------------------------------------------------------------------------
# Held runs and forks (deploys and repairs)


async def test_a_held_run_is_neither_claimed_nor_leased_nor_due_nor_backlog(store: Store) -> None:
    await _runs_with_tasks(store, {"held": [NOW - 1], "free": [NOW]})
    assert await one(store, lambda tx: tx.update_run("held", {"status": "held"}))
    claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10)
    assert claimed == ["free"]  # the held run's task is older, and stays (its input is kept)
    await store.release_leases("w")
    async with store.transaction() as tx:
        lease = await tx.lease_run("held", owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 30)
    assert lease.taken is False  # (PostgreSQL: known once committed)
    async with store.transaction() as tx:
        free = await tx.due_tasks("free", NOW)
        await tx.delete_tasks([t.id for t in free])
    assert not await store.has_due(NOW)
    stats = await store.stats(NOW)
    assert (stats.due, stats.held, stats.parked) == (0, {"wf": 1}, {})
    assert [t.kind for t in await one(store, lambda tx: tx.due_tasks("held", NOW))] == ["start"]
    # A retry makes it running again: claimable, its kept task with it.
    assert await one(store, lambda tx: tx.update_run("held", {"status": "running"}))
    assert await store.has_due(NOW)
    assert await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10) == [
        "held"
    ]


async def test_a_held_run_is_a_live_run_of_its_subject(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("h", status="held", subject="s1"))
        assert await tx.active_run("wf", "default", "s1") == "h"


async def test_a_journal_is_outlined_and_copied_in_the_store(store: Store) -> None:
    source = [
        entry(0), entry(1, value=b'{"big": [1, 2, 3]}', branch="0.1", seq=4),
        entry(2, "error", b'{"type": "X", "message": "m"}'), entry(3, "pending", None),
        entry(5, deadline=NOW + 9),
    ]  # fmt: skip
    async with store.transaction() as tx:
        await tx.put_journal("src", source)
        assert await tx.journal_outline("src") == [
            (0, "done"), (1, "done"), (2, "error"), (3, "pending"), (5, "done"),
        ]  # fmt: skip
        assert await tx.journal_outline("nothing") == []
        await tx.copy_journal("src", "two", 2)
        await tx.copy_journal("src", "all", None)
        await tx.copy_journal("src", "none", 0)
    async with store.transaction(readonly=True) as tx:
        assert await tx.journal("two") == source[:2]
        assert await tx.journal("all") == [source[0], source[1], source[2], source[4]]
        assert await tx.journal("none") == []
        assert await tx.journal("src") == source  # the source is left as it is


async def test_a_fork_records_where_it_came_from(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.insert_run(run("fork"))
        assert await tx.update_run("fork", {"forked_from": "src", "forked_at": 3})
        await tx.insert_run(run("plain"))
    async with store.transaction(readonly=True) as tx:
        got = await tx.get_run("fork")
        plain = await tx.get_run("plain")
        listed = await tx.list_runs(
            workflow=None, status=None, subject=None, domain=None, parent_id=None, limit=10
        )
        found = await tx.find_runs(
            statuses=["pending"], workflow=None, subject=None, created_before=None, after=None,
            limit=10,
        )  # fmt: skip
    assert got is not None and (got.forked_from, got.forked_at) == ("src", 3)
    assert plain is not None and (plain.forked_from, plain.forked_at) == (None, None)
    assert {r.id: r.forked_from for r in listed} == {"fork": "src", "plain": None}
    assert {r.id: r.forked_at for r in found} == {"fork": 3, "plain": None}


# -- the fleet: workers, version-aware claims, operator entries, event links -----------------


async def test_a_claim_with_serves_leases_only_the_runs_it_serves(store: Store) -> None:
    from parkway.store.fleet import serve_keys

    async with store.transaction() as tx:
        await tx.insert_run(run("v1", workflow="wf", version="1"))
        await tx.insert_run(run("v2", workflow="wf", version="2"))
        await tx.insert_run(run("any", workflow="wf", version=""))  # started by name
        await tx.insert_run(run("other", workflow="other", version="1"))
        await tx.add_tasks([NewTask(r, NOW, "start") for r in ("v1", "v2", "any", "other")])
    serves = serve_keys({"wf": ["2"]})
    claimed = await store.claim(
        "w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10, serves=serves
    )
    assert sorted(claimed) == ["any", "v2"]
    async with store.transaction(readonly=True) as tx:
        assert await tx.unserved_runs(serves, NOW, 10) == ["other", "v1"]
        assert await tx.unserved_runs(serves, NOW, 1) == ["other"]
        assert await tx.unserved_runs(serve_keys({"wf": ["1", "2"], "other": ["1"]}), NOW, 10) == []
    # Without serves, every due run (as before there were versions to serve).
    rest = await store.claim("w2", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=10)
    assert sorted(rest) == ["other", "v1"]


async def test_workers_are_listed_while_alive_and_pruned_after(store: Store) -> None:
    from parkway.store.fleet import WorkerRecord

    first = WorkerRecord("h:1:a", "h", 1, WALL, WALL, WALL + 3, {"wf": ["1"]})
    second = WorkerRecord("h:2:b", "h", 2, WALL + 1, WALL + 1, WALL + 4, {"wf": ["2"], "x": ["1"]})
    async with store.transaction() as tx:
        await tx.beat_worker(first)
        await tx.beat_worker(second)
    async with store.transaction(readonly=True) as tx:
        assert await tx.list_workers(WALL + 2) == [first, second]
        assert await tx.list_workers(WALL + 3.5) == [second]
    renewed = WorkerRecord("h:1:a", "h", 1, WALL + 9, WALL + 5, WALL + 8, {"wf": ["1", "2"]})
    async with store.transaction() as tx:
        await tx.beat_worker(renewed)  # (its start stays the first's)
    async with store.transaction() as tx:
        (found,) = await tx.list_workers(WALL + 6)
        assert found == WorkerRecord("h:1:a", "h", 1, WALL, WALL + 5, WALL + 8, {"wf": ["1", "2"]})
        assert await tx.prune_workers(WALL + 6) == 1
        assert await tx.list_workers(0) == [found]


async def test_operator_entries_are_kept_in_order_and_go_with_their_run(store: Store) -> None:
    from parkway.store.fleet import OperatorRecord

    entries = [OperatorRecord("r", "pause", "ann", NOW), OperatorRecord("r", "resume", None, NOW)]
    async with store.transaction() as tx:
        await tx.insert_run(run("r"))
        for one in entries:
            await tx.add_operator_entry(one)
        await tx.add_operator_entry(OperatorRecord("other", "cancel", "bo", NOW))
    async with store.transaction(readonly=True) as tx:
        assert await tx.operator_entries("r") == entries
    async with store.transaction() as tx:
        await tx.delete_runs(["r"])
    async with store.transaction(readonly=True) as tx:
        assert await tx.operator_entries("r") == []
        assert len(await tx.operator_entries("other")) == 1


async def test_event_links_are_listed_with_their_events_and_go_with_them(store: Store) -> None:
    from parkway.store.fleet import EventLink

    async with store.transaction() as tx:
        await tx.insert_event(event("e1", subject="s1", published_at=NOW))
        await tx.insert_event(event("e2", name="other", published_at=NOW + 1))
        await tx.link_event("e1", NOW, "resumed", ["r1", "r2"])
        await tx.link_event("e1", NOW, "started", ["r3"])
        await tx.link_event("e2", NOW + 1, "started", [])
    async with store.transaction(readonly=True) as tx:
        listed = await tx.list_events(name=None, subject=None, since=None, limit=10)
        assert [row[0] for row in listed] == ["e2", "e1"]
        assert listed[1] == ("e1", "order.paid", "default", "s1", b'{"a": 1}', NOW)
        assert [
            r[0]
            for r in await tx.list_events(name="order.paid", subject=None, since=None, limit=10)
        ] == ["e1"]
        assert [
            r[0] for r in await tx.list_events(name=None, subject="s1", since=None, limit=10)
        ] == ["e1"]
        assert [
            r[0] for r in await tx.list_events(name=None, subject=None, since=NOW + 1, limit=10)
        ] == ["e2"]
        assert [
            r[0] for r in await tx.list_events(name=None, subject=None, since=None, limit=1)
        ] == ["e2"]
        assert await tx.event_links(["e1", "e2"]) == [
            EventLink("e1", "resumed", "r1"), EventLink("e1", "resumed", "r2"),
            EventLink("e1", "started", "r3"),
        ]  # fmt: skip
    async with store.transaction() as tx:
        assert await tx.prune_events(NOW + 0.5) == 1
    async with store.transaction(readonly=True) as tx:
        assert await tx.event_links(["e1"]) == []
