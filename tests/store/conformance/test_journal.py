"""Journals, failed attempts, run values and updates
(``tx.journal``, ``tx.values``, ``tx.updates``)."""

from __future__ import annotations

import asyncio
import contextlib

import orjson
import pytest

from parkway.store import Store, open_store
from parkway.store.base import (
    NewTask,
)
from parkway.store.subscriptions import WaitKey
from tests.store.conformance.support import (
    NOW,
    WALL,
    _Rollback,
    attempt,
    entry,
    run,
    sub,
    update,
)


async def test_journal_is_ordered_replaced_by_position_and_cleared(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.journal.put("r", [entry(1), entry(0, value=None), entry(2, "pending")])
        await tx.journal.put("other", [entry(0)])
    async with store.transaction() as tx:
        assert [e.pos for e in await tx.journal.read("r")] == [0, 1, 2]
        first = (await tx.journal.read("r"))[0]
        assert first == entry(0, value=None)
        await tx.journal.put("r", [entry(2, "done", b'{"ok": true}', deadline=NOW + 5)])
        assert (await tx.journal.read("r"))[2] == entry(
            2, "done", b'{"ok": true}', deadline=NOW + 5
        )
        await tx.journal.clear("r")
        assert await tx.journal.read("r") == []
        assert len(await tx.journal.read("other")) == 1


async def test_a_journal_entry_keeps_its_branch_and_order(store: Store) -> None:
    branched = [entry(0, branch="0.1"), entry(1, seq=7), entry(2, "withdrawn", branch="2.0")]
    async with store.transaction() as tx:
        await tx.journal.put("r", branched)  # several in one call
        await tx.journal.put("r", [entry(3, branch="u4", seq=9)])  # one alone
    async with store.transaction(readonly=True) as tx:
        assert await tx.journal.read("r") == [*branched, entry(3, branch="u4", seq=9)]
    loaded = await store.load_run("r", NOW)
    assert loaded is None  # (no run row: the journal alone loads nothing)


async def test_a_loaded_run_brings_its_journal_with_branches(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r", status="parked"))
        await tx.journal.put("r", [entry(0, branch="0.0", seq=3), entry(1)])
        await tx.tasks.add([NewTask("r", NOW, "signal")])
    claimed = await store.claim("w", now=NOW, wall_now=WALL, lease_until=WALL + 30, limit=1)
    assert claimed == ["r"]
    loaded = await store.load_run("r", NOW)
    assert loaded is not None
    assert loaded.journal == [entry(0, branch="0.0", seq=3), entry(1)]


async def test_values_are_set_replaced_and_read_by_run(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.values.put("a", {"link": b'"x"', "n": b"1"}, NOW)
        await tx.values.put("b", {"n": b"2"}, NOW)
    async with store.transaction() as tx:
        await tx.values.put("a", {"n": b"3"}, NOW + 1)
    async with store.transaction(readonly=True) as tx:
        assert await tx.values.of_runs(["a", "b", "none"]) == {
            "a": {"link": b'"x"', "n": b"3"},
            "b": {"n": b"2"},
        }
        assert await tx.values.of_runs([]) == {}
    with contextlib.suppress(_Rollback):
        async with store.transaction() as tx:
            await tx.values.put("a", {"n": b"4"}, NOW)
            raise _Rollback
    async with store.transaction(readonly=True) as tx:
        assert (await tx.values.of_runs(["a"]))["a"]["n"] == b"3"


async def test_stream_items_are_numbered_in_commit_order_and_read_from_an_offset(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        assert await tx.streams.append("r", "out", [(b'"a"', None), (b'"b"', None)], NOW) == 0
        assert await tx.streams.append("r", "other", [(b"1", 2)], NOW) == 0  # its own numbers
        assert await tx.streams.append("s", "out", [(b"9", None)], NOW) == 0  # another run's
    with contextlib.suppress(_Rollback):
        async with store.transaction() as tx:
            assert await tx.streams.append("r", "out", [(b'"lost"', None)], NOW) == 2
            raise _Rollback  # (rolled back: leaves no gap)
    async with store.transaction() as tx:
        assert await tx.streams.append("r", "out", [(b'"c"', 3)], NOW + 1) == 2
    async with store.transaction(readonly=True) as tx:
        items, closed = await tx.streams.read("r", "out", 0, 100)
        assert not closed
        assert [(i.offset, i.value, i.attempt, i.written_at) for i in items] == [
            (0, b'"a"', None, NOW),
            (1, b'"b"', None, NOW),
            (2, b'"c"', 3, NOW + 1),
        ]
        assert [i.offset for i in (await tx.streams.read("r", "out", 1, 1))[0]] == [1]
        assert (await tx.streams.read("r", "out", 3, 10))[0] == []
        assert await tx.streams.read("r", "never", 0, 10) == ([], False)
        assert [i.value for i in (await tx.streams.read("r", "other", 0, 10))[0]] == [b"1"]


async def test_a_closed_stream_takes_no_more_items(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.streams.append("r", "out", [(b"1", None)], NOW)
        await tx.streams.close("r", "out")
        await tx.streams.close("r", "out")  # (idempotent)
        await tx.streams.close("r", "empty")  # never written: closed empty
    async with store.transaction() as tx:
        assert await tx.streams.append("r", "out", [(b"2", 1)], NOW) is None
        assert await tx.streams.append("r", "empty", [(b"2", 1)], NOW) is None
    async with store.transaction(readonly=True) as tx:
        items, closed = await tx.streams.read("r", "out", 0, 10)
        assert closed and [i.value for i in items] == [b"1"]
        assert await tx.streams.read("r", "empty", 0, 10) == ([], True)


async def test_a_runs_end_leaves_its_streams_open_for_a_retry(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.streams.append("r", "a", [(b"1", None)], NOW)
        await tx.streams.end_run("r")
        await tx.streams.end_run("no-streams")
    async with store.transaction() as tx:
        assert not (await tx.streams.read("r", "a", 0, 10))[1]
        assert await tx.streams.append("r", "a", [(b"2", 1)], NOW) == 1


async def test_race_appenders_of_one_stream_never_share_an_offset(engine_url: str) -> None:
    stores = [open_store(engine_url) for _ in range(2 if "memory" not in engine_url else 1)]
    for opened in stores:
        await opened.open()
    try:

        async def appends(opened: Store, writer: int) -> None:
            for i in range(20):
                async with opened.transaction() as tx:
                    items = [(f"[{writer},{i},{j}]".encode(), writer) for j in range(3)]
                    assert await tx.streams.append("r", "out", items, NOW) is not None

        await asyncio.gather(*(appends(stores[w % len(stores)], w) for w in range(4)))
        async with stores[0].transaction(readonly=True) as tx:
            items, _ = await tx.streams.read("r", "out", 0, 1000)
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
            await tx.streams.append("r", "out", [(b"1", None)], NOW)
        await asyncio.wait_for(changed.wait(), 5)
        assert "r" in heard
        changed.clear()
        async with writer.transaction() as tx:
            await tx.streams.close("s", "out")
        await asyncio.wait_for(changed.wait(), 5)
        assert "s" in heard
        changed.clear()
        async with writer.transaction() as tx:
            await tx.streams.end_run("r")  # (the end of a run with streams)
        await asyncio.wait_for(changed.wait(), 5)
        assert heard[-1] == "r"
    finally:
        await writer.close()
        await reader.close()


async def test_failed_attempts_are_kept_once_in_order_and_go_with_the_journal(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("a"))
        await tx.runs.insert(run("b"))
        await tx.journal.add_attempts([attempt("a", 3, 2), attempt("a", 1, 1), attempt("a", 3, 1)])
        await tx.journal.add_attempts([attempt("b", 0, 1)])
        await tx.journal.add_attempts([])
    async with store.transaction() as tx:
        # One kept already (run, position, attempt) is left as it was.
        await tx.journal.add_attempts([attempt("a", 1, 1, b'{"type":"Other"}')])
    with contextlib.suppress(_Rollback):
        async with store.transaction() as tx:
            await tx.journal.add_attempts([attempt("a", 9, 1)])
            raise _Rollback
    async with store.transaction(readonly=True) as tx:
        assert await tx.journal.attempts("a") == [
            attempt("a", 1, 1),
            attempt("a", 3, 1),
            attempt("a", 3, 2),
        ]
        assert await tx.journal.attempts("none") == []
    async with store.transaction() as tx:
        await tx.journal.clear("a")  # (continue-as-new: positions start again)
    async with store.transaction() as tx:
        assert await tx.journal.attempts("a") == []
        assert await tx.journal.attempts("b") == [attempt("b", 0, 1)]
        await tx.runs.delete(["b"])
    async with store.transaction(readonly=True) as tx:
        assert await tx.journal.attempts("b") == []


async def test_updates_are_kept_once_by_id_in_order_until_answered(store: Store) -> None:
    async with store.transaction() as tx:
        assert await tx.updates.add(update("r", "u1")) is None
        assert await tx.updates.add(update("r", "u2", "other")) is None
        assert await tx.updates.add(update("s", "u1")) is None  # another run's
        again = await tx.updates.add(update("r", "u1", "changed"))
        assert again is not None and (again.id, again.name, again.status) == (
            "u1",
            "add",
            "pending",
        )
    async with store.transaction() as tx:
        assert [u.id for u in await tx.updates.pending("r")] == ["u1", "u2"]
        await tx.updates.finish("r", "u1", "done", b"42", NOW + 1)
    async with store.transaction(readonly=True) as tx:
        assert [u.id for u in await tx.updates.pending("r")] == ["u2"]
        done = await tx.updates.get("r", "u1")
        assert done is not None
        assert (done.status, done.result, done.finished_at) == ("done", b"42", NOW + 1)
        assert await tx.updates.get("r", "nope") is None


async def test_cancel_conditions_are_found_by_their_own_kind(store: Store) -> None:
    condition = sub("r", -1, kind="cancel", name="\x1fcancel:order.paid", subject="*")
    async with store.transaction() as tx:
        await tx.subscriptions.add(condition)
        await tx.subscriptions.add(sub("r", 0))
    async with store.transaction(readonly=True) as tx:
        found = await tx.subscriptions.find(
            WaitKey(
                domain="default",
                name="\x1fcancel:order.paid",
                shape="",
                digest="",
                subject=None,
                kind="cancel",
            )
        )
        assert found == [condition]
