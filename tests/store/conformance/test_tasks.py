"""Tasks and signals: what is due for a run, and its mailbox (``tx.tasks``, ``tx.signals``)."""

from __future__ import annotations

import pytest

from parkway.store import Store
from parkway.store.base import (
    NewTask,
)
from tests.store.conformance.support import NOW, run


async def test_due_tasks_are_per_run_in_insertion_order(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.tasks.add(
            [
                NewTask("r", NOW + 10, "timer", 3),
                NewTask("r", NOW, "start"),
                NewTask("r", NOW, "delivery", 1, b'{"e": 1}'),
                NewTask("s", NOW, "start"),
            ]
        )
        await tx.tasks.add([])
    async with store.transaction(readonly=True) as tx:
        due = await tx.tasks.due("r", NOW)
        assert [(t.kind, t.pos, t.payload, t.due_at) for t in due] == [
            ("start", None, None, NOW),
            ("delivery", 1, b'{"e": 1}', NOW),
        ]
        assert due[0].id < due[1].id and due[0].run_id == "r"
        assert [t.kind for t in await tx.tasks.due("r", NOW + 10)] == ["timer", "start", "delivery"]
        assert await tx.tasks.due("nobody", NOW) == []


async def test_task_deletion_by_id_by_wait_and_by_run(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.tasks.add(
            [
                NewTask("r", NOW, "start"),
                NewTask("r", NOW, "timer", 1),
                NewTask("r", NOW, "delivery", 2, b"{}"),
                NewTask("r", NOW, "signal"),
                NewTask("s", NOW, "timer", 1),
            ]
        )
    async with store.transaction() as tx:
        start = (await tx.tasks.due("r", NOW))[0]
        await tx.tasks.delete([start.id])
        await tx.tasks.delete([])
        assert [t.kind for t in await tx.tasks.due("r", NOW)] == ["timer", "delivery", "signal"]
        await tx.tasks.delete_waits("r", 2)
        assert [t.kind for t in await tx.tasks.due("r", NOW)] == ["timer", "signal"]
        await tx.tasks.delete_waits("r")  # every task aimed at a wait (pos set)
        assert [t.kind for t in await tx.tasks.due("r", NOW)] == ["signal"]
        await tx.tasks.delete_run("r")
        assert await tx.tasks.due("r", NOW) == []
        assert [t.kind for t in await tx.tasks.due("s", NOW)] == ["timer"]


async def test_deleting_a_waits_tasks_can_keep_some(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.tasks.add(
            [
                NewTask("r", NOW, kind, pos, b"{}")
                for pos in (1, 2)
                for kind in ("timer", "delivery")
            ]
        )
    async with store.transaction() as tx:
        timer1, delivery1, timer2, delivery2 = await tx.tasks.due("r", NOW)
        await tx.tasks.delete_waits("r", 1, keep=[delivery1.id, timer2.id])
        await tx.tasks.delete_waits("r", 9, keep=[timer1.id])  # no such wait: nothing goes
    async with store.transaction() as tx:
        assert [t.id for t in await tx.tasks.due("r", NOW)] == [
            delivery1.id,
            timer2.id,
            delivery2.id,
        ]
        await tx.tasks.delete_waits("r", keep=[delivery2.id])
        assert [t.id for t in await tx.tasks.due("r", NOW)] == [delivery2.id]


async def test_task_ids_are_never_reused(store: Store) -> None:
    seen: set[int] = set()
    for _ in range(3):
        async with store.transaction() as tx:
            await tx.tasks.add([NewTask("r", NOW, "start"), NewTask("r", NOW, "signal")])
            tasks = await tx.tasks.due("r", NOW)
            ids = {t.id for t in tasks}
            assert not ids & seen and all(i > max(seen, default=0) for i in ids)
            seen |= ids
            await tx.tasks.delete(list(ids))


async def test_next_due_and_has_due(store: Store) -> None:
    assert await store.next_due() is None
    assert await store.has_due(NOW) is False
    async with store.transaction() as tx:
        await tx.runs.insert(run("r"))
        await tx.tasks.add([NewTask("r", NOW + 5, "timer", 0), NewTask("r", NOW + 9, "timer", 1)])
        # A task whose run is gone (a parent deleted by the retention sweep before its
        # child ended) is nobody's work: never claimed, never due.
        await tx.tasks.add([NewTask("gone", NOW, "child")])
    assert await store.next_due() == NOW
    assert await store.next_due(after=NOW) == NOW + 5
    assert await store.next_due(after=NOW + 5) == NOW + 9
    assert await store.next_due(after=NOW + 9) is None
    assert await store.has_due(NOW + 4.999) is False
    assert await store.has_due(NOW + 5) is True


async def test_signals_keep_send_order_and_are_deleted_by_id(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.signals.add("r", "go", b"1", NOW)
        await tx.signals.add("r", "stop", None, NOW + 1)
        await tx.signals.add("r", "go", b"2", NOW + 2)
        await tx.signals.add("s", "go", b"9", NOW)
    async with store.transaction() as tx:
        mailbox = await tx.signals.list("r")
        assert [(s.name, s.payload, s.at) for s in mailbox] == [
            ("go", b"1", NOW),
            ("stop", None, NOW + 1),
            ("go", b"2", NOW + 2),
        ]
        assert mailbox[0].id < mailbox[1].id < mailbox[2].id
        await tx.signals.delete([mailbox[0].id, mailbox[2].id])
        await tx.signals.delete([])
        assert [s.name for s in await tx.signals.list("r")] == ["stop"]
        assert len(await tx.signals.list("s")) == 1


async def test_send_signal_buffers_it_with_its_task_only_for_a_live_run(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("live", status="running"))
        await tx.runs.insert(run("done", status="completed"))
    sent = []
    async with store.transaction() as tx:
        sent.append(await tx.signals.send("live", "go", b"1", NOW + 1))
        sent.append(await tx.signals.send("done", "go", b"2", NOW + 1))
        sent.append(await tx.signals.send("nobody", "go", b"3", NOW + 1))
    # Known once committed (a store may send them with the COMMIT).
    assert [(s.known, s.status) for s in sent] == [
        (True, "running"),
        (True, "completed"),
        (True, None),
    ]
    for one in ("live", "done", "nobody"):  # alone in its transaction, too
        async with store.transaction() as tx:
            alone = await tx.signals.send(one, "again", b"4", NOW + 2)
        assert (alone.known, alone.status) == (
            True,
            {"live": "running", "done": "completed"}.get(one),
        )
    async with store.transaction() as tx:
        await tx.signals.delete([s.id for s in await tx.signals.list("live") if s.name == "again"])
        await tx.tasks.delete(
            [t.id for t in await tx.tasks.due("live", NOW + 9) if t.due_at > NOW + 1]
        )
    async with store.transaction() as tx:
        assert [(s.name, s.payload, s.at) for s in await tx.signals.list("live")] == [
            ("go", b"1", NOW + 1)
        ]
        assert [(t.kind, t.due_at, t.pos) for t in await tx.tasks.due("live", NOW + 1)] == [
            ("signal", NOW + 1, None)
        ]
        assert await tx.signals.list("done") == [] and await tx.tasks.due("done", NOW + 9) == []
        assert await tx.signals.list("nobody") == [] and await tx.tasks.due("nobody", NOW + 9) == []


async def test_send_signal_rolls_back_with_its_transaction(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("live", status="running"))
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await tx.signals.send("live", "go", b"1", NOW)
            raise RuntimeError("roll back")
    async with store.transaction() as tx:
        assert await tx.signals.list("live") == [] and await tx.tasks.due("live", NOW) == []
